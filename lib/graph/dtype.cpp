#include "foundry/graph/dtype.h"

#include <array>

namespace foundry {

std::optional<DType> dtype_from_export(int64_t code) {
  switch (code) {
    case 1: return DType::UInt8;
    case 2: return DType::Int8;
    case 3: return DType::Int16;
    case 4: return DType::Int32;
    case 5: return DType::Int64;
    case 6: return DType::Float16;
    case 7: return DType::Float32;
    case 8: return DType::Float64;
    case 12: return DType::Bool;
    case 13: return DType::BFloat16;
    default: return std::nullopt;
  }
}

int64_t dtype_to_export(DType t) {
  switch (t) {
    case DType::UInt8: return 1;
    case DType::Int8: return 2;
    case DType::Int16: return 3;
    case DType::Int32: return 4;
    case DType::Int64: return 5;
    case DType::Float16: return 6;
    case DType::Float32: return 7;
    case DType::Float64: return 8;
    case DType::Bool: return 12;
    case DType::BFloat16: return 13;
  }
  return 0;
}

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 10> kInfo = {{
    {DType::Bool, "bool", 1},
    {DType::UInt8, "uint8", 1},
    {DType::Int8, "int8", 1},
    {DType::Int16, "int16", 2},
    {DType::Int32, "int32", 4},
    {DType::Int64, "int64", 8},
    {DType::Float16, "float16", 2},
    {DType::BFloat16, "bfloat16", 2},
    {DType::Float32, "float32", 4},
    {DType::Float64, "float64", 8},
}};
}  // namespace

std::string_view dtype_name(DType t) { return kInfo[static_cast<size_t>(t)].name; }
size_t dtype_size(DType t) { return kInfo[static_cast<size_t>(t)].size; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kInfo)
    if (info.name == name) return info.type;
  return std::nullopt;
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_integral(DType t) { return !is_floating(t) && t != DType::Bool; }
bool is_signed(DType t) { return t != DType::Bool && t != DType::UInt8; }

int dtype_category(DType t) {
  if (t == DType::Bool) return 0;
  return is_floating(t) ? 2 : 1;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // Mirrors c10::promoteTypes for the dtypes we support.
  static constexpr DType u1 = DType::UInt8, i1 = DType::Int8, i2 = DType::Int16, i4 = DType::Int32,
                         i8 = DType::Int64, f2 = DType::Float16, bf = DType::BFloat16,
                         f4 = DType::Float32, f8 = DType::Float64, b1 = DType::Bool;
  // Row/column order is the enum order: b1 u1 i1 i2 i4 i8 f2 bf f4 f8.
  static constexpr DType table[10][10] = {
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  return table[static_cast<size_t>(a)][static_cast<size_t>(b)];
}

}  // namespace foundry
