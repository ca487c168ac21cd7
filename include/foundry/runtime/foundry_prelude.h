// The runtime headers that a CPU model's kernels.cpp, wrapper.cpp and externs.cpp share, as one
// header that foundryc's build precompiles (GCC: foundry_prelude.h.gch, once per compiler and
// flags, kept in the compile cache) and includes before each of them (-include): parsing these
// headers and the C++ library's behind them was most of a small model's compile. The sources
// include what they use themselves, so that they build without it too (CMakeLists.txt).
// Include guards rather than #pragma once: several models' copies may meet in one build.
#ifndef FOUNDRY_PRELUDE_H
#define FOUNDRY_PRELUDE_H
#include "foundry_kernel_support.h"
#include "foundry_special.h"
#include "foundry_vec.h"
#include "foundry_externs.h"
#include "foundry_dnnl.h"
#include "foundry_model_api.h"
#endif  // FOUNDRY_PRELUDE_H
