// The frontend: reads a torch.export archive into a Graph.
#pragma once
#include <string>

#include "foundry/graph/graph.h"

namespace foundry {

// Reads a model from
//   - a .pt2 archive (a ZIP: one root folder, STORED entries; weights are views into the mapping),
//   - an extracted archive folder (the root folder itself, or a folder holding just it), or
//   - a bare models/model.json, with weights read from the archive layout around it
//     (../data/weights/... relative to models/model.json).
// Throws UserError with a one-line message naming the file (and node and op where relevant) on
// any malformed, unsupported or inconsistent input; a file of another kind (a torch.save file, a
// TorchScript archive, an AOTInductor package, an ONNX model...) is named as such, with how to
// make a torch.export archive (file_kind.h). Does not run verify_graph.
Graph load_model(const std::string& path);

// Whether `path` is a regular file that starts as a ZIP archive does (a .pt2 archive, not a folder
// or a bare model.json).
bool starts_with_zip_magic(const std::string& path);

// Throws UserError naming the first opaque node (an operator that is not in the op registry):
// the compiler proper handles registry ops only.
void check_supported_ops(const Graph& g);

// A path as messages show it: as given when it is plain printable text, quoted otherwise.
std::string display_path(const std::string& path);

}  // namespace foundry
