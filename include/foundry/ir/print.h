// The stable text form of the loop-level IR (ir_pre_fusion.txt): every buffer with its layout,
// every node with its iteration ranges, reads and writes, and its body run through a printing
// handler.
#pragma once
#include <string>

#include "foundry/ir/loop_ir.h"

namespace foundry::ir {

std::string print_body(const LoopNode& node);  // the body's lines, indented by two spaces
std::string print_node(const LoopNode& node);
std::string print_buffer(const Buffer& buf);  // "buf0: float32[1024] strides [1] offset 0"
std::string print_program(const LoopProgram& program);

}  // namespace foundry::ir
