// What a file handed to foundryc is when it is not a torch.export archive: users pass torch.save
// files, TorchScript archives, AOTInductor packages (also named .pt2), ONNX models. The message
// names the kind and says how to make the file foundryc reads.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "foundry/frontend/archive.h"

namespace foundry {

// All that telling the kinds apart looks at: the first bytes of a file that is not a ZIP, or the
// entry names of one that is (as its directory already lists them).
struct FileFacts {
  static constexpr size_t kHeadBytes = 512;
  std::string_view head;  // the first kHeadBytes bytes of a file that is not a ZIP (all of a shorter one)
  bool zip = false;
  // Entries of a ZIP file, under its root folder or at its top.
  bool export_program = false;      // models/model.json: a torch.export archive
  bool old_export_program = false;  // serialized_exported_program.json: torch.export.save of torch <= 2.5
  bool aotinductor = false;         // data/aotinductor/...: an AOTInductor package
  bool torchscript_code = false;    // code/...: a TorchScript archive
  bool data_pkl = false;            // data.pkl: torch.save's pickle (TorchScript has one too)
};

// The facts of a ZIP archive, from its entry names.
FileFacts zip_file_facts(const Archive& archive);
// The facts of a file that is not a ZIP, from its first bytes.
FileFacts plain_file_facts(const Blob& file);

// The message for a file that is not a torch.export archive: what it is, then how to make the
// archive, ending with the same torch.export.save hint for every kind. Untrusted bytes are quoted.
std::string not_an_export_archive(const FileFacts& facts);

}  // namespace foundry
