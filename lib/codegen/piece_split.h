// A C++ kernel's loop split into pieces where its body chooses by that loop's variable (Halide's
// loop partitioning): a concatenation read by a fused consumer picks, for each element, one of
// its N sources by comparisons of the channel with the pieces' ends, and, written once for all
// channels, loads from every source and selects (N loads a vector, N² work over a DenseNet block).
// Written once per piece, inside the loop (`if (i0 < 64) {...} else if (i0 < 96) ...`), each
// piece decides those comparisons, keeps the one load it reads and drops the rest.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "foundry/codegen/loop_nest.h"
#include "foundry/sched/kernel_walk.h"

namespace foundry::codegen {

// The pieces of loop `var`: [0, ends[0]), [ends[0], ends[1]), ..., [ends.back(), extent).
struct PieceSplit {
  std::string var;
  std::vector<int64_t> ends;
  int64_t extent = 0;
};

// The outermost of `candidates` (loop variables of constant `extents`, none of them a vector
// loop's) whose comparisons with constants in the kernel's body split it into 2 to kMaxPieces
// pieces; nullopt when none does.
std::optional<PieceSplit> find_piece_split(const sched::Kernel& kernel, const sched::Schedule& schedule,
                                           const std::vector<std::string>& candidates,
                                           const std::vector<int64_t>& extents);

// One loop nest from the nests written for each piece (`nests[k]` for piece k): the first nest,
// with the body of the split loop (or of the innermost loop collapsed with it, since threads
// share collapsed loops only when nothing stands between them) made cases, one per piece, each
// with that piece's body less the values it no longer reads. nullopt when the nests differ
// elsewhere (a piece whose body vectorized otherwise, say) or when the kernel would pass kMaxLines:
// the kernel is then written whole.
std::optional<Stmts> merge_pieces(std::vector<Stmts> nests, const PieceSplit& split);

}  // namespace foundry::codegen
