// A corpus-style sample folder: inputs/N.npy and expected/N.npy, numbered in graph order.
#pragma once
#include <string>
#include <vector>

#include "foundry/runtime/npy.h"

namespace foundry {

// Reads DIR/0.npy, DIR/1.npy, ... until the first missing number.
std::vector<NpyArray> read_npy_sequence(const std::string& dir);

}  // namespace foundry
