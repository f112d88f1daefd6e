#pragma once
// GPT-style transformer layers as sequences of kernels.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/workload.hpp"
#include "tessera/units.hpp"

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
  /// The LM head shares the word embedding's weight (GPT-2/3). false: an own
  /// LM-head matrix (Llama 3), held and updated by the last pipeline stage.
  bool tied_embeddings = true;
  /// A learned position-embedding table of seq_len x hidden (GPT). false:
  /// rotary position embeddings (Llama), no table and no embedding add.
  bool learned_positions = true;

  [[nodiscard]] std::int64_t kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  /// Parameters of one transformer layer (weights and biases, incl. 2 layer norms).
  [[nodiscard]] std::int64_t params_per_layer() const;
  /// Parameters of one layer held by one tensor-parallel rank: the column- and
  /// row-parallel weight matrices and the column-parallel biases are split `tp`
  /// ways; the row-parallel biases and the layer norms are replicated.
  [[nodiscard]] std::int64_t params_per_layer_per_tp_rank(std::int64_t tp) const;
  /// Token + position embeddings (without learned positions: token only) and the final layer norm.
  [[nodiscard]] std::int64_t embedding_params(std::int64_t seq_len) const;
  /// All parameters: the layers, the word (and position) embeddings, the
  /// final layer norm and an untied LM head.
  [[nodiscard]] std::int64_t total_params(std::int64_t seq_len) const;
  /// Throws InputError naming the first bad field.
  void validate() const;
};

/// Shipped model presets: "gpt2-large", "gpt2-xl", "gpt3-xl", "gpt3-175b", "llama2-70b",
/// "llama3-8b", "llama3-70b", "llama3-405b".
const TransformerConfig& model_preset(std::string_view name);
std::vector<std::string> model_preset_names();

/// Host (CPU) cost of launching work, for frameworks whose host thread issues
/// every kernel (Megatron: one Python process per GPU). Zero: the host is
/// never the bottleneck (the node model's per-kernel floors stand in for it,
/// as in PyTorch-eager measurements).
struct HostOverhead {
  Time per_launch;     ///< host time per kernel launch or collective call
  Time per_iteration;  ///< host work of one iteration outside the launches (optimizer logic, bookkeeping)
  /// Host work per pipeline send or receive beyond its launch (the pipeline
  /// engine's bookkeeping around each exchange).
  Time per_p2p;
  [[nodiscard]] bool enabled() const {
    return per_launch > Time::zero() || per_iteration > Time::zero() || per_p2p > Time::zero();
  }
};

struct Workload {
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;
  node_model::DType dtype = node_model::DType::FP32;
  /// Which kernels run and how (node_model/workload.hpp): Megatron-LM's
  /// fused kernels and mixed-precision machinery, or PyTorch eager.
  node_model::Framework framework = node_model::Framework::Megatron;
  node_model::ProfileOptions profile;
  HostOverhead host;
  /// FlashAttention (Dao et al.): QK^T, the scaled masked softmax, dropout and
  /// PV run as one fused kernel each way and no s x s score or probability
  /// matrix is kept for the backward (it is recomputed inside the fused backward).
  bool flash_attention = false;

  [[nodiscard]] node_model::OpRules rules() const { return node_model::OpRules(framework, dtype, profile); }
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

using node_model::OpKernels;
using node_model::Pass;

/// The operators of one layer on one tensor-parallel rank, in forward order,
/// each with its forward, input-gradient and weight-gradient kernels from the
/// framework's rule table (node_model::OpRules): ln1, qkv, scores, the
/// attention softmax (`softmax`; FP32: `scale`, `mask`, `softmax`),
/// attn_dropout, context (with Workload::flash_attention: one `attention`
/// op in place of scores to context), context_copy, proj, residual1 (bias-dropout-add),
/// ln2, fc1, gelu (bias-GeLU), [gate], fc2, residual2. Heads and MLP columns
/// are split `shard.tp` ways.
std::vector<OpKernels> layer_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Word and position embeddings, their sum and dropout (first pipeline stage);
/// the word table is vocabulary-parallel.
std::vector<OpKernels> embedding_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Final layer norm, the LM head GEMM (vocabulary-parallel, tied to the word
/// embedding) and the vocabulary-parallel cross-entropy (last stage).
std::vector<OpKernels> lm_head_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Vocabulary rows per tensor-parallel rank: Megatron pads the vocabulary to
/// a multiple of 128 x tp; PyTorch eager does not pad.
std::int64_t padded_vocab_per_rank(const TransformerConfig& m, const Workload& w, std::int64_t tp);

}  // namespace tessera::parallelism
