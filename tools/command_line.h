// The command-line conventions foundryc and foundry-run share: an error is one line on stderr,
// "PROGRAM: error: ...", with the input's text made harmless (printable_message); a usage error
// adds the --help hint and exits 2.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "foundry/support/error.h"

namespace foundry::cli {

inline void print_error(const char* program, const std::string& msg) {
  std::fprintf(stderr, "%s: error: %s\n", program, foundry::printable_message(msg).c_str());
  std::fflush(stderr);
}

inline int usage_error(const char* program, const std::string& msg) {
  print_error(program, msg);
  std::fprintf(stderr, "Run with --help for more information.\n");
  return 2;
}

// Parses the command line: nothing when the program goes on, else its exit code (0 after
// --help or --version, 2 after a usage error).
inline std::optional<int> parse(CLI::App& app, int argc, char** argv, const char* program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(program, e.what());
  }
  return std::nullopt;
}

}  // namespace foundry::cli
