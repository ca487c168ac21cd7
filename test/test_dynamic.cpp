// Dynamic shapes (torch.export.Dim): mlp_dynamic is compiled once and its model.so runs at every
// batch size of the exported range, checked against an independent plain-loop MLP computed from
// the archive's weights; sizes outside the range are rejected with a clear error.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "foundry/frontend/frontend.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/npy.h"
#include "foundry/support/error.h"
#include "support.h"

namespace {

using foundry::NpyArray;

// The archive's weights by their parameter names ("0.weight", ...), read by the frontend only.
std::map<std::string, std::vector<float>> mlp_weights(const std::string& archive) {
  foundry::Graph g = foundry::load_model(archive);
  std::map<std::string, std::vector<float>> w;
  for (const auto& in : g.inputs) {
    if (in.fqn.empty()) continue;
    const auto& t = in.value->type;
    REQUIRE(t.dtype == foundry::DType::Float32);
    REQUIRE(t.storage_offset == 0);
    std::vector<float> v(in.storage.size / sizeof(float));
    std::memcpy(v.data(), in.storage.data, v.size() * sizeof(float));
    w[in.fqn] = std::move(v);
  }
  return w;
}

// Linear(64,128) ReLU Linear(128,10) as plain loops in double.
std::vector<float> reference_mlp(const std::map<std::string, std::vector<float>>& w, const std::vector<float>& x,
                                 int64_t batch) {
  const auto &w0 = w.at("0.weight"), &b0 = w.at("0.bias"), &w2 = w.at("2.weight"), &b2 = w.at("2.bias");
  std::vector<float> out(static_cast<size_t>(batch) * 10);
  std::vector<double> hidden(128);
  for (int64_t b = 0; b < batch; ++b) {
    for (int h = 0; h < 128; ++h) {
      double acc = b0[h];
      for (int k = 0; k < 64; ++k) acc += double(x[b * 64 + k]) * w0[h * 64 + k];
      hidden[h] = acc > 0 ? acc : 0;
    }
    for (int o = 0; o < 10; ++o) {
      double acc = b2[o];
      for (int h = 0; h < 128; ++h) acc += hidden[h] * w2[o * 128 + h];
      out[b * 10 + o] = static_cast<float>(acc);
    }
  }
  return out;
}

NpyArray float_array(std::vector<int64_t> shape, const std::vector<float>& values) {
  NpyArray a;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());  // no null pointers
  return a;
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Compiles samples/<name> into tmp/out, checking that it stays dynamic; returns the folder.
std::string compile_dynamic_sample(const TempDir& tmp, const std::string& name,
                                   const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {samples_dir() + "/" + name + "/model.pt2", "-o", tmp / "out"};
  args.insert(args.end(), extra.begin(), extra.end());
  ProcResult r = run_foundryc(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("specializ") == std::string::npos);  // no fallback to the recorded sizes
  return tmp / "out";
}

}  // namespace

TEST_CASE("dynamic: mlp_dynamic compiles once and runs at batch 1, 8, 100 and 4096", "[dynamic][fast]") {
  TempDir tmp;
  std::string archive = samples_dir() + "/mlp_dynamic/model.pt2";
  const foundry::LoadedModel model(compile_dynamic_sample(tmp, "mlp_dynamic"));

  foundry_tensor_info info = model.input_info(0);
  CHECK(info.shape[0] == -1);
  CHECK(info.min_shape[0] == 1);
  CHECK(info.max_shape[0] == 4096);
  CHECK(info.shape[1] == 64);
  CHECK(model.output_info(0).shape[0] == -1);

  auto weights = mlp_weights(archive);
  for (int64_t batch : {1, 8, 100, 4096}) {
    INFO("batch " << batch);
    std::vector<float> x = random_floats(static_cast<size_t>(batch) * 64, static_cast<unsigned>(batch));
    std::vector<NpyArray> outs = model.run({float_array({batch, 64}, x)});
    REQUIRE(outs.size() == 1);
    REQUIRE(outs[0].shape == std::vector<int64_t>{batch, 10});
    foundry::Comparison c = foundry::compare_arrays(outs[0], float_array({batch, 10}, reference_mlp(weights, x, batch)));
    INFO(c.message);
    CHECK(c.pass);
  }
  // The corpus reference at the export size.
  std::vector<NpyArray> outs = model.run({foundry::read_npy(samples_dir() + "/mlp_dynamic/inputs/0.npy")});
  foundry::Comparison c = foundry::compare_arrays(outs[0], foundry::read_npy(samples_dir() + "/mlp_dynamic/expected/0.npy"));
  INFO(c.message);
  CHECK(c.pass);
}

TEST_CASE("dynamic: sizes outside the exported range or of the wrong rank are clear errors", "[dynamic][fast]") {
  TempDir tmp;
  const foundry::LoadedModel model(compile_dynamic_sample(tmp, "mlp_dynamic"));
  for (int64_t batch : {0, 4097}) {
    INFO("batch " << batch);
    std::vector<float> x(static_cast<size_t>(batch) * 64, 1.0f);
    std::string message;
    try {
      model.run({float_array({batch, 64}, x)});
    } catch (const foundry::UserError& e) {
      message = e.what();
    }
    CHECK(message.find("dimension 0 is " + std::to_string(batch)) != std::string::npos);
    CHECK(message.find("outside the range the model was exported for [1, 4096]") != std::string::npos);
  }
  std::string message;
  try {
    model.run({float_array({8, 32}, std::vector<float>(256, 1.0f))});
  } catch (const foundry::UserError& e) {
    message = e.what();
  }
  CHECK(message.find("shape [8, 32], expected [-1, 64]") != std::string::npos);
}

TEST_CASE("dynamic: foundry-run takes any batch size and reports the error for a bad one", "[dynamic][fast]") {
  TempDir tmp;
  compile_dynamic_sample(tmp, "mlp_dynamic");
  std::filesystem::create_directories(tmp / "in");
  foundry::write_npy(tmp / "in/0.npy", float_array({5000, 64}, std::vector<float>(5000 * 64, 0.5f)));
  ProcResult run = run_process({foundry_run_exe(), tmp / "out", "--inputs", tmp / "in"});
  CHECK(run.exit_code == 1);
  CHECK(run.err.find("dimension 0 is 5000, outside the range the model was exported for [1, 4096]") != std::string::npos);
}

TEST_CASE("dynamic: a graph that reads its own size (sym_size into a view) stays dynamic", "[dynamic][fast]") {
  // samples/flatten_dynamic (scripts/export_dynamic_sample.py): x.reshape(x.shape[0], -1) feeding a
  // Linear and a row sum, and x.reshape(x.shape[0] * 3, -1) (size arithmetic: _operator.mul), with
  // PyTorch's outputs at batch 6 (the export size), 1, 100 and 1024.
  TempDir tmp;
  std::string sample = samples_dir() + "/flatten_dynamic";
  compile_dynamic_sample(tmp, "flatten_dynamic", {"--dump-ir"});
  CHECK(read_file(tmp / "out/debug/graph.txt").find("aten.sym_size") != std::string::npos);
  CHECK(read_file(tmp / "out/debug/ir_pre_fusion.txt").find("ranges: [3*s0, 4]") != std::string::npos);
  const foundry::LoadedModel model(tmp / "out");
  for (const std::string& dir : {sample, sample + "/cases/b1", sample + "/cases/b100", sample + "/cases/b1024"}) {
    std::vector<NpyArray> outs = model.run({foundry::read_npy(dir + "/inputs/0.npy")});
    REQUIRE(outs.size() == 2);
    for (size_t k = 0; k < 2; ++k) {
      INFO(dir << " output " << k);
      foundry::Comparison c =
          foundry::compare_arrays(outs[k], foundry::read_npy(dir + "/expected/" + std::to_string(k) + ".npy"));
      INFO(c.message);
      CHECK(c.pass);
    }
  }
}

TEST_CASE("dynamic: inputs that share a dynamic size must agree", "[dynamic][fast]") {
  // samples/pair_dynamic: x + y, both [B, 4] with one dynamic B (scripts/export_dynamic_sample.py).
  TempDir tmp;
  const foundry::LoadedModel model(compile_dynamic_sample(tmp, "pair_dynamic"));
  std::vector<float> x = random_floats(7 * 4, 1), y = random_floats(7 * 4, 2), sum(7 * 4);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = x[i] + y[i];
  std::vector<NpyArray> outs = model.run({float_array({7, 4}, x), float_array({7, 4}, y)});
  foundry::Comparison c = foundry::compare_arrays(outs.at(0), float_array({7, 4}, sum));
  INFO(c.message);
  CHECK(c.pass);
  std::string message;
  try {
    model.run({float_array({7, 4}, x), float_array({6, 4}, std::vector<float>(24, 0.0f))});
  } catch (const foundry::UserError& e) {
    message = e.what();
  }
  CHECK(message.find("input 1 (y) dimension 0 is 6, inconsistent with the other inputs (expected 7)") != std::string::npos);
}

namespace {

// Runs every case of samples/<name>/cases/* on a model compiled once and compares each output
// with PyTorch's; returns the number of cases run.
int check_cases(const foundry::LoadedModel& model, const std::string& name) {
  int cases = 0;
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(samples_dir() + "/" + name + "/cases"))
    dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    std::vector<NpyArray> inputs;
    for (int k = 0; std::filesystem::exists(dir / "inputs" / (std::to_string(k) + ".npy")); ++k)
      inputs.push_back(foundry::read_npy(dir / "inputs" / (std::to_string(k) + ".npy")));
    std::vector<NpyArray> outs = model.run(inputs);
    for (size_t k = 0; k < outs.size(); ++k) {
      INFO(name << " case " << dir.filename().string() << " output " << k);
      foundry::Comparison c = foundry::compare_arrays(outs[k], foundry::read_npy(dir / "expected" / (std::to_string(k) + ".npy")));
      INFO(c.message);
      CHECK(c.pass);
    }
    CHECK(std::filesystem::exists(dir / "expected" / (std::to_string(outs.size()) + ".npy")) == false);
    ++cases;
  }
  return cases;
}

// Compiles samples/<name>/<archive> (no --static-fallback: a lowering that cannot stay dynamic
// fails the compile) into tmp/<label>.
std::string compile_archive(const TempDir& tmp, const std::string& name, const std::string& archive) {
  std::string out = tmp / (name + "." + archive);
  ProcResult r = run_foundryc({samples_dir() + "/" + name + "/" + archive, "-o", out});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("warning") == std::string::npos);
  return out;
}

}  // namespace

TEST_CASE("dynamic: a batch-dynamic CNN (conv, batch norm, pools, padding, transposed conv, upsampling) compiles once for every batch", "[dynamic][compiled]") {
  // samples/dyn_cnn (scripts/export_dynamic_models.py): batch 1..32, PyTorch's outputs at 1, 2, 7
  // and 32. The training IR (model.raw.pt2) decomposes conv2d, batch_norm, linear and
  // conv_transpose2d.input; it must stay dynamic too.
  TempDir tmp;
  for (const std::string archive : {"model.pt2", "model.raw.pt2"}) {
    INFO(archive);
    const foundry::LoadedModel model(compile_archive(tmp, "dyn_cnn", archive));
    foundry_tensor_info info = model.input_info(0);
    CHECK(info.shape[0] == -1);
    CHECK(info.min_shape[0] == 1);
    CHECK(info.max_shape[0] == 32);
    CHECK(model.output_info(0).shape[0] == -1);
    CHECK(model.output_info(1).shape[0] == -1);
    CHECK(check_cases(model, "dyn_cnn") == 4);
  }
}

TEST_CASE("dynamic: a batch-dynamic U-Net's transposed convolutions run on oneDNN at every batch", "[dynamic][compiled]") {
  // samples/dyn_unet (scripts/export_unet_sample.py): batch 1..8, PyTorch's outputs at 1 and 3; a
  // oneDNN deconvolution primitive per batch size (no warning: none falls back).
  TempDir tmp;
  for (const std::string archive : {"model.pt2", "model.raw.pt2"}) {
    INFO(archive);
    const foundry::LoadedModel model(compile_archive(tmp, "dyn_unet", archive));
    CHECK(model.input_info(0).shape[0] == -1);
    CHECK(model.input_info(0).max_shape[0] == 8);
    CHECK(check_cases(model, "dyn_unet") == 2);
  }
}

TEST_CASE("dynamic: a CNN whose height and width are dynamic matches PyTorch at every size", "[dynamic][compiled]") {
  // samples/dyn_image (scripts/export_dynamic_models.py): batch 1..4, height 8*k+2 for k in 2..8
  // and width 8*k for k in 2..8 (torch.export's `8 * Dim + 2`, which the input dims bind);
  // strided, dilated and grouped convolutions, max pools with padding and ceil_mode, an average
  // pool that leaves out its padding, adaptive pools, a transposed convolution and bilinear and
  // nearest resampling; PyTorch's outputs at five sizes. The training IR decomposes conv2d and
  // batch_norm, whose outputs must keep the dynamic spatial sizes too.
  TempDir tmp;
  for (const std::string archive : {"model.pt2", "model.raw.pt2"}) {
    INFO(archive);
    const foundry::LoadedModel model(compile_archive(tmp, "dyn_image", archive));
    foundry_tensor_info info = model.input_info(0);
    for (int d : {0, 2, 3}) CHECK(info.shape[d] == -1);
    CHECK(info.min_shape[2] == 18);
    CHECK(info.max_shape[2] == 66);
    CHECK(info.min_shape[3] == 16);
    CHECK(info.max_shape[3] == 64);
    CHECK(model.output_info(1).shape[2] == -1);  // bilinear to the input's size
    CHECK(model.output_info(3).shape[2] == 5);   // bilinear to a fixed size
    CHECK(check_cases(model, "dyn_image") == 5);
    // A height that is not 2 plus a multiple of 8, and a width past the range, are refused.
    for (auto [h, w, expected] : {std::tuple<int64_t, int64_t, std::string>{19, 16, "dimension 2 is 19, not 2 plus a multiple of 8"},
                                  {18, 72, "dimension 3 is 72, outside the range the model was exported for [16, 64]"}}) {
      std::string message;
      try {
        model.run({float_array({1, 3, h, w}, std::vector<float>(static_cast<size_t>(3 * h * w), 1.0f))});
      } catch (const foundry::UserError& e) {
        message = e.what();
      }
      INFO(message);
      CHECK(message.find(expected) != std::string::npos);
    }
  }
}

TEST_CASE("dynamic: the training-IR export of an MLP stays dynamic", "[dynamic][compiled]") {
  // samples/dyn_mlp_raw: linear decomposed by foundryc into addmm over a view must keep the batch.
  TempDir tmp;
  const foundry::LoadedModel model(compile_archive(tmp, "dyn_mlp_raw", "model.raw.pt2"));
  CHECK(model.input_info(0).shape[0] == -1);
  CHECK(model.input_info(0).max_shape[0] == 256);
  CHECK(model.output_info(0).shape[0] == -1);
  CHECK(check_cases(model, "dyn_mlp_raw") == 4);
}

TEST_CASE("dynamic: attention with positions from arange up to the run-time length and a padding mask", "[dynamic][compiled]") {
  // samples/dyn_attention: batch 1..16 and sequence 2..24 both dynamic; arange(seq) feeds the
  // position embedding, the mask the attention scores; cases (1, 2), (3, 9), (5, 24), (16, 7). Its
  // pooler (a product of the first tokens, whose row stride is the run-time length) is a oneDNN
  // call built per shape with the batch as its runtime row count.
  TempDir tmp;
  for (const std::string archive : {"model.pt2", "model.raw.pt2"}) {
    INFO(archive);
    const foundry::LoadedModel model(compile_archive(tmp, "dyn_attention", archive));
    for (int input = 0; input < 2; ++input) {
      foundry_tensor_info info = model.input_info(input);
      CHECK(info.shape[0] == -1);
      CHECK(info.shape[1] == -1);
      CHECK(info.max_shape[0] == 16);
      CHECK(info.min_shape[1] == 2);
      CHECK(info.max_shape[1] == 24);
    }
    CHECK(check_cases(model, "dyn_attention") == 4);
  }
}

TEST_CASE("dynamic: sorting rows whose count and length are known only at run time matches PyTorch", "[dynamic][compiled]") {
  // samples/dyn_sort (scripts/export_sort_sample.py): sort (descending, stable), argsort, msort and
  // topk of rows with ties, NaN, infinities and signed zeros; rows 1..8 and length 7..100000;
  // cases (1, 7), (3, 500), (2, 1500); the export size (2, 300) interpreted too.
  TempDir tmp;
  for (const std::string archive : {"model.pt2", "model.raw.pt2"}) {  // the raw one: argsort, msort decomposed
    INFO(archive);
    CHECK(run_sample_both_ways(samples_dir() + "/dyn_sort", archive) == "");
    const foundry::LoadedModel model(compile_archive(tmp, "dyn_sort", archive));
    CHECK(model.input_info(0).shape[0] == -1);
    CHECK(model.input_info(0).shape[1] == -1);
    CHECK(model.input_info(1).max_shape[1] == 100000);
    CHECK(check_cases(model, "dyn_sort") == 3);
  }
}

TEST_CASE("dynamic: a lowering that cannot keep a size dynamic fails unless --static-fallback", "[dynamic][fast]") {
  // samples/dyn_inverse: linalg.inv of a dynamic batch of 3x3 matrices; its LAPACK calls are
  // built for static sizes.
  TempDir tmp;
  std::string archive = samples_dir() + "/dyn_inverse/model.pt2";
  ProcResult r = run_foundryc({archive, "-o", tmp / "out"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("foundryc: error: node linalg_inv_ex (aten.linalg_inv_ex): this lowering needs static sizes") !=
        std::string::npos);
  CHECK(r.err.find("--static-fallback") != std::string::npos);
  CHECK(!std::filesystem::exists(tmp / "out/model.so"));

  r = run_foundryc({archive, "-o", tmp / "out", "--static-fallback"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("warning: node linalg_inv_ex") != std::string::npos);
  CHECK(r.err.find("compiling for the sizes recorded at export instead") != std::string::npos);
  const foundry::LoadedModel model(tmp / "out");
  CHECK(model.input_info(0).shape[0] == 5);  // specialized to the export's batch
  std::vector<NpyArray> outs = model.run({foundry::read_npy(samples_dir() + "/dyn_inverse/inputs/0.npy")});
  foundry::Comparison c = foundry::compare_arrays(outs.at(0), foundry::read_npy(samples_dir() + "/dyn_inverse/expected/0.npy"));
  INFO(c.message);
  CHECK(c.pass);
}
