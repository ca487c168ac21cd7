// Only for the FOUNDRY_FUZZ build with a clang that has no _Float16 on x86-64 (clang 14 has it
// only with AVX512-FP16): the CMake block force-includes this header and defines
// _Float16=foundry_fuzz_float16, a 2-byte software stand-in with the two conversions the library
// uses (from an arithmetic value, to double). Rounds through float (nearest even).
#pragma once
#include <cstdint>
#include <type_traits>

#include "foundry/runtime/foundry_kernel_support.h"

struct foundry_fuzz_float16 {
  uint16_t bits;
  foundry_fuzz_float16() = default;
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  explicit foundry_fuzz_float16(T v) : bits(foundry_rt::float_to_half(static_cast<float>(v))) {}
  explicit operator double() const { return foundry_rt::half_to_float(bits); }
  explicit operator float() const { return foundry_rt::half_to_float(bits); }
};
static_assert(sizeof(foundry_fuzz_float16) == 2 && std::is_trivially_copyable_v<foundry_fuzz_float16>);
