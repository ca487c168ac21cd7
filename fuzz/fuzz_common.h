// Shared by the libFuzzer targets (fuzz/fuzz_*.cpp): how an input's bytes become a model file, and
// what counts as a finding.
//
// An input is read in one of two ways, decided by its first two bytes:
//   - "PK...": a .pt2 archive. The bytes go to an anonymous in-memory file (memfd_create) that
//     load_model opens as /proc/self/fd/N, so nothing touches the disk and the library needs no
//     in-memory entry point.
//   - anything else: a bare models/model.json. The bytes are written over models/model.json of an
//     extracted copy of a real archive (samples/mlp/model.pt2 by default, FOUNDRY_FUZZ_ARCHIVE to
//     choose another), so that weights referenced by the JSON exist and the frontend goes deep.
//
// Outcomes: returning normally or throwing foundry::UserError is the contract for bad input.
// Anything else is a finding: a sanitizer report or a crash (libFuzzer catches those itself), a
// foundry::InternalError (a broken invariant: a foundryc bug even when the input is garbage), or
// any other exception (nlohmann::json errors, std::out_of_range, std::bad_alloc, ... escaping the
// library: foundryc would report them as internal errors, exit 3). Findings abort() with a line
// on stderr saying what escaped, which libFuzzer records as a crash.
#pragma once

#include <sys/mman.h>
#include <unistd.h>
#include <zip.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "foundry/frontend/frontend.h"
#include "foundry/graph/graph.h"
#include "foundry/support/error.h"

namespace foundry_fuzz {

namespace fs = std::filesystem;

[[noreturn]] inline void die(const std::string& msg) {
  std::fprintf(stderr, "fuzz: setup failed: %s\n", msg.c_str());
  std::abort();
}

// Extracts every file entry of the ZIP at `zip_path` under `dest`; returns the archive's root
// folder (the one holding models/model.json).
inline fs::path extract_archive(const std::string& zip_path, const fs::path& dest) {
  int err = 0;
  zip_t* z = zip_open(zip_path.c_str(), ZIP_RDONLY, &err);
  if (!z) die("cannot open " + zip_path);
  fs::path root;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(z, i, 0, &st) != 0 || !st.name) continue;
    std::string name = st.name;
    if (name.empty() || name.back() == '/' || name.find("..") != std::string::npos) continue;
    fs::path out = dest / name;
    fs::create_directories(out.parent_path());
    zip_file_t* f = zip_fopen_index(z, i, 0);
    if (!f) die("cannot read " + name + " in " + zip_path);
    std::string bytes(st.size, '\0');
    zip_int64_t got = bytes.empty() ? 0 : zip_fread(f, bytes.data(), bytes.size());
    zip_fclose(f);
    if (got != static_cast<zip_int64_t>(bytes.size())) die("short read of " + name);
    std::ofstream(out, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const std::string suffix = "models/model.json";
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      root = out.parent_path().parent_path();
  }
  zip_close(z);
  if (root.empty()) die(zip_path + " has no models/model.json");
  return root;
}

// The extracted archive that bare model.json inputs are written into (made once per process,
// removed at exit).
struct JsonEnv {
  fs::path dir, json_path;
  JsonEnv() {
    const char* chosen = std::getenv("FOUNDRY_FUZZ_ARCHIVE");
    std::string archive = chosen && *chosen ? chosen : std::string(FOUNDRY_SOURCE_DIR) + "/samples/mlp/model.pt2";
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/foundry_fuzz_XXXXXX";
    if (!mkdtemp(templ.data())) die("mkdtemp " + templ);
    dir = templ;
    json_path = extract_archive(archive, dir) / "models" / "model.json";
  }
  ~JsonEnv() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

inline JsonEnv& json_env() {
  static JsonEnv env;
  return env;
}

// Calls load_model on the input's bytes as described above.
inline foundry::Graph load_bytes(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
    int fd = memfd_create("fuzz.pt2", 0);
    if (fd < 0) die("memfd_create");
    size_t done = 0;
    while (done < size) {
      ssize_t w = write(fd, data + done, size - done);
      if (w <= 0) die("write to memfd");
      done += static_cast<size_t>(w);
    }
    struct Closer {
      int fd;
      ~Closer() { close(fd); }
    } closer{fd};
    return foundry::load_model("/proc/self/fd/" + std::to_string(fd));
  }
  const JsonEnv& env = json_env();
  {
    std::ofstream out(env.json_path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) die("cannot write " + env.json_path.string());
  }
  return foundry::load_model(env.json_path.string());
}

// Runs `body`; UserError is a normal outcome, anything else that escapes aborts (a finding).
template <class F>
void run_one(F&& body) {
  try {
    body();
  } catch (const foundry::UserError&) {
    // The expected answer to bad input.
  } catch (const foundry::InternalError& e) {
    std::fprintf(stderr, "fuzz: FINDING: foundry::InternalError escaped: %s\n", e.what());
    std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: FINDING: an exception other than UserError escaped (%s): %s\n",
                 typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: FINDING: a non-std exception escaped\n");
    std::abort();
  }
}

}  // namespace foundry_fuzz
