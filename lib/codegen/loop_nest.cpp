#include "foundry/codegen/loop_nest.h"

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

}  // namespace foundry::codegen
