// foundry-run: loads a compiled model folder, runs it on .npy inputs (or random ones), compares the
// outputs with expected .npy files and/or benchmarks it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include <pthread.h>  // --cpu: pthread_setaffinity_np
#include <sched.h>

#include "foundry/runtime/compare.h"
#include "foundry/runtime/cuda_runtime.h"
#include "foundry/runtime/foundry_c_api.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"
#include "foundry/support/error.h"
#include "command_line.h"

namespace {

struct Options {
  std::string model_dir, inputs, expected, save_outputs, device;
  std::optional<double> atol, rtol;
  int bench = 0, warmup = 3, threads = 0, profile = 0;
  int cpu = -1;  // --cpu: the core the calling thread is pinned to after the warm-up
  int gap_us = 0;  // --gap-us: the pause before each timed run
  uint64_t seed = 0;
  bool json = false;
};

struct BenchStats {
  double median_ms = 0, p10_ms = 0, p90_ms = 0, min_ms = 0;
};

BenchStats stats_of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * (ms.size() - 1) + 0.5))]; };
  return {at(0.5), at(0.1), at(0.9), ms.front()};
}

// Pins the calling thread to CPU `cpu` (nothing for -1). Only with one thread (main() refuses
// more): the threads it starts later inherit the pin, and libgomp ends the pool threads that a
// smaller team leaves out (a oneDNN call may size its team to its work) and starts them again for
// the next larger team, which would put them on this one CPU.
void pin_calling_thread(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu >= CPU_SETSIZE) throw foundry::UserError("--cpu " + std::to_string(cpu) + ": no such CPU");
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
    throw foundry::UserError("--cpu " + std::to_string(cpu) + ": not a CPU this process may run on");
}

// Wall-clock milliseconds of `opt.bench` calls of `call` after `opt.warmup` untimed ones, on CPU
// `opt.cpu` from the end of the warm-up (-1: wherever the system puts it), each after a pause of
// `opt.gap_us` (untimed).
template <class Call>
std::vector<double> time_calls(const Options& opt, const Call& call) {
  for (int i = 0; i < opt.warmup; ++i) call();
  pin_calling_thread(opt.cpu);
  std::vector<double> ms;
  for (int i = 0; i < opt.bench; ++i) {
    if (opt.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(opt.gap_us));
    auto t0 = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return ms;
}

// A CPU model: NAME_run on host arrays. A CUDA model: NAME_run_cuda with the inputs already on
// the GPU, each call followed by a stream synchronize (as PyTorch is timed: call, then
// torch.cuda.synchronize()).
BenchStats benchmark(const foundry::LoadedModel& model, const std::vector<foundry::NpyArray>& inputs,
                     const Options& opt) {
  std::vector<foundry::NpyArray> outputs = model.allocate_outputs(inputs);
  if (model.device() != "cuda") return stats_of(time_calls(opt, [&] { model.run_into(inputs, outputs); }));
  std::string why;
  const foundry::CudaRuntime* cuda = foundry::CudaRuntime::find(&why);
  if (!cuda) throw foundry::UserError("--bench of a CUDA model needs a GPU: " + why);
  foundry::DeviceArrays in(*cuda, inputs), out(*cuda, outputs);
  void* stream = cuda->create_stream();
  std::vector<double> ms = time_calls(opt, [&] {
    model.run_cuda(stream, in.tensors(), out.tensors());
    cuda->synchronize(stream);
  });
  cuda->destroy_stream(stream);
  return stats_of(ms);
}

// One run of each step, in milliseconds, and the threads each ran on (CPU models).
struct StepRun {
  std::vector<double> ms;
  std::vector<int> threads;
};

// `warmup` untimed and `runs` timed profiled runs: a CUDA model's steps timed with CUDA events in a
// graph, a CPU model's with the clock between steps.
std::vector<StepRun> profiled_runs(const foundry::LoadedModel& model, const std::vector<foundry::NpyArray>& inputs,
                                   int runs, int warmup) {
  std::vector<foundry::NpyArray> outputs = model.allocate_outputs(inputs);
  std::vector<StepRun> timed;
  if (model.device() != "cuda") {
    for (int i = 0; i < warmup + runs; ++i) {
      StepRun r;
      for (const auto& step : model.profile(inputs, outputs)) {
        r.ms.push_back(step.ms);
        r.threads.push_back(step.threads);
      }
      if (i >= warmup) timed.push_back(r);
    }
    return timed;
  }
  std::string why;
  const foundry::CudaRuntime* cuda = foundry::CudaRuntime::find(&why);
  if (!cuda) throw foundry::UserError("--profile needs a GPU: " + why);
  foundry::DeviceArrays in(*cuda, inputs), out(*cuda, outputs);
  void* stream = cuda->create_stream();
  for (int i = 0; i < warmup + runs; ++i) {
    std::vector<double> ms = model.profile_cuda(stream, in.tensors(), out.tensors());
    if (i >= warmup) timed.push_back({ms, {}});
  }
  cuda->destroy_stream(stream);
  return timed;
}

// --profile N: the model's steps timed over N runs (after the warm-up ones), each step's median,
// slowest first, with its share of the steps' total and, on the CPU, the most threads it ran on.
nlohmann::json profile(const foundry::LoadedModel& model, const std::vector<foundry::NpyArray>& inputs, int runs,
                       int warmup, bool quiet) {
  const bool cpu = model.device() != "cuda";
  std::vector<StepRun> timed = profiled_runs(model, inputs, runs, warmup);
  std::vector<std::string> names = model.step_names();
  std::vector<std::vector<double>> per_step(names.size());
  std::vector<int> threads(names.size(), 0);  // the most threads a step ran on
  for (const StepRun& r : timed) {
    for (size_t k = 0; k < r.ms.size() && k < per_step.size(); ++k) per_step[k].push_back(r.ms[k]);
    for (size_t k = 0; k < r.threads.size() && k < threads.size(); ++k) threads[k] = std::max(threads[k], r.threads[k]);
  }
  std::vector<std::pair<double, size_t>> order;
  double total = 0;
  for (size_t k = 0; k < per_step.size(); ++k) {
    double median = stats_of(per_step[k]).median_ms;
    order.emplace_back(median, k);
    total += median;
  }
  std::sort(order.rbegin(), order.rend());
  nlohmann::json steps = nlohmann::json::array();
  if (!quiet)
    std::printf("profile (%s, median of %d runs): %.4f ms in %zu steps\n",
                cpu ? "the clock between steps" : "CUDA events in a graph", runs, total, names.size());
  for (const auto& [ms, k] : order) {
    nlohmann::json step = {{"step", k}, {"name", names[k]}, {"median_ms", ms}};
    if (cpu) step["threads"] = threads[k];
    steps.push_back(step);
    if (quiet) continue;
    std::string team = cpu ? " " + std::to_string(threads[k]) + (threads[k] == 1 ? " thread " : " threads") : "";
    std::printf("  %9.4f ms %5.1f%%%s  #%zu %s\n", ms, total > 0 ? 100 * ms / total : 0.0, team.c_str(), k, names[k].c_str());
  }
  return {{"total_ms", total}, {"runs", runs}, {"steps", steps}};
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

// --atol and --rtol where given, else the defaults of the expected output's dtype.
foundry::Tolerance tolerance_for(const Options& opt, foundry::DType dtype) {
  foundry::Tolerance t = foundry::Tolerance::for_dtype(dtype);
  return {opt.atol.value_or(t.atol), opt.rtol.value_or(t.rtol)};
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "atol 0.0001, rtol 0.0001" when every float dtype has those, else each dtype's: "float32: ...; float64: ...".
std::string tolerance_values(const std::map<std::string, std::string>& by_dtype) {
  std::set<std::string> distinct;
  for (const auto& [dtype, values] : by_dtype) distinct.insert(values);
  if (distinct.size() == 1) return *distinct.begin();
  std::string text;
  for (const auto& [dtype, values] : by_dtype) text += (text.empty() ? "" : "; ") + dtype + ": " + values;
  return text;
}

// Printed once before the outputs: how atol and rtol combine, so that a relative error above rtol
// that passes through atol (an element near 0) is no surprise.
std::string tolerance_line(const Options& opt, const std::vector<foundry::NpyArray>& expected) {
  std::map<std::string, std::string> by_dtype;  // "float32" -> "atol 0.0001, rtol 0.0001"
  bool exact = false;
  for (const foundry::NpyArray& e : expected) {
    exact = exact || !foundry::is_floating(e.dtype);
    if (!foundry::is_floating(e.dtype)) continue;
    foundry::Tolerance t = tolerance_for(opt, e.dtype);
    std::string dtype(foundry::dtype_name(e.dtype));
    by_dtype[dtype] = "atol " + number_text(t.atol) + ", rtol " + number_text(t.rtol);
  }
  std::string line = "tolerance: ";
  if (!by_dtype.empty()) line += "|out - ref| <= atol + rtol*|ref| per element (" + tolerance_values(by_dtype) + ")";
  if (exact) line += std::string(by_dtype.empty() ? "" : "; ") + "integer and bool outputs must be equal";
  return line;
}

std::string output_name(const foundry::LoadedModel& model, size_t k) {
  const char* name = model.output_info(k).name;
  return name ? name : "";
}

nlohmann::json comparison_json(const foundry::Comparison& c, const foundry::NpyArray& ref, foundry::Tolerance tol,
                               size_t k, const std::string& name) {
  nlohmann::json j = {{"index", k}, {"name", name}, {"pass", c.pass}, {"message", c.message},
                      {"atol", tol.atol}, {"rtol", tol.rtol}};
  // Errors exist only where the shapes and dtypes agree; 0 would read as a perfect match.
  j["max_abs_err"] = c.elements_compared ? nlohmann::json(c.max_abs_err) : nlohmann::json();
  j["max_rel_err"] = c.elements_compared ? nlohmann::json(c.max_rel_err) : nlohmann::json();
  if (c.worst >= 0)
    j["worst"] = {{"index", foundry::unravel_position(c.worst, ref.shape)}, {"abs_err", c.worst_err},
                  {"allowed", c.worst_allowed}};
  return j;
}

int usage_error(const std::string& msg) { return foundry::cli::usage_error("foundry-run", msg); }

void set_thread_count(int threads) {
  if (threads > FOUNDRY_MAX_THREADS) {
    std::fprintf(stderr, "foundry-run: warning: --threads %d is more than %d threads; using %d\n", threads,
                 FOUNDRY_MAX_THREADS, FOUNDRY_MAX_THREADS);
    threads = FOUNDRY_MAX_THREADS;
  }
  // Read by the model's OpenMP runtime when it starts, so set before loading it.
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  setenv("FOUNDRY_NUM_THREADS", std::to_string(threads).c_str(), 1);
}

std::vector<foundry::NpyArray> given_inputs(const foundry::LoadedModel& model, const std::string& dir) {
  std::vector<foundry::NpyArray> inputs = read_npy_folder("--inputs", dir);
  if (inputs.size() != model.num_inputs())
    throw foundry::UserError("found " + std::to_string(inputs.size()) + " inputs in " + dir + ", the model takes " +
                             std::to_string(model.num_inputs()));
  return inputs;
}

// A random input's shape: a dynamic size is the one torch.export ran with (manifest.json), or the
// smallest size >= 1 in its range when the manifest has none that fits.
std::vector<int64_t> random_input_shape(const foundry::LoadedModel& model, size_t k) {
  foundry_tensor_info info = model.input_info(k);
  std::vector<int64_t> example = model.example_input_shape(k);
  std::vector<int64_t> shape;
  for (size_t d = 0; d < static_cast<size_t>(info.rank); ++d) {
    int64_t smallest = std::max<int64_t>(info.min_shape[d], 1);
    bool example_fits = d < example.size() && example[d] >= smallest && example[d] <= info.max_shape[d];
    shape.push_back(info.shape[d] >= 0 ? info.shape[d] : example_fits ? example[d] : smallest);
  }
  return shape;
}

// No --inputs: random ones of the model's input dtypes and shapes, said on one line (--json:
// "random_inputs"), so that nobody takes the outputs for meaningful ones.
std::vector<foundry::NpyArray> random_inputs(const foundry::LoadedModel& model, const Options& opt,
                                             nlohmann::json& report) {
  std::mt19937_64 rng(opt.seed);
  std::vector<foundry::NpyArray> inputs;
  nlohmann::json described = nlohmann::json::array();
  std::string text;
  for (size_t k = 0; k < model.num_inputs(); ++k) {
    foundry_tensor_info info = model.input_info(k);
    std::optional<foundry::DType> dtype = foundry::dtype_from_export(info.dtype);
    if (!dtype) throw foundry::UserError("model input " + std::to_string(k) + " has an unknown dtype");
    inputs.push_back(foundry::random_array(*dtype, random_input_shape(model, k), rng));
    std::string name = info.name ? info.name : "", dtype_name(foundry::dtype_name(*dtype));
    described.push_back({{"name", name}, {"dtype", dtype_name}, {"shape", inputs.back().shape}});
    text += (text.empty() ? "" : "; ") + name + " " + dtype_name + " " + foundry::shape_text(inputs.back().shape);
  }
  report["random_inputs"] = {{"seed", opt.seed}, {"inputs", described}};
  if (!opt.json)
    std::printf("inputs: random, seed %llu (floats uniform in [-1, 1), integers 0 or 1, bools false or true): %s\n",
                static_cast<unsigned long long>(opt.seed), text.empty() ? "none" : text.c_str());
  return inputs;
}

// --expected: each output against its file, with the tolerance rule said once. True when all pass.
bool compare_outputs(const foundry::LoadedModel& model, const Options& opt,
                     const std::vector<foundry::NpyArray>& outputs, nlohmann::json& report) {
  std::vector<foundry::NpyArray> expected = read_npy_folder("--expected", opt.expected);
  if (expected.size() != outputs.size())
    throw foundry::UserError("found " + std::to_string(expected.size()) + " expected outputs in " + opt.expected +
                             ", the model has " + std::to_string(outputs.size()));
  if (!opt.json) std::printf("%s\n", tolerance_line(opt, expected).c_str());
  bool all_pass = true;
  for (size_t k = 0; k < outputs.size(); ++k) {
    foundry::Tolerance tol = tolerance_for(opt, expected[k].dtype);
    foundry::Comparison c = foundry::compare_arrays(outputs[k], expected[k], tol);
    all_pass = all_pass && c.pass;
    report["outputs"].push_back(comparison_json(c, expected[k], tol, k, output_name(model, k)));
    if (!opt.json)
      std::printf("output %zu (%s): %s: %s\n", k, output_name(model, k).c_str(), c.pass ? "PASS" : "FAIL",
                  foundry::comparison_summary(c, expected[k]).c_str());
  }
  return all_pass;
}

// libgomp spins about 300,000 times in a barrier before it sleeps. On a machine whose cores other
// processes hold, those spins take the time slices that the threads being waited for need, and a
// run takes 10 to 1000 times longer (README: "Threads on a busy machine"); 10,000 spins keep an
// idle machine's speed. Read once, when libgomp starts: set before the model loads it, and only
// when the user chose no wait policy.
void default_openmp_wait() {
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) setenv("GOMP_SPINCOUNT", "10000", 1);
}

int run(const Options& opt) {
  default_openmp_wait();
  if (opt.threads > 0) set_thread_count(opt.threads);
  foundry::LoadedModel model(opt.model_dir);
  // NAME_run takes host tensors on either device: --device only confirms which one the folder is for.
  if (!opt.device.empty() && opt.device != model.device())
    throw foundry::UserError(opt.model_dir + " was compiled for --device " + model.device() + ", not " + opt.device);
  nlohmann::json report;
  report["outputs"] = nlohmann::json::array();
  std::vector<foundry::NpyArray> inputs =
      opt.inputs.empty() ? random_inputs(model, opt, report) : given_inputs(model, opt.inputs);
  std::vector<foundry::NpyArray> outputs = model.run(inputs);
  bool all_pass = opt.expected.empty() || compare_outputs(model, opt, outputs, report);
  if (!opt.save_outputs.empty()) save_outputs(opt.save_outputs, outputs);
  if (opt.bench > 0) {
    BenchStats s = benchmark(model, inputs, opt);
    report["median_ms"] = s.median_ms;
    report["p10_ms"] = s.p10_ms;
    report["min_ms"] = s.min_ms;
    report["p90_ms"] = s.p90_ms;
    report["runs"] = opt.bench;
    if (!opt.json)
      std::printf("benchmark: median %.4f ms, p10 %.4f ms, p90 %.4f ms over %d runs\n", s.median_ms, s.p10_ms,
                  s.p90_ms, opt.bench);
  }
  if (opt.profile > 0) report["profile"] = profile(model, inputs, opt.profile, opt.warmup, opt.json);
  report["pass"] = all_pass;
  if (opt.json) std::cout << report.dump() << "\n";
  return all_pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"foundry-run: run a model compiled by foundryc on .npy inputs or random ones"};
  Options opt;
  app.add_option("model", opt.model_dir, "the output folder of foundryc (model.so, manifest.json)")->required();
  app.add_option("--inputs", opt.inputs,
                 "folder of inputs 0.npy, 1.npy, ... in graph order (default: random inputs of the model's shapes)");
  app.add_option("--expected", opt.expected,
                 "folder of expected outputs 0.npy, 1.npy, ... to compare with (needs --inputs)");
  app.add_option("--atol", opt.atol,
                 "absolute tolerance: an element passes when |out - ref| <= atol + rtol*|ref| (default by dtype: 1e-4 "
                 "for float32)");
  app.add_option("--rtol", opt.rtol, "relative tolerance, added to atol as above (default by dtype: 1e-4 for float32)");
  app.add_option("--save-outputs", opt.save_outputs, "write the outputs as .npy files into this folder");
  CLI::Option* bench = app.add_option("--bench", opt.bench,
                 "time N runs and report the median, p10 and p90 (a CUDA model: NAME_run_cuda on inputs already on "
                 "the GPU, each call followed by a stream synchronize)");
  app.add_option("--profile", opt.profile,
                 "time each kernel and library call over N runs (a CUDA model: with CUDA events) and list them, "
                 "slowest first, with the threads each CPU step ran on");
  app.add_option("--warmup", opt.warmup, "untimed runs before benchmarking (default 3)");
  app.add_option("--threads", opt.threads, "threads the model may use");
  app.add_option("--cpu", opt.cpu,
                 "--bench with --threads 1: pin the calling thread to this CPU after the warm-up runs, so that runs "
                 "can be timed on the same core (not with more threads: the threads OpenMP starts after the pin would "
                 "inherit it)")
      ->check(CLI::NonNegativeNumber)
      ->needs(bench);
  app.add_option("--gap-us", opt.gap_us,
                 "--bench: pause this many microseconds (untimed) before each timed run, as a service waits for "
                 "requests (on a busy machine a process that runs back to back shares time slices with the others; "
                 "one that waits between runs is woken ahead of them)")
      ->check(CLI::Range(0, 1000000))
      ->needs(bench);
  app.add_option("--device", opt.device,
                 "the device the model was compiled for (cpu or cuda; checked against manifest.json; default: its own)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", opt.seed, "seed of the random inputs made without --inputs (default 0)");
  app.add_flag("--json", opt.json, "print one JSON object instead of text");
  app.set_version_flag("--version", std::string("foundry-run ") + FOUNDRY_VERSION);
  if (std::optional<int> exit_code = foundry::cli::parse(app, argc, argv, "foundry-run")) return *exit_code;
  if (!opt.expected.empty() && opt.inputs.empty())
    return usage_error("--expected needs --inputs: random inputs have no expected outputs");
  if (opt.cpu >= 0 && opt.threads != 1)
    return usage_error("--cpu needs --threads 1: the threads OpenMP starts after the pin would inherit its CPU");
  try {
    return run(opt);
  } catch (const foundry::UserError& e) {
    foundry::cli::print_error("foundry-run", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foundry-run: internal error (this is a foundryc bug): %s\n",
                 foundry::printable_message(e.what()).c_str());
    return 3;
  }
}
