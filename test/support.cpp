#include "support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "foundry/runtime/compare.h"
#include "foundry/runtime/loaded_model.h"
#include "foundry/runtime/sample.h"

#ifndef FOUNDRY_CORPUS_DEFAULT
#define FOUNDRY_CORPUS_DEFAULT "../shared/corpus"
#endif
#ifndef FOUNDRYC_EXE
#define FOUNDRYC_EXE "foundryc"
#endif
#ifndef FOUNDRY_TEST_DIR
#define FOUNDRY_TEST_DIR "test"
#endif

namespace fs = std::filesystem;

namespace foundry::test {

namespace {
std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}
}  // namespace

std::string corpus_dir() {
  std::string dir = env_or_empty("FOUNDRY_CORPUS");
  if (dir.empty()) dir = FOUNDRY_CORPUS_DEFAULT;
  return fs::path(dir).lexically_normal().string();
}

bool corpus_available() {
  std::error_code ec;
  return fs::is_directory(fs::path(corpus_dir()) / "models", ec);
}

bool require_corpus() {
  if (corpus_available()) return true;
  if (env_or_empty("FOUNDRY_NO_CORPUS") == "1") {
    WARN("************************************************************\n"
         "SKIPPED: the test corpus is missing at " << corpus_dir() << "\n"
         "(FOUNDRY_NO_CORPUS=1 is set, so this test is NOT checking anything)\n"
         "************************************************************");
    return false;
  }
  FAIL("the test corpus is missing at " << corpus_dir()
       << ": set FOUNDRY_CORPUS=/path/to/corpus, or FOUNDRY_NO_CORPUS=1 to skip corpus tests");
  return false;
}

std::string test_source_dir() {
  // scripts/gpu_test.sh --run: the test binary runs on another machine, its lists unpacked elsewhere.
  if (const char* d = std::getenv("FOUNDRY_TEST_SOURCE_DIR"); d && *d) return d;
  return FOUNDRY_TEST_DIR;
}

std::string samples_dir() {
  return (fs::path(FOUNDRY_TEST_DIR).parent_path() / "samples").lexically_normal().string();
}

std::string sample_file(const std::string& name, const std::string& file) {
  std::string local = samples_dir() + "/" + name + "/" + file;
  if (fs::exists(local)) return local;
  return corpus_dir() + "/models/" + name + "/" + file;
}

void check_matches_pytorch(const std::string& sample, const std::string& out) {
  LoadedModel m(out);
  std::vector<NpyArray> got = m.run(read_npy_sequence(samples_dir() + "/" + sample + "/inputs"));
  std::vector<NpyArray> want = read_npy_sequence(samples_dir() + "/" + sample + "/expected");
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) CHECK(compare_arrays(got[k], want[k]).pass);
}

std::string run_sample_both_ways(const std::string& dir, const std::string& archive) {
  const std::string model = dir + "/" + archive, inputs = dir + "/inputs", expected = dir + "/expected";
  ProcResult interpreted = run_foundryc({model, "--interpret", "--inputs", inputs, "--expected", expected});
  if (interpreted.exit_code != 0) return archive + " --interpret: " + interpreted.out + interpreted.err;
  TempDir tmp("foundry_sample_");
  ProcResult compiled = run_foundryc({model, "-o", tmp / "out"});
  if (compiled.exit_code != 0) return archive + " compile: " + compiled.out + compiled.err;
  ProcResult run = run_process({foundry_run_exe(), tmp / "out", "--inputs", inputs, "--expected", expected});
  if (run.exit_code != 0) return archive + " foundry-run: " + run.out + run.err;
  return "";
}

std::string python3() {
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

// Under scripts/sanitize.sh the models are built with AddressSanitizer, whose runtime must be the
// first library of the process that loads them: Python is not built with it, so it is preloaded
// (and leak checking, which Python's own allocations would fail, is off in that process).
std::vector<std::string> python_command(std::vector<std::string> args) {
  std::vector<std::string> argv;
#ifdef __SANITIZE_ADDRESS__
  ProcResult lib = run_process({"g++", "-print-file-name=libasan.so"});
  if (lib.exit_code == 0)
    argv = {"env", "LD_PRELOAD=" + lib.out.substr(0, lib.out.find('\n')), "ASAN_OPTIONS=detect_leaks=0"};
#endif
  argv.push_back(python3());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string foundryc_exe() { return FOUNDRYC_EXE; }
std::string foundry_run_exe() { return FOUNDRY_RUN_EXE; }

ProcResult run_process(const std::vector<std::string>& argv, int timeout_seconds) {
  ProcResult r;
  if (argv.empty()) throw std::invalid_argument("run_process: empty argv");

  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    throw std::runtime_error("pipe2 failed");
  }
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], devnull})
      if (fd >= 0) close(fd);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    // Restore default signal handling that the test runner may have changed.
    signal(SIGPIPE, SIG_DFL);
    execvp(cargv[0], cargv.data());
    const char msg[] = "run_process: cannot execute ";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    ignored = write(2, cargv[0], strlen(cargv[0]));
    ignored = write(2, "\n", 1);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, to avoid racing the child's own call
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (devnull >= 0) close(devnull);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);

  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::seconds(timeout_seconds);
  struct Stream {
    int fd;
    std::string* sink;
    bool open = true;
  } streams[2] = {{out_pipe[0], &r.out}, {err_pipe[0], &r.err}};

  auto drain = [](Stream& s) {
    char buf[65536];
    while (s.open) {
      ssize_t n = read(s.fd, buf, sizeof buf);
      if (n > 0) {
        s.sink->append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        s.open = false;
      } else if (errno == EINTR) {
        continue;
      } else {
        if (errno != EAGAIN && errno != EWOULDBLOCK) s.open = false;
        return;
      }
    }
  };

  int status = 0;
  bool reaped = false;
  while (streams[0].open || streams[1].open) {
    auto now = clock::now();
    if (now >= deadline) {
      r.timed_out = true;
      break;
    }
    pollfd fds[2];
    nfds_t nfds = 0;
    Stream* which[2];
    for (auto& s : streams)
      if (s.open) {
        fds[nfds] = {s.fd, POLLIN, 0};
        which[nfds++] = &s;
      }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    int rc = poll(fds, nfds, static_cast<int>(std::min<long long>(left, 200)));
    if (rc < 0 && errno != EINTR) break;
    for (nfds_t i = 0; i < nfds; ++i)
      if (fds[i].revents) drain(*which[i]);
    // The child may have exited while a grandchild keeps the pipes open: take what is there
    // and stop waiting.
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      for (auto& s : streams) drain(s);
      break;
    }
  }
  if (r.timed_out) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  if (!reaped) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.term_signal = WTERMSIG(status);
    r.exit_code = 128 + r.term_signal;
  }
  return r;
}

std::string test_cache_dir() {
  static const std::string cache = [] {
    std::string shared = env_or_empty("FOUNDRY_TEST_CACHE");
    if (!shared.empty()) return shared;
    static TempDir own("foundry_test_cache_");
    return own.path();
  }();
  return cache;
}

ProcResult run_foundryc(std::vector<std::string> args, int timeout_seconds) {
  if (std::find(args.begin(), args.end(), "--cache-dir") == args.end() &&
      std::find(args.begin(), args.end(), "--no-cache") == args.end())
    args.insert(args.end(), {"--cache-dir", test_cache_dir()});
  args.insert(args.begin(), foundryc_exe());
  return run_process(args, timeout_seconds);
}

ProcResult run_foundryc_ok(std::vector<std::string> args, int timeout_seconds) {
  ProcResult r = run_foundryc(args, timeout_seconds);
  std::string command = "foundryc";
  for (const std::string& a : args) command += " " + a;
  INFO(command << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

std::string make_temp_dir(const std::string& prefix) {
  std::string base = env_or_empty("TMPDIR");
  if (base.empty()) base = "/tmp";
  std::string templ = base + "/" + prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data()))
    throw std::runtime_error("mkdtemp(" + templ + ") failed: " + std::strerror(errno));
  return std::string(buf.data());
}

TempDir::TempDir(const std::string& prefix) : path_(make_temp_dir(prefix)) {}

TempDir::~TempDir() {
  if (path_.empty()) return;
  if (env_or_empty("FOUNDRY_KEEP_TEMP") == "1") return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

TempDir::TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path);
  return ss.str();
}

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot create " + path);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string build_runtime_program(const std::string& dir, const std::string& name, const std::string& source) {
  const std::string cpp = dir + "/" + name + ".cpp", exe = dir + "/" + name;
  write_file(cpp, source);
  ProcResult cc = run_process({"c++", "-std=c++17", "-fopenmp", "-I", test_source_dir() + "/../include/foundry/runtime", cpp,
                               "-o", exe, "-ldnnl", "-lsleef"});
  INFO(cc.err);
  REQUIRE(cc.exit_code == 0);
  return exe;
}

void extract_archive(const std::string& archive, const std::string& dir) {
  ProcResult r = run_process(
      {python3(), "-c", "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])", archive, dir});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

size_t count_occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// --- file_check ----------------------------------------------------------------------------------

namespace {

struct Directive {
  enum class Kind { Check, Next, Same, Not };
  Kind kind = Kind::Check;
  std::regex pattern;
  std::string written;  // the directive as written, for messages
};

// A pattern's regular expression: the text literally, {{...}} as a regular expression.
std::regex pattern_regex(const std::string& pattern) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  std::string re;
  size_t pos = 0;
  while (pos < pattern.size()) {
    size_t open = pattern.find("{{", pos), close = open == std::string::npos ? open : pattern.find("}}", open + 2);
    if (close == std::string::npos) open = pattern.size();
    re += std::regex_replace(pattern.substr(pos, open - pos), special, R"(\$&)");
    if (open == pattern.size()) break;
    re += "(?:" + pattern.substr(open + 2, close - open - 2) + ")";
    pos = close + 2;
  }
  return std::regex(re);
}

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<Directive> parse_checks(const std::string& checks) {
  static const std::vector<std::pair<std::string, Directive::Kind>> prefixes = {
      {"CHECK:", Directive::Kind::Check},
      {"CHECK-NEXT:", Directive::Kind::Next},
      {"CHECK-SAME:", Directive::Kind::Same},
      {"CHECK-NOT:", Directive::Kind::Not}};
  std::vector<Directive> out;
  std::istringstream lines(checks);
  for (std::string line; std::getline(lines, line);) {
    line = trimmed(line);
    for (const auto& [prefix, kind] : prefixes)
      if (line.rfind(prefix, 0) == 0) out.push_back({kind, pattern_regex(trimmed(line.substr(prefix.size()))), line});
  }
  return out;
}

size_t line_start(const std::string& text, size_t pos) {
  size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
  return nl == std::string::npos ? 0 : nl + 1;
}

size_t line_end(const std::string& text, size_t pos) { return std::min(text.find('\n', pos), text.size()); }

size_t line_number(const std::string& text, size_t pos) {
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
}

// Up to `count` numbered lines of `text` from the one holding `pos`.
std::string excerpt(const std::string& text, size_t pos, int count = 4) {
  std::string out;
  for (size_t start = line_start(text, pos); start < text.size() && count-- > 0;) {
    size_t end = line_end(text, start);
    out += "  " + std::to_string(line_number(text, start)) + " | " + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out.empty() ? "  (end of text)\n" : out;
}

struct Span {
  size_t begin = 0, end = 0;
};

std::optional<Span> search(const std::string& text, const std::regex& re, size_t from, size_t to) {
  if (from > to) return std::nullopt;
  std::smatch m;
  auto first = text.begin() + static_cast<std::ptrdiff_t>(from), last = text.begin() + static_cast<std::ptrdiff_t>(to);
  if (!std::regex_search(first, last, m, re)) return std::nullopt;
  size_t begin = from + static_cast<size_t>(m.position(0));
  return Span{begin, begin + static_cast<size_t>(m.length(0))};
}

// The text a positive directive may match in, given the end of the previous match.
Span search_range(const std::string& text, Directive::Kind kind, size_t pos) {
  size_t eol = line_end(text, pos);
  if (kind == Directive::Kind::Same) return {pos, eol};
  if (kind == Directive::Kind::Next) return {std::min(eol + 1, text.size()), line_end(text, std::min(eol + 1, text.size()))};
  return {pos, text.size()};
}

// The first CHECK-NOT among `pending` that occurs in [from, to), as a failure message.
std::string forbidden_match(const std::string& text, const std::vector<const Directive*>& pending, size_t from,
                            size_t to) {
  for (const Directive* d : pending)
    if (auto hit = search(text, d->pattern, from, to))
      return "\"" + d->written + "\" failed: it occurs on line " + std::to_string(line_number(text, hit->begin)) +
             ":\n" + excerpt(text, hit->begin, 1);
  return "";
}

}  // namespace

std::string file_check(const std::string& text, const std::string& checks) {
  std::vector<Directive> directives = parse_checks(checks);
  if (directives.empty()) return "no CHECK directives in the check list";
  std::vector<const Directive*> pending_nots;
  size_t pos = 0;
  bool matched_before = false;
  for (const Directive& d : directives) {
    if (d.kind == Directive::Kind::Not) {
      pending_nots.push_back(&d);
      continue;
    }
    if (d.kind != Directive::Kind::Check && !matched_before)
      return "\"" + d.written + "\" has no previous match to follow (a bug in the check list)";
    Span range = search_range(text, d.kind, pos);
    std::optional<Span> hit = search(text, d.pattern, range.begin, range.end);
    if (!hit)
      return "\"" + d.written + "\" not matched; the search started on line " +
             std::to_string(line_number(text, range.begin)) + ":\n" + excerpt(text, range.begin);
    if (std::string failure = forbidden_match(text, pending_nots, pos, hit->begin); !failure.empty()) return failure;
    pending_nots.clear();
    pos = hit->end;
    matched_before = true;
  }
  return forbidden_match(text, pending_nots, pos, text.size());
}

}  // namespace foundry::test
