#include "foundry/codegen/wrapper.h"

#include "foundry/codegen/model_name.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "codegen/externs.h"
#include "foundry/codegen/cuda_kernel.h"
#include "foundry/codegen/cpp_expr.h"
#include "foundry/ir/expr.h"
#include "foundry/support/error.h"

namespace foundry::codegen {
namespace {

WeightsLayout layout_weights(const ir::LoopProgram& program) {
  WeightsLayout layout;
  std::map<const uint8_t*, int64_t> placed;  // storages shared by several buffers are written once
  for (const auto& buf : program.buffers) {
    if (buf->kind != ir::BufferKind::Constant) continue;
    auto it = placed.find(buf->data.data);
    if (it == placed.end()) {
      int64_t offset = layout.total_bytes;
      layout.pieces.push_back({offset, buf->data});
      layout.total_bytes = (offset + static_cast<int64_t>(buf->data.size) + 63) / 64 * 64;
      it = placed.emplace(buf->data.data, offset).first;
    }
    layout.offset_of[buf.get()] = it->second;
  }
  return layout;
}

// The exported range of a size expression: exact for a plain symbol, else its values at the
// symbols' bounds when those are finite (sizes are monotone in practice), else [0, max].
std::pair<int64_t, int64_t> size_range(const ir::Expr& e, const std::vector<ir::SizeSymbol>& symbols) {
  if (e.is_const()) return {e.const_value(), e.const_value()};
  auto at = [&](bool upper) {
    return ir::evaluate(e, [&](const std::string& name) -> int64_t {
      for (const auto& s : symbols)
        if (s.name == name) return upper ? s.max : s.min;
      throw InternalError("unknown dynamic size " + name);
    });
  };
  if (e.kind() == ir::Expr::Kind::Sym) return {at(false), at(true)};
  try {
    return {at(false), at(true)};
  } catch (const InternalError&) {  // overflow at an unbounded symbol
    return {0, INT64_MAX};
  }
}

std::string tensor_specs(const std::vector<const ir::Buffer*>& bufs, const std::vector<std::string>& names,
                         const std::vector<ir::SizeSymbol>& symbols) {
  std::string out;
  for (size_t k = 0; k < bufs.size(); ++k) {
    const auto& sizes = bufs[k]->sizes;
    if (sizes.size() > 8) throw UserError("tensors of rank above 8 are not supported by the C API");
    std::vector<int64_t> shape, lo, hi;
    for (const auto& e : sizes) {
      auto [a, b] = size_range(e, symbols);
      shape.push_back(e.is_const() ? e.const_value() : -1);
      lo.push_back(a);
      hi.push_back(b);
    }
    out += "    {" + c_string_literal(names[k]) + ", " + std::to_string(dtype_to_export(bufs[k]->dtype)) + ", " +
           std::to_string(sizes.size()) + ", " + int_list(shape) + ", " + int_list(lo) + ", " + int_list(hi) + "},\n";
  }
  return out.empty() ? "    {nullptr, 0, 0, {}, {}, {}},\n" : out;
}

// `const int64_t s0 = sizes[0];` for each dynamic size: the names kernels and shapes use.
std::string size_locals(const std::vector<ir::SizeSymbol>& symbols, const std::string& indent) {
  std::string out;
  for (size_t i = 0; i < symbols.size(); ++i)
    out += indent + "const int64_t " + symbols[i].name + " = sizes[" + std::to_string(i) + "];\n" + indent + "(void)" +
           symbols[i].name + ";\n";
  return out;
}

// A dim's size as scale*symbol + offset, scale positive.
struct Affine {
  std::string symbol;
  int64_t scale = 1, offset = 0;
};

// `e` as scale*s + offset in a symbol s not yet bound, when it is that.
std::optional<Affine> affine_in_unbound(const ir::Expr& e, const std::set<std::string>& bound) {
  std::set<std::string> syms = ir::free_symbols(e);
  if (syms.size() != 1 || bound.count(*syms.begin())) return std::nullopt;
  const std::string& s = *syms.begin();
  std::optional<ir::Expr> scale = ir::affine_coefficient(e, s);
  ir::Expr offset = ir::substitute(e, {{s, ir::Expr(0)}});
  if (!scale || !scale->is_const() || scale->const_value() <= 0 || !offset.is_const()) return std::nullopt;
  return Affine{s, scale->const_value(), offset.const_value()};
}

// Model::check_inputs(): checks every input against its spec and reads the dynamic sizes from the
// input shapes (a plain symbol's first occurrence binds it, as does a dim scale*s + offset; every
// other dynamic dim is checked against them), then Model::output_shapes(): fills in the outputs' shapes.
std::string shape_functions(const ir::LoopProgram& program) {
  const auto& symbols = program.size_symbols;
  std::ostringstream c;
  c << "int Model::check_inputs(const foundry_tensor* inputs, int64_t* sizes) {\n"
    << "  (void)sizes;\n"
    << "  for (size_t k = 0; k < kNumInputs; ++k)\n"
    << "    if (int status = foundry_rt::check_tensor(&inputs[k], kInputs[k], \"input\", k, false)) return status;\n";
  std::map<std::string, size_t> slot;
  for (size_t i = 0; i < symbols.size(); ++i) slot[symbols[i].name] = i;
  std::set<std::string> bound;
  std::vector<std::string> checks;
  for (size_t k = 0; k < program.inputs.size(); ++k) {
    const auto& sizes = program.inputs[k]->sizes;
    for (size_t d = 0; d < sizes.size(); ++d) {
      const ir::Expr& e = sizes[d];
      if (e.is_const()) continue;
      std::string at = std::to_string(k) + ", " + std::to_string(d);
      if (e.kind() == ir::Expr::Kind::Sym && !bound.count(e.sym_name())) {
        const ir::SizeSymbol& sym = symbols.at(slot.at(e.sym_name()));
        bound.insert(sym.name);
        c << "  sizes[" << slot.at(sym.name) << "] = inputs[" << k << "].shape[" << d << "];  // " << sym.name << "\n"
          << "  if (int status = foundry_rt::check_dynamic_dim(inputs, kInputs, " << at << ", -1, " << sym.min << ", "
          << sym.max << "LL)) return status;\n";
        continue;
      }
      if (std::optional<Affine> a = affine_in_unbound(e, bound)) {
        // A dim exported as scale*s + offset (torch.export's `32 * Dim(...)`) binds s.
        bound.insert(a->symbol);
        auto [lo, hi] = size_range(e, symbols);
        c << "  if (int status = foundry_rt::bind_scaled_dim(inputs, kInputs, " << at << ", " << a->scale << ", "
          << a->offset << ", " << lo << ", " << hi << "LL, &sizes[" << slot.at(a->symbol) << "])) return status;  // "
          << ir::to_string(e) << "\n";
        continue;
      }
      checks.push_back("  if (int status = foundry_rt::check_dynamic_dim(inputs, kInputs, " + at + ", " +
                       cpp_index(e, {}) + ", INT64_MIN, INT64_MAX)) return status;\n");
    }
  }
  for (const auto& sym : symbols)
    if (!bound.count(sym.name))
      throw UserError("the dynamic size " + quote_untrusted(sym.source, 40) +
                      " is not the size of any input dimension: foundryc cannot read it from the input shapes");
  c << "  {\n" << size_locals(symbols, "    ");
  for (const auto& chk : checks) c << "  " << chk;
  for (const ir::SizeCheck& chk : program.size_checks)
    c << "    if ((" << cpp_index(chk.nonnegative, {}) << ") < 0)\n      return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "
      << c_string_literal(chk.message) << ");\n";
  c << "  }\n  return FOUNDRY_OK;\n}\n\n";
  c << "void Model::output_shapes(const int64_t* sizes, foundry_tensor* outputs) {\n  (void)sizes;\n" << size_locals(symbols, "  ");
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const auto& sizes = program.outputs[k]->sizes;
    c << "  outputs[" << k << "].rank = " << sizes.size() << ";\n";
    for (size_t d = 0; d < sizes.size(); ++d)
      c << "  outputs[" << k << "].shape[" << d << "] = " << cpp_index(sizes[d], {}) << ";\n";
  }
  c << "}\n";
  return c.str();
}

// "float32[8, 64]", dynamic sizes by their symbols ("float32[s0, 64]"): for comments.
std::string type_text(const ir::Buffer& buf) {
  std::string out = std::string(dtype_name(buf.dtype)) + "[";
  for (size_t d = 0; d < buf.sizes.size(); ++d) out += (d ? ", " : "") + ir::to_string(buf.sizes[d]);
  return out + "]";
}

std::string kernels_source(const sched::Schedule& schedule, const std::string& n, const KernelOptions& options,
                           std::vector<EmittedKernel>& emitted) {
  std::ostringstream kernels;
  kernels << "// Kernels of the model `" << n << "`, generated by foundryc " << FOUNDRY_VERSION << ".\n"
          << "#include <cmath>\n#include <cstdint>\n#include <limits>\n\n#include \"foundry_kernel_support.h\"\n#include \"foundry_special.h\"\n#include \"foundry_vec.h\"\n\n";
  if (options.vectorize && options.lanes > 1)
    kernels << "// Vector loops step by " << options.lanes << " floats, the width of the --target the model was generated for.\n"
            << "static_assert(foundry_vec::kLanes == " << options.lanes
            << ", \"compile with the -march of the --target these kernels were generated for\");\n\n";
  kernels << "// Each model's kernels live in a namespace of its own, so that several models link together.\n"
          << "namespace " << n << "_kernels {\n\n";
  for (const auto& step : schedule.steps) {
    if (step.is_extern) continue;
    emitted.push_back(emit_kernel(step.kernel, schedule, options));
    kernels << emitted.back().definition << "\n";
  }
  kernels << "}  // namespace " << n << "_kernels\n";
  return kernels.str();
}

// The kernel parts of a CUDA model (kernels_0.cu, ...): each kernel's __global__ function and host
// launcher, in schedule order, split by split_kernel_parts; kernels_0.cu also defines the
// runtime's own kernels (foundry_cuda_launchers.h).
std::vector<std::string> cuda_kernel_parts(const sched::Schedule& schedule, const std::string& n,
                                           std::vector<EmittedKernel>& emitted) {
  std::vector<size_t> bytes;
  for (const auto& step : schedule.steps) {
    if (step.is_extern) continue;
    emitted.push_back(emit_cuda_kernel(step.kernel, schedule));
    bytes.push_back(emitted.back().definition.size());
  }
  std::vector<size_t> first = split_kernel_parts(bytes);
  std::vector<std::string> parts;
  for (size_t p = 0; p < first.size(); ++p) {
    size_t end = p + 1 < first.size() ? first[p + 1] : emitted.size();
    std::ostringstream kernels;
    kernels << "// CUDA kernels of the model `" << n << "`, generated by foundryc " << FOUNDRY_VERSION << ".\n// Part " << p + 1
            << " of " << first.size() << " (kernels_0.cu to kernels_" << first.size() - 1 << ".cu, compiled in parallel).\n"
            << "#include <cmath>\n#include <cstdint>\n#include <limits>\n\n#include \"foundry_cuda_device.h\"\n"
            << (p == 0 ? "#include \"foundry_cuda_launchers.h\"  // the runtime's kernels, once per model\n" : "")
            << "#include \"foundry_kernel_support.h\"\n\n"
            << "// Math functions are <cmath>'s, whose float and double overloads nvcc maps to the CUDA math library.\n"
            << "namespace " << n << "_kernels {\n\n";
    for (size_t k = first[p]; k < end; ++k) kernels << emitted[k].definition << "\n";
    kernels << "}  // namespace " << n << "_kernels\n";
    parts.push_back(kernels.str());
  }
  return parts;
}

// "features.0.weight: " for a weight whose name in the archive is not its identifier: as written
// when it is a plain dotted path, else quoted by quote_untrusted (one line, no "*/").
std::string archive_name_label(const ir::Buffer& b) {
  if (b.fqn.empty() || b.fqn == b.name) return "";
  bool plain = b.fqn.size() <= 80 && std::all_of(b.fqn.begin(), b.fqn.end(), [](char c) {
                 return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
               });
  return (plain ? b.fqn : quote_untrusted(b.fqn, 80)) + ": ";
}

// The run body's pointer to every buffer, named after the buffer, each line saying what it holds.
struct BufferPointers {
  std::map<const ir::Buffer*, std::string> names;
  std::string lines;

  const std::string& pointer_of(const ir::Buffer& b, const std::string& kernel) const {
    auto it = names.find(&b);
    if (it == names.end())
      throw InternalError("bug: " + kernel + " uses buffer " + b.name + ", which has no storage (not an input, output, "
                          "weight or arena buffer)");
    return it->second;
  }

  void add(const ir::Buffer* b, const std::string& declaration, const std::string& source) {
    names[b] = b->name;
    lines += "  " + declaration + " " + b->name + " = " + source + ";  // " + archive_name_label(*b) +
             type_text(*b) + "\n";
  }
};

// `weights_base`: where weights.bin's bytes are (the mapped file, or a CUDA model's device copy).
BufferPointers buffer_pointers(const ir::LoopProgram& program, const sched::Schedule& schedule,
                               const WeightsLayout& weights, const std::string& weights_base) {
  BufferPointers p;
  for (size_t k = 0; k < program.inputs.size(); ++k) {
    const ir::Buffer* b = program.inputs[k];
    p.add(b, "const auto*", "static_cast<const " + storage_type(b->dtype) + "*>(inputs[" + std::to_string(k) + "].data)");
  }
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const ir::Buffer* b = program.outputs[k];
    p.add(b, "auto*", "static_cast<" + storage_type(b->dtype) + "*>(outputs[" + std::to_string(k) + "].data)");
  }
  for (const auto& [b, offset] : weights.offset_of)
    p.add(b, "const auto*",
          "reinterpret_cast<const " + storage_type(b->dtype) + "*>(" + weights_base + " + " + std::to_string(offset) + ")");
  for (const auto& [b, offset] : schedule.plan.arena_offset)
    p.add(b, "auto*", "reinterpret_cast<" + storage_type(b->dtype) + "*>(arena + " + cpp_index(offset, {}) + ")");
  return p;
}

// "// add (aten.add.Tensor), relu (aten.relu) -> buf1 float32[8, 64], buf2 float32[8]": the ATen
// nodes a kernel computes (members and inlined producers, in program order) and what it writes.
std::string kernel_call_comment(const sched::Kernel& kernel, const EmittedKernel& emitted) {
  std::vector<std::string> origins = sched::kernel_origins(kernel);
  std::string out = "  //";
  for (size_t i = 0; i < origins.size(); ++i) out += (i ? ", " : " ") + origins[i];
  std::string writes;
  for (const KernelArg& arg : emitted.args)
    if (arg.written) writes += (writes.empty() ? " " : ", ") + arg.buffer->name + " " + type_text(*arg.buffer);
  return out + " ->" + writes + "\n";
}

// A library call's step name: its nodes and the call, "bmm (aten.bmm) [bmm]".
std::string extern_step_name(const ir::LoopNode& node) {
  return node_label(node) + " [" + ir::extern_name(node.call) + "]";
}

// The kernel and library calls in run order, each followed by the mark of its end for
// NAME_profile / NAME_profile_cuda; `steps` gets their names.
// A CUDA model's calls take the stream and the device error flag first, and its library calls
// are cuBLAS's and cuDNN's (`externs` is then empty).
std::string step_calls(const sched::Schedule& schedule, const std::vector<EmittedKernel>& kernels,
                       const ExternsSource& externs, const BufferPointers& ptrs, const std::string& n, bool cuda,
                       std::vector<std::string>& steps, bool tf32 = false) {
  std::string calls;
  size_t kernel_index = 0, extern_index = 0;
  for (const auto& step : schedule.steps) {
    if (step.is_extern) {
      calls += cuda ? cuda_extern_call(*step.extern_node, ptrs.names, tf32) : externs.calls[extern_index++];
    } else {
      const EmittedKernel& k = kernels[kernel_index++];
      calls += kernel_call_comment(step.kernel, k) + "  " + n + "_kernels::" + k.name + "(" + (cuda ? "stream, error_flag" : "");
      for (size_t a = 0; a < k.args.size(); ++a)
        calls += (a || cuda ? ", " : "") + ptrs.pointer_of(*k.args[a].buffer, k.name);
      for (const std::string& sym : k.size_params) calls += ", " + sym;
      calls += ");\n";
    }
    std::string index = std::to_string(steps.size());
    calls += cuda ? "  slot.step_done(stream, " + index + ");\n" : "  foundry_rt::step_done(" + index + ");\n";
    steps.push_back(step.is_extern ? extern_step_name(*step.extern_node) : kernels[kernel_index - 1].name);
  }
  return calls;
}


// NAME_model: the mapped weights, the runs' arenas and, for a model with library calls, their
// state (externs.cpp).
std::string model_struct(const std::string& n, bool has_externs) {
  std::string out = "struct " + n + "_model {\n  foundry_rt::WeightsFile weights;\n  foundry_rt::ArenaPool arenas;\n";
  if (!has_externs) return out + "  bool open_externs() { return true; }  // no library calls\n};\n\n";
  return out + "  " + n + "_externs::State* externs = nullptr;\n" +
         "  // The library calls' state, built from the weights once they are mapped; false when out of memory.\n" +
         "  bool open_externs() {\n    externs = " + n + "_externs::create(weights.data);\n    return externs != nullptr;\n  }\n" +
         "  ~" + n + "_model() { " + n + "_externs::destroy(externs); }\n};\n\n";
}

// NAME_model of a CUDA model: the mapped weights and what it owns on the device.
std::string cuda_model_struct(const std::string& n) {
  return "struct " + n + "_model {\n  foundry_rt::WeightsFile weights;\n" +
         "  foundry_cuda::DeviceState device;  // the weights on the GPU, a pool of call slots\n};\n\n";
}

// What a CUDA model's Model class says of it.
struct CudaTraits {
  bool uses_cublas = false, uses_cudnn = false;
  bool reports_errors = false;     // a kernel checks indices or divisions
};

// NAME_detail::Model: the tables and functions foundry_model_api.h's entry points use.
std::string model_class(const ir::LoopProgram& program, const WeightsLayout& weights, const std::string& n,
                        const std::vector<std::string>& steps, const CudaTraits* traits = nullptr) {
  const bool cuda = traits != nullptr;
  std::ostringstream c;
  c << "// The model as foundry_model_api.h's entry points see it.\n"
    << "struct Model {\n  using Instance = " << n << "_model;\n"
    << "  static constexpr size_t kWeightsBytes = " << weights.total_bytes << ";\n"
    << "  static constexpr size_t kNumInputs = " << program.inputs.size() << ", kNumOutputs = " << program.outputs.size()
    << ";\n  static constexpr size_t kNumSizes = " << program.size_symbols.size() << ";  // dynamic sizes\n";
  if (cuda) {
    c << "  static constexpr bool kUsesCublas = " << (traits->uses_cublas ? "true" : "false") << ";\n"
      << "  static constexpr bool kReportsErrors = " << (traits->reports_errors ? "true" : "false")
      << ";  // a kernel checks indices or divisions\n"
      << "  // A new call slot: the handles of the libraries other than cuBLAS the model calls; \"\" or what failed.\n"
      << "  static std::string open_libraries(foundry_cuda::CallSlot& slot) { "
      << (traits->uses_cudnn ? "return foundry_cudnn::open(slot); }\n" : "(void)slot; return \"\"; }\n");
  }
  c << "  // The steps (kernels and library calls) in run order, for NAME_profile" << (cuda ? "_cuda" : "") << ".\n"
    << "  static constexpr size_t kNumSteps = " << steps.size() << ";\n"
    << "  static constexpr const char* kSteps[] = {";
  for (const std::string& step : steps) c << c_string_literal(step) << ", ";
  c << "nullptr};\n";
  c << "  static constexpr foundry_rt::TensorSpec kInputs[] = {\n"
    << tensor_specs(program.inputs, program.input_names, program.size_symbols) << "  };\n"
    << "  static constexpr foundry_rt::TensorSpec kOutputs[] = {\n"
    << tensor_specs(program.outputs, program.output_names, program.size_symbols) << "  };\n\n"
    << "  static int check_inputs(const foundry_tensor* inputs, int64_t* sizes);\n"
    << "  static void output_shapes(const int64_t* sizes, foundry_tensor* outputs);\n"
    << "  static size_t arena_bytes(const int64_t* sizes);\n"
    << (cuda ? "  static void run(Instance* model, foundry_cuda::CallSlot& slot, const foundry_tensor* inputs,\n"
               "                  foundry_tensor* outputs, const int64_t* sizes, uint8_t* arena, cudaStream_t stream);\n"
             : "  static void run(Instance* model, const foundry_tensor* inputs, foundry_tensor* outputs, const int64_t* sizes,\n"
               "                  uint8_t* arena);\n")
    << "};\n\n";
  return c.str();
}

// Model::arena_bytes() and Model::run(): the buffers' pointers, then every step in order.
std::string run_functions(const ir::LoopProgram& program, const sched::Schedule& schedule, const std::string& pointers,
                          const std::string& calls, bool cuda) {
  std::string locals = size_locals(program.size_symbols, "  ");
  if (cuda)
    return "size_t Model::arena_bytes(const int64_t* sizes) {\n  (void)sizes;\n" + locals + "  return " +
           cpp_index(schedule.plan.arena_bytes, {}) + ";\n}\n\n" +
           "void Model::run(Instance* model, foundry_cuda::CallSlot& slot, const foundry_tensor* inputs,\n"
           "                foundry_tensor* outputs, const int64_t* sizes, uint8_t* arena, cudaStream_t stream) {\n"
           "  (void)model, (void)slot, (void)inputs, (void)sizes, (void)arena, (void)stream;\n"
           "  int* error_flag = slot.error_flag;  // the kernels' index and division checks\n"
           "  (void)error_flag;\n" + locals + pointers + "\n" + calls + "}\n";
  return "size_t Model::arena_bytes(const int64_t* sizes) {\n  (void)sizes;\n" + locals + "  return " +
         cpp_index(schedule.plan.arena_bytes, {}) + ";\n}\n\n" +
         "void Model::run(Instance* model, const foundry_tensor* inputs, foundry_tensor* outputs, const int64_t* sizes,\n"
         "                uint8_t* arena) {\n"
         "  (void)model, (void)inputs, (void)sizes, (void)arena;\n" + locals + pointers + "\n" + calls + "}\n";
}

std::string model_header(const std::string& n, bool cuda) {
  std::ostringstream h;
  h << "/* The C API of the compiled model `" << n << "` (generated by foundryc " << FOUNDRY_VERSION << ").\n"
    << " * All functions are thread-safe: one model may be run from several threads at once. */\n"
    << "#ifndef FOUNDRY_MODEL_" << n << "_H\n#define FOUNDRY_MODEL_" << n << "_H\n\n"
    << "#include \"foundry_c_api.h\"\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
    << "typedef struct " << n << "_model " << n << "_model;\n\n"
    << "/* Loads the model from its output folder (weights.bin). Returns FOUNDRY_OK or an error. */\n"
    << "int " << n << "_create(const char* model_dir, " << n << "_model** out);\n"
    << "/* Runs the model: inputs and outputs are caller-owned dense row-major tensors. */\n"
    << "int " << n << "_run(" << n << "_model* model, const foundry_tensor* inputs, size_t num_inputs,\n"
    << "    foundry_tensor* outputs, size_t num_outputs);\n"
    << "size_t " << n << "_num_inputs(void);\nsize_t " << n << "_num_outputs(void);\n"
    << "int " << n << "_input_info(size_t index, foundry_tensor_info* info);\n"
    << "int " << n << "_output_info(size_t index, foundry_tensor_info* info);\n"
    << "void " << n << "_destroy(" << n << "_model* model);\n"
    << "/* Checks the inputs (count, dtypes, shapes) and fills in each output's dtype, rank and shape, so\n"
    << " * that the caller can size the outputs of a model with dynamic sizes; `data` is not touched. */\n"
    << "int " << n << "_infer_shapes(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs,\n"
    << "    size_t num_outputs);\n"
    << "/* The message of the last error on the calling thread (empty when none). */\n"
    << "const char* " << n << "_last_error(void);\n"
    << "/* The model's steps (kernels and library calls) in run order, for the profiles. */\n"
    << "size_t " << n << "_num_steps(void);\nconst char* " << n << "_step_name(size_t index);\n\n";
  if (!cuda)
    h << "/* NAME_run timed step by step: step_ms[k], milliseconds, and step_threads[k] (may be NULL), the\n"
      << " * threads step k ran on, for k < NAME_num_steps(). For foundry-run --profile. */\n"
      << "int " << n << "_profile(" << n << "_model* model, const foundry_tensor* inputs, size_t num_inputs,\n"
      << "    foundry_tensor* outputs, size_t num_outputs, double* step_ms, int* step_threads, size_t num_steps);\n\n";
  if (cuda)
    h << "/* A CUDA model: NAME_run above copies host tensors to the GPU and back. NAME_run_cuda takes device\n"
      << " * pointers and enqueues the run on `stream` (a cudaStream_t; NULL: the default stream) without\n"
      << " * waiting; an error a kernel reports (an index out of range) is returned by NAME_check_errors,\n"
      << " * which waits for the stream. */\n"
      << "int " << n << "_run_cuda(" << n << "_model* model, void* stream, const foundry_tensor* inputs,\n"
      << "    size_t num_inputs, foundry_tensor* outputs, size_t num_outputs);\n"
      << "int " << n << "_check_errors(" << n << "_model* model, void* stream);\n"
      << "/* One run on device tensors timed step by step with CUDA events (in a CUDA graph of its own):\n"
      << " * step_ms[k], milliseconds, for k < NAME_num_steps(); waits for `stream`. For foundry-run --profile. */\n"
      << "int " << n << "_profile_cuda(" << n << "_model* model, void* stream, const foundry_tensor* inputs,\n"
      << "    size_t num_inputs, foundry_tensor* outputs, size_t num_outputs, double* step_ms, size_t num_steps);\n\n";
  h
    << "#ifdef __cplusplus\n}\n#endif\n\n#endif\n";
  return h.str();
}

}  // namespace

std::string sanitize_model_name(const std::string& stem) {
  std::string out;
  for (char c : stem) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out[0]))) out = "model_" + out;
  return out.substr(0, kMaxModelNameLength);
}

std::string c_string_literal(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f && c != '?') {  // '?' avoids trigraphs
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

namespace {

// Whether a step of the schedule is a library call of this kind (ir::Matmul, ir::Convolution).
template <class Call>
bool has_call(const sched::Schedule& schedule) {
  return std::any_of(schedule.steps.begin(), schedule.steps.end(), [](const sched::Step& s) {
    return s.is_extern && std::holds_alternative<Call>(s.extern_node->call.op);
  });
}

// A CUDA model: its kernel parts, and a wrapper.cpp (host code) whose run body launches the kernels on the stream
// and calls cuBLAS, with the CUDA C API.
GeneratedModel generate_cuda_model(const ir::LoopProgram& program, const sched::Schedule& schedule, const std::string& n,
                                   bool tf32) {
  GeneratedModel m;
  m.name = n;
  m.device = "cuda";
  m.weights = layout_weights(program);
  m.kernel_parts = cuda_kernel_parts(schedule, n, m.kernels);
  BufferPointers ptrs = buffer_pointers(program, schedule, m.weights, "model->device.weights");
  bool uses_cublas = has_call<ir::Matmul>(schedule), uses_cudnn = has_call<ir::Convolution>(schedule);
  CudaTraits traits;
  traits.uses_cublas = uses_cublas;
  traits.uses_cudnn = uses_cudnn;
  traits.reports_errors = std::any_of(m.kernels.begin(), m.kernels.end(), [](const EmittedKernel& k) { return k.may_fail; });
  std::vector<std::string> steps;
  std::string calls = step_calls(schedule, m.kernels, ExternsSource{}, ptrs, n, true, steps, tf32);
  std::ostringstream w;
  w << "// The entry points of the CUDA model `" << n << "` (see model.h), generated by foundryc " << FOUNDRY_VERSION
    << ".\n#include \"model.h\"\n#include \"foundry_cuda_model_api.h\"\n"
    << (uses_cudnn ? "#include \"foundry_cudnn.h\"  // the convolutions\n" : "") << "\n"
    << "namespace " << n << "_kernels {  // kernels_N.cu: the launchers\n";
  for (const auto& k : m.kernels) w << k.declaration << ";\n";
  w << "}  // namespace " << n << "_kernels\n\n"
    << cuda_model_struct(n) << "namespace " << n << "_detail {\nusing namespace " << n << "_kernels;\n\n"
    << model_class(program, m.weights, n, steps, &traits) << shape_functions(program) << "\n"
    << run_functions(program, schedule, ptrs.lines, calls, true) << "\n}  // namespace " << n << "_detail\n\n"
    << "FOUNDRY_DEFINE_CUDA_MODEL_API(" << n << ")\n";
  m.wrapper_cpp = w.str();
  m.uses_cudnn = uses_cudnn;
  m.model_h = model_header(n, true);
  return m;
}

}  // namespace

GeneratedModel generate_model(const ir::LoopProgram& program, const sched::Schedule& schedule,
                              const std::string& model_name, const KernelOptions& options) {
  if (options.device == "cuda") {
    GeneratedModel m = generate_cuda_model(program, schedule, model_name, options.tf32);
    m.march = options.cuda_arch;
    return m;
  }
  GeneratedModel m;
  m.name = model_name;
  m.weights = layout_weights(program);
  if (options.vectorize) m.march = options.lanes == 16 ? "skylake-avx512" : options.lanes == 8 ? "haswell" : "x86-64";
  const std::string& n = model_name;
  m.kernels_cpp = kernels_source(schedule, n, options, m.kernels);

  BufferPointers ptrs = buffer_pointers(program, schedule, m.weights, "model->weights.data");
  ExternsSource externs = generate_externs(program, schedule, m.weights, n, ptrs.names, options.threads);
  m.externs_cpp = externs.cpp;

  std::vector<std::string> steps;
  std::string calls = step_calls(schedule, m.kernels, externs, ptrs, n, false, steps);
  std::ostringstream w;
  w << "// The entry points of the model `" << n << "` (see model.h), generated by foundryc " << FOUNDRY_VERSION
    << ".\n#include \"model.h\"\n#include \"foundry_model_api.h\"\n#include \"foundry_externs.h\"\n\n"
    << "namespace " << n << "_kernels {  // kernels.cpp\n";
  for (const auto& k : m.kernels) w << k.declaration << ";\n";
  w << "}  // namespace " << n << "_kernels\n\n"
    << externs.wrapper_decls << model_struct(n, !externs.cpp.empty())
    << "namespace " << n << "_detail {\nusing namespace " << n << "_kernels;\n\n"
    << model_class(program, m.weights, n, steps) << shape_functions(program) << "\n"
    << run_functions(program, schedule, ptrs.lines, calls, false)
    << "\n}  // namespace " << n << "_detail\n\n"
    << "FOUNDRY_DEFINE_MODEL_API(" << n << ")\n";
  m.wrapper_cpp = w.str();
  m.model_h = model_header(n, false);
  return m;
}

}  // namespace foundry::codegen
