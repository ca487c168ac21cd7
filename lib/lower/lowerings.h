// The lowering functions of each op family, referenced by the table in
// include/foundry/lower/lowerings.def. Factories return a LowerFn for ops that share a shape.
#pragma once
#include "foundry/ir/ops.h"
#include "foundry/lower/lowering.h"

namespace foundry::lower {

using Outs = std::vector<TensorRef>;

// pointwise.cpp
LowerFn unary(ir::UnaryOp op);
LowerFn binary(ir::BinaryOp op);  // also the .Scalar overloads; add/sub honour alpha
Outs lower_div_mode(LoweringContext&, const Node&);
Outs lower_polygamma(LoweringContext&, const Node&);
Outs lower_round_decimals(LoweringContext&, const Node&);
Outs lower_where(LoweringContext&, const Node&);
Outs lower_clamp(LoweringContext&, const Node&);
Outs lower_hardtanh(LoweringContext&, const Node&);
Outs lower_relu(LoweringContext&, const Node&);
Outs lower_leaky_relu(LoweringContext&, const Node&);
Outs lower_elu(LoweringContext&, const Node&);
Outs lower_gelu(LoweringContext&, const Node&);
Outs lower_pow_scalar_base(LoweringContext&, const Node&);
Outs lower_pow_tensor_scalar(LoweringContext&, const Node&);
Outs lower_to_copy(LoweringContext&, const Node&);
Outs lower_copy(LoweringContext&, const Node&);
Outs lower_identity(LoweringContext&, const Node&);
Outs lower_nothing(LoweringContext&, const Node&);

// views.cpp
Outs lower_view(LoweringContext&, const Node&);
Outs lower_permute(LoweringContext&, const Node&);
Outs lower_expand(LoweringContext&, const Node&);
Outs lower_unsqueeze(LoweringContext&, const Node&);
Outs lower_squeeze(LoweringContext&, const Node&);
Outs lower_select(LoweringContext&, const Node&);
Outs lower_slice(LoweringContext&, const Node&);
Outs lower_as_strided(LoweringContext&, const Node&);
Outs lower_diagonal(LoweringContext&, const Node&);
Outs lower_unfold(LoweringContext&, const Node&);
Outs lower_flip(LoweringContext&, const Node&);
Outs lower_split_with_sizes(LoweringContext&, const Node&);

// reductions.cpp
Outs lower_sum(LoweringContext&, const Node&);   // sum, sum.dim_IntList
Outs lower_prod(LoweringContext&, const Node&);  // prod, prod.dim_int
Outs lower_mean(LoweringContext&, const Node&);  // mean, mean.dim
LowerFn lower_extremum(bool is_max);             // amax/amin, max/min (all elements)
Outs lower_any(LoweringContext&, const Node&);   // any, any.dim, any.dims
LowerFn lower_arg_extremum(bool is_max);         // argmax/argmin
LowerFn lower_extremum_with_index(bool is_max);  // max.dim/min.dim
Outs lower_var(LoweringContext&, const Node&);   // var.correction, var_mean.correction
LowerFn lower_scan(bool is_prod);                // cumsum/cumprod
Outs lower_logcumsumexp(LoweringContext&, const Node&);
Outs lower_searchsorted(LoweringContext&, const Node&);  // and bucketize
LowerFn lower_median(bool ignore_nan);  // median, nanmedian, nanmedian.dim
Outs lower_histc(LoweringContext&, const Node&);
Outs lower_grouped_mm(LoweringContext&, const Node&);  // and transformers' grouped_mm_fallback
LowerFn lower_softmax(bool is_log);              // _softmax/_log_softmax

// sorting.cpp
Outs lower_sort(LoweringContext&, const Node&);  // sort, sort.stable
Outs lower_topk(LoweringContext&, const Node&);

// norms.cpp
Outs lower_native_layer_norm(LoweringContext&, const Node&);
Outs lower_native_group_norm(LoweringContext&, const Node&);
Outs lower_batch_norm_no_training(LoweringContext&, const Node&);
Outs lower_batch_norm_batch_stats(LoweringContext&, const Node&);  // _native_batch_norm_legit.no_stats

// nn.cpp
Outs lower_mm(LoweringContext&, const Node&);
Outs lower_bmm(LoweringContext&, const Node&);
Outs lower_foundry_attention(LoweringContext&, const Node&);
Outs lower_addmm(LoweringContext&, const Node&);
Outs lower_convolution(LoweringContext&, const Node&);              // convolution, conv2d
Outs lower_max_pool2d_with_indices(LoweringContext&, const Node&);  // also max_pool2d
Outs lower_avg_pool2d(LoweringContext&, const Node&);
Outs lower_adaptive_avg_pool2d(LoweringContext&, const Node&);
Outs lower_adaptive_max_pool2d(LoweringContext&, const Node&);      // _adaptive_avg_pool2d, adaptive_avg_pool2d
Outs lower_upsample_nearest2d(LoweringContext&, const Node&);
Outs lower_upsample_bilinear2d(LoweringContext&, const Node&);
Outs lower_upsample_bicubic2d(LoweringContext&, const Node&);

// creation.cpp
Outs lower_full(LoweringContext&, const Node&);
Outs lower_full_like(LoweringContext&, const Node&);
Outs lower_scalar_tensor(LoweringContext&, const Node&);
Outs lower_sym_size(LoweringContext&, const Node&);
Outs lower_arange(LoweringContext&, const Node&);
Outs lower_empty(LoweringContext&, const Node&);  // empty.memory_format, empty_permuted

// indexing.cpp
Outs lower_gather(LoweringContext&, const Node&);
Outs lower_index_select(LoweringContext&, const Node&);
Outs lower_embedding(LoweringContext&, const Node&);

// embedding_bag.cpp
Outs lower_embedding_bag(LoweringContext&, const Node&);  // _embedding_bag

// grid_sample.cpp
Outs lower_grid_sampler_2d(LoweringContext&, const Node&);

// linalg.cpp
Outs lower_cholesky(LoweringContext&, const Node&);
Outs lower_cholesky_inverse(LoweringContext&, const Node&);
Outs lower_cholesky_solve(LoweringContext&, const Node&);
Outs lower_lu_factor(LoweringContext&, const Node&);
Outs lower_lu_solve(LoweringContext&, const Node&);
Outs lower_inv(LoweringContext&, const Node&);
Outs lower_solve(LoweringContext&, const Node&);
Outs lower_det(LoweringContext&, const Node&);
Outs lower_slogdet(LoweringContext&, const Node&);
Outs lower_solve_triangular(LoweringContext&, const Node&);
Outs lower_eigh(LoweringContext&, const Node&);
Outs lower_svd(LoweringContext&, const Node&);
Outs lower_householder_product(LoweringContext&, const Node&);
Outs lower_ormqr(LoweringContext&, const Node&);
Outs lower_ldl_solve(LoweringContext&, const Node&);
Outs lower_index_tensor(LoweringContext&, const Node&);  // index.Tensor (advanced indexing)
Outs lower_index_put(LoweringContext&, const Node&);
Outs lower_scatter_src(LoweringContext&, const Node&);
Outs lower_scatter_value(LoweringContext&, const Node&);
Outs lower_scatter_add(LoweringContext&, const Node&);
Outs lower_scatter_reduce(LoweringContext&, const Node&);  // scatter_reduce.two
Outs lower_select_scatter(LoweringContext&, const Node&);
Outs lower_slice_scatter(LoweringContext&, const Node&);
Outs lower_diagonal_scatter(LoweringContext&, const Node&);

// shape_ops.cpp
Outs lower_cat(LoweringContext&, const Node&);
Outs lower_constant_pad_nd(LoweringContext&, const Node&);
Outs lower_repeat(LoweringContext&, const Node&);

}  // namespace foundry::lower
