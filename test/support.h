// Helpers shared by all tests: where the corpus and samples are, running foundryc and other
// processes, temporary folders, and checks of generated text.
#pragma once
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace foundry::test {

// The test corpus: $FOUNDRY_CORPUS if set, else the path CMake baked in (../shared/corpus).
std::string corpus_dir();
// True when corpus_dir() holds the corpus (its models/ folder exists).
bool corpus_available();
// Call at the top of a test that needs the corpus:
//   if (!require_corpus()) return;
// Corpus present: returns true. Missing: FAILs the test, unless FOUNDRY_NO_CORPUS=1 is set, in
// which case it WARNs loudly and returns false (the test should then skip itself).
bool require_corpus();

// The project's test/ folder and samples/ folder (from the source tree, not the corpus).
std::string test_source_dir();
std::string samples_dir();
// A sample's file (by default its model.pt2): samples/NAME/FILE when the project has that sample,
// else the corpus's models/NAME/FILE.
std::string sample_file(const std::string& name, const std::string& file = "model.pt2");
// The model compiled into OUT computes the bundled sample's expected outputs (PyTorch's),
// within the corpus tolerance (CHECKs, one per output).
void check_matches_pytorch(const std::string& sample, const std::string& out);
// /usr/bin/python3 if it exists, else "python3" (found on PATH).
std::string python3();
// python3 with `args`, as a command that can load a compiled model (under AddressSanitizer, with
// its runtime preloaded).
std::vector<std::string> python_command(std::vector<std::string> args);

struct ProcResult {
  int exit_code = -1;  // the exit status; 128 + N when killed by signal N
  std::string out, err;
  int term_signal = 0;     // the signal that ended the process, 0 if it exited
  bool timed_out = false;  // killed by run_process after timeout_seconds
};

// Runs argv[0] (looked up on PATH when it has no '/') with argv, no shell, stdin from /dev/null,
// capturing stdout and stderr. The child gets its own process group; on timeout the whole group
// is killed with SIGKILL. Failure to start the program reads as exit code 127 and a message on err.
ProcResult run_process(const std::vector<std::string>& argv, int timeout_seconds = 300);
// The compile cache of this test run: tests never reuse one from an earlier run. Every compile
// shares one fresh folder, that of the ctest run ($FOUNDRY_TEST_CACHE, emptied when the run
// starts: test/CMakeLists.txt) or else this process's, so that a model compiled by several tests,
// and the runtime object and precompiled headers, are compiled once.
std::string test_cache_dir();
// run_process({FOUNDRYC_EXE, args...}), with --cache-dir test_cache_dir() unless args name
// --cache-dir or --no-cache.
ProcResult run_foundryc(std::vector<std::string> args, int timeout_seconds = 300);
// run_foundryc, REQUIRing that foundryc succeeds (the command and its stderr shown when not).
ProcResult run_foundryc_ok(std::vector<std::string> args, int timeout_seconds = 300);
std::string foundryc_exe();
std::string foundry_run_exe();

// A fresh directory $TMPDIR/<prefix>XXXXXX (or /tmp/...). Throws std::runtime_error on failure.
std::string make_temp_dir(const std::string& prefix);

// A temporary directory removed (recursively) on destruction; kept if FOUNDRY_KEEP_TEMP=1.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "foundry_test_");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Runs a sample folder (an archive, inputs/ and expected/ from PyTorch) both ways: through the
// reference evaluator (`foundryc ARCHIVE --interpret`) and compiled (`foundryc -o`, then
// `foundry-run`), each checked against expected/ at the default tolerance. Returns "" when both
// pass, else what the failing step printed. Use as CHECK(run_sample_both_ways(dir) == "").
std::string run_sample_both_ways(const std::string& dir, const std::string& archive = "model.pt2");

// Whole file as bytes; throws std::runtime_error if it cannot be read.
std::string read_file(const std::string& path);
// Creates or replaces the file; throws std::runtime_error on failure.
void write_file(const std::string& path, const std::string& contents);
// Writes `source`, a program over the runtime headers (include/foundry/runtime), as DIR/NAME.cpp,
// compiles it with OpenMP, oneDNN and SLEEF, REQUIRing that the compile succeeds; returns the
// program's path.
std::string build_runtime_program(const std::string& dir, const std::string& name, const std::string& source);
// Extracts a .pt2 (a ZIP) into `dir` with Python's zipfile (an implementation independent of
// ours); REQUIREs that it succeeds.
void extract_archive(const std::string& archive, const std::string& dir);

// How many times `what` occurs in `text` (overlapping occurrences counted).
size_t count_occurrences(const std::string& text, const std::string& what);

// FileCheck-style matching of generated text (a format check: what is there and in which order,
// not whether it computes the right values). `checks` holds one directive a line (blank lines
// and lines without a directive are skipped); each pattern is a literal substring, except that
// {{regex}} matches a regular expression (ECMAScript):
//   CHECK: p       p occurs at or after the end of the previous match
//   CHECK-NEXT: p  p occurs on the line after the previous match's line
//   CHECK-SAME: p  p occurs on the previous match's line, after it
//   CHECK-NOT: p   p does not occur between the previous match and the next one (or the end)
// Returns "" when every directive holds; else a message naming the first one that does not, the
// line where its search started and the text around it (or, for CHECK-NOT, where it occurred).
// Use as CHECK(file_check(text, checks) == "") so that Catch prints the message.
std::string file_check(const std::string& text, const std::string& checks);

// NaN and infinity, for expected values written by hand.
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace foundry::test

// Tests call these unqualified (corpus_dir(), run_foundryc(...), TempDir, ...).
using namespace foundry::test;  // NOLINT(google-build-using-namespace)
