// foundry-run: loads a compiled model folder, runs it on .npy inputs, compares the outputs with
// expected .npy files and/or benchmarks it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "foundry/runtime/compare.h"
#include "foundry/runtime/foundry_c_api.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/support/error.h"

namespace {

struct Options {
  std::string model_dir, inputs, expected, save_outputs;
  std::optional<double> atol, rtol;
  int bench = 0, warmup = 3, threads = 0;
  bool json = false;
};

struct BenchStats {
  double median_ms = 0, p10_ms = 0, p90_ms = 0, min_ms = 0;
};

BenchStats benchmark(const foundry::LoadedModel& model, const std::vector<foundry::NpyArray>& inputs, int runs,
                     int warmup) {
  std::vector<foundry::NpyArray> outputs = model.allocate_outputs(inputs);
  for (int i = 0; i < warmup; ++i) model.run_into(inputs, outputs);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    model.run_into(inputs, outputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * (ms.size() - 1) + 0.5))]; };
  return {at(0.5), at(0.1), at(0.9), ms.front()};
}

// --save-outputs DIR: the folder is made if needed; a file in its place or an unwritable folder is
// the user's to fix, said in one line.
void save_outputs(const std::string& dir, const std::vector<foundry::NpyArray>& outputs) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw foundry::UserError("--save-outputs " + dir + ": exists and is not a folder");
  std::filesystem::create_directories(dir, ec);
  if (ec) throw foundry::UserError("--save-outputs " + dir + ": cannot create the folder: " + ec.message());
  for (size_t k = 0; k < outputs.size(); ++k) foundry::write_npy(dir + "/" + std::to_string(k) + ".npy", outputs[k]);
}

// --inputs DIR / --expected DIR: DIR/0.npy, DIR/1.npy, ... A file or a missing path is said as such
// (read as a folder, it would hold 0 arrays and the message would be about the count).
std::vector<foundry::NpyArray> read_npy_folder(const std::string& option, const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) throw foundry::UserError(option + " " + dir + " does not exist");
  if (!std::filesystem::is_directory(dir, ec))
    throw foundry::UserError(option + " " + dir + " is not a folder of 0.npy, 1.npy, ...");
  return foundry::read_npy_sequence(dir);
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "foundry-run: error: %s\n", foundry::printable_message(msg).c_str());
  std::fprintf(stderr, "Run with --help for more information.\n");
  return 2;
}

int run(const Options& opt) {
  if (opt.threads > 0) {
    int threads = opt.threads;
    if (threads > FOUNDRY_MAX_THREADS) {
      std::fprintf(stderr, "foundry-run: warning: --threads %d is more than %d threads; using %d\n", threads,
                   FOUNDRY_MAX_THREADS, FOUNDRY_MAX_THREADS);
      threads = FOUNDRY_MAX_THREADS;
    }
    // Read by the model's OpenMP runtime when it starts, so set before loading it.
    setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    setenv("FOUNDRY_NUM_THREADS", std::to_string(threads).c_str(), 1);
  }
  foundry::LoadedModel model(opt.model_dir);
  std::vector<foundry::NpyArray> inputs = read_npy_folder("--inputs", opt.inputs);
  if (inputs.size() != model.num_inputs())
    throw foundry::UserError("found " + std::to_string(inputs.size()) + " inputs in " + opt.inputs + ", the model takes " +
                             std::to_string(model.num_inputs()));
  std::vector<foundry::NpyArray> outputs = model.run(inputs);

  nlohmann::json report;
  bool all_pass = true;
  report["outputs"] = nlohmann::json::array();
  if (!opt.expected.empty()) {
    std::vector<foundry::NpyArray> expected = read_npy_folder("--expected", opt.expected);
    if (expected.size() != outputs.size())
      throw foundry::UserError("found " + std::to_string(expected.size()) + " expected outputs in " + opt.expected +
                               ", the model has " + std::to_string(outputs.size()));
    for (size_t k = 0; k < outputs.size(); ++k) {
      std::optional<foundry::Tolerance> tol;
      if (opt.atol || opt.rtol) {
        foundry::Tolerance t = foundry::Tolerance::for_dtype(expected[k].dtype);
        tol = foundry::Tolerance{opt.atol.value_or(t.atol), opt.rtol.value_or(t.rtol)};
      }
      foundry::Comparison c = foundry::compare_arrays(outputs[k], expected[k], tol);
      all_pass = all_pass && c.pass;
      report["outputs"].push_back({{"index", k}, {"max_abs_err", c.max_abs_err}, {"max_rel_err", c.max_rel_err},
                                   {"pass", c.pass}, {"message", c.message}});
      if (!opt.json)
        std::printf("output %zu: max abs err %.3g, max rel err %.3g: %s%s%s\n", k, c.max_abs_err, c.max_rel_err,
                    c.pass ? "PASS" : "FAIL", c.pass ? "" : ": ", c.message.c_str());
    }
  }
  if (!opt.save_outputs.empty()) save_outputs(opt.save_outputs, outputs);
  if (opt.bench > 0) {
    BenchStats s = benchmark(model, inputs, opt.bench, opt.warmup);
    report["median_ms"] = s.median_ms;
    report["p10_ms"] = s.p10_ms;
    report["min_ms"] = s.min_ms;
    report["p90_ms"] = s.p90_ms;
    report["runs"] = opt.bench;
    if (!opt.json)
      std::printf("benchmark: median %.4f ms, p10 %.4f ms, p90 %.4f ms over %d runs\n", s.median_ms, s.p10_ms,
                  s.p90_ms, opt.bench);
  }
  report["pass"] = all_pass;
  if (opt.json) std::cout << report.dump() << "\n";
  return all_pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"foundry-run: run a model compiled by foundryc on .npy inputs"};
  Options opt;
  app.add_option("model", opt.model_dir, "the output folder of foundryc (model.so, manifest.json)")->required();
  app.add_option("--inputs", opt.inputs, "folder of inputs 0.npy, 1.npy, ... in graph order")->required();
  app.add_option("--expected", opt.expected, "folder of expected outputs to compare with");
  app.add_option("--atol", opt.atol, "absolute tolerance (default by dtype: 1e-4 for float32)");
  app.add_option("--rtol", opt.rtol, "relative tolerance (default by dtype: 1e-4 for float32)");
  app.add_option("--save-outputs", opt.save_outputs, "write the outputs as .npy files into this folder");
  app.add_option("--bench", opt.bench, "time N runs and report the median, p10 and p90");
  app.add_option("--warmup", opt.warmup, "untimed runs before benchmarking (default 3)");
  app.add_option("--threads", opt.threads, "threads the model may use");
  app.add_flag("--json", opt.json, "print one JSON object instead of text");
  app.set_version_flag("--version", std::string("foundry-run ") + FOUNDRY_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  try {
    return run(opt);
  } catch (const foundry::UserError& e) {
    std::fprintf(stderr, "foundry-run: error: %s\n", foundry::printable_message(e.what()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foundry-run: internal error (this is a foundryc bug): %s\n",
                 foundry::printable_message(e.what()).c_str());
    return 3;
  }
}
