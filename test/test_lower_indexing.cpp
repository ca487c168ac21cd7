// Lowerings of indexing, scatter, concatenation, padding and repetition ops: each corpus sample is
// lowered, run by the reference evaluator, and compared with PyTorch's eager results.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "foundry/frontend/frontend.h"
#include "foundry/ir/evaluate.h"
#include "foundry/lower/lowering.h"
#include "foundry/runtime/npy.h"
#include "support.h"

using foundry::DType;
using foundry::NpyArray;

namespace {

double element(const NpyArray& a, int64_t i) {
  switch (a.dtype) {
    case DType::Float32: return a.as<float>()[i];
    case DType::Float64: return a.as<double>()[i];
    case DType::Int64: return static_cast<double>(a.as<int64_t>()[i]);
    case DType::Int32: return a.as<int32_t>()[i];
    case DType::Int16: return a.as<int16_t>()[i];
    case DType::Int8: return a.as<int8_t>()[i];
    case DType::Bool: case DType::UInt8: return a.data[i];
    default: FAIL("unexpected dtype in a reference"); return 0;
  }
}

// "" when the sample's lowered program reproduces expected/ (float: |x-r| <= 1e-4 + 1e-4|r|, NaN
// where NaN; other types exact), else what differs.
std::string check_sample(const std::string& name) {
  std::string dir = corpus_dir() + "/opinfo/" + name;
  foundry::Graph g = foundry::load_model(dir + "/model.pt2");
  foundry::ir::LoopProgram program = foundry::lower::lower_graph(g);
  std::vector<NpyArray> inputs;
  for (int i = 0; std::filesystem::exists(dir + "/inputs/" + std::to_string(i) + ".npy"); ++i)
    inputs.push_back(foundry::read_npy(dir + "/inputs/" + std::to_string(i) + ".npy"));
  std::vector<NpyArray> outs = foundry::ir::evaluate_program(program, inputs);
  std::string err;
  for (size_t o = 0; o < outs.size(); ++o) {
    NpyArray ref = foundry::read_npy(dir + "/expected/" + std::to_string(o) + ".npy");
    std::string tag = "output " + std::to_string(o) + ": ";
    if (ref.dtype != outs[o].dtype) { err += tag + "dtype differs; "; continue; }
    if (ref.shape != outs[o].shape) { err += tag + "shape differs; "; continue; }
    for (int64_t i = 0; i < ref.numel(); ++i) {
      double r = element(ref, i), x = element(outs[o], i);
      bool ok = foundry::is_floating(ref.dtype)
                    ? (std::isnan(r) ? std::isnan(x) : (x == r || std::fabs(x - r) <= 1e-4 + 1e-4 * std::fabs(r)))
                    : x == r;
      if (!ok) {
        err += tag + "element " + std::to_string(i) + " is " + std::to_string(x) + ", expected " + std::to_string(r) + "; ";
        break;
      }
    }
  }
  return err;
}

void check_family(const std::vector<std::string>& prefixes) {
  if (!require_corpus()) return;
  for (const std::string& prefix : prefixes)
    for (const char* dtype : {"float32", "int64", "bool"})
      for (int k = 0; k < 3; ++k) {
        std::string name = prefix + "__" + dtype + "__" + std::to_string(k);
        if (!std::filesystem::exists(corpus_dir() + "/opinfo/" + name + "/expected")) continue;
        INFO(name);
        std::string err;
        try {
          err = check_sample(name);
        } catch (const std::exception& e) {
          err = e.what();
        }
        CHECK(err == "");
      }
}

}  // namespace

TEST_CASE("gather, index_select, embedding and advanced indexing match PyTorch", "[lower][fast]") {
  check_family({"gather", "index_select", "nn_functional_embedding", "take", "take_along_dim", "__getitem__",
                "_unsafe_masked_index", "nn_functional_pad_reflect", "nn_functional_pad_replicate",
                "nn_functional_pad_replicate_negative", "roll", "fft_fftshift", "fft_ifftshift"});
}

TEST_CASE("index_put and scatter ops match PyTorch", "[lower][fast]") {
  check_family({"index_put", "index_add", "index_copy", "index_fill", "_unsafe_masked_index_put_accumulate",
                "scatter", "scatter_add", "scatter_reduce_sum", "scatter_reduce_prod", "scatter_reduce_mean",
                "scatter_reduce_amax", "scatter_reduce_amin", "slice_scatter", "nn_functional_pad_circular",
                "nn_functional_max_unpool1d", "nn_functional_max_unpool2d", "nn_functional_max_unpool3d"});
}

TEST_CASE("cat, constant_pad_nd and repeat match PyTorch", "[lower][fast]") {
  check_family({"cat", "stack", "hstack", "vstack", "dstack", "column_stack", "block_diag", "constant_pad_nd",
                "nn_functional_pad_constant", "repeat", "tile", "_chunk_cat"});
}
