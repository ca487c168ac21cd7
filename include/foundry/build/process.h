// Running a program without a shell: argv in, exit status and captured output back.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace foundry::build {

struct ProcessResult {
  int exit_code = -1;     // 128 + signal when killed by a signal; 127 when it could not start
  std::string output;     // stdout and stderr, interleaved
  double seconds = 0;     // wall time from its start until its output closed
};

// Called while programs run, about every quarter second and whenever one ends: which of them are
// still running.
using WhileRunning = std::function<void(const std::vector<bool>& running)>;

// `cwd`: the folder the program runs in (empty: this process's). argv[0] is looked up on PATH
// when it has no '/'; a relative path in it is taken from `cwd`.
ProcessResult run_program(const std::vector<std::string>& argv, const std::string& cwd = "");

// Starts several programs at once and waits for all of them (parallel compiles).
std::vector<ProcessResult> run_programs(const std::vector<std::vector<std::string>>& argvs, const std::string& cwd = "",
                                        const WhileRunning& while_running = {});

}  // namespace foundry::build
