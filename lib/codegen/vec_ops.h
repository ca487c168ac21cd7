// The vector forms of loop-IR operations, as C++ over foundry_vec.h: float32 values (and 16-bit
// floats, widened to float32) are `foundry_vec::VecF`, booleans `foundry_vec::Mask`. An operation without a vector form gives
// nullopt, and the loop that needs it stays scalar.
#pragma once
#include <optional>
#include <string>

#include "foundry/ir/ops.h"

namespace foundry::codegen {

// The C++ infix operator of an arithmetic op or comparison (+, ==, ...): the same text in the
// scalar and the vector form. nullptr for the other ops.
const char* infix_operator(ir::BinaryOp op);
// A comparison's name in foundry_vec::Compare ("Lt", ...); nullptr for other ops.
const char* compare_name(ir::BinaryOp op);

// Whether values of `t` have a vector form (float32, float16, bfloat16 and bool).
bool has_vector_form(DType t);
// "foundry_vec::VecF" or "foundry_vec::Mask".
std::string vector_type(DType t);
// A scalar C++ expression of type `t` broadcast to every lane.
std::string vector_splat(DType t, const std::string& scalar);

std::optional<std::string> vector_unary(ir::UnaryOp op, DType t, const std::string& x);
std::optional<std::string> vector_binary(ir::BinaryOp op, DType t, const std::string& a, const std::string& b);
std::optional<std::string> vector_convert(DType from, DType to, const std::string& x);

}  // namespace foundry::codegen
