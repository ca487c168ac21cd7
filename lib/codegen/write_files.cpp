#include <filesystem>
#include <fstream>

#include "foundry/codegen/model_name.h"
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

// A CMakeLists.txt that builds model.so from the sources beside it, with the flags foundryc's own
// build uses (lib/build/compile.cpp), so that `--emit=source` output builds on another machine:
//   cmake -S OUT -B OUT/build && cmake --build OUT/build   (-DFOUNDRY_MARCH=... for another CPU)
std::string standalone_cmake(const GeneratedModel& model) {
  bool dnnl = !model.externs_cpp.empty();
  std::string n = model.name;
  return "# Builds model.so from the sources foundryc wrote here (foundryc " + std::string(FOUNDRY_VERSION) +
         ").\n"
         "cmake_minimum_required(VERSION 3.16)\n"
         "project(" + n + " LANGUAGES CXX)\n"
         "# The vector loops were generated for this instruction set's width (kernels.cpp asserts it).\n"
         "set(FOUNDRY_MARCH " + model.march + " CACHE STRING \"-march of the generated code (haswell, skylake-avx512, x86-64, native)\")\n"
         "find_package(OpenMP REQUIRED)\n"
         "add_library(" + n + " SHARED kernels.cpp wrapper.cpp" + (dnnl ? " externs.cpp foundry_dnnl.cpp" : "") + ")\n"
         "set_target_properties(" + n + " PROPERTIES OUTPUT_NAME model PREFIX \"\" CXX_STANDARD 17\n"
         "  CXX_VISIBILITY_PRESET hidden LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})\n"
         "# -fwrapv: integer overflow wraps as in PyTorch; -fno-math-errno: math calls may vectorize.\n"
         "target_compile_options(" + n + " PRIVATE -O3 -fwrapv -fno-math-errno -fno-plt -march=${FOUNDRY_MARCH})\n"
         "# sleef: the vector math functions of the kernels.\n"
         "target_link_libraries(" + n + " PRIVATE OpenMP::OpenMP_CXX sleef" + (dnnl ? " dnnl" : "") + ")\n"
         "# exports.map: only the model's API is exported (not the C++ library's template instances).\n"
         "target_link_options(" + n + " PRIVATE -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/exports.map)\n";
}

// cuDNN for a CUDA model with convolutions: CMake has no module for it, so its header and library
// are looked for in the CUDA toolkit, $CUDNN_HOME and the system's folders.
std::string cudnn_cmake(const std::string& n) {
  return "find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDNN_HOME}/include)\n"
         "find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{CUDNN_HOME}/lib $ENV{CUDNN_HOME}/lib64)\n"
         "if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)\n"
         "  message(FATAL_ERROR \"this model's convolutions need cuDNN 9 (cudnn.h, libcudnn.so): install it or set CUDNN_HOME\")\n"
         "endif()\n"
         "target_include_directories(" + n + " PRIVATE ${CUDNN_INCLUDE_DIR})\n"
         "target_link_libraries(" + n + " PRIVATE ${CUDNN_LIBRARY})\n";
}

// The same for a CUDA model (CMake's CUDA language finds nvcc; the toolkit's cudart and cuBLAS,
// and cuDNN where the model has convolutions): the kernel parts are CUDA, the wrapper C++.
std::string standalone_cuda_cmake(const GeneratedModel& model) {
  std::string n = model.name, arch = model.march.substr(model.march.rfind('_') + 1), sources;
  for (size_t p = 0; p < model.kernel_parts.size(); ++p) sources += kernel_part_name(p) + " ";
  return "# Builds model.so from the CUDA sources foundryc wrote here (foundryc " + std::string(FOUNDRY_VERSION) +
         ").\n"
         "cmake_minimum_required(VERSION 3.18)\n"
         "project(" + n + " LANGUAGES CXX CUDA)\n"
         "find_package(CUDAToolkit REQUIRED)\n"
         "# The kernels (nvcc) and the host-only wrapper (the C++ compiler).\n"
         "add_library(" + n + " SHARED " + sources + "wrapper.cpp)\n"
         "set_target_properties(" + n + " PROPERTIES OUTPUT_NAME model PREFIX \"\" CUDA_STANDARD 17 CXX_STANDARD 17\n"
         "  CUDA_ARCHITECTURES " + arch + " CUDA_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden\n"
         "  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})\n"
         "target_compile_options(" + n + " PRIVATE -O3 $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>\n"
         "  $<$<COMPILE_LANGUAGE:CXX>:-fwrapv -fno-math-errno>)\n"
         "target_link_libraries(" + n + " PRIVATE CUDA::cudart CUDA::cublas)\n"
         "target_link_options(" + n + " PRIVATE -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/exports.map)\n" +
         (model.uses_cudnn ? cudnn_cmake(n) : "");
}

// Removes a CUDA model's kernel files that a model written here before left and this one has not
// written (kernels.cu and wrapper.cu of an older foundryc, kernel parts past this model's last):
// the build takes every part it finds.
void remove_stale_cuda_sources(const std::string& dir, size_t parts) {
  std::error_code ec;
  for (const char* old : {"/kernels.cu", "/wrapper.cu"}) std::filesystem::remove(dir + old, ec);
  for (size_t p = parts; std::filesystem::remove(dir + "/" + kernel_part_name(p), ec); ++p) {
  }
}

}  // namespace

std::string kernel_part_name(size_t index) { return "kernels_" + std::to_string(index) + ".cu"; }

void write_model_files(const GeneratedModel& model, const std::string& dir) {
  bool cuda = model.device == "cuda";
  if (cuda) {
    remove_stale_cuda_sources(dir, model.kernel_parts.size());
    for (size_t p = 0; p < model.kernel_parts.size(); ++p)
      write_text(dir + "/" + kernel_part_name(p), model.kernel_parts[p]);
  } else {
    write_text(dir + "/kernels.cpp", model.kernels_cpp);
  }
  write_text(dir + "/wrapper.cpp", model.wrapper_cpp);
  write_text(dir + "/model.h", model.model_h);
  if (!model.externs_cpp.empty()) write_text(dir + "/externs.cpp", model.externs_cpp);
  write_text(dir + "/exports.map", exports_version_script(model.name));
  write_text(dir + "/CMakeLists.txt", cuda ? standalone_cuda_cmake(model) : standalone_cmake(model));
  for (const RuntimeFile& f : runtime_files()) {
    const std::string name = f.name;
    // The CUDA runtime headers (foundry_cuda*.h, foundry_cudnn.h) go only with CUDA models; the
    // runtime sources (the oneDNN glue, foundry_dnnl.cpp) only with CPU models that have library
    // calls, since the build compiles each source it finds; the header the build precompiles
    // (foundry_prelude.h) only with CPU models.
    if (!cuda && name.rfind("foundry_cud", 0) == 0) continue;
    const bool source = name.size() > 4 && name.compare(name.size() - 4, 4, ".cpp") == 0;
    if ((source && (cuda || model.externs_cpp.empty())) || (cuda && name == "foundry_prelude.h")) {
      std::error_code ec;
      std::filesystem::remove(dir + "/" + name, ec);  // an earlier model's
      continue;
    }
    write_text(dir + "/" + name, std::string(reinterpret_cast<const char*>(f.data), f.size));
  }
  if (model.weights.total_bytes > 0) write_weights(dir + "/weights.bin", model.weights);
}

}  // namespace foundry::codegen
