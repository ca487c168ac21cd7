// Telling what a file that is not a torch.export archive is, from its entry names or first bytes,
// through one table: how each kind is recognised, what it is called, what to do with it.
#include "foundry/frontend/file_kind.h"

#include <algorithm>
#include <cstdint>

#include "foundry/support/error.h"

namespace foundry {

namespace {

constexpr const char* kExportHint =
    "export the model with `ep = torch.export.export(model, example_inputs)` and save it with "
    "`torch.export.save(ep, \"model.pt2\")`";

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

uint8_t byte_at(std::string_view s, size_t i) { return i < s.size() ? static_cast<uint8_t>(s[i]) : 0; }

// A pickle of protocol 2 to 5 opens with PROTO (0x80) and the protocol number.
bool is_pickle(const FileFacts& f) {
  return !f.zip && byte_at(f.head, 0) == 0x80 && byte_at(f.head, 1) >= 2 && byte_at(f.head, 1) <= 5;
}

// torch.save's legacy format pickles its magic number 0x1950a86a20f9469cfc6c first (as LONG1, 10
// bytes little-endian), after a FRAME opcode (0x95 and 8 bytes) from protocol 4 on.
bool is_legacy_torch_save(const FileFacts& f) {
  static constexpr std::string_view kMagic("\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 12);
  if (!is_pickle(f)) return false;
  size_t at = byte_at(f.head, 2) == 0x95 ? 11 : 2;
  return f.head.substr(std::min(at, f.head.size()), kMagic.size()) == kMagic;
}

// An ONNX ModelProto opens with field 1, ir_version (tag 0x08, a small varint), and names its
// producer ("pytorch", "tf2onnx", "skl2onnx"...) or an opset domain ("ai.onnx") soon after.
bool is_onnx(const FileFacts& f) {
  if (f.zip || byte_at(f.head, 0) != 0x08 || byte_at(f.head, 1) == 0 || byte_at(f.head, 1) >= 0x80) return false;
  std::string_view start = f.head.substr(0, 256);
  return start.find("onnx") != std::string_view::npos || start.find("pytorch") != std::string_view::npos;
}

// safetensors: an 8-byte little-endian header length (far below 2^48), then the header, a JSON object.
bool is_safetensors(const FileFacts& f) {
  return !f.zip && f.head.size() >= 10 && byte_at(f.head, 6) == 0 && byte_at(f.head, 7) == 0 &&
         f.head.substr(8, 2) == "{\"";
}

bool is_gzip(const FileFacts& f) { return !f.zip && starts_with(f.head, "\x1f\x8b"); }

// POSIX tar: "ustar" at offset 257 of the first header block.
bool is_tar(const FileFacts& f) { return !f.zip && f.head.substr(std::min<size_t>(257, f.head.size()), 5) == "ustar"; }

constexpr const char* kLoadWeights = "load it into the model in Python (torch.load, model.load_state_dict), then ";

struct FileKind {
  bool (*recognise)(const FileFacts&);
  const char* what;  // what the file is
  const char* todo;  // what to do, before kExportHint
};

// In order: the first kind that recognises the file names it (TorchScript archives hold a data.pkl
// too; a legacy torch.save file is also a pickle).
const FileKind kFileKinds[] = {
    {[](const FileFacts& f) { return f.aotinductor; },
     "an AOTInductor package (torch._inductor.aoti_compile_and_package): a model already compiled by AOTInductor, "
     "without its torch.export program",
     "foundryc needs the torch.export program instead: "},
    {[](const FileFacts& f) { return f.old_export_program; },
     "a torch.export archive of torch 2.5 or earlier (serialized_exported_program.json), a format foundryc does "
     "not read",
     "with torch 2.9 or later, "},
    {[](const FileFacts& f) { return f.torchscript_code; },
     "a TorchScript archive (torch.jit.save), not a torch.export archive",
     "foundryc does not read TorchScript: starting from the Python model (the nn.Module, not the scripted one), "},
    {[](const FileFacts& f) { return f.data_pkl; },
     "a torch.save file (a state_dict or a pickled module: weights without a graph), not a torch.export archive",
     kLoadWeights},
    {[](const FileFacts& f) { return f.zip; },
     "a ZIP file but not a torch.export archive (it has no models/model.json under a root folder)", ""},
    {is_legacy_torch_save,
     "a torch.save file in the legacy pickle format (_use_new_zipfile_serialization=False): weights without a "
     "graph, not a torch.export archive",
     kLoadWeights},
    {is_pickle, "a Python pickle (pickle.dump, or torch.save's legacy format), not a torch.export archive",
     "if it holds the model, load it in Python, then "},
    {is_onnx, "an ONNX model, not a torch.export archive",
     "foundryc does not read ONNX: starting from the PyTorch model, "},
    {is_safetensors, "a safetensors file (weights without a graph), not a torch.export archive",
     "load it into the model in Python (safetensors.torch.load_file, model.load_state_dict), then "},
    {is_gzip, "a gzip-compressed file, not a .pt2 archive (a ZIP file)",
     "if it holds a .pt2 archive, decompress it (gunzip) first; otherwise "},
    {is_tar, "a tar archive, not a .pt2 archive (a ZIP file)",
     "if it holds a .pt2 archive, extract it (tar -xf) first; otherwise "},
    {[](const FileFacts& f) { return !f.zip && f.head.empty(); }, "an empty file, not a .pt2 archive (a ZIP file)", ""},
};

// The full name below its first folder ("model/models/model.json" -> "models/model.json").
std::string_view below_root(std::string_view name) {
  size_t slash = name.find('/');
  return slash == std::string_view::npos ? std::string_view() : name.substr(slash + 1);
}

// How the first bytes of an unknown file read: quoted text, or bytes in hex.
std::string describe_start(std::string_view head) {
  std::string_view start = head.substr(0, 16);
  bool text = std::all_of(start.begin(), start.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u < 0x7f) || c == '\n' || c == '\r' || c == '\t';
  });
  if (text) return quote_untrusted(std::string(head.substr(0, 40)), 40);
  static const char* kHex = "0123456789abcdef";
  std::string bytes = "bytes";
  for (char c : start.substr(0, 8)) {
    auto u = static_cast<unsigned char>(c);
    bytes += ' ';
    bytes += kHex[u >> 4];
    bytes += kHex[u & 15];
  }
  return bytes;
}

}  // namespace

FileFacts zip_file_facts(const Archive& archive) {
  FileFacts f;
  f.zip = true;
  // torch writes every entry under a root folder named after the file; look there and at the top.
  for (std::string_view full : archive.entry_names()) {
    for (std::string_view name : {full, below_root(full)}) {
      f.export_program |= name == "models/model.json";
      f.old_export_program |= name == "serialized_exported_program.json";
      f.aotinductor |= starts_with(name, "data/aotinductor/");
      f.torchscript_code |= starts_with(name, "code/");
      f.data_pkl |= name == "data.pkl";
    }
  }
  return f;
}

FileFacts plain_file_facts(const Blob& file) {
  FileFacts f;
  f.head = std::string_view(reinterpret_cast<const char*>(file.data), std::min(file.size, FileFacts::kHeadBytes));
  return f;
}

std::string not_an_export_archive(const FileFacts& facts) {
  for (const FileKind& kind : kFileKinds)
    if (kind.recognise(facts)) return std::string(kind.what) + "; " + kind.todo + kExportHint;
  return "neither a .pt2 archive (a ZIP file) nor a model.json: it starts with " + describe_start(facts.head) + "; " +
         kExportHint;
}

}  // namespace foundry
