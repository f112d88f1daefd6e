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

  /// Parameters of one transformer layer (weights and biases, incl. 2 layer norms).
  [[nodiscard]] std::int64_t params_per_layer() const;
  /// Token + position embeddings (the LM head is tied to the token embedding).
  [[nodiscard]] std::int64_t embedding_params(std::int64_t seq_len) const;
  /// Throws InputError naming the first bad field.
  void validate() const;
};

/// Shipped model presets: "gpt2-large", "gpt2-xl", "gpt3-xl", "gpt3-175b".
const TransformerConfig& model_preset(std::string_view name);
std::vector<std::string> model_preset_names();

struct Workload {
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;
  node_model::DType dtype = node_model::DType::FP32;
};

struct Op {
  std::string name;
  node_model::Kernel kernel;
};

/// Forward kernels of one layer: ln, QKV, scores (bmm), softmax, context (bmm),
/// projection, residual add, ln, fc1, gelu, fc2, residual add.
std::vector<Op> layer_forward_ops(const TransformerConfig& m, const Workload& w);
/// Backward kernels of one layer: for each GEMM the data- and weight-gradient
/// GEMMs, for each vector op its gradient (same shape).
std::vector<Op> layer_backward_ops(const TransformerConfig& m, const Workload& w);
/// Token embedding lookup and position add (first pipeline stage).
std::vector<Op> embedding_forward_ops(const TransformerConfig& m, const Workload& w);
/// Final layer norm, LM head GEMM and softmax cross-entropy (last stage).
std::vector<Op> lm_head_forward_ops(const TransformerConfig& m, const Workload& w);
/// Backward kernels of a forward op list, in reverse order.
std::vector<Op> backward_ops(const std::vector<Op>& forward);
/// Adam step over `params` parameters, as PyTorch's eager Adam runs it
/// (a few elementwise passes over parameters, gradients and two moments).
std::vector<Op> optimizer_ops(std::int64_t params, node_model::DType state_dtype);

}  // namespace tessera::parallelism
