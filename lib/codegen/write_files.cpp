#include <fstream>

#include "foundry/codegen/runtime_files.h"
#include "foundry/codegen/wrapper.h"
#include "foundry/support/error.h"

namespace foundry::codegen {
namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw UserError("cannot write " + path);
}

void write_weights(const std::string& path, const WeightsLayout& layout) {
  std::ofstream out(path, std::ios::binary);
  int64_t pos = 0;
  static const char zeros[64] = {};
  for (const auto& piece : layout.pieces) {
    while (pos < piece.offset) {
      int64_t n = std::min<int64_t>(64, piece.offset - pos);
      out.write(zeros, n);
      pos += n;
    }
    out.write(reinterpret_cast<const char*>(piece.data.data), static_cast<std::streamsize>(piece.data.size));
    pos += static_cast<int64_t>(piece.data.size);
  }
  while (pos < layout.total_bytes) {
    int64_t n = std::min<int64_t>(64, layout.total_bytes - pos);
    out.write(zeros, n);
    pos += n;
  }
  if (!out) throw UserError("cannot write " + path);
}

}  // namespace

void write_model_files(const GeneratedModel& model, const std::string& dir) {
  write_text(dir + "/kernels.cpp", model.kernels_cpp);
  write_text(dir + "/wrapper.cpp", model.wrapper_cpp);
  write_text(dir + "/model.h", model.model_h);
  if (!model.externs_cpp.empty()) write_text(dir + "/externs.cpp", model.externs_cpp);
  for (const RuntimeFile& f : runtime_files())
    write_text(dir + "/" + f.name, std::string(reinterpret_cast<const char*>(f.data), f.size));
  if (model.weights.total_bytes > 0) write_weights(dir + "/weights.bin", model.weights);
}

}  // namespace foundry::codegen
