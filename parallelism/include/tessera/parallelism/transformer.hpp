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

/// Mixture of experts (Shazeer et al. 2017; Switch Transformer; Mixtral;
/// DeepSeekMoE): in an MoE layer the MLP is `experts` expert MLPs of
/// `expert_ffn_hidden` columns each (gated like the dense MLP when
/// TransformerConfig::gated_mlp), every token routed by a learned router to
/// `top_k` of them, plus `shared_experts` experts every token goes through.
/// experts = 0: a dense model (every other field ignored).
struct MoeConfig {
  std::int64_t experts = 0;
  std::int64_t top_k = 1;
  std::int64_t expert_ffn_hidden = 0;  ///< 0: the model's ffn_hidden
  /// Layer i (from 0) is an MoE layer when i >= first_dense_layers and
  /// (i - first_dense_layers) % moe_every == 0 (Megatron's --moe-layer-freq;
  /// DeepSeek's first_k_dense_replace). 1: every layer.
  std::int64_t moe_every = 1;
  std::int64_t first_dense_layers = 0;
  /// Experts every token goes through (DeepSeekMoE's n_shared_experts), of
  /// expert_ffn_hidden columns each, computed as one dense MLP.
  std::int64_t shared_experts = 0;
  /// Tokens an expert computes, relative to the average (tokens x top_k /
  /// experts), at least 1 (below it tokens are dropped, which is not
  /// modelled): 1 = dropless, no capacity; above 1, every expert padded to
  /// this capacity (Megatron's --moe-pad-expert-input-to-capacity).
  double capacity_factor = 1.0;
  /// The busiest expert-parallel rank's routed tokens over the average
  /// (>= 1): every rank is modelled as the busiest (the all-to-all waits for
  /// it). Dropless only: under a capacity the padding already holds it (at
  /// most capacity_factor). With ep 1 there is none: a rank computes every
  /// expert for its own tokens, t x top_k rows whatever the routing.
  double imbalance = 1.0;
  /// No capacity: experts take whatever is routed to them (capacity_factor 1).
  [[nodiscard]] bool dropless() const { return capacity_factor <= 1.0; }
  /// What an expert-parallel rank computes over the average at expert
  /// parallelism `ep`: the capacity when there is one (every expert padded,
  /// at any ep), else the imbalance where ep > 1 (validate() refuses an
  /// imbalance over a capacity).
  [[nodiscard]] double load_factor(int ep) const {
    if (!dropless()) return capacity_factor;
    return ep > 1 ? imbalance : 1.0;
  }
};

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
  /// Dropout in training (GPT-2/3: attention, hidden and embedding dropout).
  /// false: probability 0, as Llama and Mixtral train, where PyTorch's
  /// dropout returns its input and launches nothing: no attention-dropout
  /// kernels, no mask multiply in the residual's backward, no masks kept.
  bool dropout = true;
  /// Biases in the linear layers (GPT). false: none, as Llama, Mixtral and
  /// DeepSeekMoE train (Megatron's --disable-bias-linear): no bias
  /// parameters, and no bias-gradient reductions in the fused bias kernels.
  bool linear_bias = true;
  /// RMSNorm (Llama, Mixtral, DeepSeekMoE) instead of layer norm: a gain
  /// without a bias per norm; the same kernels (memory-bound either way).
  bool rms_norm = false;
  /// Mixture of experts; default: a dense model.
  MoeConfig moe = {};

  [[nodiscard]] std::int64_t kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  [[nodiscard]] bool is_moe() const { return moe.experts > 0; }
  /// True when layer `layer` (from 0) is an MoE layer (MoeConfig::moe_every).
  [[nodiscard]] bool is_moe_layer(std::int64_t layer) const;
  /// MoE layers among layers [first, first + count).
  [[nodiscard]] std::int64_t moe_layers_in(std::int64_t first, std::int64_t count) const;
  [[nodiscard]] std::int64_t expert_ffn() const {
    return moe.expert_ffn_hidden > 0 ? moe.expert_ffn_hidden : ffn_hidden;
  }
  /// Parameters of one MoE layer held by one rank of a tp x ep layout, other
  /// than the routed experts': attention (as params_per_layer_per_tp_rank),
  /// the two layer norms, the router (hidden x experts, replicated) and the
  /// shared experts (split like the dense MLP). Experts carry no biases.
  [[nodiscard]] std::int64_t moe_layer_dense_params_per_rank(std::int64_t tp) const;
  /// Parameters of the experts of one MoE layer one rank holds: experts / ep
  /// experts, each split tp ways.
  [[nodiscard]] std::int64_t moe_layer_expert_params_per_rank(std::int64_t tp, std::int64_t ep) const;
  /// Parameters of one norm (layer norm: gain and bias; RMSNorm: gain).
  [[nodiscard]] std::int64_t norm_params() const { return (rms_norm ? 1 : 2) * hidden; }
  /// Parameters of one transformer layer (weights and biases, incl. 2 layer norms).
  [[nodiscard]] std::int64_t params_per_layer() const;
  /// Parameters of one layer held by one tensor-parallel rank: the column- and
  /// row-parallel weight matrices and the column-parallel biases are split `tp`
  /// ways; the row-parallel biases and the layer norms are replicated.
  [[nodiscard]] std::int64_t params_per_layer_per_tp_rank(std::int64_t tp) const;
  /// Parameters of a (MoE, `moe_layer`, or dense) layer every tensor-parallel
  /// rank holds whole: the two norms, the row-parallel biases and an MoE
  /// layer's router. Under sequence parallelism each rank's gradient of them
  /// covers its sequence shard only, so Megatron all-reduces them over the
  /// tp group.
  [[nodiscard]] std::int64_t tp_replicated_params(bool moe_layer) const;
  /// Token + position embeddings (without learned positions: token only) and the final norm.
  [[nodiscard]] std::int64_t embedding_params(std::int64_t seq_len) const;
  /// All parameters: the layers, the word (and position) embeddings, the
  /// final layer norm and an untied LM head.
  [[nodiscard]] std::int64_t total_params(std::int64_t seq_len) const;
  /// The parameters one token goes through: total_params less, in each MoE
  /// layer, the routed experts it is not sent to (experts - top_k of them).
  /// A dense model's are all of them.
  [[nodiscard]] std::int64_t active_params(std::int64_t seq_len) const;
  /// Throws InputError naming the first bad field.
  void validate() const;
};

/// Shipped model presets: "gpt2-large", "gpt2-xl", "gpt3-xl", "gpt3-175b", "llama2-70b",
/// "llama3-8b", "llama3-70b", "llama3-405b", and the mixtures of experts
/// "mixtral-8x7b" and "deepseek-moe-16b".
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
  /// Host work at the start of each micro-batch's forward step (Megatron's
  /// get_batch: the data loader, the broadcast of the batch, whose `.cpu()`
  /// of the sizes drains the GPU first, masks and position ids). Zero: no
  /// per-micro-batch step (and no sync) is modelled.
  Time per_micro_batch;
  [[nodiscard]] bool enabled() const {
    return per_launch > Time::zero() || per_iteration > Time::zero() || per_p2p > Time::zero() ||
           per_micro_batch > Time::zero();
  }
};

struct Workload {
  std::int64_t micro_batch = 1;
  std::int64_t seq_len = 0;
  node_model::DType dtype = node_model::DType::FP32;
  /// Which kernels run and how (node_model/workload.hpp): Megatron-LM's
  /// fused kernels and mixed-precision machinery, or PyTorch eager.
  node_model::Framework framework = node_model::Framework::Megatron;
  node_model::ProfileOptions profile{};
  HostOverhead host{};
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
  /// Expert parallelism: an MoE layer's experts are split `ep` ways (each
  /// rank holds experts / ep of them and computes the tokens the ep ranks of
  /// its expert-parallel group route to them).
  std::int64_t ep = 1;
};

/// Throws InputError unless `tp` divides heads, K/V heads, hidden and ffn_hidden
/// (and, with sequence parallelism, the sequence length), and unless an MoE
/// model with tp > 1 has sequence parallelism (Megatron-Core requires it: each
/// tensor-parallel rank routes its own sequence shard).
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
/// A gated MLP's SiLU and multiply run as Megatron-Core's one fused
/// bias_swiglu kernel each way (the `megatron` profile), not apart: the
/// kernels layer_ops lists and the activations the memory model keeps.
[[nodiscard]] bool fused_swiglu(const TransformerConfig& m, const Workload& w);
/// The operators of one MoE layer on one rank of a tp x ep layout, in forward
/// order: the attention block as layer_ops (ln1 .. residual1), ln2, `router`
/// (hidden x experts GEMM, replicated, on the rank's own tokens: its sequence
/// shard with tp > 1), `router_topk` (softmax and top-k), `permute` (its
/// expert_dispatch_tokens_per_rank gathered by expert), the shared experts
/// (`shared_fc1`, `shared_act`, [`shared_gate`], `shared_fc2`, on all the
/// tokens, columns split tp ways) when any, the routed experts as grouped
/// GEMMs (`fc1`, `gelu`, [`gate`], `fc2`: experts / ep groups of
/// expert_tokens_per_rank / (experts / ep) rows), `unpermute` (the rank's
/// top-k outputs weighted and summed back per token) and residual2. The
/// dispatch all-to-all and (tp > 1) the tensor-parallel all-gather of the
/// dispatched tokens run between `permute`/shared experts and `fc1`, the
/// reduce-scatter and the combine between `fc2` and `unpermute` (the
/// planner's). Work on capacity padding and imbalance is in
/// OpKernels::padding_flops.
std::vector<OpKernels> moe_layer_ops(const TransformerConfig& m, const Workload& w,
                                     const Sharding& shard = {});
/// Routed tokens one rank dispatches per micro-batch (Megatron-Core's
/// all-to-all token dispatcher): its own tokens (micro_batch x seq_len / tp,
/// its sequence shard) x top_k, spread over the experts: per expert the ep
/// ranks' share x MoeConfig::load_factor, rounded up, times experts / ep.
std::int64_t expert_dispatch_tokens_per_rank(const TransformerConfig& m, const Workload& w,
                                             const Sharding& shard);
/// Tokens the experts of one rank compute per micro-batch (over its experts /
/// ep experts): with tp > 1 the tensor-parallel group's dispatched tokens,
/// all-gathered (the experts' columns are split tp ways), so
/// expert_dispatch_tokens_per_rank x tp.
std::int64_t expert_tokens_per_rank(const TransformerConfig& m, const Workload& w, const Sharding& shard);
/// Bytes one rank sends in one expert-parallel all-to-all of one micro-batch
/// (the dispatch, or the combine): expert_dispatch_tokens_per_rank x hidden x
/// the dtype's bytes. Task::bytes of the all-to-all (its whole send buffer).
Bytes expert_all_to_all_bytes(const TransformerConfig& m, const Workload& w, const Sharding& shard);

/// Word and position embeddings, their sum and dropout (first pipeline stage);
/// the word table is vocabulary-parallel.
std::vector<OpKernels> embedding_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// Final layer norm, the LM head GEMM (vocabulary-parallel, tied to the word
/// embedding) and the vocabulary-parallel cross-entropy (last stage).
std::vector<OpKernels> lm_head_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard = {});
/// The vocabulary a plan runs: Megatron pads it to a multiple of 128 x tp
/// (make_vocab_size_divisible_by); PyTorch eager does not pad.
std::int64_t padded_vocab(const TransformerConfig& m, const Workload& w, std::int64_t tp);
/// Vocabulary rows per tensor-parallel rank: padded_vocab over tp, rounded up.
std::int64_t padded_vocab_per_rank(const TransformerConfig& m, const Workload& w, std::int64_t tp);

}  // namespace tessera::parallelism
