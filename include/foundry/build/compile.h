// The build stage: compiles a generated model folder (kernels.cpp, wrapper.cpp and the runtime
// headers beside them) into model.so and/or libmodel.a with a C++ compiler run as a subprocess,
// and caches the result by a content hash so that compiling the same model again does not run
// the compiler.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "foundry/build/cache.h"

namespace foundry::build {

struct CompileOptions {
  std::string cxx;        // --cxx; empty: $CXX, then g++, then clang++
  // --cxx-launcher: each compile runs as LAUNCHER COMPILER ARGS... (ccache, sccache), as CMake's
  // CMAKE_CXX_COMPILER_LAUNCHER; empty: $FOUNDRY_CXX_LAUNCHER, else none. Not the link.
  std::string cxx_launcher;
  std::string cache_dir;  // empty: $XDG_CACHE_HOME/foundry or ~/.cache/foundry
  bool use_cache = true;
  uint64_t cache_limit = 0;       // bytes the cache may hold; 0: default_cache_limit()
  std::string target = "native";  // -march: native, or a named ISA level
  bool shared = true;             // DIR/model.so
  bool static_archive = false;    // DIR/libmodel.a (--emit=static), the same objects archived with ar
  // "cuda": the kernel parts (kernels_0.cu, ...) compiled by nvcc (find_nvcc) for `cuda_arch`,
  // with the C++ compiler above as its host compiler (-ccbin), wrapper.cpp by that compiler, all
  // at once, linked by nvcc; model.so links cudart (shared), cuBLAS and, with convolutions, cuDNN.
  // `target` and the launcher do not apply.
  std::string device = "cpu";
  std::string cuda_arch = "sm_90";
  // While the compiler runs, about every quarter second: what it is doing ("compiling
  // kernels.cpp, externs.cpp", "linking model.so"), for a progress line.
  std::function<void(const std::string& activity)> on_activity;
};

struct CompileResult {
  bool cache_hit = false;
  std::string cache_note;  // why a cache entry that was there was not used ("" when none was)
  std::string key;       // the content hash (hex)
  std::string compiler;  // the compiler that was (or would have been) run
  std::string launcher;  // the compiler launcher, or empty
  std::vector<std::string> flags;
  // What a program linking libmodel.a adds to its link line (model.so records these itself).
  std::vector<std::string> link_flags;
};

// Builds DIR/model.so and/or DIR/libmodel.a, as `options` asks. Throws UserError with the
// compiler's output (and the source path) when compilation fails.
CompileResult compile_model(const std::string& dir, const CompileOptions& options);

// What a program or shared object made of a model's objects links with: OpenMP's runtime,
// SLEEF (vector kernels' math functions) and, for a model with library calls, oneDNN, and LAPACKE
// for one with linear-algebra calls.
std::vector<std::string> model_link_flags(bool uses_dnnl, bool uses_lapack = false);
// Whether a generated externs.cpp calls LAPACK: it includes foundry_lapack.h (codegen writes that
// include only then, kLapackInclude in lib/codegen/externs.h).
bool externs_use_lapack(const std::string& externs_cpp);

// Everything besides the generated sources that decides what the build produces, hashed: foundryc's
// version, the compilers (their paths and versions; for -march=native this CPU's instruction
// sets), their flags, and for CUDA the arch and the cuDNN it would link. Part of every cache key.
std::string toolchain_identity(const CompileOptions& options);
// The products a build of DIR with `options` leaves there and the cache keeps under its key:
// (DIR/model.so, ".so") and/or (DIR/libmodel.a, ".a").
CompileCache::Products built_products(const std::string& dir, const CompileOptions& options);
// The cache `options` name (their folder and size limit, or the defaults).
CompileCache cache_of(const CompileOptions& options);

// The compiler to use (--cxx, $CXX, g++, clang++), as named on PATH; throws UserError when absent.
std::string find_compiler(const std::string& requested);
// find_compiler's answer, made absolute when it is a path (builds run in the output folder).
std::string host_compiler(const std::string& requested);
// The compiler launcher: `requested`, else $FOUNDRY_CXX_LAUNCHER, else none (""); throws
// UserError when it is not found.
std::string find_launcher(const std::string& requested);
std::string default_cache_dir();
// nvcc: $CUDA_HOME/bin/nvcc, else nvcc on PATH, else /usr/local/cuda/bin/nvcc; throws UserError
// saying where it looked when there is none.
std::string find_nvcc();
// What model.so of a CUDA model links: the CUDA runtime (shared) and cuBLAS, and cuDNN for a
// model with convolutions.
std::vector<std::string> cuda_link_flags(bool uses_cudnn);
// Whether a CUDA model's generated wrapper.cpp calls cuDNN: it includes foundry_cudnn.h (codegen
// writes that include only then).
bool wrapper_uses_cudnn(const std::string& wrapper_cpp);
// The folders the host compiler and linker search on their own (headers, libraries).
struct SearchDirs {
  std::vector<std::string> headers, libraries;
};
SearchDirs system_search_dirs();
// cuDNN where `nvcc` (find_nvcc) finds it with no -I or -L, in its toolkit or `system`:
// "PATH/cudnn.h VERSION\nPATH/libcudnn.so", for the cache key; throws UserError saying where it
// looked when the header or the library is missing.
std::string find_cudnn(const std::string& nvcc, const SearchDirs& system = system_search_dirs());
// Whether `arch` is an nvcc -arch this build accepts: sm_ followed by two or three digits
// (sm_70 to sm_120a).
bool valid_cuda_arch(const std::string& arch);

// Content hash helpers (xxHash XXH3-128), hex encoded: of length-prefixed parts; of one part's
// bytes (as hash_hex({bytes})); of a regular file's contents, the same as hash_bytes of them, read
// in pieces so that a large file is never copied into memory whole ("" when it is not a regular
// file that can be read).
std::string hash_hex(const std::vector<std::string>& parts);
std::string hash_bytes(std::string_view bytes);
std::string hash_file(const std::string& path);

}  // namespace foundry::build
