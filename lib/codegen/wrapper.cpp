#include "foundry/codegen/wrapper.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "codegen/externs.h"
#include "foundry/codegen/cpp_expr.h"
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

// check_inputs(): checks every input against its spec and reads the dynamic sizes from the input
// shapes (a plain symbol's first occurrence binds it; every other dynamic dim is checked against
// it), then output_shapes(): fills in the outputs' shapes.
std::string shape_functions(const ir::LoopProgram& program) {
  const auto& symbols = program.size_symbols;
  std::ostringstream c;
  c << "int check_inputs(const foundry_tensor* inputs, int64_t* sizes) {\n"
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
  c << "  }\n  return FOUNDRY_OK;\n}\n\n";
  c << "void output_shapes(const int64_t* sizes, foundry_tensor* outputs) {\n  (void)sizes;\n" << size_locals(symbols, "  ");
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const auto& sizes = program.outputs[k]->sizes;
    c << "  outputs[" << k << "].rank = " << sizes.size() << ";\n";
    for (size_t d = 0; d < sizes.size(); ++d)
      c << "  outputs[" << k << "].shape[" << d << "] = " << cpp_index(sizes[d], {}) << ";\n";
  }
  c << "}\n";
  return c.str();
}

std::string model_header(const std::string& n) {
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
    << "const char* " << n << "_last_error(void);\n\n"
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
  return out.substr(0, 48);
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

GeneratedModel generate_model(const ir::LoopProgram& program, const sched::Schedule& schedule,
                              const std::string& model_name, const KernelOptions& options) {
  GeneratedModel m;
  m.name = model_name;
  m.weights = layout_weights(program);
  if (options.vectorize) m.march = options.lanes == 16 ? "skylake-avx512" : options.lanes == 8 ? "haswell" : "x86-64";
  const std::string& n = model_name;

  std::ostringstream kernels;
  kernels << "// Kernels of the model `" << n << "`, generated by foundryc " << FOUNDRY_VERSION << ".\n"
          << "#include <cmath>\n#include <cstdint>\n#include <limits>\n\n#include \"foundry_kernel_support.h\"\n#include \"foundry_vec.h\"\n\n";
  if (options.vectorize && options.lanes > 1)
    kernels << "// Vector loops step by " << options.lanes << " floats, the width of the --target the model was generated for.\n"
            << "static_assert(foundry_vec::kLanes == " << options.lanes
            << ", \"compile with the -march of the --target these kernels were generated for\");\n\n";
  kernels
          << "// Each model's kernels live in a namespace of its own, so that several models link together.\n"
          << "namespace " << n << "_kernels {\n\n";
  for (const auto& step : schedule.steps) {
    if (step.is_extern) continue;
    m.kernels.push_back(emit_kernel(step.kernel, schedule, options));
    kernels << m.kernels.back().definition << "\n";
  }
  kernels << "}  // namespace " << n << "_kernels\n";
  m.kernels_cpp = kernels.str();

  // Pointers to every buffer, named after the buffer.
  std::map<const ir::Buffer*, std::string> ptrs;
  std::ostringstream setup;
  std::set<const ir::Buffer*> outputs(program.outputs.begin(), program.outputs.end());
  for (size_t k = 0; k < program.inputs.size(); ++k) {
    const ir::Buffer* b = program.inputs[k];
    ptrs[b] = b->name;
    setup << "  const auto* " << b->name << " = static_cast<const " << storage_type(b->dtype) << "*>(inputs[" << k
          << "].data);\n";
  }
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const ir::Buffer* b = program.outputs[k];
    ptrs[b] = b->name;
    setup << "  auto* " << b->name << " = static_cast<" << storage_type(b->dtype) << "*>(outputs[" << k << "].data);\n";
  }
  for (const auto& [buf, offset] : m.weights.offset_of) {
    ptrs[buf] = buf->name;
    setup << "  const auto* " << buf->name << " = reinterpret_cast<const " << storage_type(buf->dtype)
          << "*>(model->weights.data + " << offset << ");\n";
  }
  for (const auto& [buf, offset] : schedule.plan.arena_offset) {
    ptrs[buf] = buf->name;
    setup << "  auto* " << buf->name << " = reinterpret_cast<" << storage_type(buf->dtype) << "*>(arena.base + "
          << cpp_index(offset, {}) << ");\n";
  }

  ExternsSource externs = generate_externs(program, schedule, m.weights, n, ptrs);
  m.externs_cpp = externs.cpp;
  bool has_externs = !externs.cpp.empty();
  std::ostringstream calls;
  size_t kernel_index = 0, extern_index = 0;
  for (const auto& step : schedule.steps) {
    if (step.is_extern) {
      calls << externs.calls[extern_index++];
      continue;
    }
    const EmittedKernel& k = m.kernels[kernel_index++];
    calls << "  " << n << "_kernels::" << k.name << "(";
    for (size_t a = 0; a < k.args.size(); ++a) calls << (a ? ", " : "") << ptrs.at(k.args[a].buffer);
    for (const std::string& sym : k.size_params) calls << ", " << sym;
    calls << ");\n";
  }

  std::ostringstream w;
  const std::string d = n + "_detail::";
  w << "// The entry points of the model `" << n << "` (see model.h), generated by foundryc " << FOUNDRY_VERSION
    << ".\n#include \"model.h\"\n#include \"foundry_model_runtime.h\"\n#include \"foundry_externs.h\"\n\n"
    << "#define FOUNDRY_API extern \"C\" __attribute__((visibility(\"default\")))\n\n"
    << "namespace " << n << "_kernels {  // kernels.cpp\n";
  for (const auto& k : m.kernels) w << k.declaration << ";\n";
  w << "}  // namespace " << n << "_kernels\n\n" << externs.wrapper_decls
    << "namespace " << n << "_detail {\nusing namespace " << n << "_kernels;\nconstexpr size_t kWeightsBytes = " << m.weights.total_bytes << ";\n"

    << "constexpr size_t kNumInputs = " << program.inputs.size() << ", kNumOutputs = " << program.outputs.size() << ";\n"
    << "const foundry_rt::TensorSpec kInputs[] = {\n";
  w << tensor_specs(program.inputs, program.input_names, program.size_symbols)
    << "};\nconst foundry_rt::TensorSpec kOutputs[] = {\n"
    << tensor_specs(program.outputs, program.output_names, program.size_symbols) << "};\n"
    << "constexpr size_t kNumSizes = " << program.size_symbols.size() << ";  // dynamic sizes\n\n"
    << shape_functions(program) << "}  // namespace " << n << "_detail\n"
    << "\n"
    << "struct " << n << "_model {\n  foundry_rt::WeightsFile weights;\n"
    << (has_externs ? "  " + n + "_externs::State* externs = nullptr;\n  ~" + n + "_model() { " + n +
                          "_externs::destroy(externs); }\n"
                    : std::string())
    << "};\n\n"
    << "FOUNDRY_API int " << n << "_create(const char* model_dir, " << n << "_model** out) {\n"
    << "  if (!model_dir || !out) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"null argument\");\n"
    << "  auto* model = new (std::nothrow) " << n << "_model();\n"
    << "  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, \"out of memory\");\n"
    << "  if (int status = model->weights.open(model_dir, " << d << "kWeightsBytes)) {\n    delete model;\n    return status;\n  }\n"
    << (has_externs ? "  model->externs = " + n + "_externs::create(model->weights.data);\n  if (!model->externs) {\n"
                          "    delete model;\n    return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, \"out of memory\");\n  }\n"
                    : std::string())
    << "  *out = model;\n  foundry_rt::last_error.clear();\n  return FOUNDRY_OK;\n}\n\n"
    << "FOUNDRY_API void " << n << "_destroy(" << n << "_model* model) { delete model; }\n\n"
    << "FOUNDRY_API size_t " << n << "_num_inputs(void) { return " << d << "kNumInputs; }\n"
    << "FOUNDRY_API size_t " << n << "_num_outputs(void) { return " << d << "kNumOutputs; }\n\n"
    << "FOUNDRY_API int " << n << "_input_info(size_t index, foundry_tensor_info* info) {\n"
    << "  if (index >= " << d << "kNumInputs || !info) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"no such input\");\n"
    << "  foundry_rt::fill_info(" << d << "kInputs[index], info);\n  return FOUNDRY_OK;\n}\n\n"
    << "FOUNDRY_API int " << n << "_output_info(size_t index, foundry_tensor_info* info) {\n"
    << "  if (index >= " << d << "kNumOutputs || !info) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"no such output\");\n"
    << "  foundry_rt::fill_info(" << d << "kOutputs[index], info);\n  return FOUNDRY_OK;\n}\n\n"
    << "FOUNDRY_API const char* " << n << "_last_error(void) { return foundry_rt::last_error.c_str(); }\n\n"
    << "// Checks the argument counts and the inputs, and reads the dynamic sizes into `sizes`.\n"
    << "static int " << n << "_prepare(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs,\n"
    << "    size_t num_outputs, int64_t* sizes) {\n"
    << "  if (num_inputs != " << d << "kNumInputs || num_outputs != " << d << "kNumOutputs || (" << d << "kNumInputs && !inputs) || (" << d << "kNumOutputs && !outputs))\n"
    << "    return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"expected \" + std::to_string(" << d << "kNumInputs) +\n"
    << "        \" inputs and \" + std::to_string(" << d << "kNumOutputs) + \" outputs\");\n"
    << "  if (int status = " << d << "check_inputs(inputs, sizes)) return status;\n"
    << "  " << d << "output_shapes(sizes, outputs);\n"
    << "  return FOUNDRY_OK;\n}\n\n"
    << "FOUNDRY_API int " << n << "_infer_shapes(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs,\n"
    << "    size_t num_outputs) {\n"
    << "  int64_t sizes[" << d << "kNumSizes + 1];\n"
    << "  if (int status = " << n << "_prepare(inputs, num_inputs, outputs, num_outputs, sizes)) return status;\n"
    << "  for (size_t k = 0; k < " << d << "kNumOutputs; ++k) outputs[k].dtype = " << d << "kOutputs[k].dtype;\n"
    << "  foundry_rt::last_error.clear();\n  return FOUNDRY_OK;\n}\n\n"
    << "FOUNDRY_API int " << n << "_run(" << n << "_model* model, const foundry_tensor* inputs, size_t num_inputs,\n"
    << "    foundry_tensor* outputs, size_t num_outputs) {\n"
    << "  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"null model\");\n"
    << "  int64_t sizes[" << d << "kNumSizes + 1];\n"
    << "  if (int status = " << n << "_prepare(inputs, num_inputs, outputs, num_outputs, sizes)) return status;\n"
    << "  for (size_t k = 0; k < " << d << "kNumOutputs; ++k)\n"
    << "    if (int status = foundry_rt::check_tensor(&outputs[k], " << d << "kOutputs[k], \"output\", k, true)) return status;\n"
    << size_locals(program.size_symbols, "  ")
    << "  const size_t arena_bytes = " << cpp_index(schedule.plan.arena_bytes, {}) << ";\n"
    << "  foundry_rt::Arena arena(arena_bytes);\n"
    << "  if (arena_bytes && !arena.base) return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, \"out of memory\");\n"
    << setup.str() << "  foundry_rt::kernel_error = 0;\n\n" << calls.str() << "\n"
    << "  if (foundry_rt::kernel_error)\n"
    << "    return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, foundry_rt::kernel_error_text(foundry_rt::kernel_error));\n"
    << "  foundry_rt::last_error.clear();\n  return FOUNDRY_OK;\n}\n";
  m.wrapper_cpp = w.str();
  m.model_h = model_header(n);
  return m;
}

}  // namespace foundry::codegen
