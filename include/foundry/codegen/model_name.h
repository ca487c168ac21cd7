// The model's name: the prefix of every symbol model.so exports (NAME_create, NAME_run, ...).
// Those symbols share one namespace with every library a program loads, so a name is refused
// when its API would define a function of the C library or take a library's prefix.
#pragma once
#include <cstddef>
#include <string>

namespace foundry::codegen {

// The longest name: NAME_num_outputs and the other API symbols stay readable in tools that cut
// long names, and the header guard and file names derived from NAME stay short.
constexpr size_t kMaxModelNameLength = 48;

// Why `name` cannot be a model's name (one clause, naming the colliding library), or "" when it
// can: not a C identifier of lowercase letters, digits and '_', longer than kMaxModelNameLength,
// or reserved (see reserved_name_owner).
std::string model_name_problem(const std::string& name);

// The library whose symbols NAME's API would collide with ("the C library (pthread_create)",
// "oneDNN", ...), or "" when none does.
std::string reserved_name_owner(const std::string& name);

// The linker version script of model.so (exports.map): NAME_* global, everything else local.
// -fvisibility=hidden hides the model's own code, but the C++ library's headers give their
// template instances and type information default visibility, and those would be exported.
std::string exports_version_script(const std::string& name);

}  // namespace foundry::codegen
