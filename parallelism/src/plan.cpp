// The general training planner (see docs/parallelism.md for the formulas).
#include "tessera/parallelism/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

#include "tessera/error.hpp"
#include "tessera/parallelism/passes.hpp"

namespace tessera::parallelism {

using node_model::dtype_bytes;

std::size_t fullest_stage(const std::vector<MemoryEstimate>& stages) {
  // a fuller than b: a.total / a.capacity > b.total / b.capacity, compared
  // as products (exact up to double rounding); unknown capacities by bytes.
  auto fuller = [](const MemoryEstimate& a, const MemoryEstimate& b) {
    if (a.capacity.count() <= 0 || b.capacity.count() <= 0) return a.total() > b.total();
    return a.total().as_double() * b.capacity.as_double() > b.total().as_double() * a.capacity.as_double();
  };
  std::size_t fullest = 0;
  for (std::size_t i = 1; i < stages.size(); ++i) {
    if (fuller(stages[i], stages[fullest])) fullest = i;
  }
  return fullest;
}

bool PlanSummary::oom() const {
  return std::any_of(memory_per_stage.begin(), memory_per_stage.end(), [](const MemoryEstimate& m) { return m.oom(); });
}

namespace {

constexpr std::int64_t kWorkspaceBytes = 1LL << 30;  // CUDA context + cuBLAS workspace + allocator slack

/// The MLP's activations kept for the backward, in sbh/t per layer: the
/// activation function's input and output, 2 bytes per element of the
/// ffn_hidden-wide activation each; Korthikanti et al.'s 16 for a GPT MLP
/// (ffn_hidden = 4 hidden). A gated MLP (SwiGLU) keeps fc1's output, both
/// halves (4 f), and fc2's input, the product (2 f); run unfused (SiLU,
/// then a multiply: Megatron-DeepSpeed, eager) also the SiLU's output the
/// multiply keeps (2 f more), where Megatron-Core's fused bias_swiglu
/// saves its input alone (the kernel rule, transformer.cpp; helper 124:
/// the fused one was counted as unfused, 8 f).
///
/// Under FP8 training fc2 saves its input in FP8 (see "FP8 training's saved
/// inputs" below): f less.
double mlp_activation_factor(const TransformerConfig& m, const Workload& w) {
  const double f = static_cast<double>(m.ffn_hidden) / static_cast<double>(m.hidden);
  double factor = 4.0 * f;
  if (m.gated_mlp) factor = fused_swiglu(m, w) ? 6.0 * f : 8.0 * f;
  if (w.profile.fp8) factor -= f;
  return factor;
}

// FP8 training's saved inputs (ProfileOptions::fp8; its dtype is bf16, so
// the formulas' 16-bit units are bytes). Transformer Engine 1.x's linears
// save for their weight gradient the FP8 copy of their input, 1 byte per
// element, where bf16 training saves the 16-bit input, 2:
//  - `_Linear.forward` (module/linear.py; proj and fc2 as
//    TERowParallelLinear, a shared expert's fc1 as TEColumnParallelLinear)
//    saves `inputmat_t`, the FP8 transpose fp8_cast_transpose_fused wrote,
//    or under sequence parallelism `inputmat`, the FP8 cast alone (a
//    column-parallel linear's own shard, re-gathered in the backward);
//    `inputmat_no_fp8`, the 16-bit input, only without FP8.
//  - `_LayerNormLinear.forward` (module/layernorm_linear.py; qkv and a dense
//    fc1 as TELayerNormColumnParallelLinear) saves the norm's FP8 output
//    `ln_out` (uint8; under SP the shard, re-gathered in the backward)
//    beside the norm's 16-bit input `inputmat`, which bf16 counts already.
//  - `_GroupedLinear.forward` (module/grouped_linear.py; the experts) saves
//    `saved_inputmats_t`, FP8.
// The 16-bit tensor goes unless another op keeps it: the attention keeps
// its own output (the projection's input) where attention_keeps_output; a
// shared expert's fc1 input is the router's input. Megatron-Core's layer
// spec (get_gpt_layer_with_transformer_engine_spec) places the linears.

/// Whether the attention keeps its 16-bit output, the projection's input,
/// for its own backward: FlashAttention without recomputation (Transformer
/// Engine's FusedAttnFunc.forward saves q, k, v and `out`, attention.py;
/// flash-attn saves its `out` too). Under FP8 the projection's FP8 copy is
/// then kept beside it. The unfused attention (its context bmm saves its
/// inputs) and selective recomputation (Megatron checkpoints the core
/// attention: its output is kept by the projection alone) keep no 16-bit
/// copy.
bool attention_keeps_output(const Workload& w, const ParallelPlan& p) {
  return w.flash_attention && p.recompute == Recompute::None;
}

/// Activation bytes one layer keeps for backward per micro-batch (Korthikanti
/// et al., "Reducing Activation Recomputation in Large Transformer Models",
/// 2022, Table 2), for 16-bit activations; scaled by dtype_bytes / 2.
double layer_activation_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double s = static_cast<double>(w.seq_len), b = static_cast<double>(w.micro_batch);
  const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads), t = p.tp;
  const double sbh = s * b * h;
  // Dropout masks, 1 byte per element: after the attention projection and
  // after fc2 (sbh each, in Korthikanti's 34 and 10), and of the attention
  // probabilities (as^2b, with the dropout's 2-byte output: 3 of the 5 as^2b).
  // A model without dropout keeps none of them.
  const double masks = m.dropout ? 2 : 0;
  // Split across the tensor-parallel ranks (x sbh/t): Q 2, K and V 2 each
  // per kv_heads/heads (grouped-query attention keeps fewer), the
  // projection's input 2, and the MLP's activation input and output, 2
  // bytes per element of the ffn/t-wide activation each (mlp_activation_factor:
  // Korthikanti's 16 for ffn = 4h; a gated MLP keeps 1.5x or twice as much). For
  // kv_heads = heads, Korthikanti's 8 + 16.
  const double kv = static_cast<double>(m.kv_heads_or_heads()) / a;
  double sharded = 4 + 4 * kv + mlp_activation_factor(m, w);
  double replicated = 8 + masks;  // the norms' inputs, QKV's and fc1's inputs, the masks (x sbh)
  if (w.profile.fp8) {
    // (FP8 training's saved inputs) qkv's and fc1's inputs: the norms' FP8
    // outputs, 1 each for 2; the projection's: its FP8 copy, 1 for 2, or
    // 1 beside the 2 the attention keeps (attention_keeps_output). fc2's:
    // mlp_activation_factor.
    replicated -= 2;
    sharded += attention_keeps_output(w, p) ? 1 : -1;
  }
  const double all = replicated + sharded;  // with SP, x sbh/t
  double bytes = 0;
  switch (p.recompute) {
    case Recompute::None:
      // The 5as/h term is the s x s matrices per head (softmax output 2,
      // dropout mask 1, dropout output 2 bytes per element); FlashAttention
      // keeps none of them (only its softmax statistics, s per head:
      // negligible), so Selective's figure holds.
      if (w.flash_attention) {
        bytes = p.sequence_parallel ? sbh * all / t : sbh * (replicated + sharded / t);
        break;
      }
      {
        // Where Megatron's fused softmax does not take the shape, its torch
        // path keeps the softmax output in FP32 for the backward: 4 bytes
        // per score instead of 2 (the casts, scale and mask keep nothing but
        // the shared causal mask), 7 in all with dropout (its mask and
        // output). Without dropout the context bmm keeps the probabilities
        // cast back to 16 bits, a copy of their own: 6 (helper 124: 4). The
        // fused kernel's 16-bit output is the one the bmm keeps: 2.
        const bool torch_path =
            node_model::is_megatron(w.framework) && dtype_bytes(w.dtype) == 2 &&
            !node_model::fused_softmax_available(w.framework, w.dtype, w.micro_batch * (m.heads / p.tp),
                                                 w.seq_len, w.seq_len);
        const double scores = torch_path ? (m.dropout ? 7 : 6) : (m.dropout ? 5 : 2);
        bytes = p.sequence_parallel ? sbh / t * (all + scores * a * s / h)
                                    : sbh * (replicated + sharded / t + scores * a * s / (h * t));
      }
      break;
    case Recompute::Selective:
      bytes = p.sequence_parallel ? sbh * all / t : sbh * (replicated + sharded / t);
      break;
    case Recompute::Full:
      bytes = p.sequence_parallel ? 2 * sbh / t : 2 * sbh;
      break;
  }
  return bytes * dtype_bytes(w.dtype) / 2.0;
}

/// The MLP's share of layer_weight_grad_bytes, x sbh: fc1's input 2 (/t
/// with SP, re-gathered by W), fc2's output gradient 2 (full size, as the
/// row-parallel linear takes it), the activation's output 2 ffn/h /t (fc2's
/// input) and fc1's output gradient 2 ffn/h /t (twice as wide gated). For
/// a GPT MLP (ffn = 4h): 4 + 16/t, 2 + 18/t with SP. Under FP8 fc1's and
/// fc2's inputs are their FP8 copies (FP8 training's saved inputs): 1 (1/t
/// with SP) and f/t.
double mlp_weight_grad_factor(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double t = p.tp;
  const double gated = m.gated_mlp ? 2.0 : 1.0;
  const double f = static_cast<double>(m.ffn_hidden) / static_cast<double>(m.hidden);
  double factor = (p.sequence_parallel ? 2 / t : 2) + 2 + 2 * f * (1 + gated) / t;
  if (w.profile.fp8) factor -= (p.sequence_parallel ? 1 / t : 1) + f / t;
  return factor;
}

/// Activation bytes one layer keeps from its B until its W under a
/// zero-bubble schedule (B frees the rest): the inputs of the four linears
/// (QKV and fc1 inputs 2sbh each, sharded with SP and re-gathered by W; the
/// attention context 2sbh/t; fc2's input, the activation's output) and the
/// gradients of their outputs (QKV 2sbh (heads + 2 kv_heads) / heads / t,
/// fc1's; projection and fc2 2sbh each, full size as the row-parallel
/// linears take them): mlp_weight_grad_factor for the MLP's. 16-bit, scaled
/// by dtype_bytes / 2. For a GPT layer and t = 1 this is Qi et al.'s M_W =
/// 32 sbh (Table 1). Under FP8 the four inputs are the FP8 copies the
/// linears saved (FP8 training's saved inputs; B frees the attention's own
/// output), 1 byte per element.
double layer_weight_grad_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double sbh = static_cast<double>(w.seq_len) * static_cast<double>(w.micro_batch) *
                     static_cast<double>(m.hidden);
  const double t = p.tp;
  const double qkv = (static_cast<double>(m.heads) + 2.0 * static_cast<double>(m.kv_heads_or_heads())) /
                     static_cast<double>(m.heads);
  double attention = (p.sequence_parallel ? 2 / t : 2) + 2 + (2 + 2 * qkv) / t;
  if (w.profile.fp8) attention -= (p.sequence_parallel ? 1 / t : 1) + 1 / t;
  return sbh * (attention + mlp_weight_grad_factor(m, w, p)) * dtype_bytes(w.dtype) / 2.0;
}

/// Activation bytes one MoE layer keeps for backward per micro-batch, for
/// 16-bit activations (scaled by dtype_bytes / 2): the dense layer's
/// (layer_activation_bytes) with the MLP's 19sbh (fc1 input 2sbh and dropout
/// mask sbh, replicated without SP; GeLU input and output 16sbh/t) replaced by
/// the router input 2sbh, its FP32 probabilities 4sb x experts and the
/// dropout mask sbh (replicated without SP), per routed token (R per rank)
/// the experts' input 2h, activation input 2f' (4f' gated), activation
/// output 2f' (+2f' gated: the gate's output) and output 2h (f' =
/// expert_ffn_hidden / t), and the shared experts' activations per token
/// likewise. With full recomputation: the layer input, as dense. Under FP8
/// (FP8 training's saved inputs) the experts' fc1 and fc2 inputs are their
/// FP8 copies, 1h and 1f' per routed token (GroupedLinear; the permuted
/// bf16 tokens are kept by nothing else), the shared experts' fc2 input
/// 1f_s', and their fc1 saves an FP8 copy of its input, 1 sbh (/t with
/// SP), beside the router's 16-bit one (the same tensor at bf16).
double moe_layer_activation_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double dense = layer_activation_bytes(m, w, p);
  if (p.recompute == Recompute::Full) return dense;
  const double s = static_cast<double>(w.seq_len), b = static_cast<double>(w.micro_batch);
  const double h = static_cast<double>(m.hidden), t = p.tp;
  const double sbh = s * b * h;
  const double rep = p.sequence_parallel ? 1.0 / t : 1.0;  // replicated across TP ranks without SP
  const double mask = m.dropout ? 1 : 0;                   // the dropout mask after the MLP (sbh bytes)
  double mlp = (2 + mask) * sbh * rep + mlp_activation_factor(m, w) * sbh / t;
  const double gated = m.gated_mlp ? 2.0 : 1.0;
  const double fe = static_cast<double>(m.expert_ffn()) / t;
  const double routed =
      static_cast<double>(expert_tokens_per_rank(m, w, Sharding{p.tp, p.sequence_parallel, p.ep}));
  double moe = (2 + mask) * sbh * rep + 4 * s * b * static_cast<double>(m.moe.experts) * rep;
  moe += routed * (4 * h + 2 * fe * (2 * gated));
  const double fs = static_cast<double>(m.moe.shared_experts * m.expert_ffn()) / t;
  moe += s * b * 2 * fs * (2 * gated);
  if (w.profile.fp8) {
    mlp -= sbh * rep;  // the dense fc1's input was its FP8 copy (layer_activation_bytes)
    moe -= routed * (h + fe) + s * b * fs;
    if (m.moe.shared_experts > 0) moe += sbh * rep;
  }
  return dense + (moe - mlp) * dtype_bytes(w.dtype) / 2.0;
}

/// Activation bytes one MoE layer keeps from its B until its W under a
/// zero-bubble schedule, for 16-bit activations (scaled by dtype_bytes / 2):
/// the dense layer's (layer_weight_grad_bytes) with its MLP's share
/// (mlp_weight_grad_factor) replaced by the router's input (2sbh,
/// /t with SP) and output gradient (4sb x experts, FP32), the shared
/// experts' activation output 2f_s' and fc1 output gradient 2f_s' (4f_s'
/// gated) per token and their fc2 output gradient 2sbh, and per routed token
/// the experts' fc1 input 2h, fc2 input 2f', fc1 output gradient 2f' (4f'
/// gated) and fc2 output gradient 2h. Under FP8 the linears' inputs as
/// moe_layer_activation_bytes keeps them (the experts' 1h and 1f', the
/// shared experts' fc2 input 1f_s' and fc1's FP8 copy 1 sbh, /t with SP).
double moe_layer_weight_grad_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double s = static_cast<double>(w.seq_len), b = static_cast<double>(w.micro_batch);
  const double h = static_cast<double>(m.hidden), t = p.tp;
  const double sbh = s * b * h;
  const bool sp = p.sequence_parallel;
  const double dense_mlp = mlp_weight_grad_factor(m, w, p) * sbh;
  const double gated = m.gated_mlp ? 2.0 : 1.0;
  const double fe = static_cast<double>(m.expert_ffn()) / t;
  const double fs = static_cast<double>(m.moe.shared_experts * m.expert_ffn()) / t;
  const double routed =
      static_cast<double>(expert_tokens_per_rank(m, w, Sharding{p.tp, p.sequence_parallel, p.ep}));
  double moe = (sp ? 2 * sbh / t : 2 * sbh) + 4 * s * b * static_cast<double>(m.moe.experts);
  if (m.moe.shared_experts > 0) moe += s * b * 2 * fs * (1 + gated) + 2 * sbh;
  moe += routed * (4 * h + 2 * fe * (1 + gated));
  if (w.profile.fp8) {
    moe -= routed * (h + fe) + s * b * fs;
    if (m.moe.shared_experts > 0) moe += sp ? sbh / t : sbh;
  }
  return layer_weight_grad_bytes(m, w, p) + (moe - dense_mlp) * dtype_bytes(w.dtype) / 2.0;
}

/// Layers of chunk `k` before it, i.e. the global index of its first layer.
std::int64_t chunk_first_layer(const std::vector<std::int64_t>& chunks, int k) {
  std::int64_t first = 0;
  for (int c = 0; c < k; ++c) first += chunks[static_cast<std::size_t>(c)];
  return first;
}

/// Parameters held by one rank of a pipeline stage: the experts' (divided by
/// ep) apart from the rest, as their gradients and optimizer states are
/// reduced and sharded over different data-parallel groups.
struct StageParams {
  std::int64_t dense = 0;
  std::int64_t expert = 0;
  [[nodiscard]] std::int64_t total() const { return dense + expert; }
};

/// Parameters held by one rank of pipeline stage `stage`.
StageParams stage_params(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const std::vector<std::int64_t>& chunks, int stage) {
  std::int64_t layers = 0, moe_layers = 0;
  for (int c = 0; c < p.virtual_stages; ++c) {
    const int k = c * p.pp + stage;
    const std::int64_t n = chunks[static_cast<std::size_t>(k)];
    layers += n;
    moe_layers += m.moe_layers_in(chunk_first_layer(chunks, k), n);
  }
  StageParams out;
  std::int64_t& params = out.dense;
  params = (layers - moe_layers) * m.params_per_layer_per_tp_rank(p.tp);
  if (moe_layers > 0) {
    params += moe_layers * m.moe_layer_dense_params_per_rank(p.tp);
    out.expert = moe_layers * m.moe_layer_expert_params_per_rank(p.tp, p.ep);
  }
  const std::int64_t word = padded_vocab_per_rank(m, w, p.tp) * m.hidden;
  if (stage == 0) params += word + (m.learned_positions ? w.seq_len * m.hidden : 0);
  // The LM head (an untied one, or the tied one's copy on the last stage) and the final norm.
  if (stage == p.pp - 1) params += (p.pp > 1 || !m.tied_embeddings ? word : 0) + m.norm_params();
  return out;
}

/// Weight elements of the layer linears Transformer Engine runs in FP8 held
/// by one rank of pipeline stage `stage` (every chunk of it): qkv, proj,
/// fc1 and fc2 of a dense layer; qkv, proj, the shared experts' fc1 and fc2
/// and the rank's experts (experts / ep of them) of an MoE layer; split tp
/// ways as the layer_ops linears are (OpKernels::weight_cast). Not their
/// biases, the norms, the router, the embedding or the LM head (Megatron-
/// Core builds these outside Transformer Engine's FP8 linears).
std::int64_t fp8_linear_weights(const TransformerConfig& m, const ParallelPlan& p,
                                const std::vector<std::int64_t>& chunks, int stage) {
  const std::int64_t h = m.hidden;
  const std::int64_t attention = h * (h + 2 * m.kv_heads_or_heads() * (m.hidden / m.heads)) + h * h;
  auto mlp = [&](std::int64_t ffn) { return h * ffn * (m.gated_mlp ? 2 : 1) + ffn * h; };
  const std::int64_t dense = (attention + mlp(m.ffn_hidden)) / p.tp;
  const std::int64_t moe = m.is_moe() ? (attention + mlp(m.moe.shared_experts * m.expert_ffn())) / p.tp +
                                            m.moe.experts / p.ep * (mlp(m.expert_ffn()) / p.tp)
                                      : 0;
  std::int64_t weights = 0;
  for (int c = 0; c < p.virtual_stages; ++c) {
    const int k = c * p.pp + stage;
    const std::int64_t n = chunks[static_cast<std::size_t>(k)];
    const std::int64_t moe_layers = m.moe_layers_in(chunk_first_layer(chunks, k), n);
    weights += (n - moe_layers) * dense + moe_layers * moe;
  }
  return weights;
}

/// ZeRO-3's units of model chunk `k`, in forward order: the parameters one
/// all-gather fetches (FSDP's units, DeepSpeed's submodules): the embedding
/// (chunk 0: word and position embeddings), each layer, the LM head with the
/// final norm (the last chunk; a tied head gathers the word embedding again).
/// Per rank, as stage_params counts them.
std::vector<StageParams> zero3_units(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                                     const std::vector<std::int64_t>& chunks, int k) {
  std::vector<StageParams> units;
  const std::int64_t word = padded_vocab_per_rank(m, w, p.tp) * m.hidden;
  if (k == 0) units.push_back({word + (m.learned_positions ? w.seq_len * m.hidden : 0), 0});
  const std::int64_t first = chunk_first_layer(chunks, k);
  for (std::int64_t l = first; l < first + chunks[static_cast<std::size_t>(k)]; ++l) {
    if (m.is_moe() && m.is_moe_layer(l)) {
      units.push_back(
          {m.moe_layer_dense_params_per_rank(p.tp), m.moe_layer_expert_params_per_rank(p.tp, p.ep)});
    } else {
      units.push_back({m.params_per_layer_per_tp_rank(p.tp), 0});
    }
  }
  if (k + 1 == static_cast<int>(chunks.size())) units.push_back({word + m.norm_params(), 0});
  return units;
}

MemoryEstimate stage_memory(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                            const std::vector<std::int64_t>& chunks, std::int64_t micro_batches, int stage,
                            const StageParams& sp, Bytes capacity) {
  MemoryEstimate e;
  e.capacity = capacity;
  // 16-bit training keeps an FP32 master copy (TF32 trains FP32 weights).
  const bool mixed = w.dtype != node_model::DType::FP32 && w.dtype != node_model::DType::TF32;
  const std::int64_t dp = p.dp;
  auto shard = [&](std::int64_t bytes, int from_stage) { return p.zero_stage >= from_stage ? (bytes + dp - 1) / dp : bytes; };
  // The experts' states are sharded over the dp / ep ranks holding the same experts.
  const std::int64_t expert_dp = dp / p.ep;
  auto shard_experts = [&](std::int64_t bytes, int from_stage) {
    return p.zero_stage >= from_stage ? (bytes + expert_dp - 1) / expert_dp : bytes;
  };
  auto sharded = [&](std::int64_t bytes_per_param, int from_stage) {
    const std::int64_t dense = shard(sp.dense * bytes_per_param, from_stage);
    return sp.expert > 0 ? dense + shard_experts(sp.expert * bytes_per_param, from_stage) : dense;
  };
  e.weights = Bytes(sharded(dtype_bytes(w.dtype), 3));
  if (p.zero_stage == 3) {
    // The full parameters of the unit running and of the next, prefetched
    // (ParamGathers): the largest two neighbours of any chunk of the stage.
    std::int64_t gathered = 0;
    for (int c = 0; c < p.virtual_stages; ++c) {
      const auto units = zero3_units(m, w, p, chunks, c * p.pp + stage);
      for (std::size_t u = 0; u < units.size(); ++u) {
        gathered = std::max(gathered, units[u].total() + (u + 1 < units.size() ? units[u + 1].total() : 0));
      }
    }
    e.weights += Bytes(gathered * dtype_bytes(w.dtype));
  }
  if (w.profile.fp8) {
    // Transformer Engine 1.x's FP8 weight workspaces: each linear module
    // caches its weight's FP8 cast and FP8 transpose (`set_fp8_weights`,
    // module/base.py: `weight1_fp8` and `weight1_t_fp8`, uint8 tensors of the
    // weight's shape and its transpose's), created in prepare_forward when
    // `is_first_microbatch` is not None and filled once per iteration
    // (`update_fp8_weights` in _Linear / _LayerNormLinear.forward; the
    // experts' GroupedLinear.forward caches through get_fp8_workspace with
    // its transpose, `with_transpose=torch.is_grad_enabled()`). Megatron-
    // Core passes the flag (TELinear / TELayerNormColumnParallelLinear /
    // TEGroupedLinear.forward: None only with
    // disable_parameter_transpose_cache), so every module of every model
    // chunk holds them for the whole run: 1 + 1 bytes per weight element.
    // Counted whole under ZeRO-3 (the module caches the full weight it cast).
    e.fp8_weights = Bytes(2 * fp8_linear_weights(m, p, chunks, stage));
  }
  // Gradients as the framework accumulates them (Megatron: FP32 main
  // gradients with bf16, node_model::OpRules::grad_dtype).
  e.gradients = Bytes(sharded(dtype_bytes(w.rules().grad_dtype()), 2));
  // Adam: two FP32 moments, plus an FP32 master copy when training in 16
  // bits; with 16-bit gradients (Megatron's fp16) the optimizer also copies
  // them into FP32 for its step (Float16OptimizerWithFloat16Params'
  // main_param.grad, DeepSpeed's FP32 gradient partitions): 4 more bytes,
  // Megatron's 20 bytes per parameter (4 + 16/d distributed) for fp16
  // against bf16's 18 (6 + 12/d) (helper 61).
  const bool fp32_grad_copy =
      mixed && node_model::is_megatron(w.framework) && dtype_bytes(w.rules().grad_dtype()) == 2;
  e.optimizer_states = Bytes(sharded(mixed ? (fp32_grad_copy ? 16 : 12) : 8, 1));

  const double per_layer = layer_activation_bytes(m, w, p);
  const double per_moe_layer = m.is_moe() ? moe_layer_activation_bytes(m, w, p) : 0.0;
  const double per_moe_layer_w = m.is_moe() ? moe_layer_weight_grad_bytes(m, w, p) : 0.0;
  // Zero-bubble schedules: what each layer keeps from B to W.
  const double per_layer_w = layer_weight_grad_bytes(m, w, p);
  const double logits = static_cast<double>(w.micro_batch * w.seq_len * padded_vocab_per_rank(m, w, p.tp)) * 4.0;
  // Outside the layers, as Megatron-LM's own estimate counts them
  // (theoretical_memory_usage.py; Korthikanti et al., Section 4.3; helper
  // 124): the first chunk keeps the embedding dropout's mask, 1 byte per
  // element of its output; the last the final norm's input and the LM
  // head's input (with SP its shard: Megatron re-gathers it for the weight
  // gradient), 16-bit each, the head's input until its weight gradient.
  const double tokens_h = static_cast<double>(w.micro_batch * w.seq_len * m.hidden) /
                          (p.sequence_parallel ? static_cast<double>(p.tp) : 1.0);
  const double embedding_mask = m.dropout ? tokens_h : 0.0;
  const double head_input = tokens_h * static_cast<double>(dtype_bytes(w.dtype));
  const int last_chunk = p.pp * p.virtual_stages - 1;
  double held = 0, peak = 0;
  std::int64_t in_flight = 0;  // micro-batch chunks whose F has run and whose backward has not finished
  auto track = [&] {
    if (held > peak) {
      peak = held;
      e.peak_in_flight = std::max(e.peak_in_flight, in_flight);
    }
  };
  for (const PipelineStep& st : pipeline_order(p.schedule, p.pp, stage, micro_batches, p.virtual_stages)) {
    const int k = st.chunk * p.pp + stage;
    const auto layers = static_cast<double>(chunks[static_cast<std::size_t>(k)]);
    double bytes = per_layer * layers;
    // The LM head's logits (their gradient, in place) stay until its weight gradient.
    double kept = per_layer_w * layers;
    if (m.is_moe()) {
      const auto moe_layers = static_cast<double>(
          m.moe_layers_in(chunk_first_layer(chunks, k), chunks[static_cast<std::size_t>(k)]));
      bytes += (per_moe_layer - per_layer) * moe_layers;
      kept += (per_moe_layer_w - per_layer_w) * moe_layers;
    }
    if (k == 0) bytes += embedding_mask;
    if (k == last_chunk) {
      bytes += logits + 2 * head_input;  // (the final norm's input and the head's)
      kept += logits + head_input;
    }
    switch (st.kind) {
      case StepKind::F:
        held += bytes;
        ++in_flight;
        track();
        break;
      case StepKind::B:
        if (splits_backward(p.schedule)) {
          // B frees the activations W does not need (with full recomputation
          // it recomputes them first: what W keeps can exceed what F kept).
          held += kept - bytes;
          track();
        } else {
          held -= bytes;
          --in_flight;
        }
        break;
      case StepKind::W:
        held -= kept;
        --in_flight;
        break;
    }
  }
  // (a size past int64, seq_len 10^9: an OverflowError naming what, which
  // the study layer names the keys of)
  auto bytes_of = [&](double b, const char* what) {
    try {
      return Bytes::from_truncated(b);
    } catch (const OverflowError&) {
      throw OverflowError(
          fmt::format("stage {}'s {}: {:.3g} bytes per GPU, past the 8 EiB a size may be", stage, what, b));
    }
  };
  e.activations = bytes_of(peak, "activations");
  std::int64_t workspace = kWorkspaceBytes;
  if (p.recompute == Recompute::Full) {
    // Backward of a layer holds that layer's recomputed activations.
    ParallelPlan none = p;
    none.recompute = Recompute::None;
    double largest = layer_activation_bytes(m, w, none);
    if (m.is_moe()) largest = std::max(largest, moe_layer_activation_bytes(m, w, none));
    workspace = (Bytes(workspace) + bytes_of(largest, "recomputed layer")).count();
  }
  if (m.is_moe() && p.ep > 1) {
    // The expert-parallel all-to-all's send and receive buffers (one layer's at a time).
    workspace += 2 * expert_all_to_all_bytes(m, w, Sharding{p.tp, p.sequence_parallel, p.ep}).count();
  }
  e.workspace = Bytes(workspace);
  return e;
}

// ---------------------------------------------------------------------------
// Task-graph construction.

/// Group registry: one group per distinct (member list, purpose).
class Groups {
 public:
  std::int32_t get(const std::vector<int>& ranks, int purpose) {
    auto [it, inserted] = index_.try_emplace({purpose, ranks}, static_cast<std::int32_t>(groups_.size()));
    if (inserted) groups_.push_back(Group{ranks});
    return it->second;
  }
  std::vector<Group> take() { return std::move(groups_); }

 private:
  std::map<std::pair<int, std::vector<int>>, std::int32_t> index_;
  std::vector<Group> groups_;
};

enum Purpose {
  kTensor = 0,
  kData = 1,
  kPipeForward = 2,
  kPipeBackward = 3,
  kEmbedding = 4,
  kExpert = 5,      ///< the expert-parallel group
  kExpertData = 6,  ///< the dp / ep ranks holding the same experts
};

/// What a program's group slot stands for: the rank's TP or DP group, or the
/// pair (rank at stage `from`, rank at stage `to`) of its (tp, dp) pipeline
/// column for pipeline messages and the tied embeddings.
struct SlotRole {
  int purpose = kTensor;
  int from = -1;
  int to = -1;
  bool operator==(const SlotRole&) const = default;
};

/// The global group a slot role names for the rank at `me`.
std::int32_t bind(Groups& groups, const ParallelPlan& plan, const RankCoord& me, const SlotRole& role,
                  std::vector<int>& members) {
  members.clear();
  switch (role.purpose) {
    case kTensor:
      for (int t = 0; t < plan.tp; ++t) members.push_back(rank_of(plan, {t, me.dp, me.pp}));
      break;
    case kData:
      for (int d = 0; d < plan.dp; ++d) members.push_back(rank_of(plan, {me.tp, d, me.pp}));
      break;
    case kExpert: {
      const int first = me.dp / plan.ep * plan.ep;
      for (int e = 0; e < plan.ep; ++e) members.push_back(rank_of(plan, {me.tp, first + e, me.pp}));
      break;
    }
    case kExpertData:
      for (int d = me.dp % plan.ep; d < plan.dp; d += plan.ep)
        members.push_back(rank_of(plan, {me.tp, d, me.pp}));
      break;
    default:
      members.push_back(rank_of(plan, {me.tp, me.dp, role.from}));
      members.push_back(rank_of(plan, {me.tp, me.dp, role.to}));
      break;
  }
  return groups.get(members, role.purpose);
}

/// Builds the program of one pipeline stage, shared by its tp x dp ranks.
/// Slots are numbered in order of first use (TP and DP first), so that
/// binding each rank's slots in slot order registers its groups in the order
/// they were first needed. A collective's id is n for the n-th collective of
/// its slot: both sides of a pipeline pair and all TP/DP members issue a
/// group's collectives in the same order, so they derive the same id.
class ProgramBuilder {
 public:
  /// `exchange_blocks`: the sync after a pipeline exchange also waits for
  /// the exchange (Megatron-LM's torch.cuda.synchronize() after its
  /// send/receive requests' wait(): the sender's next kernel waits for its
  /// send to be received); else it drains the compute stream alone
  /// (DeepSpeed's pipeline engine, which does not sync the device).
  ProgramBuilder(Program& prog, const KernelTimer& timer, Time p2p_host, bool exchange_blocks)
      : prog_(prog), timer_(timer), p2p_host_(p2p_host), exchange_blocks_(exchange_blocks) {}

  std::int32_t slot(const SlotRole& role) {
    for (std::size_t s = 0; s < roles_.size(); ++s) {
      if (roles_[s] == role) return static_cast<std::int32_t>(s);
    }
    roles_.push_back(role);
    seq_.push_back(0);
    return static_cast<std::int32_t>(roles_.size() - 1);
  }
  [[nodiscard]] const std::vector<SlotRole>& roles() const { return roles_; }

  TaskIndex compute(std::string_view name, Time duration, Flops flops, std::vector<TaskIndex> deps = {},
                    const HostShape& host = {}, Time host_extra = Time::zero()) {
    if (std::exchange(sync_before_compute_, false)) {
      // Megatron's pipeline exchanges (p2p_communication._communicate) end
      // with torch.cuda.synchronize(): the host drains the GPU before it
      // issues the next kernel. (So does a micro-batch's data step.)
      Task sync;
      sync.name = std::exchange(sync_name_, "pp.sync");
      sync.kind = TaskKind::Compute;
      sync.host_sync = true;
      if (last_compute_ >= 0) sync.deps.push_back(last_compute_);
      if (exchange_blocks_) sync.deps.insert(sync.deps.end(), exchanges_.begin(), exchanges_.end());
      exchanges_.clear();
      last_compute_ = push(std::move(sync));
    }
    Task t;
    t.name = prog_.keep_name(name);
    t.kind = TaskKind::Compute;
    t.duration = duration;
    t.flops = flops;
    if (timer_.host_model() && (host.any || host_extra > Time::zero())) {
      // Host work before the launches (host_extra) delays them all.
      t.host_issue = Time::from_seconds(static_cast<double>(host.launches) * timer_.per_launch_s()) + host_extra;
      t.host_span = std::max(duration, Time::from_seconds(host.span_s) + host_extra);
    }
    t.deps = std::move(deps);
    if (last_compute_ >= 0) t.deps.push_back(last_compute_);
    last_compute_ = push(std::move(t));
    return last_compute_;
  }

  /// The start of a micro-batch's forward step under the host model:
  /// Megatron's get_batch broadcasts the batch and reads its sizes back
  /// (`.cpu()`), which drains the GPU; then `host_work` of Python (data
  /// loader, masks, position ids) delays the step's first launch.
  void micro_batch_start(std::string_view name, Time host_work) {
    sync_before_compute_ = true;
    sync_name_ = "data.sync";
    compute(name, Time::zero(), Flops(), {}, {}, host_work);
  }

  TaskIndex collective(std::string_view name, CollectiveKind kind, std::int32_t slot, Bytes bytes,
                       std::vector<TaskIndex> deps) {
    Task t;
    t.name = prog_.keep_name(name);
    t.kind = TaskKind::Collective;
    t.collective = kind;
    t.group = slot;
    t.collective_id = seq_[static_cast<std::size_t>(slot)]++;
    t.bytes = bytes;
    t.deps = std::move(deps);
    if (timer_.host_model()) {
      t.host_issue = Time::from_seconds(timer_.per_launch_s());  // one NCCL call
      if (kind == CollectiveKind::SendRecv) {
        // A pipeline exchange: the pipeline engine's host work, then a sync.
        t.host_issue += p2p_host_;
        sync_before_compute_ = true;
        const TaskIndex exchange = push(std::move(t));
        exchanges_.push_back(exchange);
        return exchange;
      }
    }
    return push(std::move(t));
  }

  /// Emits `pieces`; the first compute waits for `first_deps`. Names are
  /// `prefix` + the piece's name (+ "." + kind for collectives).
  void pieces(const std::vector<Piece>& ps, std::string_view prefix, std::int32_t tp_slot,
              std::vector<TaskIndex> first_deps, std::int32_t ep_slot = -1) {
    std::vector<TaskIndex> wait_next = std::move(first_deps), wait_after;
    // A compute piece named as one before it (an op cut by its own
    // collectives: the embedding's lookup and what follows its all-reduce,
    // the loss between its three all-reduces) takes ".2", ".3", ... so that
    // no two tasks of a step share a name (helper 144: a trace's
    // `mb0.lm_head.fwd.loss` three times). Counted over the pieces before
    // it: a list is a few pieces, and this runs for every step and layer.
    for (auto it = ps.begin(); it != ps.end(); ++it) {
      const Piece& p = *it;
      name_.assign(prefix);
      name_ += p.name;
      if (p.compute) {
        const auto n =
            1 + std::count_if(ps.begin(), it, [&](const Piece& q) { return q.compute && q.name == p.name; });
        if (n > 1) fmt::format_to(std::back_inserter(name_), ".{}", n);
        const TaskIndex t = compute(name_, p.duration, p.flops, std::move(wait_next), p.host);
        if (p.host_sync && timer_.host_model()) host_sync(t);
        wait_next = std::move(wait_after);
        wait_after.clear();
        continue;
      }
      std::vector<TaskIndex> deps = wait_next;
      if (last_compute_ >= 0) deps.push_back(last_compute_);
      name_ += '.';
      name_ += to_string(p.kind);
      const TaskIndex c = collective(name_, p.kind, p.expert ? ep_slot : tp_slot, p.bytes, std::move(deps));
      (p.async ? wait_after : wait_next).push_back(c);
    }
    // Anything still outstanding is waited for by the next compute.
    wait_next.insert(wait_next.end(), wait_after.begin(), wait_after.end());
    pending_ = std::move(wait_next);
  }
  /// Collectives the next compute must wait for (left over by pieces()).
  std::vector<TaskIndex> take_pending() { return std::exchange(pending_, {}); }
  [[nodiscard]] TaskIndex last_compute() const { return last_compute_; }
  /// The host waits at `task` (Task::host_sync).
  void host_sync(TaskIndex task) { prog_.tasks[static_cast<std::size_t>(task)].host_sync = true; }
  /// Reserves room for `tasks` tasks.
  void reserve(std::size_t tasks) { prog_.tasks.reserve(tasks); }

 private:
  TaskIndex push(Task t) {
    prog_.tasks.push_back(std::move(t));
    return static_cast<TaskIndex>(prog_.tasks.size() - 1);
  }
  Program& prog_;
  const KernelTimer& timer_;
  Time p2p_host_;
  const char* sync_name_ = "pp.sync";
  bool sync_before_compute_ = false;  ///< a pipeline exchange was issued: sync before the next compute
  bool exchange_blocks_ = false;
  std::vector<TaskIndex> exchanges_;  ///< the pipeline exchanges since the last sync
  TaskIndex last_compute_ = -1;
  std::vector<SlotRole> roles_;
  std::vector<std::int64_t> seq_;  // per slot: collectives issued so far
  std::vector<TaskIndex> pending_;
  std::string name_;  // scratch
};

/// Weight, bias and norm tensors of one transformer layer (QKV, projection,
/// fc1, fc2 weights and biases; two layer norms' gains and biases).
constexpr std::int64_t kTensorsPerLayer = 12;

}  // namespace

PlanSummary estimate_memory(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                            Bytes gpu_memory) {
  plan.validate(model, work);
  PlanSummary s;
  s.micro_batches = plan.micro_batches(work.micro_batch);
  s.chunk_layers = chunk_layers(model.layers, plan);
  for (int st = 0; st < plan.pp; ++st) {
    const StageParams params = stage_params(model, work, plan, s.chunk_layers, st);
    s.params_per_stage.push_back(params.total());
    s.memory_per_stage.push_back(
        stage_memory(model, work, plan, s.chunk_layers, s.micro_batches, st, params, gpu_memory));
  }
  return s;
}


// ---------------------------------------------------------------------------
// Passes (passes.hpp).

std::int64_t StagePartition::first_layer(int chunk) const { return chunk_first_layer(chunk_layers, chunk); }

std::int64_t StagePartition::stage_layers(int stage) const {
  std::int64_t n = 0;
  for (int c = 0; c < virtual_stages; ++c) n += layers(this->chunk(stage, c));
  return n;
}

StagePartition partition_layers(std::int64_t layers, int pp, int virtual_stages) {
  StagePartition out;
  out.pp = pp;
  out.virtual_stages = virtual_stages;
  out.chunk_layers = chunk_layers(layers, pp, virtual_stages);
  return out;
}

StagePartition partition_layers(std::int64_t layers, const ParallelPlan& plan) {
  StagePartition out;
  out.pp = plan.pp;
  out.virtual_stages = plan.virtual_stages;
  out.chunk_layers = chunk_layers(layers, plan);
  return out;
}

double model_flops(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                   const StagePartition& part, std::int64_t micro_batches) {
  // Model FLOPs (no recomputation) of one micro-batch: per layer, and of the
  // embedding and the LM head. The matrix products' alone, as Megatron-LM and
  // PaLM count them: norms, activations, the optimizer, the main-gradient
  // accumulation and FP8 casts are the implementation's (helper 177: with
  // every kernel counted, MFU's numerator moved with `training.framework`
  // and `grad_sync`).
  auto op_flops = [](const std::vector<OpKernels>& ops) {
    double f = 0;
    for (const auto& op : ops)
      f += op.gemm_flops().count() - op.recomputed_flops.count() - op.padding_flops.count();
    return f;
  };
  // The model's work is counted once: the ops as one tensor-parallel group
  // would run them unsplit (tp 1), times dp. Summing the tp ranks' kernels
  // would count tp times what every rank repeats (layer norms, residuals,
  // dropout without sequence parallelism), which is hardware work, not the
  // model's. Expert parallelism keeps its split: each rank computes the
  // tokens routed to its experts, and the dp ranks together all of them.
  const Sharding shard{1, false};
  const double layer_model_flops = op_flops(layer_ops(model, work, shard));
  const double embed_model_flops = op_flops(embedding_ops(model, work, shard));
  const double head_model_flops = op_flops(lm_head_ops(model, work, shard));
  // An MoE layer's model FLOPs count the activated experts only (top_k per
  // token, no capacity padding: OpKernels::padding_flops).
  const Sharding moe_shard{1, false, plan.ep};
  const double moe_model_flops = model.is_moe() ? op_flops(moe_layer_ops(model, work, moe_shard)) : 0.0;
  double per_replica_rank_sum = 0;  // over the pp stages of one (tp, dp) column
  for (int stage = 0; stage < part.pp; ++stage) {
    std::int64_t layers_here = 0, moe_here = 0;
    for (int c = 0; c < part.virtual_stages; ++c) {
      const int k = part.chunk(stage, c);
      layers_here += part.layers(k);
      moe_here += part.moe_layers(model, k);
    }
    double f = static_cast<double>(layers_here - moe_here) * layer_model_flops;
    if (moe_here > 0) f += static_cast<double>(moe_here) * moe_model_flops;
    if (stage == 0) f += embed_model_flops;
    if (stage == part.pp - 1) f += head_model_flops;
    per_replica_rank_sum += f;
  }
  return per_replica_rank_sum * static_cast<double>(micro_batches) * plan.dp;
}

namespace {

/// The part of the parameters `held` by one rank that its optimizer step
/// updates (optimizer_shard_params).
std::int64_t optimizer_shard_of(const TransformerConfig& model, const ParallelPlan& plan,
                                const StageParams& held) {
  const std::int64_t params = held.total();
  if (plan.zero_stage < 1) return params;
  if (model.is_moe() && plan.ep > 1) {
    // The experts' optimizer states are sharded over dp / ep ranks.
    const std::int64_t expert_dp = plan.dp / plan.ep;
    return (held.dense + plan.dp - 1) / plan.dp + (held.expert + expert_dp - 1) / expert_dp;
  }
  return (params + plan.dp - 1) / plan.dp;
}

}  // namespace

std::int64_t optimizer_shard_params(const TransformerConfig& model, const Workload& work,
                                    const ParallelPlan& plan, const StagePartition& part, int stage) {
  return optimizer_shard_of(model, plan, stage_params(model, work, plan, part.chunk_layers, stage));
}

// ---------------------------------------------------------------------------
// Stage programs: the passes' outputs written as tasks.

namespace {

/// Gradient sizes the data-parallel sync reduces, and PyTorch DDP's
/// accumulation kernels.
struct GradSizes {
  std::int64_t gbytes = 0;  ///< bytes per gradient element as reduced
  std::int64_t layer = 0;   ///< one dense layer's gradients
  std::int64_t word_params = 0;
  std::int64_t moe_dense = 0;   ///< an MoE layer's non-expert gradients
  std::int64_t moe_expert = 0;  ///< an MoE layer's experts' gradients (this rank's)
  bool after_backward = false;  ///< one reduction after the backward (else overlapped buckets)
  /// .grad += g of one layer's parameters (PyTorch's accumulation, one add
  /// per tensor), for the micro-batches after the first under PyTorch DDP
  /// and under eager with zero_grad(set_to_none=True).
  Piece grad_add;
  Piece moe_grad_add;
};

GradSizes grad_sizes(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                     const KernelTimer& timer) {
  GradSizes g;
  g.gbytes = dtype_bytes(work.rules().grad_dtype());
  g.layer = model.params_per_layer_per_tp_rank(plan.tp) * g.gbytes;
  g.word_params = padded_vocab_per_rank(model, work, plan.tp) * model.hidden;
  g.after_backward = plan.resolved_grad_sync(work) == GradSync::AfterBackward;
  auto add_piece = [&](std::int64_t params) {
    PieceList piece(timer);
    Pass add;
    add.add(node_model::flat_kernel(node_model::KernelOp::Add, params, work.dtype), static_cast<int>(kTensorsPerLayer));
    piece.passes("bwd.grad_add", {&add});
    return piece.pieces().front();
  };
  g.grad_add = add_piece(model.params_per_layer_per_tp_rank(plan.tp));
  if (model.is_moe()) {
    // MoE layers: their dense parameters' gradients are reduced over the DP
    // group; their experts' over the expert-data-parallel group (dp / ep
    // ranks) when ep > 1, else with the rest.
    const std::int64_t dense_params = model.moe_layer_dense_params_per_rank(plan.tp);
    const std::int64_t expert_params = model.moe_layer_expert_params_per_rank(plan.tp, plan.ep);
    g.moe_dense = dense_params * g.gbytes;
    g.moe_expert = expert_params * g.gbytes;
    g.moe_grad_add = add_piece(dense_params + expert_params);
  }
  return g;
}

/// What every stage's program is written from.
struct PlanContext {
  const TransformerConfig& model;
  const Workload& work;  ///< as planned (PyTorch DDP: no main-gradient buffer)
  const ParallelPlan& plan;
  const StagePartition& part;
  const ModelPieces& pieces;
  const GradSizes& grads;
  const KernelTimer& timer;
  std::int64_t micro_batches = 0;
  bool dot_grad = false;  ///< gradients accumulated in .grad after the first micro-batch (PyTorch DDP; eager
                          ///< with set_to_none)
  bool split = false;        ///< the schedule splits the backward into B and W
  bool separate_experts = false;  ///< experts' gradients reduced over the expert-data-parallel group
  std::int64_t pbytes = 0;   ///< bytes per parameter and activation element
  Bytes act;                 ///< one micro-batch's activation (b s h)
  bool scatter_gather = false;
  Bytes pipe_msg;            ///< a pipeline message
};

PlanContext plan_context(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                         const StagePartition& part, const ModelPieces& pieces, const GradSizes& grads,
                         const KernelTimer& timer, std::int64_t micro_batches, bool dot_grad) {
  const bool tp = plan.tp > 1, sp = tp && plan.sequence_parallel;
  const std::int64_t pbytes = dtype_bytes(work.dtype);
  const Bytes act(work.micro_batch * work.seq_len * model.hidden * pbytes);
  // Megatron's scatter-gather of pipeline tensors (without SP): each TP rank
  // sends its 1/tp slice of the activation, the receiving TP group
  // all-gathers it (over NVLink, instead of tp copies over the network).
  const bool scatter_gather =
      tp && !sp && plan.pipeline_scatter_gather && work.framework == node_model::Framework::Megatron;
  const Bytes pipe_msg = (sp || scatter_gather) ? Bytes(act.count() / plan.tp) : act;
  return PlanContext{model,
                     work,
                     plan,
                     part,
                     pieces,
                     grads,
                     timer,
                     micro_batches,
                     dot_grad,
                     splits_backward(plan.schedule),
                     model.is_moe() && plan.ep > 1,
                     pbytes,
                     act,
                     scatter_gather,
                     pipe_msg};
}

/// The program slots of a stage's rank's own groups (-1: not used).
struct StageSlots {
  std::int32_t tp = -1;
  std::int32_t dp = -1;
  std::int32_t ep = -1;
  std::int32_t expert_dp = -1;
};

StageSlots stage_slots(ProgramBuilder& rb, const PlanContext& c) {
  StageSlots s;
  s.tp = c.plan.tp > 1 ? rb.slot({kTensor}) : -1;
  s.dp = c.plan.dp > 1 ? rb.slot({kData}) : -1;
  s.ep = c.separate_experts ? rb.slot({kExpert}) : -1;
  s.expert_dp = c.separate_experts && c.plan.dp / c.plan.ep > 1 ? rb.slot({kExpertData}) : -1;
  return s;
}

/// Units of parameters, as the gradient sync and the forward name them: a
/// layer by its model index, the embedding and the LM head (with the final
/// norm) by these.
constexpr std::int64_t kEmbeddingUnit = -1;
constexpr std::int64_t kLmHeadUnit = -2;

/// A gradient bucket as the parameter gather sees it: its parameters' bytes
/// (in the model's dtype) and the units whose gradients filled it.
struct ParamBucket {
  std::int64_t bytes = 0;
  int chunk = 0;  ///< the local model chunk whose gradients filled it
  std::vector<std::int64_t> units;
};
/// The final round's buckets, in the order the backward closed them.
struct ParamBuckets {
  std::vector<ParamBucket> dense, expert;
};

/// The data-parallel gradient sync of one stage: buckets reduced as the
/// backward fills them (or after it), the experts' apart when ep > 1, and
/// with ZeRO-1/2 the updated parameters gathered after the step.
class DpGradSync {
 public:
  DpGradSync(const PlanContext& c, const StageSlots& slots, int stage)
      : c_(c),
        slots_(slots),
        stage_(stage),
        per_chunk_(c.plan.resolved_grad_sync(c.work) == GradSync::OverlapGradReduce),
        dense_(c.plan.resolved_bucket_size(c.work), !c.grads.after_backward),
        experts_(c.plan.resolved_bucket_size(c.work), !c.grads.after_backward) {}

  /// Megatron-Core's DDP (OverlapGradReduce) keeps a gradient buffer per
  /// model chunk. Without interleaving it cuts it into buckets only on the
  /// first pipeline stage ("data-parallel communication on these stages is
  /// not on the critical path"), each reduced as the last backward fills it;
  /// elsewhere the buffer is one bucket, reduced when the backward ends.
  /// With interleaving its schedule launches each chunk's whole sync at once
  /// (align_grad_reduce), `stage` backward steps after the chunk's last one
  /// (end_chunk's `defer`), on every stage alike. Called before the
  /// gradients of local chunk `chunk` (its last backward) are produced.
  void begin_chunk(int chunk) {
    chunk_ = chunk;
    if (!per_chunk_) return;
    const bool bucketing = stage_ == 0 && chunk == 0 && c_.part.virtual_stages == 1;
    dense_.set_bucketing(bucketing);
    experts_.set_bucketing(bucketing);
  }
  /// After the chunk's last backward (`task`): its buffer's last bucket,
  /// reduced now or, `defer` > 0, after that many more gradient steps
  /// (step_done).
  void end_chunk(ProgramBuilder& rb, TaskIndex task, int defer) {
    if (!per_chunk_) return;
    if (defer <= 0) {
      close(rb, task);
      return;
    }
    // Closed now (the next chunk's gradients are its own buffer's), reduced later.
    if (dense_.close()) deferred_.push_back({false, defer, take(false)});
    if (experts_.close()) deferred_.push_back({true, defer, take(true)});
  }
  /// After a gradient step (`task`): the deferred reductions due.
  void step_done(ProgramBuilder& rb, TaskIndex task) {
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (--it->steps > 0) {
        ++it;
        continue;
      }
      emit(rb, it->expert, it->bucket, task);
      it = deferred_.erase(it);
    }
  }

  /// `bytes` of gradients (reduced over the DP group) of unit `unit`
  /// (a layer's index, kEmbeddingUnit or kLmHeadUnit) produced by
  /// `task`.
  void produced(ProgramBuilder& rb, std::int64_t unit, std::int64_t bytes, TaskIndex task) {
    // Megatron-Core gives a tied embedding shared between the first and
    // last stage its own bucket under the distributed optimizer, reduced as
    // soon as its gradient is ready (interleaved: with its chunk).
    const bool own = per_chunk_ && c_.plan.zero_stage == 1 && c_.model.tied_embeddings && c_.plan.pp > 1 &&
                     c_.part.virtual_stages == 1 && (unit == kEmbeddingUnit || unit == kLmHeadUnit);
    if (own && dense_.close()) reduce(rb, false, task);
    dense_units_.push_back(unit);
    if (dense_.add(bytes) || (own && dense_.close())) reduce(rb, false, task);
  }
  /// Layer `layer`'s gradients produced by `task`.
  void produced_layer(ProgramBuilder& rb, std::int64_t layer, bool moe, TaskIndex task) {
    if (!moe) {
      produced(rb, layer, c_.grads.layer, task);
      return;
    }
    if (!c_.separate_experts) {
      produced(rb, layer, c_.grads.moe_dense + c_.grads.moe_expert, task);
      return;
    }
    produced(rb, layer, c_.grads.moe_dense, task);
    expert_units_.push_back(layer);
    if (experts_.add(c_.grads.moe_expert)) reduce(rb, true, task);
  }
  /// Reduces what the open buckets hold, and what is deferred, after `task`.
  void close(ProgramBuilder& rb, TaskIndex task) {
    for (const Deferred& d : std::exchange(deferred_, {})) emit(rb, d.expert, d.bucket, task);
    if (dense_.close()) reduce(rb, false, task);
    if (experts_.close()) reduce(rb, true, task);
  }
  /// ZeRO-2 (DeepSpeed's): every micro-batch's gradients are reduced as its
  /// backward produces them, each such step a round named by `tag`
  /// ("mb3."); `final` marks the chunk's last, whose buckets the parameter
  /// all-gather after the step follows.
  void start_round(std::string tag, bool final) {
    tag_ = std::move(tag);
    final_ = final;
  }
  /// The reductions the optimizer step waits for.
  [[nodiscard]] std::vector<TaskIndex> reductions() const {
    std::vector<TaskIndex> out = dense_tasks_;
    out.insert(out.end(), expert_tasks_.begin(), expert_tasks_.end());
    return out;
  }
  /// The final round's buckets and the units each holds (for the next
  /// iteration's forward under overlap_param_gather).
  [[nodiscard]] ParamBuckets final_buckets() const { return {final_dense_, final_expert_}; }
  /// Distributed optimizer (ZeRO-1/2): gathers the updated parameters after
  /// `step`, bucket by bucket (with overlap_param_gather the next
  /// iteration's forward gathers them: ForwardParamGathers).
  void gather_parameters(ProgramBuilder& rb, TaskIndex step) const {
    if (c_.plan.zero_stage < 1 || c_.plan.zero_stage > 2 || c_.plan.overlap_param_gather) return;
    if (slots_.dp >= 0) {
      for (std::size_t b = 0; b < final_dense_.size(); ++b) {
        rb.collective(fmt::format("dp.param.all-gather.bucket{:03}", b), CollectiveKind::AllGather, slots_.dp,
                      Bytes(final_dense_[b].bytes), {step});
      }
    }
    if (slots_.expert_dp >= 0) {
      for (std::size_t b = 0; b < final_expert_.size(); ++b) {
        rb.collective(fmt::format("dp.expert_param.all-gather.bucket{:03}", b), CollectiveKind::AllGather,
                      slots_.expert_dp, Bytes(final_expert_[b].bytes), {step});
      }
    }
  }

 private:
  /// A closed bucket: its number, gradient bytes, chunk and units.
  struct Closed {
    std::size_t number = 0;
    std::int64_t bytes = 0;
    int chunk = 0;
    std::vector<std::int64_t> units;
  };
  struct Deferred {
    bool expert = false;
    int steps = 0;  ///< gradient steps left before its reduction
    Closed bucket;
  };
  /// The bucket just closed (with the units that filled it).
  Closed take(bool expert) {
    const GradBuckets& buckets = expert ? experts_ : dense_;
    std::vector<std::int64_t>& units = expert ? expert_units_ : dense_units_;
    return {buckets.buckets().size() - 1, buckets.buckets().back(), chunk_, std::exchange(units, {})};
  }
  /// The reduction of the bucket just closed.
  void reduce(ProgramBuilder& rb, bool expert, TaskIndex after) { emit(rb, expert, take(expert), after); }
  void emit(ProgramBuilder& rb, bool expert, const Closed& bucket, TaskIndex after) {
    const std::int32_t slot = expert ? slots_.expert_dp : slots_.dp;
    if (slot < 0) return;
    const auto kind = c_.plan.zero_stage >= 1 ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
    std::string name =
        expert ? fmt::format("{}dp.expert_grad.{}.bucket{:03}", tag_, to_string(kind), bucket.number)
               : fmt::format("{}dp.grad.{}.bucket{:03}", tag_, to_string(kind), bucket.number);
    (expert ? expert_tasks_ : dense_tasks_)
        .push_back(rb.collective(name, kind, slot, Bytes(bucket.bytes), {after}));
    if (final_) {
      // The parameters in the model's dtype, for the gathers after the step.
      (expert ? final_expert_ : final_dense_)
          .push_back(ParamBucket{bucket.bytes / c_.grads.gbytes * c_.pbytes, bucket.chunk, bucket.units});
    }
  }

  const PlanContext& c_;
  StageSlots slots_;
  int stage_ = 0;
  bool per_chunk_ = false;  ///< a buffer per model chunk (Megatron-Core)
  int chunk_ = 0;           ///< the local chunk whose gradients are produced
  GradBuckets dense_;
  GradBuckets experts_;
  std::vector<TaskIndex> dense_tasks_;
  std::vector<TaskIndex> expert_tasks_;
  std::string tag_;    ///< the round's name prefix (ZeRO-2), else empty
  bool final_ = true;  ///< the round is the chunk's last (always without ZeRO-2)
  std::vector<std::int64_t> dense_units_, expert_units_;  ///< the units in the open buckets
  std::vector<ParamBucket> final_dense_, final_expert_;   ///< the last rounds' buckets, in order
  std::vector<Deferred> deferred_;                        ///< closed, reduced later (end_chunk)
};

/// Megatron-Core's --overlap-param-gather (distributed optimizer): the
/// parameters the step updated are all-gathered during the next forward,
/// each unit's first forward waiting for its bucket (a model chunk's
/// buckets in the reverse of the backward's order). Without interleaving
/// the first bucket's gather is issued at the iteration's start and each
/// next one when the forward reaches the bucket before it (the DDP's
/// forward pre-hooks: a prefetch of one bucket); with it, as Megatron-Core's
/// interleaved schedule does (align_param_gather), the first two chunks'
/// buckets at the start and chunk c + 1's when chunk c's first forward
/// begins. One iteration stands for the steady state: what the previous
/// step updated is gathered here.
class ForwardParamGathers {
 public:
  ForwardParamGathers(ProgramBuilder& rb, const StageSlots& slots, const ParamBuckets& buckets, int chunks)
      : rb_(rb), interleaved_(chunks > 1) {
    const std::array<const std::vector<ParamBucket>*, 2> from{&buckets.dense, &buckets.expert};
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      Kind& kind = kinds_[k];
      kind.slot = k == 0 ? slots.dp : slots.expert_dp;
      kind.chunks.resize(static_cast<std::size_t>(chunks));
      const auto& list = *from[k];
      for (std::size_t i = list.size(); i-- > 0;) {  // the forward's order: the backward's reversed
        kind.chunks[static_cast<std::size_t>(list[i].chunk)].push_back(Bucket{list[i], i, -1});
      }
    }
    std::vector<TaskIndex> none;
    if (interleaved_) {
      issue_chunk(0, none);
      issue_chunk(1, none);
    } else {
      for (std::size_t k = 0; k < kinds_.size(); ++k) issue(k, 0, 0, none);
    }
  }
  /// Before a forward step, with interleaving: issues chunk `chunk` + 1's
  /// gathers (the caller passes the chunk whose first forward is `stage`
  /// forward steps ahead, as Megatron-Core's schedule looks ahead).
  void forward_step(int chunk) {
    if (!interleaved_ || chunk + 1 <= issued_chunks_) return;
    std::vector<TaskIndex> deps;
    if (rb_.last_compute() >= 0) deps.push_back(rb_.last_compute());
    issue_chunk(chunk + 1, deps);
  }
  /// Before unit `unit`'s forward in local chunk `chunk`: adds the gathers
  /// of its buckets to `first` (its first forward only) and, without
  /// interleaving, prefetches the next bucket.
  void before(int chunk, std::int64_t unit, std::vector<TaskIndex>& first) {
    std::vector<TaskIndex> deps;
    if (rb_.last_compute() >= 0) deps.push_back(rb_.last_compute());
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      if (kinds_[k].slot < 0) continue;
      auto& list = kinds_[k].chunks[static_cast<std::size_t>(chunk)];
      for (std::size_t b = 0; b < list.size(); ++b) {
        Bucket& bucket = list[b];
        if (bucket.waited ||
            std::find(bucket.of.units.begin(), bucket.of.units.end(), unit) == bucket.of.units.end()) {
          continue;
        }
        for (std::size_t i = 0; i <= b; ++i) issue(k, static_cast<std::size_t>(chunk), i, deps);
        first.push_back(bucket.gather);
        bucket.waited = true;
        if (!interleaved_ && b + 1 < list.size()) issue(k, static_cast<std::size_t>(chunk), b + 1, deps);
        break;
      }
    }
  }

 private:
  struct Bucket {
    ParamBucket of;
    std::size_t number = 0;  ///< in the backward's order (the step's numbering)
    TaskIndex gather = -1;   ///< once issued
    bool waited = false;
  };
  struct Kind {
    std::int32_t slot = -1;
    std::vector<std::vector<Bucket>> chunks;  ///< per local chunk, in the forward's order
  };
  void issue_chunk(int chunk, const std::vector<TaskIndex>& deps) {
    if (chunk >= static_cast<int>(kinds_[0].chunks.size())) return;
    issued_chunks_ = std::max(issued_chunks_, chunk + 1);
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      const auto c = static_cast<std::size_t>(chunk);
      for (std::size_t b = 0; b < kinds_[k].chunks[c].size(); ++b) issue(k, c, b, deps);
    }
  }
  void issue(std::size_t k, std::size_t chunk, std::size_t b, const std::vector<TaskIndex>& deps) {
    Kind& kind = kinds_[k];
    if (kind.slot < 0 || b >= kind.chunks[chunk].size()) return;
    Bucket& bucket = kind.chunks[chunk][b];
    if (bucket.gather >= 0) return;
    bucket.gather = rb_.collective(
        fmt::format("dp.{}.all-gather.bucket{:03}", k == 0 ? "param" : "expert_param", bucket.number),
        CollectiveKind::AllGather, kind.slot, Bytes(bucket.of.bytes), deps);
  }
  ProgramBuilder& rb_;
  bool interleaved_ = false;
  int issued_chunks_ = 0;  ///< chunks [0, issued_chunks_) issued (interleaved)
  std::array<Kind, 2> kinds_;
};

/// Task names of one step: `tag` ("mb3." or "c1.mb3.") + a suffix, in
/// reused buffers.
class StepNames {
 public:
  void start(const PipelineStep& st, int virtual_stages) {
    tag_.clear();
    if (virtual_stages > 1) {
      fmt::format_to(std::back_inserter(tag_), "c{}.mb{}.", st.chunk, st.micro_batch);
    } else {
      fmt::format_to(std::back_inserter(tag_), "mb{}.", st.micro_batch);
    }
  }
  const std::string& operator()(std::string_view suffix) {
    name_.assign(tag_);
    name_ += suffix;
    return name_;
  }
  const std::string& layer(std::int64_t l) {
    name_.assign(tag_);
    fmt::format_to(std::back_inserter(name_), "layer{:03}.", l);
    return name_;
  }

 private:
  std::string tag_, name_;
};

/// Reserves room for a stage's tasks: per micro-batch and chunk, each
/// layer's pieces plus a few pipeline, ZeRO-3 and wait tasks.
void reserve_tasks(ProgramBuilder& rb, const PlanContext& c, int stage) {
  auto per_layer_of = [&](const LayerPieces& lp) {
    return lp.forward.pieces().size() + 1 +
           (c.split ? lp.input_backward.pieces().size() + lp.weight_backward.pieces().size() + 1
                    : lp.backward.pieces().size());
  };
  std::size_t per_layer =
      per_layer_of(c.pieces.layer) + (c.plan.zero_stage == 3 ? 4 : 0);  // ZeRO-3's gathers
  if (c.pieces.moe_layer) per_layer = std::max(per_layer, per_layer_of(*c.pieces.moe_layer));
  std::size_t tasks = 64;
  for (int v = 0; v < c.part.virtual_stages; ++v) {
    const auto nl = static_cast<std::size_t>(c.part.layers(c.part.chunk(stage, v)));
    tasks += static_cast<std::size_t>(c.micro_batches) * (nl * per_layer + 8);
  }
  rb.reserve(tasks);
}

/// ZeRO-3 as FSDP and DeepSpeed run it: before each unit of an F or B step
/// runs (zero3_units: the embedding, each layer, the LM head), its
/// parameters are all-gathered over the data-parallel ranks (an MoE layer's
/// experts over the ranks holding the same experts). The next unit's gather
/// is issued once the unit before the running one has finished (a prefetch
/// of one unit, FSDP's default), so it overlaps the running unit; a step's
/// first two wait for the compute before the step (on the first stage, the
/// micro-batch's data step). Each unit's parameters are freed after it runs
/// (the memory model holds two units). W steps gather nothing: weight
/// gradients need only the activations and the output gradients.
class ParamGathers {
 public:
  ParamGathers(ProgramBuilder& rb, const PlanContext& c, const StageSlots& slots, int k, StepKind step,
               StepNames& named)
      : rb_(rb), slots_(slots), named_(named), forward_(step == StepKind::F) {
    if (c.plan.zero_stage != 3 || slots.dp < 0 || step == StepKind::W) return;
    const auto units = zero3_units(c.model, c.work, c.plan, c.part.chunk_layers, k);
    // Labels in forward order: the embedding, the model's layer index, the LM head.
    std::int64_t l = c.part.has_embedding(k) ? -1 : 0;
    for (const StageParams& u : units) {
      const std::int64_t label = l < 0                  ? kEmbeddingUnit
                                 : l < c.part.layers(k) ? c.part.first_layer(k) + l
                                                        : kLmHeadUnit;
      ++l;
      Unit unit{label, u.dense * c.pbytes, u.expert * c.pbytes, {}};
      if (!c.separate_experts) unit.dense += std::exchange(unit.expert, 0);
      units_.push_back(unit);
    }
    if (!forward_) std::reverse(units_.begin(), units_.end());
  }
  /// Before the step's unit `u` (in the order the step runs them) runs:
  /// issues the prefetch of the next and adds unit u's gathers to `first`.
  void before(std::size_t u, std::vector<TaskIndex>& first) {
    if (units_.empty()) return;
    if (u == 0) {
      std::vector<TaskIndex> deps;
      if (rb_.last_compute() >= 0) deps.push_back(rb_.last_compute());
      issue(0, deps);
      if (units_.size() > 1) issue(1, deps);
    } else if (u + 1 < units_.size()) {
      issue(u + 1, {rb_.last_compute()});
    }
    first.insert(first.end(), units_[u].gathers.begin(), units_[u].gathers.end());
  }

 private:
  struct Unit {
    std::int64_t label = 0;
    std::int64_t dense = 0, expert = 0;  ///< bytes
    std::vector<TaskIndex> gathers;
  };
  void issue(std::size_t u, const std::vector<TaskIndex>& deps) {
    Unit& unit = units_[u];
    auto name = [&](std::string_view what) {
      std::string prefix = unit.label == kEmbeddingUnit ? named_("embedding.")
                           : unit.label == kLmHeadUnit  ? named_("lm_head.")
                                                        : named_.layer(unit.label);
      return fmt::format("{}{}.zero3.{}", prefix, forward_ ? "fwd" : "bwd", what);
    };
    unit.gathers.push_back(rb_.collective(name("param.all-gather"), CollectiveKind::AllGather, slots_.dp,
                                          Bytes(unit.dense), deps));
    if (unit.expert > 0 && slots_.expert_dp >= 0) {
      unit.gathers.push_back(rb_.collective(name("expert_param.all-gather"), CollectiveKind::AllGather,
                                            slots_.expert_dp, Bytes(unit.expert), deps));
    }
  }
  ProgramBuilder& rb_;
  const StageSlots& slots_;
  StepNames& named_;
  bool forward_;
  std::vector<Unit> units_;
};

/// An F step of chunk `k` on `stage`: the activation received (or the
/// embedding), the chunk's layers, the LM head on the last chunk, the
/// activation sent on. `first_micro_batch`: the chunk's first F step of the
/// iteration, whose layers run their once-per-iteration kernels
/// (LayerPieces::first_forward: Transformer Engine's FP8 weight casts,
/// cached for the later micro-batches once Megatron-Core's schedule has set
/// is_first_microbatch on the chunk).
void add_forward(ProgramBuilder& rb, const PlanContext& c, const StageSlots& slots, int stage, int k,
                 bool first_micro_batch, StepNames& named, ForwardParamGathers* params) {
  const int p = c.plan.pp, last = c.part.chunks() - 1;
  // Megatron-LM receives the activation (recv_forward, or with the send
  // before it) before forward_step, whose get_batch is the data step: the
  // receive is posted first, so a sender that waits for it (blocking
  // exchanges, ProgramBuilder) does not wait for the data step too.
  std::optional<TaskIndex> recv;
  auto receive = [&] {
    const int from = (k - 1) % p;
    return rb.collective(named("pp.recv_activation"), CollectiveKind::SendRecv,
                         rb.slot({kPipeForward, from, stage}), c.pipe_msg, {});
  };
  if (!c.part.has_embedding(k) && c.work.framework == node_model::Framework::Megatron) recv = receive();
  // The stages that load data (the first: tokens; the last: labels) start
  // each micro-batch with its data step (ProgramBuilder::micro_batch_start).
  if (c.timer.host_model() && c.work.host.per_micro_batch > Time::zero() && (k == 0 || k == last)) {
    rb.micro_batch_start(named("data"), c.work.host.per_micro_batch);
  }
  ParamGathers gathers(rb, c, slots, k, StepKind::F, named);
  std::size_t unit = 0;
  std::vector<TaskIndex> first;
  const int local_chunk = k / c.plan.pp;  // StagePartition::chunk(stage, local_chunk) == k
  auto needs = [&](std::int64_t u) {
    if (params != nullptr) params->before(local_chunk, u, first);
  };
  if (c.part.has_embedding(k)) {
    gathers.before(unit++, first);
    needs(kEmbeddingUnit);
    rb.pieces(c.pieces.embedding.forward.pieces(), named("embedding."), slots.tp, std::move(first));
    first = rb.take_pending();
  } else {
    if (!recv) recv = receive();
    first.push_back(c.scatter_gather ? rb.collective(named("pp.gather_activation"), CollectiveKind::AllGather,
                                                     slots.tp, c.act, {*recv})
                                     : *recv);
  }
  const std::int64_t first_layer = c.part.first_layer(k);
  for (std::int64_t l = 0; l < c.part.layers(k); ++l) {
    const LayerPieces& lp = c.pieces.of_layer(c.model, first_layer + l);
    gathers.before(unit++, first);
    needs(first_layer + l);
    rb.pieces(lp.forward_of(first_micro_batch).pieces(), named.layer(first_layer + l), slots.tp, std::move(first),
              slots.ep);
    first = rb.take_pending();
  }
  if (k == last) {
    gathers.before(unit++, first);
    needs(kLmHeadUnit);
    rb.pieces(c.pieces.lm_head.forward.pieces(), named("lm_head."), slots.tp, std::move(first));
    first = rb.take_pending();
  }
  if (!first.empty()) rb.compute(named("fwd.wait"), Time::zero(), Flops(), std::exchange(first, {}));
  if (k != last) {
    rb.collective(named("pp.send_activation"), CollectiveKind::SendRecv, rb.slot({kPipeForward, stage, (k + 1) % p}),
                  c.pipe_msg, {rb.last_compute()});
  }
}

/// A B or W step of chunk `k` on `stage` (B with W when the schedule does
/// not split the backward): the gradient received (B), the LM head on the
/// last chunk, the layers last to first, the embedding on chunk 0, the
/// gradient sent back (B). W exchanges no pipeline messages. With
/// `sync_grads` (the chunk's last step computing weight gradients; under
/// ZeRO-2 every such step) each piece's gradients go to the data-parallel
/// sync; with `accumulate`
/// (PyTorch DDP after the first micro-batch) they are added to .grad.
void add_backward(ProgramBuilder& rb, const PlanContext& c, const StageSlots& slots, DpGradSync& sync,
                  int stage, int k, StepKind kind, bool sync_grads, bool accumulate, StepNames& named) {
  const TransformerConfig& model = c.model;
  const int p = c.plan.pp, last = c.part.chunks() - 1;
  const bool w_step = kind == StepKind::W;
  const std::int64_t gbytes = c.grads.gbytes;
  ParamGathers gathers(rb, c, slots, k, kind, named);
  std::size_t unit = 0;
  std::vector<TaskIndex> first;
  if (k == last) {
    gathers.before(unit++, first);
    rb.pieces(c.pieces.lm_head.of(kind, c.split).pieces(), named("lm_head."), slots.tp, std::move(first));
    first = rb.take_pending();
    if (sync_grads && (p > 1 || !model.tied_embeddings)) {
      sync.produced(rb, kLmHeadUnit, (c.grads.word_params + model.norm_params()) * gbytes, rb.last_compute());
    }
  } else if (!w_step) {
    const int from = (k + 1) % p;
    const TaskIndex recv = rb.collective(named("pp.recv_gradient"), CollectiveKind::SendRecv,
                                         rb.slot({kPipeBackward, from, stage}), c.pipe_msg, {});
    first.push_back(c.scatter_gather ? rb.collective(named("pp.gather_gradient"), CollectiveKind::AllGather,
                                                     slots.tp, c.act, {recv})
                                     : recv);
  }
  const std::int64_t first_layer = c.part.first_layer(k);
  for (std::int64_t l = c.part.layers(k) - 1; l >= 0; --l) {
    const bool moe = c.pieces.moe_layer && model.is_moe_layer(first_layer + l);
    const LayerPieces& lp = c.pieces.of_layer(model, first_layer + l);
    gathers.before(unit++, first);
    rb.pieces(lp.of(kind, c.split).pieces(), named.layer(first_layer + l), slots.tp, std::move(first),
              slots.ep);
    first = rb.take_pending();
    if (accumulate) {
      const Piece& add = moe ? c.grads.moe_grad_add : c.grads.grad_add;
      rb.compute(named.layer(first_layer + l) + (w_step ? "wgrad.grad_add" : "bwd.grad_add"), add.duration,
                 Flops(), std::exchange(first, {}), add.host);
    }
    if (sync_grads) {
      if (!first.empty()) {
        rb.compute(named.layer(first_layer + l) + (w_step ? "wgrad.wait" : "bwd.wait"), Time::zero(), Flops(),
                   std::exchange(first, {}));
      }
      sync.produced_layer(rb, first_layer + l, moe, rb.last_compute());
    }
  }
  if (c.part.has_embedding(k)) {
    gathers.before(unit++, first);
    rb.pieces(c.pieces.embedding.of(kind, c.split).pieces(), named("embedding."), slots.tp, std::move(first));
    first = rb.take_pending();
  }
  if (!first.empty()) {
    rb.compute(named(w_step ? "wgrad.wait" : "bwd.wait"), Time::zero(), Flops(), std::exchange(first, {}));
  }
  if (c.part.has_embedding(k) && sync_grads) {
    sync.produced(rb, kEmbeddingUnit,
                  (c.grads.word_params + (model.learned_positions ? c.work.seq_len * model.hidden : 0) +
                   (p == 1 && model.tied_embeddings ? model.norm_params() : 0)) *
                      gbytes,
                  rb.last_compute());
  }
  if (k != 0 && !w_step) {
    rb.collective(named("pp.send_gradient"), CollectiveKind::SendRecv, rb.slot({kPipeBackward, stage, (k - 1) % p}),
                  c.pipe_msg, {rb.last_compute()});
  }
}

/// The schedule's steps of `stage`, in order.
void add_pipeline_steps(ProgramBuilder& rb, const PlanContext& c, const StageSlots& slots, DpGradSync& sync,
                        int stage, const std::vector<PipelineStep>& order, ForwardParamGathers* params) {
  const int v = c.part.virtual_stages;
  // The steps that compute weight gradients: B (fused), or W (split). A
  // chunk's gradients are final after its last such step.
  const StepKind grad_step = c.split ? StepKind::W : StepKind::B;
  std::vector<std::size_t> last_backward(static_cast<std::size_t>(v), 0);
  std::vector<std::size_t> first_backward(static_cast<std::size_t>(v), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i].kind != grad_step) continue;
    last_backward[static_cast<std::size_t>(order[i].chunk)] = i;
    auto& f = first_backward[static_cast<std::size_t>(order[i].chunk)];
    f = std::min(f, i);
  }
  // The forward steps' chunks, in order, and which start their chunk (for
  // Megatron-Core's look-ahead of `stage` forward steps to the parameter
  // gathers of the chunk after the one whose first forward comes then).
  std::vector<int> forward_chunks;
  std::vector<bool> forward_first;
  std::vector<char> seen(static_cast<std::size_t>(v), 0);
  for (const PipelineStep& st : order) {
    if (!st.forward()) continue;
    forward_first.push_back(std::exchange(seen[static_cast<std::size_t>(st.chunk)], char{1}) == 0);
    forward_chunks.push_back(st.chunk);
  }
  std::size_t forwards = 0;
  StepNames named;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const PipelineStep& st = order[i];
    const int k = c.part.chunk(stage, st.chunk);  // virtual stage
    named.start(st, v);
    if (st.forward()) {
      const std::size_t at = forwards++;
      const std::size_t ahead = at + static_cast<std::size_t>(stage);
      if (params != nullptr && ahead < forward_chunks.size() && forward_first[ahead]) {
        params->forward_step(forward_chunks[ahead]);
      }
      add_forward(rb, c, slots, stage, k, forward_first[at], named, params);
      continue;
    }
    const bool grads = st.kind == grad_step;
    const bool last_mb = grads && i == last_backward[static_cast<std::size_t>(st.chunk)];
    // PyTorch DDP (and eager with set_to_none): micro-batches after the
    // first add their gradients to .grad.
    const bool accumulate = c.dot_grad && grads && i != first_backward[static_cast<std::size_t>(st.chunk)];
    // ZeRO-2 and ZeRO-3 reduce every micro-batch's gradients (DeepSpeed and
    // FSDP: a rank keeps only its shard of them, as the memory model counts;
    // helper 61: ZeRO-3 reduced once per iteration); ZeRO-0/1 only the
    // chunk's last.
    const bool every_mb = grads && c.plan.zero_stage >= 2;
    if (every_mb) sync.start_round(std::string(named("")), last_mb);
    if (last_mb) sync.begin_chunk(st.chunk);
    add_backward(rb, c, slots, sync, stage, k, st.kind, last_mb || every_mb, accumulate, named);
    // Each such round its own buckets (else the next chunk's round would take the rest).
    if (every_mb) sync.close(rb, rb.last_compute());
    if (grads) sync.step_done(rb, rb.last_compute());
    // Megatron-Core's interleaved schedule launches a chunk's gradient sync
    // `stage` backward steps after the chunk's last (align_grad_reduce).
    if (last_mb) sync.end_chunk(rb, rb.last_compute(), v > 1 ? stage : 0);
  }
}

/// The optimizer step of `stage` after its gradients are reduced (`reduced`,
/// and the tied embeddings' all-reduce between the first and the last stage),
/// then ZeRO-1/2's parameter gathers.
void add_optimizer(ProgramBuilder& rb, const PlanContext& c, const StageSlots& slots, const DpGradSync& sync,
                   int stage, TaskIndex last_compute) {
  const int p = c.plan.pp;
  std::vector<TaskIndex> before_step = sync.reductions();
  // Megatron's finalize_model_grads runs them one after another: the
  // data-parallel reductions (finish_grad_sync), the norms' all-reduce, the
  // tied embeddings' (each enqueued behind the previous on the compute
  // stream). DeepSpeed's pipeline engine reduces the tied gradients before
  // the data-parallel ones (ReduceTiedGrads, then ReduceGrads), its
  // reductions having been issued already here: they run side by side.
  const bool in_order = c.work.framework == node_model::Framework::Megatron;
  std::vector<TaskIndex> after{last_compute};
  if (in_order) after.insert(after.end(), before_step.begin(), before_step.end());
  // Sequence parallelism: the parameters every tensor-parallel rank holds
  // whole (norms, row-parallel biases, routers) got each rank's sequence
  // shard's gradient only; Megatron all-reduces them over the tp group
  // before the step, in one coalesced call (finalize_model_grads'
  // _allreduce_layernorm_grads), the final norm's on the last stage too.
  if (c.plan.tp > 1 && c.plan.sequence_parallel) {
    std::int64_t replicated = stage == p - 1 ? c.model.norm_params() : 0;
    for (int v = 0; v < c.part.virtual_stages; ++v) {
      const int k = c.part.chunk(stage, v);
      const std::int64_t first = c.part.first_layer(k);
      for (std::int64_t l = first; l < first + c.part.layers(k); ++l) {
        replicated += c.model.tp_replicated_params(c.model.is_moe_layer(l));
      }
    }
    const TaskIndex norms = rb.collective("norm.grad.all-reduce", CollectiveKind::AllReduce, slots.tp,
                                          Bytes(replicated * c.grads.gbytes), after);
    before_step.push_back(norms);
    if (in_order) after = {norms};
  }
  // Tied embeddings: the first and last stage add their word-embedding gradients.
  if (p > 1 && c.model.tied_embeddings && (stage == 0 || stage == p - 1)) {
    before_step.push_back(rb.collective("embedding.grad.all-reduce", CollectiveKind::AllReduce,
                                        rb.slot({kEmbedding, 0, p - 1}),
                                        Bytes(c.grads.word_params * c.grads.gbytes), after));
  }
  if (c.timer.host_model()) {
    // Megatron's step starts with .item() calls (the fp16 inf check, the
    // gradient norm): the host waits for the gradients to be reduced.
    rb.host_sync(rb.compute("optimizer.sync", Time::zero(), Flops(), std::exchange(before_step, {})));
  }
  // Optimizer step over this rank's (shard of the) parameters.
  const StageParams stage_held = stage_params(c.model, c.work, c.plan, c.part.chunk_layers, stage);
  const std::int64_t step_params = optimizer_shard_of(c.model, c.plan, stage_held);
  const int tensors = static_cast<int>(c.part.stage_layers(stage) * kTensorsPerLayer + 4);
  // The main gradients zeroed after it: under ZeRO-1 (Megatron's
  // distributed optimizer) the whole buffer the rank accumulated into, not
  // the shard the step updates (zero_grad_buffer); ZeRO-2/3 keep only the
  // shard's gradients.
  const std::int64_t held = c.plan.zero_stage == 1 ? stage_held.total() : step_params;
  const Pass opt_pass =
      c.work.rules().optimizer(step_params, tensors, c.plan.fused_optimizer, c.plan.grad_clipping, held);
  PieceList opt_piece(c.timer);
  opt_piece.passes("optimizer", {&opt_pass});
  const Piece& opt = opt_piece.pieces().front();
  const TaskIndex step =
      rb.compute("optimizer", opt.duration, Flops(), std::move(before_step), opt.host, c.work.host.per_iteration);
  if (c.timer.host_model()) rb.host_sync(step);
  sync.gather_parameters(rb, step);
}

/// The program of pipeline stage `stage` (shared by its tp x dp ranks) and
/// what its slots stand for.
/// `gathered`: with overlap_param_gather, the buckets whose parameters this
/// iteration's forward gathers (those a first build of the program closed).
Program stage_program(const PlanContext& c, int stage, std::vector<SlotRole>& roles,
                      ParamBuckets* buckets = nullptr, const ParamBuckets* gathered = nullptr) {
  Program prog;
  // Megatron-LM's 1F1B pairs each send with the receive it waits for next
  // (send_forward_recv_backward, send_backward_recv_forward), as this
  // program does; its interleaved schedule batches others, which the
  // program does not follow (with blocking exchanges it would deadlock),
  // and Megatron-Core overlaps them there (--overlap-p2p-communication).
  const bool blocking =
      c.work.framework == node_model::Framework::Megatron && c.plan.schedule == Schedule::OneFOneB;
  ProgramBuilder rb(prog, c.timer, c.work.host.per_p2p, blocking);
  const StageSlots slots = stage_slots(rb, c);
  const auto order = pipeline_order(c.plan.schedule, c.plan.pp, stage, c.micro_batches, c.part.virtual_stages);
  reserve_tasks(rb, c, stage);
  std::optional<ForwardParamGathers> params;
  if (gathered != nullptr) params.emplace(rb, slots, *gathered, c.part.virtual_stages);
  DpGradSync sync(c, slots, stage);
  add_pipeline_steps(rb, c, slots, sync, stage, order, params ? &*params : nullptr);
  const TaskIndex last_compute = rb.last_compute();
  sync.close(rb, last_compute);
  add_optimizer(rb, c, slots, sync, stage, last_compute);
  if (buckets != nullptr) *buckets = sync.final_buckets();
  roles = rb.roles();
  return prog;
}

/// Binds every rank to its stage's program. Ranks in order and each rank's
/// slots in slot order: the groups get the same numbers as when every rank
/// had its own program (and the executor's stream order with them).
void bind_ranks(const ParallelPlan& plan, const std::vector<std::vector<SlotRole>>& stage_roles, TaskGraph& graph) {
  Groups groups;
  std::vector<int> members;
  // A TP, DP or expert group is bound once, by the coordinates that name it,
  // not once per member (listing a data-parallel group for each of its
  // members cost ranks x dp: a 100,000-GPU data-parallel job spent minutes
  // here; helper 179).
  std::map<std::array<int, 7>, std::int32_t> bound;
  graph.ranks.reserve(static_cast<std::size_t>(plan.world_size()));
  for (int rank = 0; rank < plan.world_size(); ++rank) {
    const RankCoord me = rank_coord(plan, rank);
    const auto& roles = stage_roles[static_cast<std::size_t>(me.pp)];
    std::vector<std::int32_t> slot_groups;
    slot_groups.reserve(roles.size());
    for (const SlotRole& role : roles) {
      std::array<int, 7> key{role.purpose, -1, -1, -1, me.pp, role.from, role.to};
      switch (role.purpose) {
        case kTensor:
          key[1] = me.dp;
          break;
        case kData:
          key[1] = me.tp;
          break;
        case kExpert:
          key[1] = me.tp;
          key[2] = me.dp / plan.ep;
          break;
        case kExpertData:
          key[1] = me.tp;
          key[2] = me.dp % plan.ep;
          break;
        default:  // a pipeline pair: two members
          slot_groups.push_back(bind(groups, plan, me, role, members));
          continue;
      }
      const auto [it, fresh] = bound.try_emplace(key, 0);
      if (fresh) it->second = bind(groups, plan, me, role, members);
      slot_groups.push_back(it->second);
    }
    graph.add_rank(me.pp, std::move(slot_groups));
  }
  graph.groups = groups.take();
}

}  // namespace

PlannedTraining plan_training_detailed(const TransformerConfig& model, const Workload& given,
                                       const ParallelPlan& plan, const node_model::KernelPredictor& predictor) {
  PlannedTraining out;
  out.summary = estimate_memory(model, given, plan, predictor.gpu().memory);
  const Workload work = workload_under(given, plan);
  const bool torch_ddp = plan.torch_ddp(work);

  const StagePartition part = partition_layers(model.layers, plan);
  const KernelTimer timer(predictor, work);
  const ModelPieces pieces = model_pieces(model, work, plan, timer);
  out.summary.model_flops = model_flops(model, work, plan, part, out.summary.micro_batches);
  const GradSizes grads = grad_sizes(model, work, plan, timer);
  // Gradients in .grad that micro-batches after the first add to: PyTorch
  // DDP under Megatron, and eager with zero_grad(set_to_none=True) (else
  // eager's weight-gradient passes add in every backward).
  const bool dot_grad = torch_ddp || (work.framework == node_model::Framework::PyTorchEager &&
                                      !work.profile.eager_accumulate_every_backward);
  const PlanContext context =
      plan_context(model, work, plan, part, pieces, grads, timer, out.summary.micro_batches, dot_grad);

  // One program per pipeline stage: every (tp, dp) rank of a stage runs the
  // same tasks; only the groups its slots name differ.
  std::vector<std::vector<SlotRole>> stage_roles(static_cast<std::size_t>(plan.pp));
  out.graph.programs.reserve(static_cast<std::size_t>(plan.pp));
  for (int stage = 0; stage < plan.pp; ++stage) {
    auto& roles = stage_roles[static_cast<std::size_t>(stage)];
    if (!plan.overlap_param_gather) {
      out.graph.add_program(stage_program(context, stage, roles));
      continue;
    }
    // The buckets are known once the backward has been written: a first
    // build finds them, the second gathers them in the forward.
    ParamBuckets buckets;
    (void)stage_program(context, stage, roles, &buckets);
    out.graph.add_program(stage_program(context, stage, roles, nullptr, &buckets));
  }
  bind_ranks(plan, stage_roles, out.graph);
  return out;
}

TaskGraph plan_training(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                        const node_model::KernelPredictor& predictor) {
  return plan_training_detailed(model, work, plan, predictor).graph;
}

namespace {
/// `word` is `prefix` followed by one or more decimal digits.
bool numbered(std::string_view word, std::string_view prefix) {
  if (word.size() <= prefix.size() || word.substr(0, prefix.size()) != prefix) return false;
  return std::all_of(word.begin() + static_cast<std::ptrdiff_t>(prefix.size()), word.end(),
                     [](char ch) { return ch >= '0' && ch <= '9'; });
}
}  // namespace

// The inverse of StepNames' tags and the bucket names of the gradient sync.
std::string task_role(std::string_view name) {
  std::string out;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t dot = std::min(name.find('.', start), name.size());
    const std::string_view word = name.substr(start, dot - start);
    start = dot + 1;
    if (numbered(word, "c") || numbered(word, "mb")) continue;
    if (!out.empty()) out += '.';
    if (numbered(word, "layer")) {
      out += "layer";
    } else if (numbered(word, "bucket")) {
      out += "bucket";
    } else {
      out += word;
    }
  }
  return out;
}

}  // namespace tessera::parallelism
