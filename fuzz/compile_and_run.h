// fuzz_pipeline's compile-and-run step: one input in FOUNDRY_FUZZ_COMPILE_EVERY (default 16,
// chosen by a hash of its bytes so that a replay decides the same way; 0 turns it off) that
// reaches generated code is also built with g++ under AddressSanitizer and UndefinedBehavior-
// Sanitizer and run once by fuzz/model_runner.cpp on small made-up inputs. The memory safety of
// the compiled model lives in generated code that the rest of the pipeline never executes.
//
// Findings (abort, as in fuzz_common.h): generated code that the C++ compiler rejects, and a run
// that ends in a sanitizer report or a signal. A model that refuses its inputs with an error code
// is a clean outcome; so is a run stopped by the time limit (big loops are legal).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "foundry/build/compile.h"
#include "foundry/build/process.h"
#include "foundry/codegen/wrapper.h"
#include "fuzz_common.h"

namespace foundry_fuzz {

constexpr int kSanitizerExit = 86;  // ASAN_OPTIONS/UBSAN_OPTIONS exitcode for the model run

// The scratch folder with the sanitizing compiler wrapper and the runner (made once per process).
struct CompileEnv {
  fs::path dir, cxx, runner;
  CompileEnv() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/foundry_fuzz_build_XXXXXX";
    if (!mkdtemp(templ.data())) die("mkdtemp " + templ);
    dir = templ;
    // -O1 after foundryc's -O3: the sanitizers find the same faults and g++ is much faster.
    cxx = dir / "g++-asan";
    std::ofstream(cxx) << "#!/bin/sh\ntimeout -s KILL 300 g++ \"$@\" -O1 -fsanitize=address,undefined "
                          "-fno-sanitize-recover=undefined -fno-omit-frame-pointer\nrc=$?\n"
                          "[ $rc = 137 ] && echo 'fuzz: compile time limit' >&2\nexit $rc\n";
    fs::permissions(cxx, fs::perms::owner_all);
    runner = dir / "model_runner";
    std::string src = std::string(FOUNDRY_SOURCE_DIR) + "/fuzz/model_runner.cpp";
    foundry::build::ProcessResult r = foundry::build::run_program(
        {"g++", "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined", "-I",
         std::string(FOUNDRY_SOURCE_DIR) + "/include/foundry/runtime", src, "-o", runner.string(), "-ldl"});
    if (r.exit_code != 0) die("building " + src + ":\n" + r.output);
  }
  ~CompileEnv() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

inline uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ULL;
  return h;
}

inline bool chosen_for_compile(const uint8_t* data, size_t size) {
  const char* env = std::getenv("FOUNDRY_FUZZ_COMPILE_EVERY");
  long every = env && *env ? std::strtol(env, nullptr, 10) : 16;
  return every > 0 && fnv1a(data, size) % static_cast<uint64_t>(every) == 0;
}

[[noreturn]] inline void finding(const std::string& what, const std::string& output) {
  std::fprintf(stderr, "fuzz: FINDING: %s\n%s\n", what.c_str(), output.c_str());
  std::abort();
}

// Builds `model` (its name must be "fuzz") and runs it once; aborts on a finding.
inline void compile_and_run(const foundry::codegen::GeneratedModel& model, uint64_t seed) {
  static CompileEnv env;
  fs::path out = env.dir / "model";
  std::error_code ec;
  fs::remove_all(out, ec);
  fs::create_directories(out);
  foundry::codegen::write_model_files(model, out.string());
  foundry::build::CompileOptions options;
  options.cxx = env.cxx.string();
  options.use_cache = false;
  try {
    foundry::build::compile_model(out.string(), options);
  } catch (const foundry::UserError& e) {
    if (std::string(e.what()).find("fuzz: compile time limit") != std::string::npos) return;
    finding("the generated model does not compile", e.what());
  }
  foundry::build::ProcessResult r = foundry::build::run_program(
      {"env", "ASAN_OPTIONS=detect_leaks=0:intercept_tls_get_addr=0:exitcode=" + std::to_string(kSanitizerExit),
       "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=" + std::to_string(kSanitizerExit), "timeout", "-s",
       "KILL", "120", env.runner.string(), out.string(), model.name, std::to_string(seed)});
  if (r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2 || r.exit_code == 128 + 9) return;
  finding("the compiled model failed under the sanitizers (exit " + std::to_string(r.exit_code) + ")", r.output);
}

}  // namespace foundry_fuzz
