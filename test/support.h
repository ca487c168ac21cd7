// Helpers shared by all tests: where the corpus and samples are, running foundryc and other
// processes, temporary folders.
#pragma once
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
// /usr/bin/python3 if it exists, else "python3" (found on PATH).
std::string python3();

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
// run_process({FOUNDRYC_EXE, args...}).
// Without --cache-dir or --no-cache among args, a fresh per-process cache folder is passed.
ProcResult run_foundryc(std::vector<std::string> args, int timeout_seconds = 300);
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

// Whole file as bytes; throws std::runtime_error if it cannot be read.
std::string read_file(const std::string& path);
// Creates or replaces the file; throws std::runtime_error on failure.
void write_file(const std::string& path, const std::string& contents);

}  // namespace foundry::test

// Tests call these unqualified (corpus_dir(), run_foundryc(...), TempDir, ...).
using namespace foundry::test;  // NOLINT(google-build-using-namespace)
