// The driver: the table of stages, run in order, and the output folder discipline (write to a
// fresh folder beside OUTDIR, rename it into place only on success).
#include "foundry/driver/pipeline.h"

#include <fcntl.h>
#include <limits.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>

#include <nlohmann/json.hpp>

#include "foundry/build/compile.h"
#include "foundry/codegen/model_name.h"
#include "foundry/runtime/foundry_c_api.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/driver/output_cache.h"
#include "foundry/frontend/frontend.h"
#include "foundry/graph/graph.h"
#include "foundry/ir/debug_buffers.h"
#include "foundry/ir/print.h"
#include "foundry/lower/lowering.h"
#include "foundry/passes/pipeline.h"
#include "foundry/sched/channels_last.h"
#include "foundry/sched/epilogue.h"
#include "foundry/sched/schedule.h"
#include "foundry/sched/storage_order.h"
#include "foundry/support/error.h"
#include "foundry/support/interrupt.h"

namespace foundry {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".foundryc-output";  // marks folders foundryc may replace

struct StageDef {
  Stage stage;
  const char* name;
  const char* dump;  // what --dump-ir writes for it under OUTDIR/debug/ ("": the outputs are the files)
};
constexpr std::array<StageDef, 6> kStageNames = {{
    {Stage::Frontend, "frontend", "graph.txt"},
    {Stage::Passes, "passes", "graph_post_passes.txt"},
    {Stage::Lower, "lower", "ir_pre_fusion.txt"},
    {Stage::Schedule, "schedule", "ir_post_fusion.txt"},
    {Stage::Codegen, "codegen", ""},
    {Stage::Build, "build", ""},
}};

// A run that stops before codegen writes no files of its own: only its dumps show anything. Said
// after it succeeds (an error is the whole story when it fails).
void warn_if_nothing_to_show(const PipelineOptions& opts) {
  if (!opts.stop_after || opts.dump_ir) return;
  const StageDef& last = kStageNames[static_cast<size_t>(*opts.stop_after)];
  if (*last.dump == '\0') return;
  spdlog::warn("--stop-after={} without --dump-ir writes nothing to look at (it only checks that the stages up to {} "
               "succeed); add --dump-ir for debug/{}",
               last.name, last.name, last.dump);
}

}  // namespace

std::string_view stage_name(Stage s) { return kStageNames[static_cast<size_t>(s)].name; }

std::optional<Stage> stage_from_name(std::string_view name) {
  for (const auto& d : kStageNames)
    if (name == d.name) return d.stage;
  return std::nullopt;
}

const std::vector<std::string>& stage_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& d : kStageNames) v.emplace_back(d.name);
    return v;
  }();
  return names;
}

std::string default_output_dir(const std::string& input) {
  fs::path p(input);
  if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  fs::path stem = p.stem();
  if (stem.empty() || stem == "." || stem == "..") stem = "model";
  return (p.parent_path() / (stem.string() + "_out")).string();
}

namespace {

// Everything the stages pass along; later stages add their values here.
struct PipelineState {
  std::optional<Graph> graph;
  std::optional<ir::LoopProgram> program;
  size_t model_outputs = 0;  // the program's outputs before --debug-buffers added the intermediates
  std::optional<sched::Schedule> schedule;
  std::optional<codegen::GeneratedModel> model;
  bool cache_hit = false;
};

// Where a stage writes: the fresh work folder, later renamed to OUTDIR.
struct StageContext {
  fs::path work_dir;
  bool dump_ir = false;

  void write_file(const fs::path& rel, const std::string& contents) const {
    fs::path p = work_dir / rel;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << contents;
    out.close();
    if (!out) throw UserError("cannot write " + display_path(p.string()));
  }
  void dump(const std::string& name, const std::string& contents) const {
    if (dump_ir) write_file(fs::path("debug") / name, contents);
  }
};

// The checks a loaded graph passes before anything runs on it, errors naming the file: the
// compiler and the reference evaluator (--interpret) refuse the same graphs in the same words.
void check_loaded_graph(const std::string& input, const Graph& g) {
  try {
    verify_graph(g);
    check_supported_ops(g);
  } catch (const UserError& e) {
    throw UserError(display_path(input) + ": " + e.what());
  }
}

void run_frontend(const PipelineOptions& opts, PipelineState& state, const StageContext& ctx) {
  Graph g = load_model(opts.input);
  spdlog::debug("frontend: {} inputs, {} nodes, {} outputs", g.inputs.size(), g.nodes.size(),
                g.outputs.size());
  try {
    check_loaded_graph(opts.input, g);
  } catch (const UserError&) {
    // Dump what was read, so that the mismatch can be looked at, then fail.
    ctx.dump("graph.txt", print_graph(g));
    throw;
  }
  ctx.dump("graph.txt", print_graph(g));
  state.graph = std::move(g);
}

// A compiled model keeps no state between runs: the updates a program makes to its buffers or
// inputs (torch.export's mutation outputs) are computed and dropped. Said once per update, since
// PyTorch's module would see them in its next call.
void warn_dropped_updates(const Graph& g) {
  for (const GraphOutput& o : g.outputs) {
    if (o.kind == OutputKind::BufferMutation)
      spdlog::warn("the model updates its buffer {} in place; a compiled model keeps no state: every run starts from "
                   "the exported value (a PyTorch module would see the update in its next call)",
                   quote_untrusted(o.target, 60));
    if (o.kind == OutputKind::UserInputMutation)
      spdlog::warn("the model updates its input {} in place; a compiled model leaves the caller's input as it was",
                   quote_untrusted(o.target, 60));
  }
}

void run_passes(const PipelineOptions& opts, PipelineState& state, const StageContext& ctx) {
  PassOptions options;
  options.device = opts.device;
  std::vector<PassReport> reports = run_graph_passes(*state.graph, options);
  warn_dropped_updates(*state.graph);
  if (opts.timing_out) *opts.timing_out << format_pass_reports(reports) << std::flush;
  ctx.dump("graph_post_passes.txt", print_graph(*state.graph));
}

void run_lower(const PipelineOptions& opts, PipelineState& state, const StageContext& ctx) {
  lower::LowerOptions options;
  options.dynamic_shapes = true;
  options.static_fallback = opts.static_fallback;
  options.libraries = lower::libraries_for(opts.device);
  options.reduction_split = lower::reduction_split_for(opts.device);
  state.program = lower::lower_graph(*state.graph, options);
  state.model_outputs = state.program->outputs.size();
  if (opts.debug_buffers) ir::expose_computed_buffers(*state.program);
  ctx.dump("ir_pre_fusion.txt", ir::print_program(*state.program));
}

void run_schedule(const PipelineOptions& opts, PipelineState& state, const StageContext& ctx) {
  sched::ScheduleOptions options;
  options.fusion = opts.fusion;
  // A CUDA model's matrix products are plain cuBLAS calls: activations stay in the kernels.
  if (opts.fusion && opts.device == "cpu") {
    // Layouts first: whether a 1x1 convolution is a product on NCHW operands, which takes no
    // activation, or a oneDNN call on channels-last ones, which does, depends on them.
    int kept = sched::keep_channels_last(*state.program);
    if (kept) spdlog::info("{} activation(s) stored channels last", kept);
    int folded = sched::fold_activations_into_externs(*state.program);
    if (folded) spdlog::info("{} activation(s) folded into the library calls before them", folded);
    int reordered = sched::loop_in_storage_order(*state.program);
    if (reordered) spdlog::info("{} pointwise node(s) loop in their output's storage order", reordered);
  }
  state.schedule = sched::schedule_program(*state.program, options);
  ctx.dump("ir_post_fusion.txt", sched::print_schedule(*state.schedule));
  if (opts.timing_out)
    *opts.timing_out << "foundryc: peak intermediate memory: " << ir::to_string(state.schedule->plan.arena_bytes)
                     << " bytes (" << ir::to_string(state.schedule->plan.unplanned_bytes) << " without reuse)\n";
}

std::string model_name(const PipelineOptions& opts) {
  if (!opts.name.empty()) {
    std::string problem = codegen::model_name_problem(opts.name);
    if (problem.empty()) return opts.name;
    std::string suggestion = codegen::sanitize_model_name(opts.name);
    if (!codegen::model_name_problem(suggestion).empty()) suggestion = codegen::sanitize_model_name("model_" + suggestion);
    throw UserError("--name " + quote_untrusted(opts.name) + " cannot be used: " + problem + " (try " + suggestion + ")");
  }
  fs::path p(opts.input);
  if (!p.has_filename()) p = p.parent_path();
  // A file name is no choice of symbols: one that would be reserved gets a prefix instead.
  std::string n = codegen::sanitize_model_name(p.stem().string());
  return codegen::model_name_problem(n).empty() ? n : codegen::sanitize_model_name("model_" + n);
}

// Each tensor's name, dtype, shape (a dynamic size as its expression, "s0") and example_shape: the
// sizes of the inputs torch.export ran with (what foundry-run's random inputs take).
nlohmann::json tensor_list(const std::vector<const ir::Buffer*>& bufs, const std::vector<std::string>& names,
                           const std::vector<ir::SizeSymbol>& symbols) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t k = 0; k < bufs.size(); ++k) {
    nlohmann::json shape = nlohmann::json::array(), example = nlohmann::json::array();
    for (const auto& e : bufs[k]->sizes) {
      shape.push_back(e.is_const() ? nlohmann::json(e.const_value()) : nlohmann::json(ir::to_string(e)));
      example.push_back(ir::value_at_hints(e, symbols));
    }
    list.push_back({{"name", names[k]}, {"dtype", std::string(dtype_name(bufs[k]->dtype))}, {"shape", shape},
                    {"example_shape", example}});
  }
  return list;
}

// manifest.json's "weights": each constant buffer in program order, by its identifier in the
// generated code and its name in the archive, with where its storage lies in weights.bin (a
// storage several buffers view is stored once: they share its offset) and how the buffer views it.
nlohmann::json weights_list(const codegen::WeightsLayout& layout) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [buf, offset] : layout.offset_of) {
    nlohmann::json shape = nlohmann::json::array(), strides = nlohmann::json::array();
    for (const auto& e : buf->sizes) shape.push_back(e.const_value());
    for (const auto& e : buf->strides) strides.push_back(e.const_value());
    list.push_back({{"name", buf->name}, {"fqn", buf->fqn}, {"dtype", std::string(dtype_name(buf->dtype))},
                    {"shape", shape}, {"strides", strides}, {"storage_offset", buf->offset.const_value()},
                    {"offset", offset}, {"bytes", buf->data.size}});
  }
  return list;
}

// manifest.json's "debug_build" (--debug-buffers): how many outputs are the model's own, and for
// every computed buffer, in program order, the output holding it, the nodes that wrote it and the
// ATen nodes they came from (foundryc --compare-with reads it).
nlohmann::json debug_build_manifest(const ir::LoopProgram& program, size_t model_outputs) {
  nlohmann::json buffers = nlohmann::json::array();
  for (const ir::ComputedBuffer& c : ir::computed_buffers(program)) {
    auto it = std::find(program.outputs.begin(), program.outputs.end(), c.buffer);
    if (it == program.outputs.end()) continue;  // a rank the C API cannot describe
    nlohmann::json nodes = nlohmann::json::array(), aten_nodes = nlohmann::json::array();
    for (const ir::LoopNode* n : c.writers) {
      nodes.push_back("node" + std::to_string(n->id));
      for (const auto& o : n->origins) aten_nodes.push_back(o);
    }
    buffers.push_back({{"buffer", c.buffer->name}, {"output", it - program.outputs.begin()}, {"nodes", nodes},
                       {"aten_nodes", aten_nodes}});
  }
  return {{"model_outputs", model_outputs}, {"buffers", buffers}};
}

// manifest.json: what the folder holds, for tools and people.
nlohmann::json manifest(const PipelineOptions& opts, const PipelineState& state) {
  const ir::LoopProgram& program = *state.program;
  const sched::Schedule& schedule = *state.schedule;
  nlohmann::json kernels = nlohmann::json::array();
  int64_t bytes_moved = 0;
  for (const auto& step : schedule.steps) {
    sched::Traffic t = sched::step_traffic(step, schedule);
    bytes_moved += t.bytes_read + t.bytes_written;
    nlohmann::json nodes = nlohmann::json::array();
    auto add_origins = [&](const ir::LoopNode* n) {
      for (const auto& o : n->origins) nodes.push_back(o);
    };
    std::string name;
    if (step.is_extern) {
      name = "extern_" + ir::extern_name(step.extern_node->call);
      add_origins(step.extern_node);
    } else {
      name = step.kernel.name;
      for (const auto& m : step.kernel.members) add_origins(m.node);
      for (const auto* n : step.kernel.inlined) add_origins(n);
    }
    kernels.push_back({{"name", name}, {"extern", step.is_extern}, {"aten_nodes", nodes},
                       {"bytes_read", t.bytes_read}, {"bytes_written", t.bytes_written}});
  }
  nlohmann::json m = {
      {"name", state.model->name},
      {"foundryc_version", FOUNDRY_VERSION},
      {"inputs", tensor_list(program.inputs, program.input_names, program.size_symbols)},
      {"outputs", tensor_list(program.outputs, program.output_names, program.size_symbols)},
      {"kernels", kernels},
      {"bytes_moved", bytes_moved},
      {"fusion", opts.fusion},
      {"peak_intermediate_bytes", ir::value_at_hints(schedule.plan.arena_bytes, schedule.size_symbols)},
      {"weights_bytes", state.model->weights.total_bytes},
      {"weights", weights_list(state.model->weights)},
  };
  if (opts.debug_buffers) m["debug_build"] = debug_build_manifest(program, state.model_outputs);
  // A CPU model's manifest stays as it was: no "device" means the CPU.
  if (opts.device == "cuda") {
    m["device"] = opts.device;
    m["cuda_arch"] = opts.cuda_arch;
    m["tf32"] = opts.tf32;
  }
  return m;
}

// The manifest as a file: archive names are UTF-8 as JSON has them, but one from a graph built
// otherwise could hold invalid bytes, which dump() would throw on; they become U+FFFD.
std::string manifest_text(const nlohmann::json& m) {
  return m.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void run_codegen(const PipelineOptions& opts, PipelineState& state, const StageContext& ctx) {
  codegen::KernelOptions kernel_options;
  kernel_options.threads = opts.threads;
  if (opts.threads > FOUNDRY_MAX_THREADS) {
    spdlog::warn("--threads {} is more than {} threads; the model uses {}", opts.threads, FOUNDRY_MAX_THREADS,
                 FOUNDRY_MAX_THREADS);
    kernel_options.threads = FOUNDRY_MAX_THREADS;
  }
  kernel_options.vectorize = opts.vectorize;
  kernel_options.lanes = codegen::vector_lanes(opts.target);
  kernel_options.device = opts.device;
  kernel_options.cuda_arch = opts.cuda_arch;
  kernel_options.tf32 = opts.tf32;
  state.model = codegen::generate_model(*state.program, *state.schedule, model_name(opts), kernel_options);
  codegen::write_model_files(*state.model, ctx.work_dir.string());
  ctx.write_file("manifest.json", manifest_text(manifest(opts, state)));
}

build::CompileOptions compile_options(const PipelineOptions& opts) {
  build::CompileOptions options;
  options.cxx = opts.cxx;
  options.cxx_launcher = opts.cxx_launcher;
  options.cache_dir = opts.cache_dir;
  options.use_cache = opts.use_cache;
  options.cache_limit = opts.cache_limit;
  options.target = opts.target;
  options.shared = !opts.emit_static || opts.emit_so;  // --emit=source --stop-after=build still builds model.so
  options.static_archive = opts.emit_static;
  options.on_activity = opts.on_activity;
  options.device = opts.device;
  options.cuda_arch = opts.cuda_arch;
  return options;
}

void run_build(const PipelineOptions& opts, PipelineState& state, const StageContext& ctx) {
  build::CompileResult r = build::compile_model(ctx.work_dir.string(), compile_options(opts));
  if (!r.cache_note.empty()) spdlog::info("build: {}", r.cache_note);
  state.cache_hit = r.cache_hit;
  nlohmann::json m = manifest(opts, state);
  m["compiler"] = r.compiler;
  if (!r.launcher.empty()) m["compiler_launcher"] = r.launcher;
  m["compile_flags"] = r.flags;
  m["hash"] = r.key;
  if (opts.emit_static) m["link_flags"] = r.link_flags;  // what a program linking libmodel.a adds
  ctx.write_file("manifest.json", manifest_text(m));
  if (!opts.emit_source)
    for (const char* f : {"kernels.cpp", "wrapper.cpp", "externs.cpp", "foundry_dnnl.cpp", "CMakeLists.txt"}) fs::remove(ctx.work_dir / f);
  spdlog::info("build: {}", r.cache_hit ? "cache hit, the compiler did not run" : "compiled with " + r.compiler);
}

using StageFn = void (*)(const PipelineOptions&, PipelineState&, const StageContext&);

// The stages in order.
constexpr std::array<StageFn, 6> kStageFns = {{
    run_frontend,  // frontend: read and verify the archive
    run_passes,    // passes: clean the ATen graph
    run_lower,     // lower: ATen nodes to loop-level IR
    run_schedule,  // schedule: fusion, order, buffer plan
    run_codegen,   // codegen: kernels, wrapper, header, weights
    run_build,     // build: model.so (cached)
}};

// ---- the output folder ----

bool is_ours_or_empty(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir / kMarker, ec))) return true;
  return fs::is_empty(dir, ec) && !ec;
}

// Checks that `dir` may be replaced: absent, a symlink, an empty folder or one foundryc wrote.
void check_replaceable(const fs::path& dir) {
  std::error_code ec;
  fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st) || fs::is_symlink(st)) return;
  if (!fs::is_directory(st))
    throw UserError("output path " + display_path(dir.string()) + " exists and is not a folder");
  if (!is_ours_or_empty(dir))
    throw UserError("refusing to replace " + display_path(dir.string()) +
                    ": it is not empty and was not written by foundryc");
}

// The folders foundryc writes beside OUTDIR are named after it: OUTDIR.tmp-PID-RANDOM while it
// works, OUTDIR.old-PID-RANDOM while it swaps, OUTDIR.failed for --dump-ir's dumps. When OUTDIR's
// name is too long for those to fit in NAME_MAX, they are named after a prefix of it and a hash
// of the whole name instead.
constexpr size_t kLongestSuffix = 24;  // ".tmp-", a pid of up to 10 digits, "-", 8 hex digits

std::string sibling_stem(const fs::path& dir) {
  std::string name = dir.filename().string();
  if (name.size() + kLongestSuffix <= NAME_MAX) return name;
  return name.substr(0, NAME_MAX - kLongestSuffix - 17) + "-" + build::hash_hex({name}).substr(0, 16);
}

fs::path sibling(const fs::path& dir, const std::string& suffix) {
  return dir.parent_path() / (sibling_stem(dir) + suffix);
}

// Whether `path` is `dir` or lies inside it, both absolute and normal.
bool is_within(const fs::path& path, const fs::path& dir) {
  return std::mismatch(dir.begin(), dir.end(), path.begin(), path.end()).first == dir.end();
}

// Replacing `folder` as a whole would delete an input inside it: refused. Symbolic links in the
// input's path are followed; `folder` itself may be a link, and replacing a link leaves what it
// points to alone.
void check_input_outside(const std::string& input, const fs::path& folder) {
  std::error_code ec;
  fs::path in = fs::canonical(input, ec);
  if (ec) return;  // the frontend says what is wrong with it
  fs::path dir = fs::weakly_canonical(fs::absolute(folder, ec).parent_path(), ec) / folder.filename();
  if (!ec && is_within(in, dir))
    throw UserError("the input " + display_path(input) + " is inside the output folder " +
                    display_path(folder.string()) + ", which foundryc replaces as a whole: choose another -o");
}

// Serializes the swap of a folder with the other foundryc processes writing it, through a lock
// on the folder that holds it (flock on a folder: no lock file to leave behind).
class FolderLock {
 public:
  explicit FolderLock(const fs::path& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~FolderLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_;
};

std::string unique_suffix() {
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d-%08llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return buf;
}

// Moves `from` to `to`, replacing whatever `to` was (checked with check_replaceable). The old
// folder is renamed aside first and removed afterwards; remove_all does not follow symlinks.
// Interrupts wait until it is done, so that neither folder is lost half way.
void replace_dir(const fs::path& from, const fs::path& to) {
  InterruptsDeferred deferred;
  FolderLock lock(to.parent_path().empty() ? fs::path(".") : to.parent_path());
  check_replaceable(to);
  std::error_code ec;
  fs::path aside;
  if (fs::exists(fs::symlink_status(to, ec))) {
    aside = sibling(to, ".old-" + unique_suffix());
    fs::rename(to, aside, ec);
    if (ec) throw UserError("cannot replace " + display_path(to.string()) + ": " + ec.message());
  }
  fs::rename(from, to, ec);
  if (ec) {
    std::error_code ignored;
    if (!aside.empty()) fs::rename(aside, to, ignored);  // put the old one back
    throw UserError("cannot create " + display_path(to.string()) + ": " + ec.message());
  }
  if (!aside.empty()) fs::remove_all(aside, ec);
}

class WorkDir {
 public:
  explicit WorkDir(const fs::path& out_dir) {
    fs::path parent = out_dir.parent_path();
    if (parent.empty()) parent = ".";
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw UserError("cannot create " + display_path(parent.string()) + ": " + ec.message());
    for (int attempt = 0; attempt < 100; ++attempt) {
      path_ = sibling(out_dir, ".tmp-" + unique_suffix());
      if (fs::create_directory(path_, ec) && !ec) break;
      path_.clear();
    }
    if (path_.empty())
      throw UserError("cannot create a work folder beside " + display_path(out_dir.string()) + ": " + ec.message());
    interrupted_.emplace(fs::absolute(path_, ec).string());
    std::ofstream(path_ / kMarker) << "written by foundryc; safe to delete\n";
  }
  ~WorkDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;

  const fs::path& path() const { return path_; }
  // Moves the folder to `to`; the WorkDir no longer removes it.
  void commit(const fs::path& to) {
    replace_dir(path_, to);
    path_.clear();
    interrupted_.reset();
  }

 private:
  fs::path path_;
  std::optional<RemoveOnInterrupt> interrupted_;  // removes it when foundryc is interrupted
};

// Rethrows `original` (a UserError or InternalError) with `note` appended to its message; other
// exceptions are rethrown as they are.
[[noreturn]] void rethrow_with_note(std::exception_ptr original, const std::string& note) {
  try {
    std::rethrow_exception(original);
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) + note);
  } catch (const InternalError& e) {
    throw InternalError(std::string(e.what()) + note);
  }
}

// ---- --depfile ----

// A path as Make and Ninja read it in a depfile: spaces and '#' escaped with a backslash, '$' doubled.
std::string depfile_escape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == '#') out += '\\';
    if (c == '$') out += '$';
    if (c == '\n' || c == '\r') throw UserError("--depfile: cannot name a path with a newline: " + display_path(path));
    out += c;
  }
  return out;
}

// The files the frontend reads for `input`: the archive itself; every file of an extracted
// archive folder; or a bare models/model.json and the archive folder around it.
// The output folder (and its work folders beside it, OUTDIR.tmp-*) is skipped when it lies inside.
std::vector<std::string> depfile_inputs(const std::string& input, const fs::path& out_dir) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path out_abs = fs::weakly_canonical(fs::absolute(out_dir, ec), ec);
  const std::string out_prefix = sibling_stem(out_abs) + ".";
  auto is_output = [&](const fs::path& p) {
    fs::path abs = fs::weakly_canonical(fs::absolute(p, ec), ec);
    if (abs.parent_path() != out_abs.parent_path()) return false;
    std::string name = abs.filename().string();
    return name == out_abs.filename().string() || name.rfind(out_prefix, 0) == 0;
  };
  auto add_tree = [&](const fs::path& dir) {
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec) && is_output(it->path())) it.disable_recursion_pending();
      else if (it->is_regular_file(ec)) found.push_back(it->path().string());
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  };
  if (fs::is_directory(input, ec)) {
    add_tree(input);
    return files;
  }
  files.push_back(input);
  char magic[2] = {0, 0};
  std::ifstream(input, std::ios::binary).read(magic, 2);
  if (!(magic[0] == 'P' && magic[1] == 'K')) {  // not a ZIP: a bare model.json
    fs::path dir = fs::path(input).parent_path();
    if (dir.empty()) dir = ".";
    add_tree((dir / "..").lexically_normal());
    std::sort(files.begin() + 1, files.end());
    files.erase(std::unique(files.begin() + 1, files.end()), files.end());
  }
  return files;
}

// Writes "TARGET: INPUTS..." to opts.depfile (through a temporary file and a rename).
void write_depfile(const PipelineOptions& opts, const fs::path& out_dir, Stage last) {
  const char* built = opts.emit_static && !opts.emit_so ? "libmodel.a" : "model.so";
  const char* target = last >= Stage::Build ? built : last >= Stage::Codegen ? "manifest.json" : kMarker;
  std::string text = depfile_escape((out_dir / target).string()) + ":";
  for (const auto& f : depfile_inputs(opts.input, out_dir)) text += " \\\n  " + depfile_escape(f);
  text += "\n";
  fs::path path(opts.depfile);
  fs::path tmp = path;
  tmp += ".tmp-" + unique_suffix();
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  std::error_code ec;
  if (out) fs::rename(tmp, path, ec);
  if (!out || ec) {
    fs::remove(tmp, ec);
    throw UserError("cannot write the depfile " + display_path(path.string()));
  }
}

// Adds `step`'s wall time since `t0` to the result, and prints it for --time-passes; returns it.
double record_time(PipelineResult& result, const PipelineOptions& opts, const std::string& step,
                   std::chrono::steady_clock::time_point t0) {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.timings.push_back({step, seconds});
  if (opts.timing_out) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "foundryc: time: %-9s %10.3f ms\n", step.c_str(), seconds * 1e3);
    *opts.timing_out << buf << std::flush;
  }
  return seconds;
}

}  // namespace

ir::LoopProgram lower_for_evaluation(const std::string& input) {
  Graph graph = load_model(input);
  check_loaded_graph(input, graph);
  run_graph_passes(graph);
  return lower::lower_graph(graph);
}

// --device and --cuda-arch, and nvcc when the run builds a CUDA model: said before any work.
void check_device(const PipelineOptions& opts, Stage last) {
  if (opts.device != "cpu" && opts.device != "cuda")
    throw UserError("unknown device " + quote_untrusted(opts.device, 40) + ": use --device cpu or --device cuda");
  if (opts.tf32 && opts.device != "cuda") throw UserError("--allow-tf32 needs --device cuda (TF32 is a GPU format)");
  if (opts.device != "cuda") return;
  if (!build::valid_cuda_arch(opts.cuda_arch))
    throw UserError("unknown CUDA architecture " + quote_untrusted(opts.cuda_arch, 40) +
                    ": use --cuda-arch sm_NN, such as sm_80 or sm_90 (sm_70 to sm_121)");
  if (opts.emit_static) throw UserError("--emit=static is not supported with --device cuda yet");
  if (last >= Stage::Build) build::find_nvcc();
}

PipelineResult run_pipeline(const PipelineOptions& opts) {
  PipelineResult result;
  fs::path out_dir = opts.output_dir.empty() ? fs::path(default_output_dir(opts.input)) : fs::path(opts.output_dir);
  if (!out_dir.has_filename()) out_dir = out_dir.parent_path();  // "out/" -> "out"
  if (!out_dir.has_filename() || out_dir.filename() == "." || out_dir.filename() == "..")
    throw UserError("output folder " + display_path(out_dir.string()) +
                    " must name a folder of its own (foundryc replaces it as a whole)");
  result.output_dir = out_dir.string();

  Stage last = opts.stop_after ? *opts.stop_after : opts.emit_so || opts.emit_static ? Stage::Build : Stage::Codegen;
  check_device(opts, last);
  check_input_outside(opts.input, out_dir);
  if (opts.dump_ir) check_input_outside(opts.input, sibling(out_dir, ".failed"));
  WorkDir work(out_dir);
  StageContext ctx{work.path(), opts.dump_ir};
  PipelineState state;

  // The output cache first: a hit is the whole compile.
  const build::CompileOptions build_options = compile_options(opts);
  const std::string outputs_key = last == Stage::Build ? output_cache_key(opts, model_name(opts), build_options) : "";
  if (!outputs_key.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    if (fetch_outputs(outputs_key, build_options, work.path())) {
      spdlog::info("cache hit: this archive was compiled with these options before, no stage ran");
      record_time(result, opts, "cache", t0);
      result.cache_hit = true;
      if (!opts.depfile.empty()) write_depfile(opts, out_dir, last);
      work.commit(out_dir);
      return result;
    }
  }
  std::optional<WarningRecorder> warnings;  // stored with the outputs, for a later hit to print
  if (!outputs_key.empty()) warnings.emplace();

  try {
    for (size_t i = 0; i <= static_cast<size_t>(last); ++i) {
      Stage stage = kStageNames[i].stage;
      std::string name(stage_name(stage));
      if (!kStageFns[i]) throw UserError("stage " + name + " is not implemented yet");
      if (opts.on_stage) opts.on_stage(i, static_cast<size_t>(last) + 1, name);
      spdlog::info("running stage {}", name);
      auto t0 = std::chrono::steady_clock::now();
      kStageFns[i](opts, state, ctx);
      double seconds = record_time(result, opts, name, t0);
      spdlog::info("stage {} done in {:.3f} ms", name, seconds * 1e3);
    }
  } catch (const std::exception&) {
    if (!opts.dump_ir) throw;  // ~WorkDir removes the partial output
    std::exception_ptr original = std::current_exception();
    fs::path failed = sibling(out_dir, ".failed");
    std::string note;
    try {
      work.commit(failed);
      note = " (debug dumps so far are in " + display_path(failed.string()) + "/)";
    } catch (const std::exception& e) {
      note = std::string(" (the debug dumps could not be kept: ") + e.what() + ")";
    }
    rethrow_with_note(original, note);
  }
  result.cache_hit = state.cache_hit;
  if (warnings) store_outputs(outputs_key, build_options, work.path(), warnings->warnings());
  if (!opts.depfile.empty()) write_depfile(opts, out_dir, last);
  work.commit(out_dir);
  warn_if_nothing_to_show(opts);
  return result;
}

}  // namespace foundry
