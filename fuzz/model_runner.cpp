// Runs a compiled model once, for fuzz_pipeline's compile-and-run inputs (fuzz/compile_and_run.h):
// `model_runner DIR NAME SEED` opens DIR/model.so, creates the model from DIR, makes inputs of the
// shapes and dtypes it declares (a dynamic dimension at its smallest legal size, at least 1)
// filled from SEED, asks for the output shapes and runs it. Built with g++ and AddressSanitizer
// like the model.so it loads, not with the fuzzer's clang: one process holds one sanitizer
// runtime, and model.so gets libasan from this program.
//
// Exit status: 0 ran; 1 the model returned an error code (a clean refusal, e.g. an index out of
// range); 2 setup trouble or sizes too large to try (not a finding). A sanitizer report exits with
// ASAN_OPTIONS/UBSAN_OPTIONS' exitcode, a crash by its signal: those are the findings.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "foundry_c_api.h"

namespace {

using create_fn = int (*)(const char*, void**);
using run_fn = int (*)(void*, const foundry_tensor*, size_t, foundry_tensor*, size_t);
using count_fn = size_t (*)();
using info_fn = int (*)(size_t, foundry_tensor_info*);
using infer_fn = int (*)(const foundry_tensor*, size_t, foundry_tensor*, size_t);
using destroy_fn = void (*)(void*);
using error_fn = const char* (*)();

constexpr int64_t kMaxBytes = int64_t(64) << 20;  // per tensor: bigger models are not tried

void* symbol(void* lib, const std::string& name) {
  void* s = dlsym(lib, name.c_str());
  if (!s) {
    std::fprintf(stderr, "model_runner: %s missing\n", name.c_str());
    std::exit(2);
  }
  return s;
}

int64_t element_size(int32_t dtype) {
  switch (dtype) {
    case FOUNDRY_UINT8: case FOUNDRY_INT8: case FOUNDRY_BOOL: return 1;
    case FOUNDRY_INT16: case FOUNDRY_FLOAT16: case FOUNDRY_BFLOAT16: return 2;
    case FOUNDRY_INT32: case FOUNDRY_FLOAT32: return 4;
    default: return 8;
  }
}

int64_t bytes_of(const foundry_tensor& t) {
  int64_t n = element_size(t.dtype);
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] < 0 || (t.shape[d] > 0 && n > kMaxBytes / t.shape[d])) return kMaxBytes + 1;
    n *= t.shape[d];
  }
  return n;
}

// Small values: integer inputs are often indices, and a few land outside every range on purpose.
void fill(std::vector<unsigned char>& bytes, int32_t dtype, uint64_t& state) {
  auto next = [&] { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  int64_t size = element_size(dtype), n = static_cast<int64_t>(bytes.size()) / size;
  for (int64_t i = 0; i < n; ++i) {
    unsigned char* p = bytes.data() + i * size;
    int64_t small = static_cast<int64_t>(next() % 8) - 2;
    switch (dtype) {
      case FOUNDRY_FLOAT32: { float v = static_cast<float>(next() % 4001) / 1000.0f - 2.0f; std::memcpy(p, &v, 4); break; }
      case FOUNDRY_FLOAT64: { double v = static_cast<double>(next() % 4001) / 1000.0 - 2.0; std::memcpy(p, &v, 8); break; }
      case FOUNDRY_BOOL: *p = static_cast<unsigned char>(next() & 1); break;
      case FOUNDRY_FLOAT16: case FOUNDRY_BFLOAT16: { uint16_t v = static_cast<uint16_t>(0x3c00 | (next() & 0x3ff)); std::memcpy(p, &v, 2); break; }
      default: std::memcpy(p, &small, static_cast<size_t>(size)); break;  // little-endian: the low bytes
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: model_runner DIR NAME SEED\n");
    return 2;
  }
  std::string dir = argv[1], name = argv[2];
  uint64_t state = std::strtoull(argv[3], nullptr, 10);
  void* lib = dlopen((dir + "/model.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "model_runner: %s\n", dlerror());
    return 2;
  }
  auto create = reinterpret_cast<create_fn>(symbol(lib, name + "_create"));
  auto run = reinterpret_cast<run_fn>(symbol(lib, name + "_run"));
  auto num_inputs = reinterpret_cast<count_fn>(symbol(lib, name + "_num_inputs"));
  auto num_outputs = reinterpret_cast<count_fn>(symbol(lib, name + "_num_outputs"));
  auto input_info = reinterpret_cast<info_fn>(symbol(lib, name + "_input_info"));
  auto infer = reinterpret_cast<infer_fn>(symbol(lib, name + "_infer_shapes"));
  auto destroy = reinterpret_cast<destroy_fn>(symbol(lib, name + "_destroy"));
  auto last_error = reinterpret_cast<error_fn>(symbol(lib, name + "_last_error"));

  size_t n_in = num_inputs(), n_out = num_outputs();
  std::vector<foundry_tensor> inputs(n_in), outputs(n_out);
  std::vector<std::vector<unsigned char>> in_bytes(n_in), out_bytes(n_out);
  for (size_t i = 0; i < n_in; ++i) {
    foundry_tensor_info info{};
    if (input_info(i, &info) != FOUNDRY_OK) return 2;
    inputs[i].dtype = info.dtype;
    inputs[i].rank = info.rank;
    for (int d = 0; d < info.rank; ++d)
      inputs[i].shape[d] = info.shape[d] >= 0 ? info.shape[d] : (info.min_shape[d] > 1 ? info.min_shape[d] : 1);
    int64_t bytes = bytes_of(inputs[i]);
    if (bytes > kMaxBytes) return 2;
    in_bytes[i].assign(static_cast<size_t>(bytes) + 1, 0);  // +1: never a null pointer
    fill(in_bytes[i], info.dtype, state);
    inputs[i].data = in_bytes[i].data();
  }
  if (infer(inputs.data(), n_in, outputs.data(), n_out) != FOUNDRY_OK) {
    std::fprintf(stderr, "model_runner: infer_shapes: %s\n", last_error());
    return 1;
  }
  for (size_t o = 0; o < n_out; ++o) {
    int64_t bytes = bytes_of(outputs[o]);
    if (bytes > kMaxBytes) return 2;
    out_bytes[o].assign(static_cast<size_t>(bytes) + 1, 0);
    outputs[o].data = out_bytes[o].data();
  }
  void* model = nullptr;
  if (create(dir.c_str(), &model) != FOUNDRY_OK) {
    std::fprintf(stderr, "model_runner: create: %s\n", last_error());
    return 1;
  }
  int status = run(model, inputs.data(), n_in, outputs.data(), n_out);
  if (status != FOUNDRY_OK) std::fprintf(stderr, "model_runner: run: %s\n", last_error());
  destroy(model);
  return status == FOUNDRY_OK ? 0 : 1;
}
