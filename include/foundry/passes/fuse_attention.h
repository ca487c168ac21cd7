// Attention as one node. Exported models compute attention as two batched products around a
// softmax (scaled_dot_product_attention decomposes to that, and models write it out):
//
//   bmm(q [N,L,E], k_t [N,E,S]) -> views, scalings (mul / div by a number) -> add(mask) ->
//   _softmax(-1) -> [_safe_softmax's where(all -inf, 0, ...)] -> views -> bmm(., v [N,S,Ev])
//
// which materializes the [N, L, S] scores and passes over them several times. When the scores of
// one batch entry are large (kMinFusedScores), this pass replaces the chain by one
// _foundry_attention(q, k_t, v, mask, scale, masked_rows_zero) node, which the CPU runs block by
// block without the score matrix (runtime/foundry_attention.h). The intermediate values must have
// no other reader; float32 and static sizes only.
#pragma once
#include <cstdint>

#include "foundry/graph/graph.h"

namespace foundry::passes {

// Scores per batch entry (L * S) from which the fused call is the faster. Each block of queries
// costs two sgemm calls (a few microseconds) and saves the passes over its scores. On the 2-core
// AVX-512 build machine, chain against fused call: 16 x 16 (corpus encoder_layer) 31 against 38
// us per run; 197 x 197 (samples/vit_block) 1.64 against 1.62 ms at one thread, 1.66 against
// 0.92 at two; 1024 x 1024 (samples/long_attention) 7.2 against 5.1 and 8.6 against 6.8 ms a call.
constexpr int64_t kMinFusedScores = 128 * 128;

bool fuse_attention(Graph& g);

}  // namespace foundry::passes
