#include "foundry/codegen/wrapper.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "foundry/support/error.h"

namespace foundry::codegen {
namespace {

std::vector<int64_t> static_shape(const ir::Buffer& buf) {
  std::vector<int64_t> out;
  for (const auto& e : buf.sizes) {
    FOUNDRY_CHECK(e.is_const(), "the C++ backend needs static sizes");
    out.push_back(e.const_value());
  }
  return out;
}

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

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

std::string tensor_specs(const std::vector<const ir::Buffer*>& bufs, const std::vector<std::string>& names) {
  std::string out;
  for (size_t k = 0; k < bufs.size(); ++k) {
    std::vector<int64_t> shape = static_shape(*bufs[k]);
    if (shape.size() > 8) throw UserError("tensors of rank above 8 are not supported by the C API");
    out += "    {" + c_string_literal(names[k]) + ", " + std::to_string(dtype_to_export(bufs[k]->dtype)) + ", " +
           std::to_string(shape.size()) + ", " + int_list(shape) + "},\n";
  }
  return out.empty() ? "    {nullptr, 0, 0, {}},\n" : out;
}

std::string strided_arg(const ir::ExternCall::Operand& op, const std::string& ptr, std::ostringstream& decls,
                        int& counter, const std::string& type) {
  std::string s = "strides" + std::to_string(counter++);
  decls << "  static const int64_t " << s << "[] = " << int_list(op.strides) << ";\n";
  return "foundry_rt::Strided<" + type + ">{" + ptr + ", " + s + ", " + std::to_string(op.offset) + "}";
}

// The call of one extern kernel over the wrapper's buffer pointers.
std::string extern_call(const ir::LoopNode& node, const std::map<const ir::Buffer*, std::string>& ptrs,
                        int& counter) {
  const ir::ExternCall& call = node.call;
  std::string type = storage_type(node.output->dtype);
  if (!is_floating(node.output->dtype) || type == "uint16_t")
    throw UserError("extern kernel " + call.kind + " on " + std::string(dtype_name(node.output->dtype)) +
                    " is not supported by the C++ backend");
  std::ostringstream decls, out;
  std::vector<int64_t> out_shape = static_shape(*node.output);
  const std::string& dst = ptrs.at(node.output);
  auto ptr = [&](const ir::ExternCall::Operand& op) { return ptrs.at(op.buffer); };
  if (call.kind == "mm" || call.kind == "bmm" || call.kind == "addmm") {
    bool batched = call.kind == "bmm", bias = call.kind == "addmm";
    const auto& a = call.inputs[bias ? 1 : 0];
    const auto& b = call.inputs[bias ? 2 : 1];
    int64_t batch = batched ? out_shape[0] : 1, M = out_shape[batched], N = out_shape[batched + 1];
    int64_t K = a.sizes.back();
    std::string a_arg = strided_arg(a, ptr(a), decls, counter, type);
    std::string b_arg = strided_arg(b, ptr(b), decls, counter, type);
    std::string bias_decl = "nullptr";
    if (bias) {
      std::string bias_var = "bias" + std::to_string(counter);
      std::string bias_arg = strided_arg(call.inputs[0], ptr(call.inputs[0]), decls, counter, type);
      decls << "  const auto " << bias_var << " = " << bias_arg << ";\n";
      bias_decl = "&" + bias_var;
    }
    auto param = [&](const char* key) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", call.float_params.count(key) ? call.float_params.at(key) : 1.0);
      return std::string(buf);
    };
    out << decls.str() << "  foundry_rt::matmul<" << type << ">(" << batch << ", " << M << ", " << N << ", " << K
        << ", " << a_arg << ", " << b_arg << ", " << bias_decl << ", " << param("alpha") << ", " << param("beta")
        << ", " << (batched ? "true" : "false") << ", " << dst << ");\n";
    return out.str();
  }
  if (call.kind == "convolution") {
    // 1-D and 2-D convolutions become 3-D ones with leading size-1 spatial dims.
    const auto& x = call.inputs[0];
    const auto& w = call.inputs[1];
    const auto& bias = call.inputs[2];
    size_t spatial = x.sizes.size() - 2;
    if (spatial < 1 || spatial > 3) throw UserError("convolution with " + std::to_string(spatial) + " spatial dims is not supported");
    auto to3d = [&](std::vector<int64_t> v, int64_t fill, size_t lead) {
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(lead), 3 - spatial, fill);
      return v;
    };
    auto arr = [&](const std::vector<int64_t>& v) {
      std::string name = "params" + std::to_string(counter++);
      decls << "  static const int64_t " << name << "[] = " << int_list(v) << ";\n";
      return name;
    };
    std::string xs = arr(to3d(x.sizes, 1, 2)), ws = arr(to3d(w.sizes, 1, 2)), os = arr(to3d(out_shape, 1, 2));
    std::string xst = arr(to3d(x.strides, 0, 2)), wst = arr(to3d(w.strides, 0, 2));
    std::string st = arr(to3d(call.int_params.at("stride"), 1, 0)), pad = arr(to3d(call.int_params.at("padding"), 0, 0)),
                dil = arr(to3d(call.int_params.at("dilation"), 1, 0));
    std::string bias_ptr = bias.buffer ? ptrs.at(bias.buffer) : "nullptr";
    int64_t bias_stride = bias.buffer ? bias.strides[0] : 0, bias_off = bias.buffer ? bias.offset : 0;
    out << decls.str() << "  foundry_rt::conv3d<" << type << ">(" << xs << ", " << ws << ", " << os << ", " << ptr(x)
        << ", " << xst << ", " << x.offset << ", " << ptr(w) << ", " << wst << ", " << w.offset << ", " << bias_ptr
        << ", " << bias_stride << ", " << bias_off << ", " << st << ", " << pad << ", " << dil << ", "
        << call.int_params.at("groups")[0] << ", " << dst << ");\n";
    return out.str();
  }
  throw UserError("extern kernel " + call.kind + " is not supported by the C++ backend");
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
                              const std::string& model_name) {
  GeneratedModel m;
  m.name = model_name;
  m.weights = layout_weights(program);
  const std::string& n = model_name;

  std::ostringstream kernels;
  kernels << "// Kernels of the model `" << n << "`, generated by foundryc " << FOUNDRY_VERSION << ".\n"
          << "#include <cmath>\n#include <cstdint>\n#include <limits>\n\n#include \"foundry_kernel_support.h\"\n\n"
          << "// Each model's kernels live in a namespace of its own, so that several models link together.\n"
          << "namespace " << n << "_kernels {\n\n";
  for (const auto& step : schedule.steps) {
    if (step.is_extern) continue;
    m.kernels.push_back(emit_kernel(step.kernel, schedule));
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
          << offset << ");\n";
  }

  std::ostringstream calls;
  size_t kernel_index = 0;
  int counter = 0;
  for (const auto& step : schedule.steps) {
    if (step.is_extern) {
      calls << "  // extern " << step.extern_node->call.kind << "\n" << extern_call(*step.extern_node, ptrs, counter);
      continue;
    }
    const EmittedKernel& k = m.kernels[kernel_index++];
    calls << "  " << n << "_kernels::" << k.name << "(";
    for (size_t a = 0; a < k.args.size(); ++a) calls << (a ? ", " : "") << ptrs.at(k.args[a].buffer);
    calls << ");\n";
  }

  std::ostringstream w;
  const std::string d = n + "_detail::";
  w << "// The entry points of the model `" << n << "` (see model.h), generated by foundryc " << FOUNDRY_VERSION
    << ".\n#include \"model.h\"\n#include \"foundry_model_runtime.h\"\n#include \"foundry_externs.h\"\n\n"
    << "#define FOUNDRY_API extern \"C\" __attribute__((visibility(\"default\")))\n\n"
    << "namespace " << n << "_kernels {  // kernels.cpp\n";
  for (const auto& k : m.kernels) w << k.declaration << ";\n";
  w << "}  // namespace " << n << "_kernels\n\n"
    << "namespace " << n << "_detail {\nusing namespace " << n << "_kernels;\nconstexpr size_t kWeightsBytes = " << m.weights.total_bytes << ";\n"
    << "constexpr size_t kArenaBytes = " << schedule.plan.arena_bytes << ";\n"
    << "constexpr size_t kNumInputs = " << program.inputs.size() << ", kNumOutputs = " << program.outputs.size() << ";\n"
    << "const foundry_rt::TensorSpec kInputs[] = {\n";
  w << tensor_specs(program.inputs, program.input_names) << "};\nconst foundry_rt::TensorSpec kOutputs[] = {\n"
    << tensor_specs(program.outputs, program.output_names) << "};\n}  // namespace " << n << "_detail\n"
    << "\n"
    << "struct " << n << "_model {\n  foundry_rt::WeightsFile weights;\n};\n\n"
    << "FOUNDRY_API int " << n << "_create(const char* model_dir, " << n << "_model** out) {\n"
    << "  if (!model_dir || !out) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"null argument\");\n"
    << "  auto* model = new (std::nothrow) " << n << "_model();\n"
    << "  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, \"out of memory\");\n"
    << "  if (int status = model->weights.open(model_dir, " << d << "kWeightsBytes)) {\n    delete model;\n    return status;\n  }\n"
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
    << "FOUNDRY_API int " << n << "_run(" << n << "_model* model, const foundry_tensor* inputs, size_t num_inputs,\n"
    << "    foundry_tensor* outputs, size_t num_outputs) {\n"
    << "  if (!model) return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"null model\");\n"
    << "  if (num_inputs != " << d << "kNumInputs || num_outputs != " << d << "kNumOutputs || (" << d << "kNumInputs && !inputs) || (" << d << "kNumOutputs && !outputs))\n"
    << "    return foundry_rt::set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, \"expected \" + std::to_string(" << d << "kNumInputs) +\n"
    << "        \" inputs and \" + std::to_string(" << d << "kNumOutputs) + \" outputs\");\n"
    << "  for (size_t k = 0; k < " << d << "kNumInputs; ++k)\n"
    << "    if (int status = foundry_rt::check_tensor(&inputs[k], " << d << "kInputs[k], \"input\", k, false)) return status;\n"
    << "  for (size_t k = 0; k < " << d << "kNumOutputs; ++k)\n"
    << "    if (int status = foundry_rt::check_tensor(&outputs[k], " << d << "kOutputs[k], \"output\", k, true)) return status;\n"
    << "  foundry_rt::Arena arena(" << d << "kArenaBytes);\n"
    << "  if (" << d << "kArenaBytes && !arena.base) return foundry_rt::set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, \"out of memory\");\n"
    << setup.str() << "  foundry_rt::kernel_error = 0;\n\n" << calls.str() << "\n"
    << "  if (foundry_rt::kernel_error)\n"
    << "    return foundry_rt::set_error(FOUNDRY_ERROR_RUNTIME, foundry_rt::kernel_error_text(foundry_rt::kernel_error));\n"
    << "  foundry_rt::last_error.clear();\n  return FOUNDRY_OK;\n}\n";
  m.wrapper_cpp = w.str();
  m.model_h = model_header(n);
  return m;
}

}  // namespace foundry::codegen
