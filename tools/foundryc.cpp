// foundryc: the command line. Exit codes: 0 success, 1 user error, 2 usage error, 3 internal error.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "foundry/driver/pipeline.h"
#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace {

// Messages are one line: any newline from a nested message becomes a space.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

void print_error(const std::string& msg) { std::cerr << "foundryc: error: " << one_line(msg) << std::endl; }

int usage_error(const std::string& msg) {
  print_error(msg);
  std::cerr << "Run with --help for more information." << std::endl;
  return 2;
}

void setup_logging(int verbosity, bool quiet) {
  auto logger = spdlog::stderr_logger_mt("foundryc");
  logger->set_pattern("foundryc: %l: %v");
  if (quiet) logger->set_level(spdlog::level::err);
  else if (verbosity >= 2) logger->set_level(spdlog::level::debug);
  else if (verbosity == 1) logger->set_level(spdlog::level::info);
  else logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(logger);
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
  app.add_option("--emit", emit, "what to produce: source, so (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"source", "so"}))
      ->default_str("source,so");
  app.add_option("--stop-after", stop_after, "stop after this stage")
      ->check(CLI::IsMember(foundry::stage_names()));
  app.add_flag("--dump-ir", dump_ir, "write each stage's dump under OUTDIR/debug/");
  app.add_flag("--time-passes", time_passes, "print each stage's wall time");
  auto* verbose = app.add_flag("-v,--verbose", verbosity, "log progress to stderr (-vv: more)");
  app.add_flag("-q,--quiet", quiet, "only print errors")->excludes(verbose);
  app.add_flag("--list-ops", list_ops, "list the operators foundryc knows, with their schemas");
  app.set_version_flag("--version", std::string("foundryc ") + FOUNDRY_VERSION);

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
    if (list_ops) {
      for (const foundry::OpInfo& op : foundry::all_ops()) std::cout << op.schema.text << "\n";
      std::cout.flush();
      return 0;
    }
    if (input.empty()) return usage_error("INPUT is required");

    setup_logging(verbosity, quiet);
    foundry::PipelineOptions opts;
    opts.input = input;
    opts.output_dir = output_dir;
    opts.emit_source = std::find(emit.begin(), emit.end(), "source") != emit.end();
    opts.emit_so = std::find(emit.begin(), emit.end(), "so") != emit.end();
    if (!stop_after.empty()) opts.stop_after = foundry::stage_from_name(stop_after);
    opts.dump_ir = dump_ir;
    if (time_passes) opts.timing_out = &std::cerr;
    foundry::PipelineResult result = foundry::run_pipeline(opts);
    spdlog::info("wrote {}", result.output_dir);
    return 0;
  } catch (const foundry::UserError& e) {
    print_error(e.what());
    return 1;
  } catch (const foundry::InternalError& e) {
    print_error(std::string("internal error (this is a foundryc bug): ") + e.what());
    return 3;
  } catch (const std::exception& e) {
    print_error(std::string("internal error (this is a foundryc bug): ") + e.what());
    return 3;
  } catch (...) {
    print_error("internal error (this is a foundryc bug): unknown exception");
    return 3;
  }
}
