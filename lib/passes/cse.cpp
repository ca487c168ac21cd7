// Common-subexpression elimination by hashing each pure node's canonical key.
#include "foundry/passes/cse.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <unordered_map>

#include "foundry/passes/rewrite.h"

namespace foundry::passes {

namespace {

void put_int(std::string& key, int64_t v) { key += std::to_string(v); }

void put_value(std::string& key, const Value* v) {
  if (!v) {
    key += '~';
    return;
  }
  key += '%';
  put_int(key, v->id);
}

void put_double(std::string& key, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  key += 'x';
  key += std::to_string(bits);
}

void put_type(std::string& key, const Value* v) {
  key += v->is_tensor ? 'T' : 'S';
  put_int(key, static_cast<int64_t>(v->type.dtype));
  for (int64_t s : v->type.sizes) {
    key += ',';
    put_int(key, s);
  }
  for (const std::string& s : v->type.symbols) {
    key += ';';
    put_int(key, static_cast<int64_t>(s.size()));
    key += ':';
    key += s;
  }
}

// A string that two nodes share exactly when they compute the same thing.
std::string node_key(const Node& n) {
  std::string key = n.target;
  key += '(';
  for (const Arg& a : n.args) {
    put_int(key, static_cast<int64_t>(a.kind));
    key += ':';
    switch (a.kind) {
      case Arg::Kind::None: break;
      case Arg::Kind::Tensor:
      case Arg::Kind::SymInt:
        put_value(key, a.tensor);
        if (!a.tensor) put_int(key, a.i);  // a SymInt given as a plain number
        break;
      case Arg::Kind::TensorList:
      case Arg::Kind::OptTensorList:
        for (const Value* v : a.tensors) {
          put_value(key, v);
          key += ',';
        }
        break;
      case Arg::Kind::Int:
      case Arg::Kind::Bool:
      case Arg::Kind::Layout:
      case Arg::Kind::MemoryFormat: put_int(key, a.i); break;
      case Arg::Kind::IntList:
      case Arg::Kind::BoolList:
        for (int64_t v : a.ints) {
          put_int(key, v);
          key += ',';
        }
        break;
      case Arg::Kind::Float: put_double(key, a.f); break;
      case Arg::Kind::FloatList:
        for (double d : a.floats) {
          put_double(key, d);
          key += ',';
        }
        break;
      case Arg::Kind::String:
      case Arg::Kind::Device:
        put_int(key, static_cast<int64_t>(a.s.size()));
        key += ':';
        key += a.s;
        break;
      case Arg::Kind::ScalarType: put_int(key, static_cast<int64_t>(a.dtype)); break;
    }
    key += '|';
  }
  key += ")->";
  for (const Value* v : n.outputs) {
    put_type(key, v);
    key += '|';
  }
  return key;
}

}  // namespace

bool eliminate_common_subexpressions(Graph& g) {
  Rewriter rw(g);
  std::unordered_map<std::string, Node*> seen;
  int merged = 0;
  // Nodes are visited in order and replacements patch the arguments of later nodes, so the keys
  // of later nodes already name the surviving values.
  std::vector<Node*> order;
  for (auto& n : g.nodes) order.push_back(n.get());
  for (Node* n : order) {
    if (!n->op || n->outputs.empty() || !is_pure(*n)) continue;
    auto [it, inserted] = seen.emplace(node_key(*n), n);
    if (inserted) continue;
    rw.replace_outputs(*n, std::vector<Value*>(it->second->outputs.begin(), it->second->outputs.end()));
    ++merged;
  }
  if (merged) spdlog::debug("cse: merged {} nodes", merged);
  return rw.commit();
}

}  // namespace foundry::passes
