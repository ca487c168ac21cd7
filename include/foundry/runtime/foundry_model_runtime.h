// Support code that every compiled model's wrapper uses: the weights file mapping, the runs'
// arenas, input checking and the thread-local error message behind NAME_last_error(). Copied into
// each output folder next to the generated sources.
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_MODEL_RUNTIME_H
#define FOUNDRY_MODEL_RUNTIME_H
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "foundry_c_api.h"
#include "foundry_kernel_support.h"

namespace foundry_rt {

inline thread_local std::string last_error;

inline int set_error(int status, const std::string& message) {
  last_error = message;
  return status;
}

// weights.bin, mapped read-only for the model's lifetime.
struct WeightsFile {
  const uint8_t* data = nullptr;
  size_t size = 0;

  int open(const std::string& dir, size_t expected_size) {
    if (expected_size == 0) return FOUNDRY_OK;
    std::string path = dir + "/weights.bin";
    // O_NONBLOCK: opening a FIFO would wait for a writer forever; only a regular file is mapped.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return set_error(FOUNDRY_ERROR_IO, "cannot open " + path);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return set_error(FOUNDRY_ERROR_IO, path + " is not a regular file");
    }
    if (static_cast<size_t>(st.st_size) != expected_size) {
      ::close(fd);
      return set_error(FOUNDRY_ERROR_IO, path + " does not have the expected size " + std::to_string(expected_size));
    }
    void* p = mmap(nullptr, expected_size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return set_error(FOUNDRY_ERROR_IO, "cannot map " + path);
    data = static_cast<const uint8_t*>(p);
    size = expected_size;
    return FOUNDRY_OK;
  }
  ~WeightsFile() {
    if (data) munmap(const_cast<uint8_t*>(data), size);
  }
};

// The intermediate buffers of a model's runs, kept from one run to the next: a run takes a free
// arena at least as large as it needs (or makes one, 64-byte aligned) and gives it back when it
// ends. Allocating one per run put malloc's work (a heap consolidation for any block over a page)
// and, for large ones, fresh pages into every run. Concurrent runs hold one each; the pool keeps
// as many as ran at once, of the largest size each met, until the model is destroyed.
class ArenaPool {
  struct Block {
    std::unique_ptr<uint8_t, decltype(&std::free)> data{nullptr, &std::free};
    size_t bytes = 0;
  };

 public:
  // One run's arena, given back to the pool when the run ends.
  class Lease {
   public:
    Lease(ArenaPool& pool, size_t bytes) : pool_(pool), block_(pool.take(bytes)) {}
    ~Lease() { pool_.give_back(std::move(block_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    uint8_t* base() const { return block_.data.get(); }

   private:
    ArenaPool& pool_;
    Block block_;
  };

 private:
  // A free block of at least `bytes` (any free block is taken; a smaller one is replaced), or a
  // new one; empty when `bytes` is 0 or out of memory.
  Block take(size_t bytes) {
    Block block;
    if (bytes == 0) return block;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        block = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (block.bytes >= bytes) return block;
    const size_t rounded = (bytes + 63) / 64 * 64;
    block.data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, rounded)));
    block.bytes = block.data ? rounded : 0;
    return block;
  }
  void give_back(Block block) {
    if (!block.data) return;
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(block));
  }

  std::mutex mutex_;
  std::vector<Block> free_;
};

// An input or output as compiled: a dynamic dimension has shape -1 and its range in min/max.
struct TensorSpec {
  const char* name;
  int32_t dtype;
  int32_t rank;
  int64_t shape[FOUNDRY_MAX_RANK];
  int64_t min_shape[FOUNDRY_MAX_RANK];
  int64_t max_shape[FOUNDRY_MAX_RANK];
};

inline std::string shape_text(const int64_t* shape, int32_t rank) {
  std::string s = "[";
  for (int32_t d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

// A dtype code's name as PyTorch spells it ("float32"), for messages.
inline std::string dtype_text(int32_t code) {
  switch (code) {
    case FOUNDRY_UINT8: return "uint8";
    case FOUNDRY_INT8: return "int8";
    case FOUNDRY_INT16: return "int16";
    case FOUNDRY_INT32: return "int32";
    case FOUNDRY_INT64: return "int64";
    case FOUNDRY_FLOAT16: return "float16";
    case FOUNDRY_FLOAT32: return "float32";
    case FOUNDRY_FLOAT64: return "float64";
    case FOUNDRY_BOOL: return "bool";
    case FOUNDRY_BFLOAT16: return "bfloat16";
  }
  return "unknown dtype code " + std::to_string(code);
}

// Checks that `t` matches `spec` (and, for outputs, fills in the shape).
inline int check_tensor(const foundry_tensor* t, const TensorSpec& spec, const char* role, size_t index, bool is_output) {
  // Made only for a message: a run checks every input and output.
  auto what = [&] { return std::string(role) + " " + std::to_string(index) + " (" + spec.name + ")"; };
  if (!t) return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, what() + ": null tensor");
  if (!t->data) {  // allowed for a tensor without elements (its own shape says so)
    bool empty = false;
    for (int32_t d = 0; d < t->rank && d < FOUNDRY_MAX_RANK; ++d) empty = empty || t->shape[d] == 0;
    if (!empty) return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, what() + ": null data pointer");
  }
  if (t->dtype != spec.dtype)
    return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, what() + ": " + dtype_text(t->dtype) + ", expected " +
                                                         dtype_text(spec.dtype));
  if (is_output) {  // the shape is filled in by the caller of check_tensor (it may be dynamic)
    const_cast<foundry_tensor*>(t)->rank = spec.rank;
    return FOUNDRY_OK;
  }
  // Static dims must match; dynamic ones (-1) are checked by check_dynamic_dim.
  bool same = t->rank == spec.rank;
  for (int32_t d = 0; same && d < spec.rank; ++d) same = spec.shape[d] < 0 || t->shape[d] == spec.shape[d];
  if (!same)
    return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, what() + ": shape " + shape_text(t->shape, t->rank) +
                                                         ", expected " + shape_text(spec.shape, spec.rank) +
                                                         (t->rank == spec.rank ? "" : " (rank differs)"));
  return FOUNDRY_OK;
}

// Checks dimension `dim` of input `index` (already rank-checked) against a dynamic size: within
// the exported range [min, max], and equal to `expected` unless that is -1 (the dim binds it).
inline int check_dynamic_dim(const foundry_tensor* inputs, const TensorSpec* specs, size_t index, int32_t dim,
                             int64_t expected, int64_t min, int64_t max) {
  int64_t actual = inputs[index].shape[dim];
  auto what = [&] {  // made only for a message
    return "input " + std::to_string(index) + " (" + specs[index].name + ") dimension " + std::to_string(dim) +
           " is " + std::to_string(actual);
  };
  if (actual < min || actual > max)
    return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, what() + ", outside the range the model was exported for [" +
                                                         std::to_string(min) + ", " + std::to_string(max) + "]");
  if (expected >= 0 && actual != expected)
    return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT, what() + ", inconsistent with the other inputs (expected " +
                                                         std::to_string(expected) + ")");
  return FOUNDRY_OK;
}

// Binds a dynamic size s from dimension `dim` of input `index`, exported as scale*s + offset:
// the dim must lie in [min, max] (its exported range) and be offset plus a multiple of scale.
inline int bind_scaled_dim(const foundry_tensor* inputs, const TensorSpec* specs, size_t index, int32_t dim,
                           int64_t scale, int64_t offset, int64_t min, int64_t max, int64_t* size) {
  if (int status = check_dynamic_dim(inputs, specs, index, dim, -1, min, max)) return status;
  int64_t actual = inputs[index].shape[dim];
  if ((actual - offset) % scale != 0)
    return set_error(FOUNDRY_ERROR_INVALID_ARGUMENT,
                     "input " + std::to_string(index) + " (" + specs[index].name + ") dimension " + std::to_string(dim) +
                         " is " + std::to_string(actual) + ", not " + (offset ? std::to_string(offset) + " plus " : "") +
                         "a multiple of " + std::to_string(scale) + " as the model was exported for");
  *size = (actual - offset) / scale;
  return FOUNDRY_OK;
}

inline void fill_info(const TensorSpec& spec, foundry_tensor_info* info) {
  info->name = spec.name;
  info->dtype = spec.dtype;
  info->rank = spec.rank;
  for (int32_t d = 0; d < spec.rank; ++d) {
    info->shape[d] = spec.shape[d];
    info->min_shape[d] = spec.min_shape[d];
    info->max_shape[d] = spec.max_shape[d];
  }
}

inline const char* kernel_error_text(int code) {
  return code == 1 ? "an index is out of range" : code == 2 ? "integer division by zero" : "kernel error";
}

}  // namespace foundry_rt

#endif  // FOUNDRY_MODEL_RUNTIME_H
