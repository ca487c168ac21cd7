// The runtime headers (include/foundry/runtime/foundry_*.h) embedded into foundryc at build
// time, copied next to every generated model so that its sources build anywhere.
#pragma once
#include <cstddef>
#include <vector>

namespace foundry::codegen {

struct RuntimeFile {
  const char* name;
  const unsigned char* data;
  size_t size;
};

const std::vector<RuntimeFile>& runtime_files();

}  // namespace foundry::codegen
