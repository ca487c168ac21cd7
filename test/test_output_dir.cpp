// The output folder (-o) against data loss and litter: an input inside the folder foundryc
// replaces is refused, a name as long as the file system allows works, concurrent writers of one
// folder all succeed and leave nothing beside it, and SIGINT/SIGTERM remove the work folder and
// end the compiler processes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace fs = std::filesystem;

namespace {

std::string pointwise() { return samples_dir() + "/pointwise/model.pt2"; }

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

void check_user_error(const ProcResult& r, const std::string& words) {
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.rfind("foundryc: error: ", 0) == 0);
  CHECK_THAT(r.err, Catch::Contains(words));
}

}  // namespace

TEST_CASE("output: an input inside the output folder is refused and kept", "[output][cli][fast]") {
  TempDir tmp("foundry_output_");
  const std::string out = tmp / "out";
  REQUIRE(run_foundryc({pointwise(), "-o", out, "--stop-after=frontend"}).exit_code == 0);

  SECTION("an archive inside it") {
    fs::copy_file(pointwise(), out + "/model.pt2");
    check_user_error(run_foundryc({out + "/model.pt2", "-o", out, "--stop-after=frontend"}), "inside the output folder");
    CHECK(fs::is_regular_file(out + "/model.pt2"));
    // Spelled another way: through "..", and with the output given as "out/".
    check_user_error(run_foundryc({out + "/../out/model.pt2", "-o", out + "/", "--stop-after=frontend"}),
                     "inside the output folder");
    CHECK(fs::is_regular_file(out + "/model.pt2"));
  }
  SECTION("an extracted archive folder inside it") {
    extract_archive(pointwise(), out + "/extracted");
    check_user_error(run_foundryc({out + "/extracted", "-o", out, "--stop-after=frontend"}), "inside the output folder");
    CHECK(fs::is_regular_file(out + "/extracted/model/models/model.json"));
  }
  SECTION("a bare model.json whose archive folder is inside it") {
    extract_archive(pointwise(), out + "/extracted");
    check_user_error(run_foundryc({out + "/extracted/model/models/model.json", "-o", out, "--stop-after=frontend"}),
                     "inside the output folder");
    CHECK(fs::is_regular_file(out + "/extracted/model/models/model.json"));
  }
  SECTION("inside the folder that keeps the dumps of a failed --dump-ir run") {
    fs::create_directories(out + ".failed");
    fs::copy_file(pointwise(), out + ".failed/model.pt2");
    check_user_error(run_foundryc({out + ".failed/model.pt2", "-o", out, "--dump-ir", "--stop-after=frontend"}),
                     "inside the output folder");
    CHECK(fs::is_regular_file(out + ".failed/model.pt2"));
  }
  SECTION("an output folder inside the input folder is fine") {
    extract_archive(pointwise(), tmp / "extracted");
    ProcResult r = run_foundryc({tmp / "extracted", "-o", tmp / "extracted/out", "--stop-after=frontend"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("output: a folder name of 240 characters works", "[output][cli][fast]") {
  TempDir tmp("foundry_output_");
  const std::string name(240, 'n');
  for (int round = 0; round < 2; ++round) {  // written, then replaced
    ProcResult r = run_foundryc({pointwise(), "-o", tmp / name, "--stop-after=codegen"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(fs::is_regular_file(tmp / (name + "/kernels.cpp")));
    CHECK(names_in(tmp.path()) == std::set<std::string>{name});
  }
  // The longest legal name, with --dump-ir's folder for a failed run.
  const std::string longest(255, 'l');
  ProcResult r = run_foundryc({pointwise(), "-o", tmp / longest, "--stop-after=frontend", "--dump-ir"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::is_regular_file(tmp / (longest + "/debug/graph.txt")));
}

TEST_CASE("output: concurrent writers of one folder all succeed and leave no litter", "[output][cli][fast]") {
  TempDir tmp("foundry_output_");
  const std::string out = tmp / "out";
  constexpr int kWriters = 6, kRounds = 40;
  std::vector<ProcResult> results(kWriters * kRounds);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w)
    writers.emplace_back([&, w] {
      for (int k = 0; k < kRounds; ++k)
        results[w * kRounds + k] = run_foundryc({pointwise(), "-o", out, "--stop-after=frontend", "--dump-ir"});
    });
  for (auto& t : writers) t.join();
  for (const auto& r : results) {
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
  }
  CHECK(names_in(tmp.path()) == std::set<std::string>{"out"});
  CHECK(fs::is_regular_file(out + "/debug/graph.txt"));
}

namespace {

// Runs foundryc in the background with a marker in its environment (its compiler processes
// inherit it), waits until a compiler process runs, sends `signal` to foundryc and reports what
// remains: "seen" when a compiler had started, "left:PID" for each process still holding the marker.
ProcResult interrupt_build(const std::string& out, const std::string& cache, const std::string& signal) {
  const std::string marker = "FOUNDRY_INTERRUPT_TEST=" + out;
  const std::string script =
      "marked() { grep -l -s -z -F -x \"$MARKER\" /proc/[0-9]*/environ | sed 's|/proc/||; s|/environ||' | grep -v -x \"$1\"; }\n"
      // Short probes (the compiler's --version, its -march=native macros) hold the marker too;
      // only a process compiling one of the generated sources counts as a compile in progress.
      "compiling() { for p in $(marked $1); do tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q '\\.cpp' && echo $p; done; }\n"
      // A background job of a script starts with SIGINT ignored: python puts back the default.
      "\"$PYTHON\" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \\\n"
      "  env \"$MARKER\" \"$FOUNDRYC\" \"$MODEL\" -o \"$OUT\" --cache-dir \"$CACHE\" --no-cache &\n"
      "pid=$!\n"
      "while kill -0 $pid 2>/dev/null; do [ -n \"$(compiling $pid)\" ] && echo seen && break; sleep 0.05; done\n"
      "kill -" + signal + " $pid\n"
      "wait $pid\n"
      "echo \"exit $?\"\n"
      "for p in $(marked none); do echo \"left:$p $(tr '\\0' ' ' < /proc/$p/cmdline)\"; done\n";
  return run_process({"/usr/bin/env", "MARKER=" + marker, "FOUNDRYC=" + foundryc_exe(), "PYTHON=" + python3(),
                      "MODEL=" + samples_dir() + "/small_cnn/model.pt2", "OUT=" + out, "CACHE=" + cache, "/bin/sh",
                      "-c", script},
                     300);
}

}  // namespace

TEST_CASE("output: SIGINT and SIGTERM remove the work folder and end the compilers", "[output][cli][fast]") {
  for (const char* signal : {"TERM", "INT"}) {
    TempDir tmp("foundry_output_");
    ProcResult r = interrupt_build(tmp / "out", tmp / "cache", signal);
    INFO("SIG" << signal << ": " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("seen"));                     // it was stopped while compiling
    CHECK_THAT(r.out, !Catch::Contains("exit 0"));                  // and did not finish
    CHECK_THAT(r.out, !Catch::Contains("left:"));                   // no compiler outlives it
    CHECK(names_in(tmp.path()) == std::set<std::string>{});         // no OUT.tmp-* (no cache written either)
  }
}
