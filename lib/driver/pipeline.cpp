// The driver: the table of stages, run in order, and the output folder discipline (write to a
// fresh folder beside OUTDIR, rename it into place only on success).
#include "foundry/driver/pipeline.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>

#include "foundry/frontend/frontend.h"
#include "foundry/graph/graph.h"
#include "foundry/support/error.h"

namespace foundry {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".foundryc-output";  // marks folders foundryc may replace

struct StageDef {
  Stage stage;
  const char* name;
};
constexpr std::array<StageDef, 6> kStageNames = {{
    {Stage::Frontend, "frontend"},
    {Stage::Passes, "passes"},
    {Stage::Lower, "lower"},
    {Stage::Schedule, "schedule"},
    {Stage::Codegen, "codegen"},
    {Stage::Build, "build"},
}};

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

void run_frontend(const PipelineOptions& opts, PipelineState& state, const StageContext& ctx) {
  Graph g = load_model(opts.input);
  spdlog::debug("frontend: {} inputs, {} nodes, {} outputs", g.inputs.size(), g.nodes.size(),
                g.outputs.size());
  try {
    verify_graph(g);
  } catch (const UserError& e) {
    // Dump what was read, so that the mismatch can be looked at, then fail.
    ctx.dump("graph.txt", print_graph(g));
    throw UserError(display_path(opts.input) + ": " + e.what());
  }
  ctx.dump("graph.txt", print_graph(g));
  try {
    check_supported_ops(g);
  } catch (const UserError& e) {
    throw UserError(display_path(opts.input) + ": " + e.what());
  }
  state.graph = std::move(g);
}

using StageFn = void (*)(const PipelineOptions&, PipelineState&, const StageContext&);

// The stages in order; nullptr marks a stage that is not implemented yet.
constexpr std::array<StageFn, 6> kStageFns = {{
    run_frontend,  // frontend
    nullptr,       // passes
    nullptr,       // lower
    nullptr,       // schedule
    nullptr,       // codegen
    nullptr,       // build
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

std::string unique_suffix() {
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d-%08llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return buf;
}

// Moves `from` to `to`, replacing whatever `to` was (checked with check_replaceable). The old
// folder is renamed aside first and removed afterwards; remove_all does not follow symlinks.
void replace_dir(const fs::path& from, const fs::path& to) {
  check_replaceable(to);
  std::error_code ec;
  fs::path aside;
  if (fs::exists(fs::symlink_status(to, ec))) {
    aside = to.parent_path() / (to.filename().string() + ".old-" + unique_suffix());
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
      path_ = parent / (out_dir.filename().string() + ".tmp-" + unique_suffix());
      if (fs::create_directory(path_, ec) && !ec) break;
      path_.clear();
    }
    if (path_.empty())
      throw UserError("cannot create a work folder beside " + display_path(out_dir.string()) + ": " + ec.message());
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
  }

 private:
  fs::path path_;
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

}  // namespace

PipelineResult run_pipeline(const PipelineOptions& opts) {
  PipelineResult result;
  fs::path out_dir = opts.output_dir.empty() ? fs::path(default_output_dir(opts.input)) : fs::path(opts.output_dir);
  if (!out_dir.has_filename()) out_dir = out_dir.parent_path();  // "out/" -> "out"
  if (!out_dir.has_filename() || out_dir.filename() == "." || out_dir.filename() == "..")
    throw UserError("output folder " + display_path(out_dir.string()) +
                    " must name a folder of its own (foundryc replaces it as a whole)");
  result.output_dir = out_dir.string();

  Stage last = opts.stop_after ? *opts.stop_after : opts.emit_so ? Stage::Build : Stage::Codegen;
  WorkDir work(out_dir);
  StageContext ctx{work.path(), opts.dump_ir};
  PipelineState state;

  try {
    for (size_t i = 0; i <= static_cast<size_t>(last); ++i) {
      Stage stage = kStageNames[i].stage;
      std::string name(stage_name(stage));
      if (!kStageFns[i]) throw UserError("stage " + name + " is not implemented yet");
      spdlog::info("running stage {}", name);
      auto t0 = std::chrono::steady_clock::now();
      kStageFns[i](opts, state, ctx);
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      result.timings.push_back({name, seconds});
      if (opts.timing_out) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "foundryc: time: %-9s %10.3f ms\n", name.c_str(), seconds * 1e3);
        *opts.timing_out << buf << std::flush;
      }
      spdlog::info("stage {} done in {:.3f} ms", name, seconds * 1e3);
    }
  } catch (const std::exception&) {
    if (!opts.dump_ir) throw;  // ~WorkDir removes the partial output
    std::exception_ptr original = std::current_exception();
    fs::path failed = out_dir.parent_path() / (out_dir.filename().string() + ".failed");
    std::string note;
    try {
      work.commit(failed);
      note = " (debug dumps so far are in " + display_path(failed.string()) + "/)";
    } catch (const std::exception& e) {
      note = std::string(" (the debug dumps could not be kept: ") + e.what() + ")";
    }
    rethrow_with_note(original, note);
  }
  work.commit(out_dir);
  return result;
}

}  // namespace foundry
