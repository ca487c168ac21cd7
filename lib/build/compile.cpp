#include "foundry/build/compile.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "foundry/build/cache.h"
#include "foundry/build/process.h"
#include "foundry/support/error.h"
#include "foundry/support/files.h"

#include <spdlog/spdlog.h>

namespace fs = std::filesystem;

namespace foundry::build {
namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The path of `program` as the shell would run it (a name without '/' is looked up on PATH),
// symbolic links left as they are; "" when there is none.
std::string path_of(const std::string& program) {
  if (program.find('/') != std::string::npos) return access(program.c_str(), X_OK) == 0 ? program : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return dir + "/" + program;
  return "";
}

bool on_path(const std::string& program) { return !path_of(program).empty(); }

// The first line of `cxx --version`, and for -march=native the macros the compiler defines for
// this CPU (its instruction sets), so that a cache shared by machines with other CPUs never
// hands one of them code it cannot run.
std::string compiler_identity(const std::string& cxx, const std::string& target) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  const std::string id = cxx + "\n" + target;
  auto it = cache.find(id);
  if (it != cache.end()) return it->second;
  ProcessResult r = run_program({cxx, "--version"});
  std::string identity = r.output.substr(0, r.output.find('\n'));
  if (target.empty() || target == "native") {
    ProcessResult cpu = run_program({cxx, "-march=native", "-E", "-dM", "-x", "c++", "/dev/null"});
    identity += "\nnative: " + hash_hex({cpu.output});
  }
  return cache[id] = identity;
}

std::vector<std::string> compile_flags(const CompileOptions& options) {
  // -fwrapv: integer overflow wraps as in PyTorch's kernels instead of being undefined.
  // -fno-math-errno: math functions need not set errno (results are unchanged).
  // -fvisibility=hidden: only the C API is exported, so two models link into one program.
  // -fopenmp: parallel loops and `omp simd` lanes (GCC's runtime, libgomp, is the one oneDNN
  // uses: one thread pool per process).
  std::vector<std::string> flags = {"-std=c++17", "-O3", "-fPIC", "-fwrapv", "-fno-math-errno",
                                    "-fvisibility=hidden", "-fno-plt", "-fopenmp"};
  if (!options.target.empty() && options.target != "generic") flags.push_back("-march=" + options.target);
  return flags;
}

// `ar` with the D modifier: zero timestamps and owners, so that two compiles of one model give
// the same bytes.
void archive(const std::vector<std::string>& objects, const fs::path& to) {
  std::error_code ec;
  fs::remove(to, ec);  // `ar r` would add to an old archive
  std::vector<std::string> argv = {"ar", "rcsD", to.string()};
  argv.insert(argv.end(), objects.begin(), objects.end());
  ProcessResult r = run_program(argv);
  if (r.exit_code == 127) throw UserError("`ar` was not found: install binutils to build " + to.string());
  if (r.exit_code != 0) throw UserError("archiving " + to.string() + " failed:\n" + r.output);
}

// A command line as a shell would take it back (for -v: copied into a terminal, it runs).
std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "-_=+./,:@%") == std::string::npos;
    std::string quoted = "'";
    for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += (out.empty() ? "" : " ") + (plain ? a : quoted + "'");
  }
  return out;
}

// Runs the compiles (or the link) in the output folder, telling `on_activity` which are still
// running; with -v, logs each command line and each one's time.
std::vector<ProcessResult> run_build_steps(const std::vector<std::vector<std::string>>& argvs,
                                           const std::vector<std::string>& names, const std::string& verb,
                                           const fs::path& dir, const CompileOptions& options) {
  for (const auto& argv : argvs) spdlog::info("build: {}", shell_command(argv));
  WhileRunning progress;
  if (options.on_activity)
    progress = [&](const std::vector<bool>& running) {
      std::string what;
      for (size_t i = 0; i < running.size(); ++i)
        if (running[i]) what += (what.empty() ? "" : ", ") + names[i];
      if (!what.empty()) options.on_activity(verb + " " + what);
    };
  std::vector<ProcessResult> done = run_programs(argvs, dir.string(), progress);
  for (size_t i = 0; i < done.size(); ++i) {
    spdlog::info("build: {} {} took {:.2f} s", verb, names[i], done[i].seconds);
    if (done[i].exit_code == 0 && !done[i].output.empty()) spdlog::info("build: {} said:\n{}", names[i], done[i].output);
  }
  return done;
}

}  // namespace

namespace {
// XXH3-128 over length-prefixed parts (no ambiguity between parts), hex encoded.
class PartsHash {
 public:
  PartsHash() : state_(XXH3_createState()) { XXH3_128bits_reset(state_); }
  ~PartsHash() { XXH3_freeState(state_); }
  PartsHash(const PartsHash&) = delete;
  PartsHash& operator=(const PartsHash&) = delete;
  void length(uint64_t n) { XXH3_128bits_update(state_, &n, sizeof n); }
  void bytes(const void* p, size_t n) { XXH3_128bits_update(state_, p, n); }
  void part(std::string_view p) {
    length(p.size());
    bytes(p.data(), p.size());
  }
  std::string hex() const {
    XXH128_hash_t h = XXH3_128bits_digest(state_);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    return buf;
  }

 private:
  XXH3_state_t* state_;
};
}  // namespace

std::string hash_hex(const std::vector<std::string>& parts) {
  PartsHash h;
  for (const auto& p : parts) h.part(p);
  return h.hex();
}

std::string hash_bytes(std::string_view bytes) {
  PartsHash h;  // as hash_hex({bytes}), without the copy
  h.part(bytes);
  return h.hex();
}

std::string hash_file(const std::string& path) {
  std::string error;
  int fd = open_regular_file(path, error);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    return "";
  }
  // As hash_bytes of the contents, read in pieces into one reused buffer.
  PartsHash h;
  h.length(static_cast<uint64_t>(st.st_size));
  std::vector<char> buf(1 << 20);
  uint64_t done = 0;
  ssize_t got = 0;
  while ((got = ::read(fd, buf.data(), buf.size())) > 0) {
    h.bytes(buf.data(), static_cast<size_t>(got));
    done += static_cast<uint64_t>(got);
  }
  ::close(fd);
  return got < 0 || done != static_cast<uint64_t>(st.st_size) ? "" : h.hex();  // changed while read: none
}

namespace {
// The files in `dir` whose names `keep` accepts, in name order.
template <typename Keep>
std::vector<fs::path> files_in(const fs::path& dir, Keep keep) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (keep(entry.path())) found.push_back(entry.path());
  std::sort(found.begin(), found.end());
  return found;
}

// A cache key: `parts`, then each of `files` by name and content.
std::string files_key(std::vector<std::string> parts, const std::vector<fs::path>& files) {
  for (const auto& p : files) {
    parts.push_back(p.filename().string());
    parts.push_back(read_all(p));
  }
  return hash_hex(parts);
}

// A cache key: `parts` (what builds the model) and every generated source in `out` (the files
// ending in one of `exts`, and the headers).
std::string sources_key(std::vector<std::string> parts, const fs::path& out, const std::vector<std::string>& exts) {
  return files_key(std::move(parts), files_in(out, [&](const fs::path& p) {
                     std::string ext = p.extension().string();
                     return ext == ".h" || std::find(exts.begin(), exts.end(), ext) != exts.end();
                   }));
}

bool is_runtime_file(const fs::path& p, const std::string& ext) {
  return p.filename().string().rfind("foundry_", 0) == 0 && p.extension() == ext;
}

// `[launcher] compiler flags... -c SRC -o SRC.o` for each source (relative names in the output
// folder), with `prelude` (prelude_flags) after the flags of the model's own sources.
std::vector<std::vector<std::string>> compile_commands(const CompileResult& result, const std::vector<std::string>& sources,
                                                       const std::vector<std::string>& prelude = {}) {
  std::vector<std::vector<std::string>> commands;
  for (const auto& src : sources) {
    std::vector<std::string> argv;
    if (!result.launcher.empty()) argv.push_back(result.launcher);
    argv.push_back(result.compiler);
    argv.insert(argv.end(), result.flags.begin(), result.flags.end());
    if (!is_runtime_file(src, ".cpp")) argv.insert(argv.end(), prelude.begin(), prelude.end());
    argv.insert(argv.end(), {"-c", src, "-o", src + ".o"});
    commands.push_back(argv);
  }
  return commands;
}
}  // namespace

std::string find_compiler(const std::string& requested) {
  // --cxx, then $CXX, as build systems and AOTInductor honour them.
  if (!requested.empty()) {
    if (!on_path(requested)) throw UserError("the C++ compiler '" + requested + "' (--cxx) was not found");
    return requested;
  }
  if (const char* env = std::getenv("CXX"); env && *env) {
    if (!on_path(env))
      throw UserError("the C++ compiler '" + std::string(env) + "' ($CXX) was not found" +
                      (std::string(env).find(' ') != std::string::npos
                           ? " (it is one program: give a launcher such as ccache with --cxx-launcher)"
                           : ""));
    return env;
  }
  // Then g++: its OpenMP runtime (libgomp) is oneDNN's, and with glibc's vector math it
  // vectorizes the loops that call exp, log, tanh, erf... (README: "The C++ compiler").
  if (on_path("g++")) return "g++";
  if (on_path("clang++")) return "clang++";
  throw UserError("no C++ compiler found (tried $CXX, g++, clang++); install g++ or pass --cxx");
}

std::string host_compiler(const std::string& requested) {
  std::string cxx = find_compiler(requested);
  // It runs in the output folder: a relative path to it must not change meaning.
  return cxx.find('/') != std::string::npos ? fs::absolute(cxx).string() : cxx;
}

std::string find_launcher(const std::string& requested) {
  std::string launcher = requested, from = "--cxx-launcher";
  if (launcher.empty()) {
    const char* env = std::getenv("FOUNDRY_CXX_LAUNCHER");
    launcher = env ? env : "";
    from = "$FOUNDRY_CXX_LAUNCHER";
  }
  if (launcher.empty()) return "";
  if (!on_path(launcher))
    throw UserError("the compiler launcher '" + launcher + "' (" + from + ") was not found" +
                    (launcher.find(' ') != std::string::npos ? " (it is one program, such as ccache or sccache)" : ""));
  // It runs in the output folder: a relative path to it must not change meaning.
  return launcher.find('/') != std::string::npos ? fs::absolute(launcher).string() : launcher;
}

std::vector<std::string> model_link_flags(bool uses_dnnl, bool uses_lapack) {
  // --as-needed: a model whose kernels call no SLEEF function does not depend on libsleef.
  std::vector<std::string> flags = {"-fopenmp", "-Wl,--as-needed", "-lsleef"};
  if (uses_dnnl) flags.push_back("-ldnnl");
  if (uses_lapack) flags.push_back("-llapacke");
  return flags;
}

bool externs_use_lapack(const std::string& externs_cpp) {
  return fs::exists(externs_cpp) && read_all(externs_cpp).find("#include \"foundry_lapack.h\"") != std::string::npos;
}

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/foundry";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/foundry";
  return "/tmp/foundry-cache";
}

std::string find_nvcc() {
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    std::string p = std::string(home) + "/bin/nvcc";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  if (on_path("nvcc")) return "nvcc";
  if (access("/usr/local/cuda/bin/nvcc", X_OK) == 0) return "/usr/local/cuda/bin/nvcc";
  throw UserError("--device cuda needs the CUDA toolkit's nvcc, which was not found ($CUDA_HOME/bin, PATH, "
                  "/usr/local/cuda/bin): install the CUDA toolkit or set CUDA_HOME");
}

std::vector<std::string> cuda_link_flags(bool uses_cudnn) {
  std::vector<std::string> flags = {"-cudart", "shared", "-lcublas"};
  if (uses_cudnn) flags.push_back("-lcudnn");
  return flags;
}

bool wrapper_uses_cudnn(const std::string& wrapper_cpp) {
  return fs::exists(wrapper_cpp) && read_all(wrapper_cpp).find("#include \"foundry_cudnn.h\"") != std::string::npos;
}

namespace {

// The first of `dirs` holding `file`, or "".
std::string first_holding(const std::vector<fs::path>& dirs, const std::string& file) {
  std::error_code ec;
  for (const auto& d : dirs)
    if (fs::exists(d / file, ec)) return (d / file).string();
  return "";
}

std::string joined(const std::vector<fs::path>& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ", ") + d.string();
  return out;
}

// "MAJOR.MINOR.PATCHLEVEL" from cudnn_version.h beside cudnn.h ("" when it is not there).
std::string cudnn_version(const fs::path& header_dir) {
  std::stringstream lines(read_all(header_dir / "cudnn_version.h"));
  std::string version;
  for (std::string line; std::getline(lines, line);)
    for (const char* part : {"CUDNN_MAJOR ", "CUDNN_MINOR ", "CUDNN_PATCHLEVEL "})
      if (line.rfind(std::string("#define ") + part, 0) == 0)
        version += (version.empty() ? "" : ".") + line.substr(8 + std::strlen(part));
  return version;
}

}  // namespace

SearchDirs system_search_dirs() {
  return {{"/usr/local/include", "/usr/include/x86_64-linux-gnu", "/usr/include"},
          {"/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib"}};
}

std::string find_cudnn(const std::string& nvcc, const SearchDirs& system) {
  // The folders nvcc searches without -I and -L: its toolkit's (nvcc.profile: TOP is the folder
  // above nvcc's, links not followed, as nvcc does) and the host compiler's and linker's own.
  fs::path top = fs::path(path_of(nvcc)).parent_path().parent_path();
  std::vector<fs::path> headers, libraries;
  std::error_code ec;
  for (const auto& target : fs::directory_iterator(top / "targets", ec)) {
    headers.push_back(target.path() / "include");
    libraries.push_back(target.path() / "lib");
  }
  headers.push_back(top / "include");
  libraries.insert(libraries.end(), {top / "lib64", top / "lib"});
  headers.insert(headers.end(), system.headers.begin(), system.headers.end());
  libraries.insert(libraries.end(), system.libraries.begin(), system.libraries.end());
  std::string header = first_holding(headers, "cudnn.h"), library = first_holding(libraries, "libcudnn.so");
  if (header.empty() || library.empty())
    throw UserError("this model's convolutions call cuDNN 9 with --device cuda, whose " +
                    std::string(header.empty() ? "header cudnn.h (looked in " + joined(headers)
                                               : "library libcudnn.so (looked in " + joined(libraries)) +
                    ") was not found: install cuDNN 9 for the CUDA toolkit of " + nvcc);
  return header + " " + cudnn_version(fs::path(header).parent_path()) + "\n" + library;
}

bool valid_cuda_arch(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return false;
  std::string v = arch.substr(3);
  if (!v.empty() && (v.back() == 'a' || v.back() == 'f')) v.pop_back();
  if (v.size() < 2 || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  int n = std::stoi(v);
  return n >= 70 && n <= 121;
}

namespace {

// nvcc's flags for the kernel parts: the arch, the host compiler, and the C++ flags that matter
// for the host code (-fPIC, hidden visibility, wrapping integers).
// --expt-relaxed-constexpr: the kernels use std::numeric_limits in device code.
std::vector<std::string> nvcc_flags(const std::string& host_cxx, const std::string& arch) {
  return {"-std=c++17", "-O3", "-arch=" + arch, "-ccbin", host_cxx, "--expt-relaxed-constexpr",
          "-Xcompiler", "-fPIC,-fvisibility=hidden,-fwrapv,-fno-math-errno"};
}

// The C++ compiler's flags for wrapper.cpp, which is host code only (the CUDA runtime's, cuBLAS's
// and cuDNN's C APIs): the same as nvcc passes it, and the toolkit's headers, which nvcc would
// add (nvcc.profile: its target folder's include, else TOP/include).
std::vector<std::string> host_wrapper_flags(const std::string& nvcc) {
  fs::path top = fs::path(path_of(nvcc)).parent_path().parent_path(), include = top / "include";
  std::error_code ec;
  for (const auto& target : fs::directory_iterator(top / "targets", ec))
    if (fs::exists(target.path() / "include/cuda_runtime.h", ec)) {
      include = target.path() / "include";
      break;
    }
  return {"-std=c++17", "-O3", "-fPIC", "-fvisibility=hidden", "-fwrapv", "-fno-math-errno", "-I" + include.string()};
}

// The parts of a CUDA model's kernels in `out`: kernels_0.cu, kernels_1.cu, ... up to the first
// missing one (codegen's kernel_part_name; write_model_files removes parts an earlier model left).
std::vector<std::string> kernel_parts(const fs::path& out) {
  std::vector<std::string> parts;
  while (fs::exists(out / ("kernels_" + std::to_string(parts.size()) + ".cu")))
    parts.push_back("kernels_" + std::to_string(parts.size()) + ".cu");
  return parts;
}

// The key's part for nvcc: its version (the toolkit's release and build lines) and the host compiler.
std::string nvcc_identity(const std::string& nvcc, const std::string& host_cxx) {
  ProcessResult r = run_program({nvcc, "--version"});
  std::string release, build;
  std::stringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("release") != std::string::npos) release = line;
    if (line.rfind("Build", 0) == 0) build = line;
  }
  return release + "\n" + build + "\n" + compiler_identity(host_cxx, "generic");
}

// model.so of a CUDA model: the kernel parts compiled by nvcc and wrapper.cpp by the C++ compiler,
// all at once (as a CPU model's sources), linked by nvcc with the shared CUDA runtime, cuBLAS and,
// for a model with convolutions, cuDNN (by the sonames the libraries record, libcudnn.so.9: no
// run path, so model.so loads where cuDNN is in the system's library folder, as on the GPU host,
// or on LD_LIBRARY_PATH).
CompileResult compile_cuda_model(const fs::path& out, const CompileOptions& options) {
  if (options.static_archive) throw UserError("--emit=static is not supported with --device cuda yet");
  CompileResult result;
  std::string host = host_compiler(options.cxx);
  result.compiler = find_nvcc();
  result.flags = nvcc_flags(host, options.cuda_arch);
  const std::vector<std::string> host_flags = host_wrapper_flags(result.compiler);
  bool uses_cudnn = wrapper_uses_cudnn((out / "wrapper.cpp").string());
  if (uses_cudnn) find_cudnn(result.compiler);  // says where it looked when it is missing
  result.link_flags = cuda_link_flags(uses_cudnn);
  std::vector<std::string> key_parts = {toolchain_identity(options)};
  key_parts.insert(key_parts.end(), result.link_flags.begin(), result.link_flags.end());
  result.key = sources_key(std::move(key_parts), out, {".cu", ".cpp"});
  CompileCache cache = cache_of(options);
  if (options.use_cache && cache.fetch(result.key, built_products(out.string(), options), result.cache_note)) {
    result.cache_hit = true;
    return result;
  }
  std::vector<std::string> sources = kernel_parts(out);
  if (sources.empty()) throw InternalError("bug: no kernels_0.cu in " + out.string());
  std::vector<std::vector<std::string>> commands = compile_commands(result, sources);
  std::vector<std::string> wrapper = {host};
  wrapper.insert(wrapper.end(), host_flags.begin(), host_flags.end());
  wrapper.insert(wrapper.end(), {"-c", "wrapper.cpp", "-o", "wrapper.cpp.o"});
  commands.push_back(wrapper);
  sources.push_back("wrapper.cpp");
  std::vector<ProcessResult> done = run_build_steps(commands, sources, "compiling", out, options);
  for (size_t i = 0; i < done.size(); ++i)
    if (done[i].exit_code != 0)
      throw UserError((i + 1 < done.size() ? "nvcc" : "the C++ compiler") + std::string(" failed on ") +
                      (out / sources[i]).string() + " (exit " + std::to_string(done[i].exit_code) + "):\n" + done[i].output);
  std::vector<std::string> link = {result.compiler, "-shared", "-arch=" + options.cuda_arch, "-ccbin", host, "-o", "model.so"};
  for (const auto& src : sources) link.push_back(src + ".o");
  link.insert(link.end(), result.link_flags.begin(), result.link_flags.end());
  link.insert(link.end(), {"-Xlinker", "--version-script=exports.map"});
  ProcessResult linked = run_build_steps({link}, {"model.so"}, "linking", out, options).front();
  if (linked.exit_code != 0) throw UserError("linking " + (out / "model.so").string() + " failed:\n" + linked.output);
  for (const auto& src : sources) fs::remove(out / (src + ".o"));
  if (options.use_cache) cache.store(result.key, built_products(out.string(), options));
  return result;
}

// The runtime sources beside a CPU model with library calls (codegen writes foundry_dnnl.cpp,
// the oneDNN glue, only then), in name order.
std::vector<std::string> runtime_sources(const fs::path& out) {
  std::vector<std::string> found;
  if (!fs::exists(out / "externs.cpp")) return found;
  for (const fs::path& p : files_in(out, [](const fs::path& p) { return is_runtime_file(p, ".cpp"); }))
    found.push_back(p.filename().string());
  return found;
}

// The cache key of `what` ("runtime object", "precompiled header") built from runtime file `src`:
// the toolchain (`toolchain`, its identity and flags), the file and every runtime header beside it
// (foundry_*.h), by name and content. The model's own files are not part of it: one build serves
// every model.
std::string runtime_key(const std::string& what, const std::string& toolchain, const fs::path& out,
                        const std::string& src) {
  std::vector<fs::path> inputs = {out / src};
  for (const fs::path& p : files_in(out, [](const fs::path& p) { return is_runtime_file(p, ".h"); })) inputs.push_back(p);
  return files_key({what, toolchain}, inputs);
}

// Whether `cxx` is GCC (it defines __GNUC__ and not __clang__), whose precompiled headers the
// build uses.
bool compiler_is_gcc(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = known.find(cxx); it != known.end()) return it->second;
  ProcessResult r = run_program({cxx, "-dM", "-E", "-x", "c++", "/dev/null"});
  return known[cxx] = r.exit_code == 0 && r.output.find("#define __GNUC__ ") != std::string::npos &&
                      r.output.find("__clang__") == std::string::npos;
}

}  // namespace

std::string toolchain_identity(const CompileOptions& options) {
  // Asked before the pipeline (the output cache) and again by the build: the compilers run once.
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  const std::string id = hash_hex({options.device, host_compiler(options.cxx), options.target, options.cuda_arch,
                                   options.device == "cuda" ? find_nvcc() : ""});
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(id); it != known.end()) return it->second;
  }
  std::vector<std::string> parts = {FOUNDRY_VERSION, options.device};
  if (options.device == "cuda") {
    // nvcc (its release and build), the host compiler, the arch, both compilers' flags, and the
    // cuDNN nvcc would link (its version and where it is), or none.
    std::string host = host_compiler(options.cxx), nvcc = find_nvcc();
    std::string cudnn = "no cuDNN";
    try {
      cudnn = find_cudnn(nvcc);
    } catch (const UserError&) {
    }
    parts.insert(parts.end(), {nvcc, nvcc_identity(nvcc, host), options.cuda_arch, cudnn});
    for (const auto& flags : {nvcc_flags(host, options.cuda_arch), host_wrapper_flags(nvcc)})
      parts.insert(parts.end(), flags.begin(), flags.end());
  } else {
    // The compiler (as named, its version, and for -march=native this CPU's instruction sets) and
    // the flags (with -march). Not the launcher: ccache or sccache gives the compiler's own output.
    std::string cxx = host_compiler(options.cxx);
    std::vector<std::string> flags = compile_flags(options);
    parts.insert(parts.end(), {cxx, compiler_identity(cxx, options.target)});
    parts.insert(parts.end(), flags.begin(), flags.end());
  }
  std::lock_guard<std::mutex> lock(mu);
  return known[id] = hash_hex(parts);
}

CompileCache::Products built_products(const std::string& dir, const CompileOptions& options) {
  fs::path out(dir);
  CompileCache::Products products;  // (output, suffix in the cache)
  if (options.shared || options.device == "cuda") products.push_back({(out / "model.so").string(), ".so"});
  if (options.static_archive && options.device != "cuda") products.push_back({(out / "libmodel.a").string(), ".a"});
  return products;
}

CompileCache cache_of(const CompileOptions& options) {
  return CompileCache(options.cache_dir.empty() ? default_cache_dir() : options.cache_dir,
                      options.cache_limit ? options.cache_limit : default_cache_limit());
}

namespace {
constexpr const char* kPrelude = "foundry_prelude.h";

// A build product that goes when the build ends, however it ends.
class RemovedAtExit {
 public:
  explicit RemovedAtExit(fs::path path) : path_(std::move(path)) {}
  ~RemovedAtExit() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  RemovedAtExit(const RemovedAtExit&) = delete;
  RemovedAtExit& operator=(const RemovedAtExit&) = delete;

 private:
  fs::path path_;
};

// The flags that put the precompiled foundry_prelude.h before each of a model's sources, once
// DIR/foundry_prelude.h.gch is there: from the cache, or compiled now and kept. A small model's
// sources spend most of their compile parsing the runtime headers (corpus mlp's three: 4.4 s of
// compiler time, 2.4 s less with the header precompiled), and precompiling it takes about 6 s,
// so it pays from a cache's second model on. None where it does not pay or cannot work: an empty
// cache (its first model may be its only one), no cache, a compiler other than GCC, a launcher
// (ccache does not cache compiles that use one), a model without the header (a CUDA one), or a
// precompile that fails (the sources then say what is wrong themselves).
std::vector<std::string> prelude_flags(const fs::path& out, const CompileOptions& options, const CompileResult& result,
                                       CompileCache& cache) {
  if (!options.use_cache || !result.launcher.empty() || !fs::exists(out / kPrelude) ||
      !compiler_is_gcc(result.compiler))
    return {};
  const std::string gch = std::string(kPrelude) + ".gch";
  const CompileCache::Products products = {{(out / gch).string(), ".gch"}};
  const std::string key = runtime_key("precompiled header", toolchain_identity(options), out, kPrelude);
  std::string why;
  if (cache.fetch(key, products, why)) {
    spdlog::info("build: {} is the cache's, compiled for this compiler and flags before", gch);
  } else if (cache.stats().entries == 0) {
    return {};
  } else {
    std::vector<std::string> argv = {result.compiler};
    argv.insert(argv.end(), result.flags.begin(), result.flags.end());
    argv.insert(argv.end(), {"-x", "c++-header", kPrelude, "-o", gch});
    if (run_build_steps({argv}, {gch}, "precompiling", out, options).front().exit_code != 0) return {};
    cache.store(key, products);
  }
  // -Winvalid-pch: should GCC find the header unusable after all, it says why (shown with -v).
  return {"-Winvalid-pch", "-include", kPrelude};
}
}  // namespace

CompileResult compile_model(const std::string& dir, const CompileOptions& options) {
  if (options.device == "cuda") return compile_cuda_model(fs::path(dir), options);
  CompileResult result;
  result.compiler = host_compiler(options.cxx);
  result.launcher = find_launcher(options.cxx_launcher);
  result.flags = compile_flags(options);
  fs::path out = fs::path(dir);
  std::vector<std::string> sources;
  for (const char* f : {"kernels.cpp", "wrapper.cpp", "externs.cpp"})
    if (fs::exists(out / f)) sources.push_back(f);
  bool uses_dnnl = fs::exists(out / "externs.cpp");
  const std::vector<std::string> runtime = runtime_sources(out);

  // The key (README: "The compile cache"): the toolchain and its flags, and every generated
  // source by name and content (a function of the input and the options).
  result.key = sources_key({toolchain_identity(options)}, out, {".cpp"});
  // The libraries the objects need: model.so records them, a program linking libmodel.a names them.
  result.link_flags = model_link_flags(uses_dnnl, externs_use_lapack((out / "externs.cpp").string()));

  CompileCache cache = cache_of(options);
  const CompileCache::Products products = built_products(dir, options);
  if (options.use_cache && cache.fetch(result.key, products, result.cache_note)) {
    result.cache_hit = true;
    return result;
  }

  // The runtime sources' objects come from the cache when it has them; the others are compiled
  // with the model's sources, and kept.
  std::vector<std::pair<std::string, std::string>> runtime_to_store;  // (source, key)
  std::vector<std::string> compiled = sources;
  for (const std::string& src : runtime) {
    const std::string key = runtime_key("runtime object", toolchain_identity(options), out, src);
    std::string why;
    if (options.use_cache && cache.fetch(key, {{(out / (src + ".o")).string(), ".o"}}, why)) {
      spdlog::info("build: {}.o is the cache's, compiled for this compiler and flags before", src);
      continue;
    }
    compiled.push_back(src);
    runtime_to_store.push_back({src, key});
  }

  // Compiled and linked inside the output folder, with relative names: no path of this machine
  // ends up in model.so (sanitizers and debug info record source names), so builds in two folders
  // give the same bytes. The model's sources include the precompiled runtime headers first.
  const RemovedAtExit gch(out / (std::string(kPrelude) + ".gch"));
  const std::vector<std::string> prelude = prelude_flags(out, options, result, cache);
  std::vector<ProcessResult> done =
      run_build_steps(compile_commands(result, compiled, prelude), compiled, "compiling", out, options);
  for (size_t i = 0; i < done.size(); ++i)
    if (done[i].exit_code != 0)
      throw UserError("the C++ compiler failed on " + (out / compiled[i]).string() + " (exit " +
                      std::to_string(done[i].exit_code) + "):\n" + done[i].output);
  if (options.use_cache)
    for (const auto& [src, key] : runtime_to_store) cache.store(key, {{(out / (src + ".o")).string(), ".o"}});
  sources.insert(sources.end(), runtime.begin(), runtime.end());
  std::vector<std::string> objects;
  for (const auto& src : sources) objects.push_back((out / (src + ".o")).string());
  if (options.shared) {
    std::vector<std::string> link = {result.compiler, "-shared", "-o", "model.so"};
    for (const auto& src : sources) link.push_back(src + ".o");
    link.insert(link.end(), result.link_flags.begin(), result.link_flags.end());
    // Only the model's API leaves model.so (exports.map, written by codegen from the model's name).
    if (fs::exists(out / "exports.map")) link.push_back("-Wl,--version-script=exports.map");
    ProcessResult linked = run_build_steps({link}, {"model.so"}, "linking", out, options).front();
    if (linked.exit_code != 0) throw UserError("linking " + (out / "model.so").string() + " failed:\n" + linked.output);
  }
  if (options.static_archive) archive(objects, out / "libmodel.a");
  for (const auto& o : objects) fs::remove(o);

  if (options.use_cache) cache.store(result.key, products);  // an unwritable cache is no error
  return result;
}

}  // namespace foundry::build
