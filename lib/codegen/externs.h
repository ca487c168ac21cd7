// Generation of a model's extern kernel calls (externs.cpp): oneDNN primitives built at model
// creation, with the portable loops of foundry_externs.h as the fallback.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "foundry/codegen/wrapper.h"

namespace foundry::codegen {

struct ExternsSource {
  std::string cpp;                 // externs.cpp; empty when the model has no extern kernels
  std::string wrapper_decls;       // declarations the wrapper needs
  std::vector<std::string> calls;  // per extern step: the call statement (wrapper pointer names)
};

ExternsSource generate_externs(const ir::LoopProgram& program, const sched::Schedule& schedule,
                               const WeightsLayout& weights, const std::string& model_name,
                               const std::map<const ir::Buffer*, std::string>& wrapper_ptrs, int threads);

// The statements of a LAPACK call (foundry_lapack.h) over the function's pointers (`ptrs`:
// operand buffers and the output, "out"); lapack_externs.cpp.
std::string linalg_statements(const ir::LoopNode& node, const ir::Linalg& call,
                              const std::map<const ir::Buffer*, std::string>& ptrs);
// The statements of a row sort (foundry_sort.h) over the function's pointers, its rows on
// `threads` threads (foundryc --threads; 0: the runtime's default); sort_externs.cpp.
std::string sort_statements(const ir::LoopNode& node, const ir::SortRows& call,
                            const std::map<const ir::Buffer*, std::string>& ptrs, int threads);
// The statements of a fused attention (foundry_attention.h) over the function's pointers, its
// blocks of queries on up to `threads` threads; attention_externs.cpp.
std::string attention_statements(const ir::LoopNode& node, const ir::Attention& call,
                                 const std::map<const ir::Buffer*, std::string>& ptrs, int threads);
// Whether a library call is a float32 depthwise 2-d convolution that runs on foundryc's own loops
// (foundry_depthwise.h) instead of oneDNN; the block of create() that builds what its rows read
// into state member `member` (a foundry_rt::DepthwiseRows), and the statements of one call;
// depthwise_externs.cpp.
bool runs_depthwise(const ir::LoopNode& node);
std::string depthwise_build(const ir::LoopNode& node, const std::string& member);
std::string depthwise_statements(const ir::LoopNode& node, const std::string& member,
                                 const std::map<const ir::Buffer*, std::string>& ptrs);
// `op`'s first element in the function of a call, over its pointers (`local`).
std::string operand_pointer(const ir::Operand& op, const std::map<const ir::Buffer*, std::string>& local);
// The folded activation of a library call as the runtime's enumerator (foundry_rt::Activation).
std::string activation_enum(ir::Activation activation);
// The line externs.cpp includes the LAPACK routines with; the build links -llapacke when it is there.
constexpr const char* kLapackInclude = "#include \"foundry_lapack.h\"";

// The statements of a library call of a CUDA model (cuda_externs.cpp): matrix products through
// cuBLAS, convolutions through cuDNN, over the run body's pointers (`ptrs`), `model` and `stream`
// in scope; `tf32`: float32 calls may use TF32 tensor cores (--allow-tf32). Throws UserError,
// naming the node, for the calls that have no GPU form yet (LAPACK, sorts).
std::string cuda_extern_call(const ir::LoopNode& node, const std::map<const ir::Buffer*, std::string>& ptrs, bool tf32);
// A library call's nodes, "bmm (aten.bmm)" ("node7" when it has no ATen origin), for comments,
// errors and step names.
std::string node_label(const ir::LoopNode& node);

std::string int_list(const std::vector<int64_t>& v);
std::string expr_list(const std::vector<ir::Expr>& v);
// The dynamic sizes (s0, ...) that the expressions mention, in name order.
std::set<std::string> size_symbols_of(const std::vector<ir::Expr>& exprs);

}  // namespace foundry::codegen
