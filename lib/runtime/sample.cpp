#include "foundry/runtime/sample.h"

#include <filesystem>

namespace foundry {

std::vector<NpyArray> read_npy_sequence(const std::string& dir) {
  std::vector<NpyArray> out;
  for (int k = 0;; ++k) {
    std::string path = dir + "/" + std::to_string(k) + ".npy";
    if (!std::filesystem::exists(path)) break;
    out.push_back(read_npy(path));
  }
  return out;
}

}  // namespace foundry
