#pragma once
// GPT-style transformer layers as sequences of kernels.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/kernel.hpp"

namespace tessera::parallelism {

struct TransformerConfig {
  std::string name;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t ffn_hidden = 0;  ///< usually 4 * hidden
  std::int64_t vocab = 0;
  /// Llama-style grouped-query attention: number of key/value heads (0 = `heads`,
  /// i.e. ordinary multi-head attention).
  std::int64_t kv_heads = 0;
  /// Llama-style gated MLP (SwiGLU): fc1 produces 2 x ffn_hidden (gate and up)
  /// multiplied elementwise before fc2.
  bool gated_mlp = false;

  [[nodiscard]] std::int64_t kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  /// Parameters of one transformer layer (weights and biases, incl. 2 layer norms).
  [[nodiscard]] std::int64_t params_per_layer() const;
  /// Parameters of one layer held by one tensor-parallel rank: the column- and
  /// row-parallel weight matrices and the column-parallel biases are split `tp`
  /// ways; the row-parallel biases and the layer norms are replicated.
  [[nodiscard]] std::int64_t params_per_layer_per_tp_rank(std::int64_t tp) const;
  /// Token + position embeddings (the LM head is tied to the token embedding).
  [[nodiscard]] std::int64_t embedding_params(std::int64_t seq_len) const;
  /// Throws InputError naming the first bad field.
  void validate() const;
};

/// Shipped model presets: "gpt2-large", "gpt2-xl", "gpt3-xl", "gpt3-175b", "llama2-70b".
const TransformerConfig& model_preset(std::string_view name);
std::vector<std::string> model_preset_names();

struct Workload {
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;
  node_model::DType dtype = node_model::DType::FP32;
};

/// How one rank's share of a layer is cut (Megatron-LM tensor parallelism).
/// `tp` = 1 is the unsharded layer. With sequence parallelism the
/// layer norms, residual adds and dropouts run on seq_len / tp tokens.
struct Sharding {
  std::int64_t tp = 1;
  bool sequence_parallel = false;
};

/// Throws InputError unless `tp` divides heads, K/V heads, hidden and ffn_hidden
/// (and, with sequence parallelism, the sequence length).
void check_sharding(const TransformerConfig& m, const Workload& w, const Sharding& s);

struct Op {
  std::string name;
  node_model::Kernel kernel;
  /// Gradient kernels of a vector op in backward (GEMMs always get a data- and
  /// a weight-gradient GEMM): 1, or 0 for passes whose gradient is folded into
  /// another kernel (the cross-entropy's intermediate passes).
  int backward_kernels = 1;
};

/// Row width of flat streams (kFlatStreamRow elements per row).
inline constexpr std::int64_t kFlatStreamRow = 4096;
/// An elementwise kernel over `elements` contiguous elements (an optimizer
/// pass over all parameters, a pass over the logits), as the node model's
/// measured shapes have it: rows of kFlatStreamRow. A contiguous elementwise
/// kernel moves the same bytes whatever 2-D view it is given; a 1 x N row far
/// wider than any measured row would be outside the node model's range.
node_model::Kernel flat_stream(node_model::KernelOp op, std::int64_t elements, node_model::DType dtype);

/// Forward kernels of one layer, as Megatron-LM runs them in FP32: ln, QKV,
/// scores (bmm), layer-scaling multiply, causal mask, softmax, attention
/// dropout, context (bmm), context permute copy, projection, bias-dropout-add,
/// ln, fc1, bias-gelu, fc2, bias-dropout-add. With `shard`,
/// the kernels of one tensor-parallel rank (heads and MLP columns / tp).
std::vector<Op> layer_forward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Backward kernels of one layer: for each GEMM the data- and weight-gradient
/// GEMMs, for each vector op its gradient (same shape).
std::vector<Op> layer_backward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Token embedding lookup and position add (first pipeline stage).
std::vector<Op> embedding_forward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Final layer norm, LM head GEMM and softmax cross-entropy (last stage); the
/// LM head is vocabulary-parallel (vocab / tp columns per rank).
std::vector<Op> lm_head_forward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Backward kernels of a forward op list, in reverse order.
std::vector<Op> backward_ops(const std::vector<Op>& forward);
/// Adam step over `params` parameters, as PyTorch's eager Adam runs it
/// (a few elementwise passes over parameters, gradients and two moments).
std::vector<Op> optimizer_ops(std::int64_t params, node_model::DType state_dtype);
/// Adam as one fused multi-tensor kernel (apex/Transformer Engine FusedAdam, what
/// Megatron-LM runs): reads parameters, gradients and both moments once and
/// writes parameters and moments (7 passes over `params` elements), plus, with
/// `clip_gradients`, the global gradient norm (1 pass) and the rescale (2 passes).
std::vector<Op> fused_optimizer_ops(std::int64_t params, node_model::DType state_dtype, bool clip_gradients);

}  // namespace tessera::parallelism
