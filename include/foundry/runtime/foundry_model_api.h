// The C API entry points of every compiled model (see model.h), written once here instead of in
// each generated wrapper: the wrapper defines its model's tables and steps as a `Model` class
// and FOUNDRY_DEFINE_MODEL_API(NAME) turns them into the exported NAME_* functions. Copied into
// each output folder next to the generated sources.
//
// What a wrapper's NAME_detail::Model provides:
//   using Instance = NAME_model;   // the loaded model: `weights`, `arenas` and `bool open_externs()`
//   static constexpr size_t kWeightsBytes, kNumInputs, kNumOutputs, kNumSizes;
//   static constexpr foundry_rt::TensorSpec kInputs[], kOutputs[];
//   static int check_inputs(const foundry_tensor* inputs, int64_t* sizes);  // binds the sizes
//   static void output_shapes(const int64_t* sizes, foundry_tensor* outputs);
//   static size_t arena_bytes(const int64_t* sizes);
//   static void run(Instance* model, const foundry_tensor* inputs, foundry_tensor* outputs,
//                   const int64_t* sizes, uint8_t* arena);  // the kernel and library calls
//   static constexpr size_t kNumSteps; static constexpr const char* kSteps[];  // their names
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_MODEL_API_H
#define FOUNDRY_MODEL_API_H
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "foundry_c_api.h"
#include "foundry_model_runtime.h"

namespace foundry_rt {

template <class Model>
int create_model(const char* model_dir, typename Model::Instance** out) {
  if (!model_dir || !out) return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null argument");
  auto* model = new (std::nothrow) typename Model::Instance();
  if (!model) return set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "out of memory");
  if (int status = model->weights.open(model_dir, Model::kWeightsBytes)) {
    delete model;
    return status;
  }
  if (!model->open_externs()) {
    delete model;
    return set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  *out = model;
  last_error.clear();
  return FOUNDRY_OK;
}

inline int tensor_info(const TensorSpec* specs, size_t count, size_t index, foundry_tensor_info* info,
                       const char* missing) {
  if (index >= count || !info) return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, missing);
  fill_info(specs[index], info);
  return FOUNDRY_OK;
}

// Checks the argument counts and the inputs, reads the dynamic sizes into `sizes` and fills in
// the outputs' shapes.
template <class Model>
int prepare(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs, size_t num_outputs,
            int64_t* sizes) {
  if (num_inputs != Model::kNumInputs || num_outputs != Model::kNumOutputs || (Model::kNumInputs && !inputs) ||
      (Model::kNumOutputs && !outputs))
    return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "expected " + std::to_string(Model::kNumInputs) +
                                                         " inputs and " + std::to_string(Model::kNumOutputs) +
                                                         " outputs");
  if (int status = Model::check_inputs(inputs, sizes)) return status;
  Model::output_shapes(sizes, outputs);
  return FOUNDRY_OK;
}

template <class Model>
int infer_shapes(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs, size_t num_outputs) {
  int64_t sizes[Model::kNumSizes + 1];
  if (int status = prepare<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  for (size_t k = 0; k < Model::kNumOutputs; ++k) outputs[k].dtype = Model::kOutputs[k].dtype;
  last_error.clear();
  return FOUNDRY_OK;
}

template <class Model>
int run_model(typename Model::Instance* model, const foundry_tensor* inputs, size_t num_inputs,
              foundry_tensor* outputs, size_t num_outputs) {
  if (!model) return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null model");
  int64_t sizes[Model::kNumSizes + 1];
  if (int status = prepare<Model>(inputs, num_inputs, outputs, num_outputs, sizes)) return status;
  for (size_t k = 0; k < Model::kNumOutputs; ++k)
    if (int status = check_tensor(&outputs[k], Model::kOutputs[k], "output", k, true)) return status;
  // Each call has its own intermediate buffers, so that several threads may run one model.
  const size_t arena_bytes = Model::arena_bytes(sizes);
  ArenaPool::Lease arena(model->arenas, arena_bytes);
  if (arena_bytes && !arena.base()) return set_error(FOUNDRY_ERROR_OUT_OF_MEMORY, "out of memory");
  kernel_error = 0;
  forget_team_step();  // one left by a run that ended early (an error) is not this run's
  if (step_profile) step_profile->start();
  SubnormalsFlushed flushed;
  Model::run(model, inputs, outputs, sizes, arena.base());
  if (kernel_error) return set_error(FOUNDRY_ERROR_RUNTIME, kernel_error_text(kernel_error));
  last_error.clear();
  return FOUNDRY_OK;
}

// NAME_profile: NAME_run with each step's end marked (StepProfile).
template <class Model>
int profile_model(typename Model::Instance* model, const foundry_tensor* inputs, size_t num_inputs,
                  foundry_tensor* outputs, size_t num_outputs, double* step_ms, int* step_threads, size_t num_steps) {
  if (!step_ms && Model::kNumSteps) return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "null step_ms");
  if (num_steps < Model::kNumSteps)
    return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, "step_ms holds " + std::to_string(num_steps) +
                                                         " times; the model has " + std::to_string(Model::kNumSteps) +
                                                         " steps (NAME_num_steps)");
  StepProfile profile{step_ms, step_threads, Model::kNumSteps};
  step_profile = &profile;
  int status = run_model<Model>(model, inputs, num_inputs, outputs, num_outputs);
  step_profile = nullptr;
  return status;
}

}  // namespace foundry_rt

// Exported from the model's shared object (it is compiled with -fvisibility=hidden).
#define FOUNDRY_API extern "C" __attribute__((visibility("default")))

// The NAME_* functions that describe a model and its last error, the same for every device, for
// the model whose wrapper defines NAME_model and NAME_detail::Model.
#define FOUNDRY_DEFINE_MODEL_INFO_API(NAME)                                                                      \
  FOUNDRY_API void NAME##_destroy(NAME##_model* model) { delete model; }                                         \
  FOUNDRY_API size_t NAME##_num_inputs(void) { return NAME##_detail::Model::kNumInputs; }                        \
  FOUNDRY_API size_t NAME##_num_outputs(void) { return NAME##_detail::Model::kNumOutputs; }                      \
  FOUNDRY_API int NAME##_input_info(size_t index, foundry_tensor_info* info) {                                   \
    return foundry_rt::tensor_info(NAME##_detail::Model::kInputs, NAME##_detail::Model::kNumInputs, index,       \
                                   info, "no such input");                                                       \
  }                                                                                                              \
  FOUNDRY_API int NAME##_output_info(size_t index, foundry_tensor_info* info) {                                  \
    return foundry_rt::tensor_info(NAME##_detail::Model::kOutputs, NAME##_detail::Model::kNumOutputs, index,     \
                                   info, "no such output");                                                      \
  }                                                                                                              \
  FOUNDRY_API const char* NAME##_last_error(void) { return foundry_rt::last_error.c_str(); }                     \
  FOUNDRY_API size_t NAME##_num_steps(void) { return NAME##_detail::Model::kNumSteps; }                           \
  FOUNDRY_API const char* NAME##_step_name(size_t index) {                                                       \
    return index < NAME##_detail::Model::kNumSteps ? NAME##_detail::Model::kSteps[index] : nullptr;              \
  }                                                                                                              \
  FOUNDRY_API int NAME##_infer_shapes(const foundry_tensor* inputs, size_t num_inputs, foundry_tensor* outputs,  \
                                      size_t num_outputs) {                                                      \
    return foundry_rt::infer_shapes<NAME##_detail::Model>(inputs, num_inputs, outputs, num_outputs);             \
  }

// The NAME_* functions of model.h of a CPU model.
#define FOUNDRY_DEFINE_MODEL_API(NAME)                                                                           \
  FOUNDRY_API int NAME##_create(const char* model_dir, NAME##_model** out) {                                     \
    return foundry_rt::create_model<NAME##_detail::Model>(model_dir, out);                                       \
  }                                                                                                              \
  FOUNDRY_API int NAME##_run(NAME##_model* model, const foundry_tensor* inputs, size_t num_inputs,               \
                             foundry_tensor* outputs, size_t num_outputs) {                                      \
    return foundry_rt::run_model<NAME##_detail::Model>(model, inputs, num_inputs, outputs, num_outputs);         \
  }                                                                                                              \
  FOUNDRY_API int NAME##_profile(NAME##_model* model, const foundry_tensor* inputs, size_t num_inputs,           \
                                 foundry_tensor* outputs, size_t num_outputs, double* step_ms, int* step_threads, \
                                 size_t num_steps) {                                                             \
    return foundry_rt::profile_model<NAME##_detail::Model>(model, inputs, num_inputs, outputs, num_outputs,      \
                                                           step_ms, step_threads, num_steps);                    \
  }                                                                                                              \
  FOUNDRY_DEFINE_MODEL_INFO_API(NAME)

#endif  // FOUNDRY_MODEL_API_H
