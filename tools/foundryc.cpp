// foundryc: the command line. Exit codes: 0 success, 1 user error, 2 usage error, 3 internal error.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "foundry/build/cache.h"
#include "foundry/build/compile.h"
#include "foundry/driver/compare_buffers.h"
#include "foundry/driver/pipeline.h"
#include "foundry/ir/evaluate.h"
#include "foundry/ops/registry.h"
#include "foundry/runtime/compare.h"
#include "foundry/runtime/sample.h"
#include "foundry/support/error.h"
#include "foundry/support/interrupt.h"
#include "command_line.h"

namespace {

// Messages are one line, with the input's text made harmless (see printable_message).
void print_error(const std::string& msg) { foundry::cli::print_error("foundryc", msg); }

int usage_error(const std::string& msg) { return foundry::cli::usage_error("foundryc", msg); }

// Log lines name nodes, values and files of the archive: made printable as error messages are
// (with more room: -v lists a kernel's nodes).
class PrintableStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit PrintableStderrSink(bool clear_line) : clear_line_(clear_line) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    std::string line(formatted.data(), formatted.size());
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    std::cerr << (clear_line_ ? "\x1b[K" : "") << foundry::printable_message(line, 4 * foundry::kMaxMessageBytes)
              << '\n';
  }
  void flush_() override { std::cerr.flush(); }

 private:
  bool clear_line_;  // a progress line may be on the terminal's current line: erase it first
};

void setup_logging(int verbosity, bool quiet, bool progress_on_terminal) {
  auto logger =
      std::make_shared<spdlog::logger>("foundryc", std::make_shared<PrintableStderrSink>(progress_on_terminal));
  logger->set_pattern("foundryc: %l: %v");
  if (quiet) logger->set_level(spdlog::level::err);
  else if (verbosity >= 2) logger->set_level(spdlog::level::debug);
  else if (verbosity == 1) logger->set_level(spdlog::level::info);
  else logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

// Stage progress when stderr is a terminal: "[3/6] lower" rewritten in place, then one line with
// the total time. Each progress line ends with '\r' rather than starting with it, so whatever
// stderr prints next (a warning, a log line, the error) starts at column 0 and, erasing the line
// first, replaces it. Lines stay shorter than a terminal's 80 columns: a wrapped line would not
// be rewritten. Pipes and CI logs get none of it.
class Progress {
 public:
  explicit Progress(bool quiet) {
    const char* term = std::getenv("TERM");
    enabled_ = !quiet && isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0);
  }
  void stage(size_t index, size_t count, std::string_view name) {
    stage_ = "[" + std::to_string(index + 1) + "/" + std::to_string(count) + "] " + std::string(name);
    stage_start_ = std::chrono::steady_clock::now();
    if (enabled_) std::cerr << "\x1b[K" << stage_ << "\r" << std::flush;
  }
  // Within a stage: "[6/6] build: compiling kernels.cpp, wrapper.cpp (12.3 s)", so that a long
  // compile on a loaded machine does not look frozen.
  void activity(const std::string& what) {
    if (!enabled_) return;
    char time[32];
    std::snprintf(time, sizeof time, "%.1f s", seconds_since(stage_start_));
    std::string shown = what.size() > 56 ? what.substr(0, 53) + "..." : what;
    std::cerr << "\x1b[K" << stage_ << ": " << shown << " (" << time << ")\r" << std::flush;
  }
  void done(const foundry::PipelineResult& result) {
    if (!enabled_) return;
    char time[32];
    std::snprintf(time, sizeof time, "%.2f s", seconds_since(start_));
    std::cerr << "\x1b[Kfoundryc: wrote " << result.output_dir << " in " << time
              << (result.cache_hit ? " (compiled code from the cache)" : "") << std::endl;
  }
  bool enabled() const { return enabled_; }
  // Before an error message: no progress text left on its line.
  void clear() {
    if (enabled_) std::cerr << "\x1b[K" << std::flush;
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  bool enabled_ = false;
  std::string stage_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), stage_start_ = start_;
};

// --interpret: runs the unfused loop IR with the reference evaluator and compares its outputs.
int interpret(const std::string& input, const std::string& inputs_dir, const std::string& expected_dir) {
  foundry::ir::LoopProgram program = foundry::lower_for_evaluation(input);
  std::vector<foundry::NpyArray> outputs =
      foundry::ir::evaluate_program(program, foundry::read_npy_sequence(inputs_dir));
  if (expected_dir.empty()) {
    std::cout << "evaluated " << outputs.size() << " outputs\n";
    return 0;
  }
  std::vector<foundry::NpyArray> expected = foundry::read_npy_sequence(expected_dir);
  if (expected.size() != outputs.size())
    throw foundry::UserError("the model has " + std::to_string(outputs.size()) + " outputs, " + expected_dir + " holds " +
                             std::to_string(expected.size()));
  bool pass = true;
  for (size_t k = 0; k < outputs.size(); ++k) {
    foundry::Comparison c = foundry::compare_arrays(outputs[k], expected[k]);
    pass = pass && c.pass;
    std::cout << "output " << k << ": " << (c.pass ? "PASS: " : "FAIL: ") << foundry::comparison_summary(c, expected[k])
              << "\n";
  }
  return pass ? 0 : 1;
}

// --interpret --compare-with OUT: the first buffer where the debug build OUT and the reference
// evaluator part ways. Exit 1 when one differs, as a failed --expected comparison does.
int compare_with(const std::string& input, const std::string& inputs_dir, const std::string& compiled_dir) {
  foundry::BufferReport report = foundry::compare_with_debug_build(input, compiled_dir, inputs_dir);
  std::cout << foundry::format_buffer_report(report) << std::flush;
  return report.differences.empty() ? 0 : 1;
}

// --cache-stats, --cache-clear: what the compile cache holds, or emptying it.
int cache_command(const std::string& cache_dir, const std::string& max_size, bool clear) {
  uint64_t limit = max_size.empty() ? foundry::build::default_cache_limit()
                                    : foundry::build::parse_byte_size(max_size, "--cache-max-size");
  foundry::build::CompileCache cache(cache_dir.empty() ? foundry::build::default_cache_dir() : cache_dir, limit);
  if (clear) {
    foundry::build::CacheStats s = cache.clear();
    std::cout << "removed " << s.entries << " entries (" << s.bytes << " bytes) from " << cache.dir() << "\n";
    return 0;
  }
  foundry::build::CacheStats s = cache.stats();
  std::cout << "compile cache " << cache.dir() << ": " << s.entries << " entries, " << s.bytes << " bytes (limit "
            << cache.limit() << " bytes)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"foundryc: an ahead-of-time compiler for PyTorch torch.export models (.pt2)", "foundryc"};
  std::string input, output_dir;
  std::vector<std::string> emit = {"source", "so"};
  std::string stop_after;
  bool dump_ir = false, time_passes = false, quiet = false, list_ops = false;
  int verbosity = 0;

  app.add_option("INPUT", input, "a .pt2 archive, an extracted archive folder, or a models/model.json");
  app.add_option("-o,--output", output_dir, "output folder (default: <input stem>_out beside the input)");
  app.add_option("--emit", emit,
                 "what to produce (comma-separated): source (the C++ sources), so (model.so), "
                 "static (libmodel.a, for static linking: see manifest.json's link_flags)")
      ->delimiter(',')
      ->check(CLI::IsMember({"source", "so", "static"}))
      ->default_str("source,so");
  app.add_option("--stop-after", stop_after, "stop after this stage")
      ->check(CLI::IsMember(foundry::stage_names()));
  app.add_flag("--dump-ir", dump_ir, "write each stage's dump under OUTDIR/debug/");
  app.add_flag("--time-passes", time_passes, "print each stage's wall time");
  auto* verbose = app.add_flag("-v,--verbose", verbosity, "log progress to stderr (-vv: more)");
  app.add_flag("-q,--quiet", quiet, "only print errors")->excludes(verbose);
  app.add_flag("--list-ops", list_ops, "list the operators foundryc knows, with their schemas (each NAME(Tensor self, ...) -> Tensor also has its in-place form NAME_)");
  std::string name, cxx, cache_dir, target = "native", inputs_dir, expected_dir;
  bool no_fusion = false, no_cache = false, interpret_only = false;
  app.add_option("--name", name, "C symbol prefix of the model's API (default: from the input file name)");
  app.add_flag("--no-fusion", no_fusion, "one kernel per IR node, nothing inlined (for differential testing)");
  bool static_fallback = false;
  app.add_flag("--static-fallback", static_fallback,
               "when an op's lowering cannot keep a dynamic size, compile for the sizes recorded at export "
               "(with a warning) instead of failing");
  app.add_option("--cxx", cxx, "C++ compiler for model.so (default: $CXX, else g++, else clang++)");
  std::string cxx_launcher;
  app.add_option("--cxx-launcher", cxx_launcher,
                 "run each compile as PROGRAM COMPILER ARGS..., e.g. ccache or sccache (default: $FOUNDRY_CXX_LAUNCHER)");
  app.add_option("--cache-dir", cache_dir, "compile cache folder (default: $XDG_CACHE_HOME/foundry, else ~/.cache/foundry)");
  app.add_flag("--no-cache", no_cache, "neither read nor write the compile cache");
  std::string cache_max_size;
  bool cache_stats = false, cache_clear = false;
  app.add_option("--cache-max-size", cache_max_size,
                 "most bytes the compile cache keeps, e.g. 500M (default: $FOUNDRY_CACHE_MAX_SIZE, else 2G); "
                 "the least recently used entries go first");
  app.add_flag("--cache-stats", cache_stats, "print the compile cache's folder, entries, size and limit, and exit");
  app.add_flag("--cache-clear", cache_clear, "remove every entry of the compile cache, and exit");
  app.add_option("--target", target, "instruction set of the generated code")
      ->check(CLI::IsMember({"native", "avx2", "avx512", "generic"}));
  app.add_flag("--interpret", interpret_only,
               "run the model with the reference evaluator instead of compiling it (with --inputs)");
  app.add_option("--inputs", inputs_dir, "with --interpret: folder of inputs 0.npy, 1.npy, ...");
  app.add_option("--expected", expected_dir, "with --interpret: folder of expected outputs to compare with");
  std::string compare_dir;
  app.add_option("--compare-with", compare_dir,
                 "with --interpret: a debug build (--debug-buffers) to compare buffer by buffer with the evaluator; "
                 "names the first buffer that differs, its node, ATen origin and first differing element");
  bool debug_buffers = false;
  app.add_flag("--debug-buffers", debug_buffers,
               "debug build: every intermediate buffer is also an output, after the model's own (see manifest.json)");
  int threads = 0;
  app.add_option("--threads", threads,
                 "threads of the generated code: 0 (default) every core, or FOUNDRY_NUM_THREADS at run time; "
                 "1 no parallel loops at all")
      ->check(CLI::NonNegativeNumber);
  bool no_simd = false;
  app.add_flag("--no-simd", no_simd,
               "no explicit SIMD loops over foundry_vec.h: scalar loops with `omp simd` hints (for comparison)");
  std::string device = "cpu", cuda_arch = "sm_90";
  app.add_option("--device", device, "where the model runs: cpu (default) or cuda (an NVIDIA GPU; needs nvcc)");
  app.add_option("--cuda-arch", cuda_arch, "with --device cuda: the GPU architecture, sm_NN (default sm_90)");
  bool allow_tf32 = false;
  app.add_flag("--allow-tf32", allow_tf32,
               "with --device cuda: float32 convolutions and matrix products may use TF32 tensor cores (as PyTorch's "
               "cuDNN convolutions do by default): faster, with about 1e-3 relative error instead of float32's");
  std::string depfile;
  app.add_option("--depfile", depfile,
                 "also write a Make/Ninja depfile: OUTDIR/model.so (or manifest.json) and the input files it depends on");
  app.set_version_flag("--version", std::string("foundryc ") + FOUNDRY_VERSION);

  if (std::optional<int> exit_code = foundry::cli::parse(app, argc, argv, "foundryc")) return *exit_code;

  Progress progress(quiet);
  try {
    if (list_ops) {
      for (const foundry::OpInfo& op : foundry::all_ops()) std::cout << op.schema.text << "\n";
      std::cout.flush();
      return 0;
    }
    if (cache_stats || cache_clear) return cache_command(cache_dir, cache_max_size, cache_clear);
    if (input.empty()) return usage_error("INPUT is required");
    foundry::install_interrupt_cleanup();  // removes OUTDIR.tmp-*, ends the compilers

    setup_logging(verbosity, quiet, progress.enabled());
    if (interpret_only) {
      if (inputs_dir.empty()) return usage_error("--interpret needs --inputs DIR");
      if (!compare_dir.empty()) return compare_with(input, inputs_dir, compare_dir);
      return interpret(input, inputs_dir, expected_dir);
    }
    if (!compare_dir.empty()) return usage_error("--compare-with needs --interpret");
    foundry::PipelineOptions opts;
    opts.name = name;
    opts.fusion = !no_fusion;
    opts.static_fallback = static_fallback;
    opts.cxx = cxx;
    opts.cxx_launcher = cxx_launcher;
    opts.cache_dir = cache_dir;
    opts.threads = threads;
    opts.vectorize = !no_simd;
    opts.debug_buffers = debug_buffers;
    opts.use_cache = !no_cache;
    if (!cache_max_size.empty()) opts.cache_limit = foundry::build::parse_byte_size(cache_max_size, "--cache-max-size");
    // --target names an ISA level; -march takes a CPU: the oldest one with that level.
    opts.target = target == "avx2" ? "haswell" : target == "avx512" ? "skylake-avx512" : target == "generic" ? "x86-64" : target;
    opts.input = input;
    opts.output_dir = output_dir;
    opts.emit_source = std::find(emit.begin(), emit.end(), "source") != emit.end();
    opts.emit_so = std::find(emit.begin(), emit.end(), "so") != emit.end();
    opts.emit_static = std::find(emit.begin(), emit.end(), "static") != emit.end();
    if (!stop_after.empty()) opts.stop_after = foundry::stage_from_name(stop_after);
    opts.dump_ir = dump_ir;
    opts.depfile = depfile;
    opts.device = device;
    opts.cuda_arch = cuda_arch;
    opts.tf32 = allow_tf32;
    if (time_passes) opts.timing_out = &std::cerr;
    opts.on_stage = [&](size_t index, size_t count, std::string_view stage) { progress.stage(index, count, stage); };
    opts.on_activity = [&](const std::string& what) { progress.activity(what); };
    foundry::PipelineResult result = foundry::run_pipeline(opts);
    progress.done(result);
    spdlog::info("wrote {}", result.output_dir);
    return 0;
  } catch (const foundry::UserError& e) {
    progress.clear();
    print_error(e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Under a memory limit (ulimit -v, a container): the input asks for more than there is.
    progress.clear();
    print_error("out of memory (the model needs more memory than this process may use)");
    return 1;
  } catch (const foundry::InternalError& e) {
    progress.clear();
    print_error(std::string("internal error (this is a foundryc bug): ") + e.what());
    return 3;
  } catch (const std::exception& e) {
    progress.clear();
    print_error(std::string("internal error (this is a foundryc bug): ") + e.what());
    return 3;
  } catch (...) {
    progress.clear();
    print_error("internal error (this is a foundryc bug): unknown exception");
    return 3;
  }
}
