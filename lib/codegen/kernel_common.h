// What the C++ and CUDA kernel emitters share (cpp_kernel.cpp, cuda_kernel.cpp): the handler
// that shares identical expressions within a kernel body, and a kernel's arguments and comment.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "codegen/cpp_ops.h"
#include "codegen/kernel_scopes.h"
#include "foundry/codegen/cpp_kernel.h"
#include "foundry/ir/record.h"
#include "foundry/support/error.h"

namespace foundry::codegen {

using ir::Expr;
using ir::ReduceOp;
using ir::Val;

// Runs each op through both handlers (the scalar one, then the vector one when there is one), and
// shares identical expressions within a kernel body: an op whose operands and arguments match
// one computed before in a loop still open reuses that value (as Inductor's CSE does). A store
// ends the sharing of loads of its buffer.
class SharedOps final : public ir::Ops {
 public:
  SharedOps(ScopeStack& scopes, ir::Ops& scalar, ir::Ops* vector) : scopes_(scopes), scalar_(scalar), vector_(vector) {}

  Val load(const ir::Buffer& buf, const Expr& index) override {
    return shared("load " + buf.name + "[" + ir::to_string(index) + "]", &buf,
                  [&](ir::Ops& o) { return o.load(buf, index); });
  }
  void store(const ir::Buffer& buf, const Expr& index, Val v, ir::StoreMode mode) override {
    std::erase_if(known_, [&](const auto& entry) { return entry.second.loaded == &buf; });
    both([&](ir::Ops& o) { o.store(buf, index, v, mode); return Val{}; });
  }
  Val constant(const ir::Scalar& s) override {
    return shared("constant " + std::string(dtype_name(s.dtype)) + " " + literal(s), nullptr,
                  [&](ir::Ops& o) { return o.constant(s); });
  }
  Val index_expr(const Expr& e, DType t) override {
    return shared("index " + std::string(dtype_name(t)) + " " + ir::to_string(e), nullptr,
                  [&](ir::Ops& o) { return o.index_expr(e, t); });
  }
  Val to_dtype(Val v, DType t) override {
    return shared("to " + std::string(dtype_name(t)) + " " + operands({v}), nullptr, [&](ir::Ops& o) { return o.to_dtype(v, t); });
  }
  Val unary(ir::UnaryOp op, Val x) override {
    return shared(std::string(ir::op_name(op)) + " " + operands({x}), nullptr, [&](ir::Ops& o) { return o.unary(op, x); });
  }
  Val binary(ir::BinaryOp op, Val a, Val b) override {
    return shared(std::string(ir::op_name(op)) + " " + operands({a, b}), nullptr,
                  [&](ir::Ops& o) { return o.binary(op, a, b); });
  }
  Val where(Val c, Val a, Val b) override {
    return shared("where " + operands({c, a, b}), nullptr, [&](ir::Ops& o) { return o.where(c, a, b); });
  }
  Expr indirect(Val v, const Expr& size, ir::NegativeIndex negative) override {
    std::string key = "indirect " + operands({v}) + " " + ir::to_string(size) + (negative == ir::NegativeIndex::Wraps ? " wraps" : "");
    auto it = known_indirect_.find(key);
    if (it != known_indirect_.end() && scopes_.is_open(it->second.second)) return it->second.first;
    Expr e = scalar_.indirect(v, size, negative);
    if (vector_) FOUNDRY_CHECK(vector_->indirect(v, size, negative) == e, "bug: the kernel's handlers numbered an index apart");
    known_indirect_[key] = {e, scopes_.top().serial};
    return e;
  }
  Val reduction(ReduceOp op, Val v) override {
    return both([&](ir::Ops& o) { return o.reduction(op, v); });
  }
  void store_reduction(const ir::Buffer& buf, const Expr& index, Val v) override {
    both([&](ir::Ops& o) { o.store_reduction(buf, index, v); return Val{}; });
  }

 private:
  struct Known {
    Val value;
    int scope = 0;                      // serial of the scope it is defined in
    const ir::Buffer* loaded = nullptr;  // a load of this buffer
  };
  ScopeStack& scopes_;
  ir::Ops& scalar_;
  ir::Ops* vector_;
  std::map<std::string, Known> known_;
  std::map<std::string, std::pair<Expr, int>> known_indirect_;

  static std::string operands(std::initializer_list<Val> vals) {
    std::string out;
    for (Val v : vals) out += "%" + std::to_string(v.id) + " ";
    return out;
  }
  template <class F>
  Val both(F&& f) {
    Val s = f(scalar_);
    if (vector_) FOUNDRY_CHECK(f(*vector_).id == s.id, "bug: the kernel's handlers numbered a value apart");
    return s;
  }
  template <class F>
  Val shared(const std::string& key, const ir::Buffer* loaded, F&& f) {
    auto it = known_.find(key);
    if (it != known_.end() && scopes_.is_open(it->second.scope)) return it->second.value;
    Val v = both(f);
    known_[key] = {v, scopes_.defined_in.at(v.id), loaded};
    return v;
  }
};

// The buffers a kernel reads and writes, as the recording handler sees its walk.
ir::Accesses kernel_accesses(const sched::Kernel& kernel, const sched::Schedule& schedule);
// One argument per buffer: inputs "in_ptrN", written buffers "out_ptrN".
std::vector<KernelArg> kernel_args(const ir::Accesses& accesses);
// "add (aten.add.Tensor), relu (aten.relu)": the ATen nodes a kernel computes.
std::string origin_comment(const sched::Kernel& kernel);

}  // namespace foundry::codegen
