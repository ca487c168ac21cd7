// libFuzzer target: the frontend on hostile bytes, read as a .pt2 archive ("PK..." inputs) or as
// a bare model.json (everything else; see fuzz_common.h), then the graph verifier, the supported-op
// check and the graph printer. Build with -DFOUNDRY_FUZZ=ON (clang); run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  foundry_fuzz::run_one([&] {
    foundry::Graph g = foundry_fuzz::load_bytes(data, size);
    foundry::verify_graph(g);
    (void)foundry::print_graph(g);
    foundry::check_supported_ops(g);
  });
  return 0;
}
