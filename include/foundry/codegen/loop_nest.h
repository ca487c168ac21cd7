// A kernel as a loop nest: loops with their ranges and how they run (threads, SIMD hints, steps
// of a vector), parallel regions, and the body statements that the scalar and vector handlers
// wrote. The kernel emitter builds it from the scheduler's plan; a printer turns it into text
// (print_cpp: C++ with OpenMP pragmas; print_cuda: CUDA C++, the loops marked for the GPU mapped
// to the grid, the blocks and the threads of a block).
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace foundry::codegen {

struct Stmt;
using Stmts = std::vector<Stmt>;

// `for (int64_t var = begin; var < end; var += step)`; bounds are C++ index expressions.
struct Loop {
  enum class Threads {
    None,
    Team,    // starts a team of threads that share the iterations (`omp parallel for`)
    Shared,  // shares the iterations among the enclosing region's team (`omp for`)
    // CUDA (print_cuda only): every thread of the grid takes iterations, grid-stride
    Grid,
    // CUDA: each block takes iterations (`blockIdx.x`, stepping by `gridDim.x`)
    Blocks,
    // CUDA: the threads of a block share the iterations (`threadIdx.x`, stepping by `blockDim.x`)
    BlockThreads,
  };
  std::string var, begin = "0", end;
  int64_t step = 1;
  Threads threads = Threads::None;
  int collapse = 1;            // threads share this loop and the collapse-1 loops inside it
  std::string num_threads;     // Team: the team's size (C++ expression)
  std::string condition;       // Team: run on threads only when this holds ("" = always)
  // BlockThreads over a static extent: each thread takes its iterations in ceil(end / kThreads)
  // unrolled rounds (`slot`; the kernel defines kThreads), so arrays indexed by the round stay
  // in registers (RowRegisters, kernel_scopes.h).
  bool rounds = false;
  bool unroll = false;  // CUDA: `#pragma unroll` (a loop of constant extent, e.g. a vector's lanes)
  bool simd = false;           // iterations may also run in SIMD lanes (`omp simd`)
  std::string simd_reduction;  // simd: the accumulators combined across lanes, "+:acc0, acc1"
  Stmts body;
};

// A block run by a team of threads, whose `Shared` loops divide the work (`omp parallel`):
// `reduction` combines a per-thread variable after the block ("|:errors").
struct ParallelRegion {
  std::string num_threads, condition, reduction;
  Stmts body;
};

// `if (condition) {...} else if ... else {...}`: the first case whose condition holds runs; the
// last case's condition is "" (else). C++ kernels only (a loop split into pieces, piece_split.h).
struct Cases {
  std::vector<std::pair<std::string, Stmts>> cases;
};

// A statement of a kernel: one line of code, a loop, a parallel region, or cases.
struct Stmt {
  std::variant<std::string, Loop, ParallelRegion, Cases> node;
  Stmt(std::string line) : node(std::move(line)) {}  // NOLINT: lines read as statements
  Stmt(Loop loop) : node(std::move(loop)) {}         // NOLINT
  Stmt(ParallelRegion region) : node(std::move(region)) {}  // NOLINT
  Stmt(Cases cases) : node(std::move(cases)) {}             // NOLINT
};

// A plain loop over [begin, end) by `step`.
Loop loop_over(std::string var, std::string begin, std::string end, int64_t step = 1);

// Appends `from` to `to`.
void append(Stmts& to, const Stmts& from);
void append_lines(Stmts& to, const std::vector<std::string>& lines);

// The C++ text of `stmts`, one line each, indented by `indent` (two spaces a level).
void print_cpp(const Stmts& stmts, const std::string& indent, std::vector<std::string>& out);
// The CUDA C++ text of `stmts`: Grid, Blocks and BlockThreads loops over the GPU's indices
// (64-bit: a grid may hold more than 2^31 threads' worth of elements); no OpenMP pragmas or
// parallel regions (a bug to meet one).
void print_cuda(const Stmts& stmts, const std::string& indent, std::vector<std::string>& out);

}  // namespace foundry::codegen
