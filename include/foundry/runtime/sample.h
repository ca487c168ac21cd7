// A corpus-style sample folder: inputs/N.npy and expected/N.npy, numbered in graph order; and
// random inputs for running a model without a folder of them.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "foundry/runtime/npy.h"

namespace foundry {

// Reads DIR/0.npy, DIR/1.npy, ... until the first missing number.
std::vector<NpyArray> read_npy_sequence(const std::string& dir);

// An array of pseudo-random values from `rng`: floats uniform in [-1, 1) (exactly representable in
// the dtype, so none rounds to 1), integers 0 or 1 and bools false or true: integer inputs are
// often indices (an embedding's rows, a gather's positions), which small nonnegative values keep
// in range. The same seed gives the same values everywhere: mt19937_64 is fixed by the standard,
// the distributions of <random> are not, so the values are made from its bits here.
NpyArray random_array(DType dtype, const std::vector<int64_t>& shape, std::mt19937_64& rng);

}  // namespace foundry
