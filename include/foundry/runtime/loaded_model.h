// A compiled model folder opened through its C API (dlopen of model.so), for the runner and the
// tests. The symbol prefix is the model name recorded in manifest.json.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "foundry/runtime/foundry_c_api.h"
#include "foundry/runtime/npy.h"

namespace foundry {

class LoadedModel {
 public:
  // Throws UserError when the folder, its manifest or model.so cannot be loaded.
  explicit LoadedModel(const std::string& dir);
  // A model inside a shared object that may hold several (test batches): its symbol prefix and
  // the folder with its weights.
  LoadedModel(const std::string& so_path, const std::string& name, const std::string& weights_dir);
  ~LoadedModel();
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  const std::string& name() const { return name_; }
  // Where it runs: manifest.json's "device", "cpu" when it has none (a CPU model, or a model
  // opened from a shared object). NAME_run takes host tensors either way.
  const std::string& device() const { return device_; }
  size_t num_inputs() const;
  size_t num_outputs() const;
  foundry_tensor_info input_info(size_t i) const;
  foundry_tensor_info output_info(size_t i) const;
  // Input i's shape at the sizes torch.export ran with (manifest.json's example_shape); empty when
  // there is none (a folder of an older foundryc, a model opened from a shared object).
  std::vector<int64_t> example_input_shape(size_t i) const;

  // Runs on `inputs`, returning the outputs (allocated here, shaped by NAME_infer_shapes). Throws
  // UserError with the model's last_error on failure.
  std::vector<NpyArray> run(const std::vector<NpyArray>& inputs) const;
  // Runs with caller-provided output arrays (already sized): no allocation, for benchmarking.
  void run_into(const std::vector<NpyArray>& inputs, std::vector<NpyArray>& outputs) const;
  // NAME_run_cuda of a CUDA model: device tensors, enqueued on `stream` (a cudaStream_t).
  void run_cuda(void* stream, const std::vector<foundry_tensor>& inputs, std::vector<foundry_tensor>& outputs) const;
  // The model's steps in run order (its kernels and library calls; empty for a model of an older
  // foundryc).
  std::vector<std::string> step_names() const;
  // A CPU model's run timed step by step (NAME_profile): per step, its milliseconds and threads.
  struct StepTime {
    double ms;
    int threads;
  };
  std::vector<StepTime> profile(const std::vector<NpyArray>& inputs, std::vector<NpyArray>& outputs) const;
  // A CUDA model's run on device tensors timed step by step with CUDA events: milliseconds per step
  // (NAME_profile_cuda; waits for `stream`).
  std::vector<double> profile_cuda(void* stream, const std::vector<foundry_tensor>& inputs,
                                   std::vector<foundry_tensor>& outputs) const;
  // Outputs shaped for these inputs (throws UserError when the model rejects the inputs).
  std::vector<NpyArray> allocate_outputs(const std::vector<NpyArray>& inputs) const;

 private:
  struct Api;
  std::string name_, device_ = "cpu";
  void* handle_ = nullptr;
  void* model_ = nullptr;
  std::unique_ptr<Api> api_;
  std::vector<std::vector<int64_t>> example_input_shapes_;
  void open(const std::string& so_path, const std::string& weights_dir);
};

// An array as a foundry_tensor (its data, dtype and shape).
foundry_tensor describe_array(const NpyArray& a);

}  // namespace foundry
