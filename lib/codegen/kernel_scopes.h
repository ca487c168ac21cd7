// The loop scopes a kernel's bodies are emitted into, shared by its two emitting handlers: the
// scalar one (CppScalarOps) and the vector one (CppVectorOps). There is one scope per loop block
// of the kernel walk: the kernel's outer loops, then each reduction's or inner member's loops.
// A scope collects each handler's statements; the kernel emitter then arranges them into a loop
// nest (loop_nest.h).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "foundry/codegen/loop_nest.h"
#include "foundry/ir/loop_ir.h"
#include "foundry/ir/ops.h"

namespace foundry::codegen {

struct Accumulator {
  std::string name, type;
  ir::ReduceOp op;
};

// A transposed read in tile form: kLanes rows read whole into `tile` from `base`, `stride`
// elements apart (see tiled loops in cpp_kernel.cpp).
struct TileLoad {
  std::string tile, base;
  int64_t stride = 0;
};

struct Scope {
  ir::Index ranges;  // the loops' ranges
  std::vector<std::string> vars;
  int serial = 0;        // tells this scope from a sibling that reused its place on the stack
  int nested = 0;        // loops opened inside this one
  int split_chunks = 0;  // > 0: a reduction loop split into this many pieces run on threads

  // Scalar form: `lines` is the loop body (with the loops of inner scopes). A reduction loop's
  // accumulators are declared before it (`pre`) and its results read after it (`post`).
  std::vector<std::string> pre, post;
  Stmts lines;
  std::vector<Accumulator> accumulators;

  // Vector form of the loop over the last of `vars`, `foundry_vec::kLanes` iterations at a time:
  // `vector_lines` are its body, `vector_pre` the lanes' accumulators (declared after `pre`),
  // `vector_combine` folds them into the scalar accumulators after the loops. `vector_ok` turns
  // false when a store or reduction in the loop has no vector form.
  std::vector<std::string> vector_pre, vector_lines, vector_combine;
  bool vector_ok = true;
  // The same body for the last iterations, fewer than kLanes (`kActiveLanes` of them, from the
  // vector variable on): loads and stores touch only those lanes, and reductions take the
  // reduction's identity from the others. `partial_ok` turns false where that form is missing (a
  // tile, a 16-bit store): the iterations then run scalar.
  std::vector<std::string> partial_lines;
  bool partial_ok = true;
  // Statements that do not change within the innermost loop (values of the other loops: an
  // upsampling's source rows and weights, a gathered group's index) are written once before it
  // instead of at each of its iterations: `hoisted`, scalar, its values splat into the vector
  // form. Only where `hoists` (C++ kernels whose loops allow it; see ScopeStack::invariant).
  bool hoists = false;
  std::vector<std::string> hoisted;
  std::set<int> hoisted_values;
  std::set<std::string> hoisted_symbols;  // indirect indices computed there
  std::set<std::string> varying;          // the innermost variable, and indices read inside its loop
  bool fails = false;  // a statement inside its loops can report a kernel error (an index, a division)
  // The outer scope of a transposing kernel runs tile by tile along `tile_var` (the plan's choice).
  std::string tile_var;
  std::vector<TileLoad> tile_loads;
};

// A row held in registers (CUDA row kernels, cuda_kernel.cpp; Inductor's persistent reductions):
// in a short loop that a block's threads share, each thread takes its elements in a fixed number
// of unrolled rounds (`slot`), so what one such loop loads can stay in a register array indexed
// by the round, and a later loop of the same shape in the same row reads it from there instead
// of from memory again; a value such a loop stores is held too, for a later loop that reads it
// back. A store to a buffer forgets what was held of it before.
class RowRegisters {
 public:
  static constexpr int kMaxArrays = 8;  // per kernel: at most 8 rounds each, 64 registers

  void enter(const ir::Index& ranges, const std::vector<std::string>& vars, int serial);
  void leave() { serial_ = 0; }
  bool inside(int serial) const { return serial_ != 0 && serial == serial_; }
  // The array element that holds ptr[index] in this round, if an earlier loop loaded or stored it.
  std::optional<std::string> held(const std::string& ptr, const ir::Expr& index);
  // Holds `value`, just loaded from or stored to ptr[index]: the statement that keeps it, or ""
  // when the index does not move with the loop (or goes through loaded indices) or no array is
  // left.
  std::string hold(const std::string& ptr, const ir::Expr& index, const std::string& type, const std::string& value);
  void forget(const std::string& ptr);
  // After the walk: the declarations of the arrays read again, each `kRowSlots` long (a constant
  // the kernel defines); `body` loses the statements that filled the others.
  std::vector<std::string> finish(Stmts& body) const;

 private:
  struct Held {
    std::string ptr, array;
  };
  int serial_ = 0;
  std::string shape_;
  std::map<std::string, ir::Expr> positional_;  // the loop's variables -> p0, p1, ...
  std::map<std::string, Held> held_;            // by shape, pointer and positional index
  std::vector<std::string> declarations_;       // one per array, in order
  std::set<std::string> read_;                  // the arrays read again
  std::optional<std::string> key(const std::string& ptr, const ir::Expr& index) const;
};

class ScopeStack;

// Lane vectors of a flat CUDA kernel (cuda_kernel.cpp): each thread takes kLanes consecutive
// elements of the innermost loop, whose extent they divide; a float32 access that moves by one
// element per lane from a 16-byte boundary becomes one 128-bit load before the lanes' unrolled
// loop (or store after it) into a register array indexed by `lane`. Other accesses stay scalar.
class LaneVectors {
 public:
  static constexpr int kLanes = 4;

  // `var`: the innermost loop variable; `serial`: the flat loop's scope; `vars`: every loop
  // variable of the kernel (an index with other symbols, such as loaded indices, stays scalar).
  LaneVectors(std::string var, int serial, std::set<std::string> vars)
      : var_(std::move(var)), serial_(serial), vars_(std::move(vars)) {}
  bool inside(int serial) const { return serial == serial_; }
  const std::string& var() const { return var_; }
  std::string first_lane() const { return var_ + "_lane0"; }  // the variable at lane 0
  // The lane's element of a vector load or store of ptr[index], if it has that form.
  std::optional<std::string> load(ScopeStack& scopes, const std::string& ptr, const ir::Expr& index);
  std::optional<std::string> store(ScopeStack& scopes, const std::string& ptr, const ir::Expr& index);
  // Before the lanes' loop: the arrays and the loads; after it: the stores.
  const std::vector<std::string>& before() const { return before_; }
  const std::vector<std::string>& after() const { return after_; }
  const std::set<std::string>& pointers() const { return pointers_; }  // read or written as vectors

 private:
  std::string var_;
  int serial_;
  std::set<std::string> vars_;
  std::map<std::string, std::string> loaded_;  // "ptr|index" -> array
  std::vector<std::string> before_, after_;
  std::set<std::string> pointers_;
  int arrays_ = 0;
  std::optional<std::string> first_lane_offset(ScopeStack& scopes, const ir::Expr& index) const;
};

class ScopeStack {
 public:
  ScopeStack(const std::map<const ir::Buffer*, std::string>& ptrs, int lanes);

  void open(const ir::Index& ranges, const std::vector<std::string>& vars);
  Scope close();  // the innermost scope, taken off the stack
  Scope& top() { return stack_.back(); }
  const Scope& top() const { return stack_.back(); }
  size_t depth() const { return stack_.size(); }
  bool is_open(int serial) const;  // a value defined in scope `serial` is visible here
  int enclosing_serial() const { return stack_[stack_.size() - 2].serial; }

  // The C++ of an index expression, simplified with the extents of the loops in scope; the
  // dynamic sizes it mentions become kernel parameters.
  std::string idx(const ir::Expr& e);
  std::string ptr(const ir::Buffer& buf) const;
  void set_extent(const std::string& symbol, const ir::Expr& extent) { extents_[symbol] = extent; }

  const std::set<std::string>& size_symbols() const { return size_symbols_; }
  int lanes() const { return lanes_; }
  // The piece of a loop that the kernel is being written for (piece_split.h): index expressions
  // are simplified for `var` in [begin, end), and comparisons that hold, or fail, for all of it
  // are decided.
  struct Piece {
    std::string var;
    int64_t begin = 0, end = 0;
  };
  std::optional<Piece> piece;
  // Whether `diff op 0` holds in every iteration of the piece; nullopt when it varies (or no piece).
  std::optional<bool> decided(ir::BinaryOp op, const ir::Expr& diff) const;
  std::map<int, int> defined_in;  // value id -> serial of the scope that defines it
  // Hoisting (Scope::hoisted): whether scopes opened from now on may hoist, and the buffers the
  // kernel writes, whose loads stay where they are.
  bool hoisting = false;
  std::set<const ir::Buffer*> written;
  // Whether a statement of the innermost scope that reads `values` (and `buffer`, and indexes
  // with `indices`) gives the same value at every iteration of its innermost loop.
  bool invariant(std::initializer_list<ir::Val> values, std::initializer_list<const ir::Expr*> indices = {},
                 const ir::Buffer* buffer = nullptr) const;
  bool may_fail = false;          // the code calls a helper that can report a kernel error
  RowRegisters* rows = nullptr;   // CUDA row kernels that hold short rows in registers
  LaneVectors* lane_vectors = nullptr;  // CUDA flat kernels that load and store 4 lanes at a time

 private:
  ir::Expr at_offset(const ir::Expr& e, ir::SymbolExtents& extents) const;
  ir::Expr in_piece(const ir::Expr& e) const;

  const std::map<const ir::Buffer*, std::string>& ptrs_;
  int lanes_;
  std::vector<Scope> stack_;
  ir::SymbolExtents extents_;
  std::set<std::string> size_symbols_;
  int serial_ = 0;
};

// The lane symbol of per-lane index lambdas (`[&](int64_t lane) { ... }`).
inline const std::string kLane = "lane";

}  // namespace foundry::codegen
