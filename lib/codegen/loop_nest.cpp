#include "foundry/codegen/loop_nest.h"

#include "foundry/support/error.h"

namespace foundry::codegen {
namespace {

// The OpenMP pragma of a loop, "" when it runs plainly.
std::string loop_pragma(const Loop& loop) {
  std::string p;
  if (loop.threads == Loop::Threads::Team) p = "#pragma omp parallel for";
  if (loop.threads == Loop::Threads::Shared) p = "#pragma omp for";
  if (loop.simd) p += p.empty() ? "#pragma omp simd" : " simd";
  if (!loop.simd_reduction.empty()) p += " reduction(" + loop.simd_reduction + ")";
  if (loop.threads != Loop::Threads::None && loop.collapse > 1) p += " collapse(" + std::to_string(loop.collapse) + ")";
  if (loop.threads == Loop::Threads::Team) {
    p += " num_threads(" + loop.num_threads + ")";
    if (!loop.condition.empty()) p += " if(" + loop.condition + ")";
  }
  return p;
}

struct CppPrinter {
  std::vector<std::string>& out;

  void operator()(const std::string& line, const std::string& indent) { out.push_back(indent + line); }

  void operator()(const Loop& loop, const std::string& indent) {
    FOUNDRY_CHECK(loop.threads == Loop::Threads::None || loop.threads == Loop::Threads::Team ||
                      loop.threads == Loop::Threads::Shared,
                  "bug: a CUDA loop in a C++ kernel");
    if (std::string pragma = loop_pragma(loop); !pragma.empty()) out.push_back(indent + pragma);
    std::string step = loop.step == 1 ? "++" + loop.var : loop.var + " += " + std::to_string(loop.step);
    out.push_back(indent + "for (int64_t " + loop.var + " = " + loop.begin + "; " + loop.var + " < " + loop.end + "; " +
                  step + ") {");
    print_cpp(loop.body, indent + "  ", out);
    out.push_back(indent + "}");
  }

  void operator()(const ParallelRegion& region, const std::string& indent) {
    std::string head = "#pragma omp parallel num_threads(" + region.num_threads + ")";
    if (!region.condition.empty()) head += " if(" + region.condition + ")";
    if (!region.reduction.empty()) head += " reduction(" + region.reduction + ")";
    out.push_back(indent + head);
    out.push_back(indent + "{");
    print_cpp(region.body, indent + "  ", out);
    out.push_back(indent + "}");
  }

  void operator()(const Cases& cases, const std::string& indent) {
    for (size_t k = 0; k < cases.cases.size(); ++k) {
      const auto& [condition, body] = cases.cases[k];
      const std::string head = condition.empty() ? "else {" : (k ? "else if (" : "if (") + condition + ") {";
      out.push_back(indent + (k ? "} " : "") + head);
      print_cpp(body, indent + "  ", out);
    }
    out.push_back(indent + "}");
  }
};

// The first iteration a GPU thread takes and how far it steps, by the loop's mapping.
std::pair<std::string, std::string> cuda_start_step(const Loop& loop) {
  std::string begin = loop.begin == "0" ? "" : loop.begin + " + ";
  switch (loop.threads) {
    case Loop::Threads::Grid:
      return {begin + "static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x",
              "static_cast<int64_t>(gridDim.x) * blockDim.x"};
    case Loop::Threads::Blocks: return {begin + "static_cast<int64_t>(blockIdx.x)", "gridDim.x"};
    case Loop::Threads::BlockThreads: return {begin + "static_cast<int64_t>(threadIdx.x)", "blockDim.x"};
    case Loop::Threads::None: return {loop.begin, std::to_string(loop.step)};
    default: throw InternalError("bug: an OpenMP loop in a CUDA kernel");
  }
}

struct CudaPrinter {
  std::vector<std::string>& out;

  void operator()(const std::string& line, const std::string& indent) { out.push_back(indent + line); }

  void operator()(const Loop& loop, const std::string& indent) {
    if (loop.rounds) return print_rounds(loop, indent);
    auto [start, step] = cuda_start_step(loop);
    std::string next = step == "1" ? "++" + loop.var : loop.var + " += " + step;
    if (loop.unroll) out.push_back(indent + "#pragma unroll");
    out.push_back(indent + "for (int64_t " + loop.var + " = " + start + "; " + loop.var + " < " + loop.end + "; " +
                  next + ") {");
    print_cuda(loop.body, indent + "  ", out);
    out.push_back(indent + "}");
  }

  void operator()(const ParallelRegion&, const std::string&) {
    throw InternalError("bug: an OpenMP parallel region in a CUDA kernel");
  }
  void operator()(const Cases&, const std::string&) { throw InternalError("bug: a loop split into pieces in a CUDA kernel"); }

  void print_rounds(const Loop& loop, const std::string& indent) {
    FOUNDRY_CHECK(loop.threads == Loop::Threads::BlockThreads && loop.begin == "0", "rounds of a loop that is not a row's");
    out.push_back(indent + "#pragma unroll");
    out.push_back(indent + "for (int slot = 0; slot < (" + loop.end + " + kThreads - 1) / kThreads; ++slot) {");
    out.push_back(indent + "  const int64_t " + loop.var + " = static_cast<int64_t>(threadIdx.x) + slot * kThreads;");
    out.push_back(indent + "  if (" + loop.var + " < " + loop.end + ") {");
    print_cuda(loop.body, indent + "    ", out);
    out.push_back(indent + "  }");
    out.push_back(indent + "}");
  }
};

}  // namespace

Loop loop_over(std::string var, std::string begin, std::string end, int64_t step) {
  Loop loop;
  loop.var = std::move(var);
  loop.begin = std::move(begin);
  loop.end = std::move(end);
  loop.step = step;
  return loop;
}

void append(Stmts& to, const Stmts& from) { to.insert(to.end(), from.begin(), from.end()); }

void append_lines(Stmts& to, const std::vector<std::string>& lines) { to.insert(to.end(), lines.begin(), lines.end()); }

void print_cpp(const Stmts& stmts, const std::string& indent, std::vector<std::string>& out) {
  CppPrinter printer{out};
  for (const Stmt& s : stmts) std::visit([&](const auto& node) { printer(node, indent); }, s.node);
}

void print_cuda(const Stmts& stmts, const std::string& indent, std::vector<std::string>& out) {
  CudaPrinter printer{out};
  for (const Stmt& s : stmts) std::visit([&](const auto& node) { printer(node, indent); }, s.node);
}

}  // namespace foundry::codegen
