// The compiled model's run is documented as safe to call from several threads at once (each call
// has its own intermediate buffers). One loaded model, 8 threads x 200 runs, every output checked
// against the sample's expected/ outputs. Half the threads use run_into with outputs they
// allocated once (no allocation per call), the other half run (fresh outputs each call).
// scripts/tsan.sh runs this test under ThreadSanitizer, with the model compiled with it too.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "support.h"

namespace {

constexpr int kThreads = 8;
constexpr int kIterations = 200;

void run_concurrently(const std::string& sample) {
  const std::string dir = samples_dir() + "/" + sample;
  TempDir tmp("foundry_concurrency_");
  const std::string out = tmp / "out";
  ProcResult r = run_foundryc({dir + "/model.pt2", "-o", out, "-q"}, 600);
  INFO("foundryc stdout: " << r.out << "\nfoundryc stderr: " << r.err);
  REQUIRE(r.exit_code == 0);

  const std::vector<foundry::NpyArray> inputs = foundry::read_npy_sequence(dir + "/inputs");
  const std::vector<foundry::NpyArray> expected = foundry::read_npy_sequence(dir + "/expected");
  REQUIRE_FALSE(expected.empty());
  const foundry::LoadedModel model(out);
  REQUIRE(model.num_outputs() == expected.size());

  std::atomic<int64_t> runs{0}, failures{0};
  std::mutex first_mu;
  std::string first_failure;
  auto fail = [&](const std::string& what) {
    ++failures;
    std::lock_guard<std::mutex> lock(first_mu);
    if (first_failure.empty()) first_failure = what;
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<foundry::NpyArray> outputs = model.allocate_outputs(inputs);
        for (int i = 0; i < kIterations; ++i) {
          if (t % 2 == 0) {
            model.run_into(inputs, outputs);
          } else {
            outputs = model.run(inputs);
          }
          ++runs;
          if (outputs.size() != expected.size()) {
            fail("thread " + std::to_string(t) + ": " + std::to_string(outputs.size()) + " outputs");
            continue;
          }
          for (size_t k = 0; k < outputs.size(); ++k) {
            foundry::Comparison c = foundry::compare_arrays(outputs[k], expected[k]);
            if (!c.pass)
              fail("thread " + std::to_string(t) + " iteration " + std::to_string(i) + " output " +
                   std::to_string(k) + ": " + c.message);
          }
          // Scribble over run_into's outputs so that a run that writes nothing is caught.
          if (t % 2 == 0)
            for (auto& o : outputs) std::fill(o.data.begin(), o.data.end(), uint8_t{0xAB});
        }
      } catch (const std::exception& e) {
        fail("thread " + std::to_string(t) + ": " + e.what());
      }
    });
  }
  for (auto& th : threads) th.join();

  INFO(sample << ": first failure: " << first_failure);
  CHECK(failures.load() == 0);
  CHECK(runs.load() == int64_t{kThreads} * kIterations);
}

}  // namespace

TEST_CASE("concurrency: mlp run from 8 threads on one loaded model", "[concurrency][fast]") {
  run_concurrently("mlp");
}

// This one once gave wrong outputs (6 of 1600 runs): oneDNN's library-managed scratchpad was
// shared between threads; foundry_dnnl.h now gives every call its own.
TEST_CASE("concurrency: norm_softmax run from 8 threads on one loaded model", "[concurrency][fast]") {
  run_concurrently("norm_softmax");
}

// A dynamic-batch model's library calls get a oneDNN primitive per shape, built by the first run
// that meets it and cached in the model: threads running different batch sizes at once share
// (and race to build) those primitives.
TEST_CASE("concurrency: dyn_cnn run from 8 threads at 4 batch sizes on one loaded model", "[concurrency][fast]") {
  const std::string dir = samples_dir() + "/dyn_cnn";
  TempDir tmp("foundry_concurrency_");
  ProcResult r = run_foundryc({dir + "/model.pt2", "-o", tmp / "out", "-q"}, 600);
  INFO("foundryc stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> cases = {"b1", "b2", "b7", "b32"};
  std::vector<std::vector<foundry::NpyArray>> inputs, expected;
  for (const std::string& c : cases) {
    inputs.push_back(foundry::read_npy_sequence(dir + "/cases/" + c + "/inputs"));
    expected.push_back(foundry::read_npy_sequence(dir + "/cases/" + c + "/expected"));
  }
  const foundry::LoadedModel model(tmp / "out");
  std::atomic<int64_t> failures{0};
  std::mutex first_mu;
  std::string first_failure;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const size_t c = static_cast<size_t>(t) % cases.size();
      for (int i = 0; i < 20; ++i) {
        std::string what;
        try {
          std::vector<foundry::NpyArray> outputs = model.run(inputs[c]);
          for (size_t k = 0; k < outputs.size() && what.empty(); ++k) {
            foundry::Comparison cmp = foundry::compare_arrays(outputs[k], expected[c][k]);
            if (!cmp.pass) what = cases[c] + " output " + std::to_string(k) + ": " + cmp.message;
          }
        } catch (const std::exception& e) {
          what = cases[c] + ": " + e.what();
        }
        if (what.empty()) continue;
        ++failures;
        std::lock_guard<std::mutex> lock(first_mu);
        if (first_failure.empty()) first_failure = what;
      }
    });
  }
  for (auto& th : threads) th.join();
  INFO("first failure: " << first_failure);
  CHECK(failures.load() == 0);
}
