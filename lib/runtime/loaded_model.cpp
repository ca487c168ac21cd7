#include "foundry/runtime/loaded_model.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "foundry/support/error.h"
#include "foundry/support/files.h"

namespace foundry {

struct LoadedModel::Api {
  int (*create)(const char*, void**);
  int (*run)(void*, const foundry_tensor*, size_t, foundry_tensor*, size_t);
  int (*infer_shapes)(const foundry_tensor*, size_t, foundry_tensor*, size_t);
  size_t (*num_inputs)();
  size_t (*num_outputs)();
  int (*input_info)(size_t, foundry_tensor_info*);
  int (*output_info)(size_t, foundry_tensor_info*);
  void (*destroy)(void*);
  const char* (*last_error)();
  // Models of an older foundryc lack these:
  size_t (*num_steps)();
  const char* (*step_name)(size_t);
  // CPU models only:
  int (*profile)(void*, const foundry_tensor*, size_t, foundry_tensor*, size_t, double*, int*, size_t);
  // CUDA models only:
  int (*run_cuda)(void*, void*, const foundry_tensor*, size_t, foundry_tensor*, size_t);
  int (*profile_cuda)(void*, void*, const foundry_tensor*, size_t, foundry_tensor*, size_t, double*, size_t);
};

namespace {
template <typename F>
void bind_symbol(void* handle, const std::string& symbol, F& fn) {
  void* p = dlsym(handle, symbol.c_str());
  if (!p) throw UserError("model.so has no symbol " + symbol);
  fn = reinterpret_cast<F>(p);
}

// A symbol only some models have (nullptr when absent).
template <typename F>
void bind_optional(void* handle, const std::string& symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(handle, symbol.c_str()));
}

}  // namespace

foundry_tensor describe_array(const NpyArray& a) {
  foundry_tensor t{};
  t.data = const_cast<uint8_t*>(a.data.data());
  t.dtype = static_cast<int32_t>(dtype_to_export(a.dtype));
  t.rank = static_cast<int32_t>(a.shape.size());
  for (size_t d = 0; d < a.shape.size() && d < FOUNDRY_MAX_RANK; ++d) t.shape[d] = a.shape[d];
  return t;
}

LoadedModel::LoadedModel(const std::string& dir) : api_(std::make_unique<Api>()) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) throw UserError(dir + " does not exist");
  // A manifest that is there but unreadable (a FIFO, no permission) is said by the open below.
  if (!std::filesystem::exists(dir + "/manifest.json", ec))
    throw UserError(dir + " is not a folder compiled by foundryc (no manifest.json); compile a model with " +
                    "`foundryc model.pt2 -o " + dir + "`");
  std::string error;
  int fd = open_regular_file(dir + "/manifest.json", error);  // not a FIFO: it would block
  if (fd < 0) throw UserError("cannot read " + dir + "/manifest.json: " + error);
  ::close(fd);
  std::ifstream manifest(dir + "/manifest.json");
  if (!manifest) throw UserError("cannot read " + dir + "/manifest.json");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(manifest);
    name_ = m.at("name").get<std::string>();
    device_ = m.value("device", std::string("cpu"));
    for (const auto& input : m.value("inputs", nlohmann::json::array()))
      example_input_shapes_.push_back(input.value("example_shape", std::vector<int64_t>{}));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(dir + "/manifest.json is not a foundryc manifest: " + e.what());
  }
  open(dir + "/model.so", dir);
}

LoadedModel::LoadedModel(const std::string& so_path, const std::string& name, const std::string& weights_dir)
    : name_(name), api_(std::make_unique<Api>()) {
  open(so_path, weights_dir);
}

void LoadedModel::open(const std::string& so, const std::string& dir) {
  std::string error;
  int fd = open_regular_file(so, error);  // dlopen of a FIFO would block
  if (fd < 0) throw UserError("cannot load " + so + ": " + error);
  ::close(fd);
  handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) throw UserError("cannot load " + so + ": " + dlerror());
  bind_symbol(handle_, name_ + "_create", api_->create);
  bind_symbol(handle_, name_ + "_run", api_->run);
  bind_symbol(handle_, name_ + "_infer_shapes", api_->infer_shapes);
  bind_symbol(handle_, name_ + "_num_inputs", api_->num_inputs);
  bind_symbol(handle_, name_ + "_num_outputs", api_->num_outputs);
  bind_symbol(handle_, name_ + "_input_info", api_->input_info);
  bind_symbol(handle_, name_ + "_output_info", api_->output_info);
  bind_symbol(handle_, name_ + "_destroy", api_->destroy);
  bind_symbol(handle_, name_ + "_last_error", api_->last_error);
  bind_optional(handle_, name_ + "_run_cuda", api_->run_cuda);
  bind_optional(handle_, name_ + "_num_steps", api_->num_steps);
  bind_optional(handle_, name_ + "_step_name", api_->step_name);
  bind_optional(handle_, name_ + "_profile", api_->profile);
  bind_optional(handle_, name_ + "_profile_cuda", api_->profile_cuda);
  if (api_->create(dir.c_str(), &model_) != FOUNDRY_OK)
    throw UserError("cannot create the model from " + dir + ": " + api_->last_error());
}

LoadedModel::~LoadedModel() {
  if (model_) api_->destroy(model_);
  if (handle_) dlclose(handle_);
}

size_t LoadedModel::num_inputs() const { return api_->num_inputs(); }
size_t LoadedModel::num_outputs() const { return api_->num_outputs(); }

foundry_tensor_info LoadedModel::input_info(size_t i) const {
  foundry_tensor_info info{};
  api_->input_info(i, &info);
  return info;
}

foundry_tensor_info LoadedModel::output_info(size_t i) const {
  foundry_tensor_info info{};
  api_->output_info(i, &info);
  return info;
}

std::vector<int64_t> LoadedModel::example_input_shape(size_t i) const {
  return i < example_input_shapes_.size() ? example_input_shapes_[i] : std::vector<int64_t>{};
}

namespace {
// An output's bytes; a size past this machine's memory is the caller's problem to hear about (a
// model with a dynamic size run on a huge input), not a crash.
void allocate_output(NpyArray& a, size_t k) {
  int64_t numel = a.numel();
  size_t bytes = dtype_size(a.dtype);
  bool overflows = numel < 0 || (numel > 0 && bytes > std::numeric_limits<size_t>::max() / static_cast<size_t>(numel));
  std::string shape;
  for (int64_t d : a.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::string what = "output " + std::to_string(k) + " [" + shape + "] needs ";
  if (overflows) throw UserError(what + "more bytes than this machine can address");
  bytes *= static_cast<size_t>(numel);
  try {
    a.data.resize(bytes);
  } catch (const std::bad_alloc&) {
    throw UserError(what + std::to_string(bytes) + " bytes, more memory than is available");
  } catch (const std::length_error&) {
    throw UserError(what + std::to_string(bytes) + " bytes, more memory than is available");
  }
}
}  // namespace

std::vector<NpyArray> LoadedModel::allocate_outputs(const std::vector<NpyArray>& inputs) const {
  std::vector<foundry_tensor> in, out(num_outputs());
  for (const auto& a : inputs) in.push_back(describe_array(a));
  if (api_->infer_shapes(in.data(), in.size(), out.data(), out.size()) != FOUNDRY_OK)
    throw UserError(std::string("the model rejects the inputs: ") + api_->last_error());
  std::vector<NpyArray> outs(out.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    auto dt = dtype_from_export(out[k].dtype);
    if (!dt) throw UserError("model output " + std::to_string(k) + " has an unknown dtype");
    outs[k].dtype = *dt;
    outs[k].shape.assign(out[k].shape, out[k].shape + out[k].rank);
    allocate_output(outs[k], k);
  }
  return outs;
}

namespace {
// The arrays as foundry_tensors, for the C API.
std::vector<foundry_tensor> describe_arrays(const std::vector<NpyArray>& arrays) {
  std::vector<foundry_tensor> tensors;
  for (const NpyArray& a : arrays) tensors.push_back(describe_array(a));
  return tensors;
}
}  // namespace

void LoadedModel::run_into(const std::vector<NpyArray>& inputs, std::vector<NpyArray>& outputs) const {
  std::vector<foundry_tensor> in = describe_arrays(inputs), out = describe_arrays(outputs);
  if (api_->run(model_, in.data(), in.size(), out.data(), out.size()) != FOUNDRY_OK)
    throw UserError(std::string("the model failed: ") + api_->last_error());
}

std::vector<NpyArray> LoadedModel::run(const std::vector<NpyArray>& inputs) const {
  std::vector<NpyArray> outputs = allocate_outputs(inputs);
  run_into(inputs, outputs);
  return outputs;
}

void LoadedModel::run_cuda(void* stream, const std::vector<foundry_tensor>& inputs,
                           std::vector<foundry_tensor>& outputs) const {
  if (!api_->run_cuda) throw UserError("model " + name_ + " was not compiled with --device cuda (no " + name_ + "_run_cuda)");
  if (api_->run_cuda(model_, stream, inputs.data(), inputs.size(), outputs.data(), outputs.size()) != FOUNDRY_OK)
    throw UserError(std::string("the model failed: ") + api_->last_error());
}

std::vector<std::string> LoadedModel::step_names() const {
  std::vector<std::string> names;
  if (!api_->num_steps || !api_->step_name) return names;
  for (size_t k = 0; k < api_->num_steps(); ++k) names.push_back(api_->step_name(k));
  return names;
}

std::vector<LoadedModel::StepTime> LoadedModel::profile(const std::vector<NpyArray>& inputs,
                                                        std::vector<NpyArray>& outputs) const {
  if (!api_->profile || !api_->num_steps)
    throw UserError("model " + name_ + " has no " + name_ + "_profile: --profile times the steps of a CPU model " +
                    "compiled by this foundryc");
  std::vector<foundry_tensor> in = describe_arrays(inputs), out = describe_arrays(outputs);
  std::vector<double> ms(api_->num_steps());
  std::vector<int> threads(ms.size());
  if (api_->profile(model_, in.data(), in.size(), out.data(), out.size(), ms.data(), threads.data(), ms.size()) !=
      FOUNDRY_OK)
    throw UserError(std::string("the model failed: ") + api_->last_error());
  std::vector<StepTime> steps;
  for (size_t k = 0; k < ms.size(); ++k) steps.push_back({ms[k], threads[k]});
  return steps;
}

std::vector<double> LoadedModel::profile_cuda(void* stream, const std::vector<foundry_tensor>& inputs,
                                              std::vector<foundry_tensor>& outputs) const {
  if (!api_->profile_cuda || !api_->num_steps)
    throw UserError("model " + name_ + " has no " + name_ + "_profile_cuda: --profile times the steps of a model " +
                    "compiled with --device cuda (by this foundryc)");
  std::vector<double> ms(api_->num_steps());
  if (api_->profile_cuda(model_, stream, inputs.data(), inputs.size(), outputs.data(), outputs.size(), ms.data(),
                         ms.size()) != FOUNDRY_OK)
    throw UserError(std::string("the model failed: ") + api_->last_error());
  return ms;
}

}  // namespace foundry
