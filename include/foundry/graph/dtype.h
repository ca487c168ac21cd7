// Element types, the export format's numbering of them, and ATen's type promotion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace foundry {

enum class DType : uint8_t { Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64 };

// torch.export's ScalarType numbering (its own, not c10's): 1 uint8 ... 13 bfloat16.
std::optional<DType> dtype_from_export(int64_t code);
int64_t dtype_to_export(DType t);

std::string_view dtype_name(DType t);  // "float32", "int64", "bool", ...
std::optional<DType> dtype_from_name(std::string_view name);
size_t dtype_size(DType t);
bool is_floating(DType t);
bool is_integral(DType t);  // integers, not bool
bool is_signed(DType t);

// ATen's promote_types for two tensor dtypes (the lattice of c10::promoteTypes).
DType promote_types(DType a, DType b);

// Category used when a wrapped number (Python scalar) meets a tensor: 0 bool, 1 integer, 2 floating.
int dtype_category(DType t);

}  // namespace foundry
