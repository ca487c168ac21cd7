// The output cache, in front of the pipeline (ccache's "direct mode"): a compile whose input
// archive, options, foundryc and toolchain are those of an earlier successful compile takes that
// compile's output folder from the compile cache, and no stage runs.
//
// Its entry, under a key of all four, holds the folder's files except the built products, and the
// warnings that compile printed (replayed on a hit, so a hit says what the compile said); the
// products come from the build's own entry, named by manifest.json's "hash", so that a hit keeps
// that entry in use and the two are evicted as one model's. Nothing in an entry is trusted: the
// cache checks each part's size and hash, and a file name that is not a plain name in the folder
// (no '/', no leading '.') makes the entry a miss.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "foundry/build/compile.h"
#include "foundry/driver/pipeline.h"

namespace foundry {

// The key of a run's outputs, or "" when the run is not looked up: its input is not one archive
// file (a folder, or a bare model.json beside the files it names), or it writes debug dumps or
// stops early. `name` is the model's C name (PipelineOptions::name or the input's stem).
std::string output_cache_key(const PipelineOptions& opts, const std::string& name, const build::CompileOptions& build);

// Writes the outputs stored under `key` into `dir` and prints their compile's warnings; false when
// there are none, or they or their built products are not whole (said with -v).
bool fetch_outputs(const std::string& key, const build::CompileOptions& build, const std::filesystem::path& dir);

// Stores the files of `dir` (a finished compile's folder) under `key`, with `warnings`.
void store_outputs(const std::string& key, const build::CompileOptions& build, const std::filesystem::path& dir,
                   const std::vector<std::string>& warnings);

// Keeps the warnings logged while it lives, also those the logger's level hides from the user
// (a quiet compile's entry must still hold them for a later hit), without changing what is printed.
class WarningRecorder {
 public:
  WarningRecorder();
  ~WarningRecorder();
  WarningRecorder(const WarningRecorder&) = delete;
  WarningRecorder& operator=(const WarningRecorder&) = delete;
  std::vector<std::string> warnings() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace foundry
