// Building small ATen graphs by hand for unit tests: typed inputs, weights that own their
// bytes, and nodes bound to their schema and typed by their op's shape rule.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "foundry/build/compile.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/graph/graph.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/ops/registry.h"
#include "foundry/runtime/npy.h"
#include "foundry/sched/schedule.h"

namespace foundry::test {

inline RawArg pos(Arg a) { return RawArg{"", std::move(a), false}; }
inline RawArg pos(Value* v) { return pos(Arg::of_tensor(v)); }
inline RawArg named(const std::string& name, Arg a) { return RawArg{name, std::move(a), true}; }
inline Arg ints(std::vector<int64_t> v) { return Arg::of_ints(std::move(v)); }
inline Arg tensors(std::vector<Value*> vs) {
  Arg a;
  a.kind = Arg::Kind::TensorList;
  a.tensors = std::move(vs);
  return a;
}

struct Builder {
  Graph g;

  Value* input(const std::string& name, std::vector<int64_t> sizes, DType dtype = DType::Float32) {
    Value* v = g.new_value(name, shape::make_type(dtype, std::move(sizes)));
    g.inputs.push_back(GraphInput{InputKind::User, v, "", {}});
    return v;
  }

  // A float32 weight owning `data` (or 0.1*i - 1 patterns when empty).
  Value* weight(const std::string& name, std::vector<int64_t> sizes, std::vector<float> data = {},
                InputKind kind = InputKind::Parameter) {
    TensorType t = shape::make_type(DType::Float32, std::move(sizes));
    if (data.empty())
      for (int64_t i = 0; i < t.numel(); ++i) data.push_back(0.25f * static_cast<float>(i % 11) - 1.0f);
    REQUIRE(static_cast<int64_t>(data.size()) == t.numel());
    auto bytes = std::make_shared<std::vector<uint8_t>>(data.size() * 4);
    std::memcpy(bytes->data(), data.data(), bytes->size());
    Value* v = g.new_value(name, t);
    GraphInput in{kind, v, name, Blob{bytes, bytes->data(), bytes->size()}};
    g.inputs.push_back(in);
    return v;
  }

  Node* node(const std::string& op, std::vector<RawArg> raw) {
    const OpInfo* info = find_op(op);
    REQUIRE(info != nullptr);
    auto n = std::make_unique<Node>();
    n->target = info->name;
    n->op = info;
    n->name = info->schema.name;
    n->source_name = n->name;
    n->args = bind_arguments(*info, raw, &n->arg_names);
    std::vector<TensorType> types = info->infer(*n);
    for (const TensorType& t : types) n->outputs.push_back(g.new_value(n->name, t));
    return g.append_node(std::move(n));
  }
  Value* op(const std::string& name, std::vector<RawArg> raw) { return node(name, std::move(raw))->outputs.at(0); }

  void output(Value* v, OutputKind kind = OutputKind::User, const std::string& target = "") {
    g.outputs.push_back(GraphOutput{kind, v, target});
  }
};

inline size_t count_op(const Graph& g, const std::string& target) {
  size_t n = 0;
  for (const auto& node : g.nodes) n += node->target == target;
  return n;
}

// An array of `dtype` holding `values` (of the matching C++ type) in row-major order.
template <typename T>
NpyArray npy_array(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(T));
  std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

// Deterministic inputs for a graph's user inputs (float32 waves, bool patterns).
inline std::vector<NpyArray> make_inputs(const Graph& g) {
  std::vector<NpyArray> out;
  int seed = 1;
  for (const Value* v : g.user_inputs()) {
    NpyArray a;
    a.dtype = v->type.dtype;
    a.shape = v->type.sizes;
    a.data.resize(static_cast<size_t>(a.numel()) * dtype_size(a.dtype));
    REQUIRE((a.dtype == DType::Float32 || a.dtype == DType::Bool));
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (a.dtype == DType::Bool)
        a.data[static_cast<size_t>(i)] = ((i * 7 + seed) % 5) != 0;
      else
        a.as<float>()[i] = 4.0f * std::sin(0.37f * static_cast<float>(i + seed));
    }
    ++seed;
    out.push_back(std::move(a));
  }
  return out;
}

// The graph lowered and run by the reference evaluator.
inline std::vector<NpyArray> evaluate(const Graph& g, const std::vector<NpyArray>& inputs) {
  return ir::evaluate_program(lower::lower_graph(g), inputs);
}

// Schedules, generates and builds `program` into dir/model.so (symbol prefix `name`), with the
// compile cache in `cache`.
inline void compile_program(const ir::LoopProgram& program, const std::string& dir, const std::string& cache,
                            bool vectorize = true, const std::string& name = "bounds") {
  sched::Schedule schedule = sched::schedule_program(program, {});
  codegen::KernelOptions kernel_options;
  kernel_options.vectorize = vectorize;
  std::filesystem::create_directories(dir);
  codegen::write_model_files(codegen::generate_model(program, schedule, name, kernel_options), dir);
  build::CompileOptions options;
  options.cache_dir = cache;
  build::compile_model(dir, options);
}

// Lowers `g` (with dynamic sizes, as foundryc does) and compiles it as compile_program does.
inline void compile_graph(const Graph& g, const std::string& dir, const std::string& cache, bool vectorize = true,
                          const std::string& name = "bounds") {
  lower::LowerOptions lower_options;
  lower_options.dynamic_shapes = true;
  compile_program(lower::lower_graph(g, lower_options), dir, cache, vectorize, name);
}

}  // namespace foundry::test
