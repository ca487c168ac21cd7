#include "foundry/codegen/model_name.h"

#include <cctype>
#include <string_view>

namespace foundry::codegen {

namespace {

struct Reserved {
  std::string_view name;
  std::string_view owner;
};

// Whole namespaces: the name itself and every name starting with it and '_' (dnnl_primitive
// would define dnnl_primitive_create, which oneDNN calls). libstdc++'s and libgcc's C symbols
// (__cxa_*, _Unwind_*) and GOMP_*/Sleef_*/cuXxx spellings start with '_' or hold an uppercase
// letter, which a model name cannot; their libraries' lowercase prefixes are listed all the same.
constexpr Reserved kPrefixes[] = {
    {"pthread", "the C library's POSIX threads (pthread_create)"},
    {"posix", "the C library (posix_spawnattr_destroy)"},
    {"sem", "the C library (sem_destroy)"},
    {"timer", "the C library (timer_create)"},
    {"thrd", "the C library's C11 threads (thrd_create)"},
    {"mtx", "the C library's C11 threads (mtx_destroy)"},
    {"cnd", "the C library's C11 threads (cnd_destroy)"},
    {"tss", "the C library's C11 threads (tss_create)"},
    {"clnt", "the C library's Sun RPC (clnt_create)"},
    {"svc", "the C library's Sun RPC (svc_run)"},
    {"xdr", "the C library's Sun RPC (xdr_*)"},
    {"omp", "OpenMP (omp_*)"},
    {"gomp", "OpenMP's GNU runtime libgomp (GOMP_*)"},
    {"kmp", "OpenMP's LLVM runtime (kmp_*, __kmpc_*)"},
    {"ompt", "OpenMP's tools interface (ompt_*)"},
    {"dnnl", "oneDNN (dnnl_primitive_create)"},
    {"mkldnn", "oneDNN (mkldnn_*)"},
    {"onednn", "oneDNN"},
    {"sleef", "SLEEF (Sleef_*)"},
    {"cuda", "the CUDA runtime (cuda*)"},
    {"cublas", "cuBLAS"},
    {"cublaslt", "cuBLASLt"},
    {"cudnn", "cuDNN"},
    {"cufft", "cuFFT"},
    {"curand", "cuRAND"},
    {"cusparse", "cuSPARSE"},
    {"cusolver", "cuSOLVER"},
    {"nccl", "NCCL"},
    {"nvrtc", "NVRTC"},
    {"nvtx", "NVTX"},
    {"nvml", "NVML"},
    {"cupti", "CUPTI"},
    {"foundry", "foundryc's own runtime (foundry_tensor, foundry_rt)"},
};

// Single names whose NAME_create, NAME_destroy or NAME_run is a C library function.
constexpr Reserved kNames[] = {
    {"argz", "the C library (argz_create)"},         {"authdes", "the C library (authdes_create)"},
    {"authdes_pk", "the C library (authdes_pk_create)"}, {"authnone", "the C library (authnone_create)"},
    {"authunix", "the C library (authunix_create)"}, {"clntraw", "the C library (clntraw_create)"},
    {"clnttcp", "the C library (clnttcp_create)"},   {"clntudp", "the C library (clntudp_create)"},
    {"clntunix", "the C library (clntunix_create)"}, {"epoll", "the C library (epoll_create)"},
    {"memfd", "the C library (memfd_create)"},       {"svcfd", "the C library (svcfd_create)"},
    {"svcraw", "the C library (svcraw_create)"},     {"svctcp", "the C library (svctcp_create)"},
    {"svcudp", "the C library (svcudp_create)"},     {"svcunix", "the C library (svcunix_create)"},
    {"timerfd", "the C library (timerfd_create)"},   {"xdrmem", "the C library (xdrmem_create)"},
    {"xdrrec", "the C library (xdrrec_create)"},     {"xdrstdio", "the C library (xdrstdio_create)"},
};

bool in_namespace(std::string_view name, std::string_view prefix) {
  return name == prefix || (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix &&
                            name[prefix.size()] == '_');
}

}  // namespace

std::string reserved_name_owner(const std::string& name) {
  for (const Reserved& r : kNames)
    if (name == r.name) return std::string(r.owner);
  for (const Reserved& r : kPrefixes)
    if (in_namespace(name, r.name)) return std::string(r.owner);
  return "";
}

std::string exports_version_script(const std::string& name) {
  return "/* model.so exports the " + name + "_* functions of model.h and nothing else. */\n{\n  global:\n    " + name +
         "_*;\n  local:\n    *;\n};\n";
}

std::string model_name_problem(const std::string& name) {
  if (name.empty() || !std::islower(static_cast<unsigned char>(name[0])))
    return "it must start with a lowercase letter";
  for (char c : name)
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_')
      return "it must be a C identifier of lowercase letters, digits and '_'";
  if (name.size() > kMaxModelNameLength)
    return "it is " + std::to_string(name.size()) + " characters long, the limit is " +
           std::to_string(kMaxModelNameLength);
  if (std::string owner = reserved_name_owner(name); !owner.empty())
    return "it is reserved: model.so exports " + name + "_create, " + name +
           "_run, ... and names in this namespace belong to " + owner;
  return "";
}

}  // namespace foundry::codegen
