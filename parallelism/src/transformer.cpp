#include "tessera/parallelism/transformer.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/error.hpp"
#include "tessera/names.hpp"

namespace tessera::parallelism {

using node_model::Kernel;
using node_model::KernelOp;

std::int64_t TransformerConfig::params_per_layer() const { return params_per_layer_per_tp_rank(1); }

std::int64_t TransformerConfig::params_per_layer_per_tp_rank(std::int64_t tp) const {
  const std::int64_t h = hidden;
  const std::int64_t f = ffn_hidden * (gated_mlp ? 2 : 1);  // fc1 output width
  const std::int64_t qkv = h + 2 * kv_heads_or_heads() * (hidden / heads);
  // Column-parallel (split): QKV (h x qkv + qkv), fc1 (h x f + f). Row-parallel
  // (split weight, replicated bias): projection (h x h + h), fc2 (ffn x h + h).
  // Replicated: 2 layer norms (4h). With tp = 1 and a plain GPT layer this is
  // 4h^2 + 2hf + f + 9h; without biases and with RMSNorm (Llama) the
  // weights and 2h.
  const std::int64_t column_bias = linear_bias ? qkv + f : 0;
  return (h * qkv + h * f + h * h + ffn_hidden * h + column_bias) / tp + tp_replicated_params(false);
}

std::int64_t TransformerConfig::tp_replicated_params(bool moe_layer) const {
  // A dense layer: the projection's and fc2's biases; an MoE layer: the
  // projection's bias (experts carry none) and the router.
  if (moe_layer) return (linear_bias ? hidden : 0) + 2 * norm_params() + hidden * moe.experts;
  return (linear_bias ? 2 * hidden : 0) + 2 * norm_params();
}

bool TransformerConfig::is_moe_layer(std::int64_t layer) const {
  if (!is_moe() || layer < moe.first_dense_layers) return false;
  return (layer - moe.first_dense_layers) % std::max<std::int64_t>(1, moe.moe_every) == 0;
}

std::int64_t TransformerConfig::moe_layers_in(std::int64_t first, std::int64_t count) const {
  std::int64_t n = 0;
  for (std::int64_t l = first; l < first + count; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

namespace {
/// Weights of one (unbiased) MLP of `ffn` columns: fc1 (x2 gated) and fc2.
std::int64_t mlp_weights(const TransformerConfig& m, std::int64_t ffn) {
  return m.hidden * ffn * (m.gated_mlp ? 2 : 1) + ffn * m.hidden;
}
}  // namespace

std::int64_t TransformerConfig::moe_layer_dense_params_per_rank(std::int64_t tp) const {
  const std::int64_t h = hidden;
  const std::int64_t qkv = h + 2 * kv_heads_or_heads() * (hidden / heads);
  // Column-parallel QKV (weights and bias) and row-parallel projection split
  // tp ways, its bias replicated; two norms; the router (h x experts)
  // replicated; the shared experts split like the dense MLP.
  return (h * qkv + (linear_bias ? qkv : 0) + h * h + mlp_weights(*this, moe.shared_experts * expert_ffn())) /
             tp +
         tp_replicated_params(true);
}

std::int64_t TransformerConfig::moe_layer_expert_params_per_rank(std::int64_t tp, std::int64_t ep) const {
  return moe.experts / ep * (mlp_weights(*this, expert_ffn()) / tp);
}

std::int64_t TransformerConfig::embedding_params(std::int64_t seq_len) const {
  return vocab * hidden + (learned_positions ? seq_len * hidden : 0) + norm_params();  // + final norm
}

std::int64_t TransformerConfig::total_params(std::int64_t seq_len) const {
  const std::int64_t moe_layers = moe_layers_in(0, layers);
  return (layers - moe_layers) * params_per_layer() +
         moe_layers * (moe_layer_dense_params_per_rank(1) + moe_layer_expert_params_per_rank(1, 1)) +
         embedding_params(seq_len) + (tied_embeddings ? 0 : vocab * hidden);
}

std::int64_t TransformerConfig::active_params(std::int64_t seq_len) const {
  if (!is_moe()) return total_params(seq_len);
  // One expert's parameters: a layer's experts held one per rank (ep = experts).
  const std::int64_t expert = moe_layer_expert_params_per_rank(1, moe.experts);
  return total_params(seq_len) - moe_layers_in(0, layers) * (moe.experts - moe.top_k) * expert;
}

void TransformerConfig::validate() const {
  auto need = [&](std::int64_t v, std::string_view field) {
    if (v <= 0) throw InputError(fmt::format("model '{}': {} must be positive (got {})", name, field, v));
  };
  need(layers, "layers");
  need(hidden, "hidden");
  need(heads, "heads");
  need(ffn_hidden, "ffn_hidden");
  need(vocab, "vocab");
  if (hidden % heads != 0) {
    throw InputError(fmt::format("model '{}': heads ({}) must divide hidden ({})", name, heads, hidden));
  }
  if (kv_heads < 0) throw InputError(fmt::format("model '{}': kv_heads must not be negative (got {})", name, kv_heads));
  if (kv_heads > 0 && heads % kv_heads != 0) {
    throw InputError(fmt::format("model '{}': kv_heads ({}) must divide heads ({})", name, kv_heads, heads));
  }
  if (moe.experts < 0) {
    throw InputError(fmt::format("model '{}': moe.experts must not be negative (got {})", name, moe.experts));
  }
  if (!is_moe()) return;
  auto moe_field = [&](std::int64_t v, std::int64_t lo, std::string_view field) {
    if (v < lo)
      throw InputError(fmt::format("model '{}': moe.{} must be at least {} (got {})", name, field, lo, v));
  };
  moe_field(moe.top_k, 1, "top_k");
  if (moe.top_k > moe.experts) {
    throw InputError(fmt::format("model '{}': moe.top_k ({}) must not exceed moe.experts ({})", name,
                                 moe.top_k, moe.experts));
  }
  moe_field(moe.expert_ffn_hidden, 0, "expert_ffn_hidden");
  moe_field(moe.moe_every, 1, "moe_every");
  moe_field(moe.first_dense_layers, 0, "first_dense_layers");
  moe_field(moe.shared_experts, 0, "shared_experts");
  if (moe.first_dense_layers >= layers) {
    throw InputError(
        fmt::format("model '{}': moe.first_dense_layers ({}) leaves no MoE layer among the {} layers", name,
                    moe.first_dense_layers, layers));
  }
  if (!std::isfinite(moe.capacity_factor) || moe.capacity_factor < 1) {
    throw InputError(fmt::format(
        "model '{}': moe.capacity_factor must be at least 1 (got {}): below it an expert drops tokens, which "
        "the model does not represent (1: dropless)",
        name, moe.capacity_factor));
  }
  if (!std::isfinite(moe.imbalance) || moe.imbalance < 1) {
    throw InputError(
        fmt::format("model '{}': moe.imbalance must be at least 1 (got {})", name, moe.imbalance));
  }
  if (!moe.dropless() && moe.imbalance > moe.capacity_factor) {
    throw InputError(fmt::format(
        "model '{}': moe.imbalance ({}) exceeds moe.capacity_factor ({}): the busiest expert would drop the "
        "tokens over its capacity, which the model does not represent (an imbalance up to the capacity is "
        "in its padding)",
        name, moe.imbalance, moe.capacity_factor));
  }
}

void check_sharding(const TransformerConfig& m, const Workload& w, const Sharding& s) {
  if (s.tp <= 0) throw InputError(fmt::format("tp must be positive (got {})", s.tp));
  auto divides = [&](std::int64_t v, const char* what) {
    if (v % s.tp != 0) {
      throw InputError(fmt::format("tp ({}) must divide the model's {} ({})", s.tp, what, v));
    }
  };
  divides(m.heads, "heads");
  divides(m.hidden, "hidden");
  divides(m.kv_heads_or_heads(), "kv_heads");
  divides(m.ffn_hidden, "ffn_hidden");
  if (m.is_moe()) divides(m.expert_ffn(), "expert_ffn_hidden");
  if (s.ep <= 0) throw InputError(fmt::format("ep must be positive (got {})", s.ep));
  if (s.ep > 1 && !m.is_moe()) {
    throw InputError(fmt::format("ep ({}) needs a mixture-of-experts model (model.moe.experts)", s.ep));
  }
  if (s.ep > 1 && m.moe.experts % s.ep != 0) {
    throw InputError(fmt::format("ep ({}) must divide the model's experts ({})", s.ep, m.moe.experts));
  }
  if (s.sequence_parallel && w.seq_len % s.tp != 0) {
    throw InputError(fmt::format("tp ({}) must divide seq_len ({}) with sequence parallelism", s.tp, w.seq_len));
  }
  if (m.is_moe() && s.tp > 1 && !s.sequence_parallel) {
    throw InputError(fmt::format(
        "tp ({}) of a mixture-of-experts model needs parallelism.sequence_parallel: true, as "
        "Megatron-Core requires (each tensor-parallel rank routes its own sequence shard's tokens)",
        s.tp));
  }
}

namespace {
TransformerConfig moe_preset(TransformerConfig m, MoeConfig moe) {
  m.moe = moe;
  return m;
}

const std::array<TransformerConfig, 10>& presets() {
  static const std::array<TransformerConfig, 10> kPresets{{
      {"gpt2-large", 36, 1280, 20, 5120, 50257},
      {"gpt2-xl", 48, 1600, 25, 6400, 50257},
      {"gpt3-xl", 24, 2048, 16, 8192, 50257},
      {"gpt3-175b", 96, 12288, 96, 49152, 50257},
      // Llama 2 70B (meta-llama/Llama-2-70b-hf config.json: 80 layers,
      // hidden_size 8192, 64 heads, num_key_value_heads 8, intermediate_size
      // 28672, vocab_size 32000, tie_word_embeddings false, rotary): GQA,
      // SwiGLU, an untied LM head, no position table; no biases, RMSNorm
      // (as every Llama and mixture-of-experts preset below).
      {"llama2-70b", 80, 8192, 64, 28672, 32000, 8, true, false, false, false, false, true},
      // Llama 3 (meta-llama/Meta-Llama-3-8B, -70B, Llama-3.1-405B config.json:
      // num_hidden_layers, hidden_size, num_attention_heads,
      // num_key_value_heads, intermediate_size, vocab_size 128256): GQA with 8
      // KV heads, SwiGLU, an untied LM head, rotary positions.
      {"llama3-8b", 32, 4096, 32, 14336, 128256, 8, true, false, false, false, false, true},
      {"llama3-70b", 80, 8192, 64, 28672, 128256, 8, true, false, false, false, false, true},
      {"llama3-405b", 126, 16384, 128, 53248, 128256, 8, true, false, false, false, false, true},
      // Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1 config.json: 32 layers,
      // hidden_size 4096, 32 heads, 8 KV heads, intermediate_size 14336,
      // vocab_size 32000, num_local_experts 8, num_experts_per_tok 2,
      // tie_word_embeddings false, rotary): every layer MoE, SwiGLU experts.
      moe_preset({"mixtral-8x7b", 32, 4096, 32, 14336, 32000, 8, true, false, false, false, false, true},
                 {.experts = 8, .top_k = 2}),
      // DeepSeekMoE 16B (deepseek-ai/deepseek-moe-16b-base config.json: 28
      // layers, hidden_size 2048, 16 heads (no GQA), intermediate_size 10944
      // for the dense first layer (first_k_dense_replace 1), vocab_size
      // 102400, n_routed_experts 64, num_experts_per_tok 6,
      // moe_intermediate_size 1408, n_shared_experts 2, moe_layer_freq 1):
      // fine-grained experts, as Qwen1.5-MoE.
      moe_preset({"deepseek-moe-16b", 28, 2048, 16, 10944, 102400, 0, true, false, false, false, false, true},
                 {.experts = 64,
                  .top_k = 6,
                  .expert_ffn_hidden = 1408,
                  .moe_every = 1,
                  .first_dense_layers = 1,
                  .shared_experts = 2}),
  }};
  return kPresets;
}

void check_workload(const Workload& w) {
  if (w.micro_batch <= 0) throw InputError(fmt::format("micro-batch must be positive (got {})", w.micro_batch));
  if (w.seq_len <= 0) throw InputError(fmt::format("sequence length must be positive (got {})", w.seq_len));
}
}  // namespace

const TransformerConfig& model_preset(std::string_view name) {
  for (const auto& m : presets()) {
    if (m.name == name) return m;
  }
  std::string known;
  std::vector<std::string> names;
  for (const auto& m : presets()) {
    known += (known.empty() ? "" : ", ") + m.name;
    names.push_back(m.name);
  }
  throw InputError(fmt::format("unknown model preset '{}'{} (known: {})", name,
                               did_you_mean(std::string(name), names), known));
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out;
  for (const auto& m : presets()) out.push_back(m.name);
  return out;
}

std::int64_t padded_vocab(const TransformerConfig& m, const Workload& w, std::int64_t tp) {
  if (!node_model::is_megatron(w.framework)) return m.vocab;
  // make_vocab_size_divisible_by = 128, times the tensor-parallel size.
  const std::int64_t multiple = 128 * tp;
  return (m.vocab + multiple - 1) / multiple * multiple;
}

std::int64_t padded_vocab_per_rank(const TransformerConfig& m, const Workload& w, std::int64_t tp) {
  return (padded_vocab(m, w, tp) + tp - 1) / tp;
}

std::vector<OpKernels> layer_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  m.validate();
  check_workload(w);
  check_sharding(m, w, shard);
  const node_model::OpRules r = w.rules();
  const bool megatron = node_model::is_megatron(w.framework);
  const std::int64_t tp = shard.tp;
  const std::int64_t t = w.micro_batch * w.seq_len;               // tokens
  const std::int64_t tv = shard.sequence_parallel ? t / tp : t;   // tokens of the norms and residuals
  const std::int64_t h = m.hidden, f = m.ffn_hidden / tp, s = w.seq_len;
  const std::int64_t d = m.hidden / m.heads;
  const std::int64_t heads = m.heads / tp, kv = m.kv_heads_or_heads() / tp;
  const std::int64_t bh = w.micro_batch * heads;
  // Megatron adds the biases of the row-parallel linears and of fc1 inside
  // its fused kernels (skip_bias_add); eager adds them in the GEMM.
  const bool bias = m.linear_bias;
  const bool linear_bias = !megatron && bias;
  const bool norm_bias = !m.rms_norm;
  // Megatron-Core's Transformer Engine layer (read under fp8 only): qkv and
  // fc1 are TELayerNormColumnParallelLinear (ln1 and ln2 write their input
  // in FP8), proj and fc2 TERowParallelLinear.
  const std::int64_t shards = shard.sequence_parallel ? tp : 1;
  const node_model::TeLinear column_ln{.row_parallel = false, .norm_fused = true, .sequence_shards = shards};
  const node_model::TeLinear row{.row_parallel = true, .norm_fused = false, .sequence_shards = shards};
  std::vector<OpKernels> ops;
  ops.push_back(r.layer_norm("ln1", tv, h, norm_bias));
  ops.push_back(r.layer_linear("qkv", t, h, (heads + 2 * kv) * d, bias, column_ln));
  if (w.flash_attention) {
    ops.push_back(r.flash_attention("attention", bh, s, d));
  } else {
    ops.push_back(r.bmm("scores", bh, s, s, d));
    for (auto& op : r.attention_softmax("", bh, s, s)) ops.push_back(std::move(op));
    if (m.dropout) ops.push_back(r.dropout("attn_dropout", bh * s, s));
    ops.push_back(r.bmm("context", bh, s, d, s));
  }
  // [b, heads, s, d] -> [s, b, heads * d]: permute(...).contiguous().
  ops.push_back(r.copy("context_copy", t * heads * d));
  ops.push_back(r.layer_linear("proj", t, heads * d, h, linear_bias, row));
  ops.push_back(r.bias_dropout_add("residual1", tv, h, m.dropout, bias));
  ops.push_back(r.layer_norm("ln2", tv, h, norm_bias));
  ops.push_back(r.layer_linear("fc1", t, h, (m.gated_mlp ? 2 : 1) * f, linear_bias, column_ln));
  // SwiGLU: SiLU of the gate times the up projection; Megatron-Core's one
  // fused kernel each way (bias_swiglu; helper 72: it was timed as two
  // unfused ones), Megatron-DeepSpeed's and eager's SiLU (timed as GeLU's
  // elementwise class) and a multiply (helper 74: its ParallelMLP's swiglu
  // is F.silu(x[0]) * x[1], unfused).
  if (fused_swiglu(m, w)) {
    ops.push_back(r.bias_swiglu("swiglu", t, f, bias ? 2 * f : 0));
  } else {
    ops.push_back(r.bias_gelu(m.gated_mlp ? "silu" : "gelu", t, f, bias ? (m.gated_mlp ? 2 : 1) * f : 0));
    if (m.gated_mlp) ops.push_back(r.elementwise("gate", KernelOp::Mul, t, f, 2));
  }
  ops.push_back(r.layer_linear("fc2", t, f, h, linear_bias, row));
  ops.push_back(r.bias_dropout_add("residual2", tv, h, m.dropout, bias));
  return ops;
}

bool fused_swiglu(const TransformerConfig& m, const Workload& w) {
  return m.gated_mlp && w.framework == node_model::Framework::Megatron;
}

std::int64_t expert_dispatch_tokens_per_rank(const TransformerConfig& m, const Workload& w,
                                             const Sharding& shard) {
  if (!m.is_moe()) return 0;
  // The rank's own tokens: its sequence shard with tp > 1 (check_sharding
  // requires sequence parallelism there).
  const std::int64_t t = w.micro_batch * w.seq_len / shard.tp;
  // Per expert: the group's tokens x top_k spread over the experts, times
  // the load factor (capacity, or imbalance with ep > 1), rounded up to
  // whole tokens.
  const double per_expert = static_cast<double>(shard.ep * t * m.moe.top_k) /
                            static_cast<double>(m.moe.experts) * m.moe.load_factor(shard.ep);
  return static_cast<std::int64_t>(std::ceil(per_expert - 1e-9)) * (m.moe.experts / shard.ep);
}

std::int64_t expert_tokens_per_rank(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  return expert_dispatch_tokens_per_rank(m, w, shard) * shard.tp;
}

Bytes expert_all_to_all_bytes(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  return Bytes(expert_dispatch_tokens_per_rank(m, w, shard) * m.hidden * node_model::dtype_bytes(w.dtype));
}

std::vector<OpKernels> moe_layer_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  if (!m.is_moe()) throw InputError(fmt::format("model '{}' has no experts (moe.experts = 0)", m.name));
  std::vector<OpKernels> ops = layer_ops(m, w, shard);
  // Keep the attention block (ln1 .. residual1) and ln2.
  std::size_t keep = 0;
  while (keep < ops.size() && ops[keep].name != "ln2") ++keep;
  ops.resize(keep + 1);
  const node_model::OpRules r = w.rules();
  const std::int64_t tp = shard.tp, h = m.hidden;
  const std::int64_t t = w.micro_batch * w.seq_len;  // tokens (gathered with SP)
  const std::int64_t own = t / tp;                   // the rank's sequence shard (tp > 1 needs SP)
  const std::int64_t experts = m.moe.experts, local = experts / shard.ep;
  const std::int64_t dispatched = expert_dispatch_tokens_per_rank(m, w, shard);
  const std::int64_t routed = expert_tokens_per_rank(m, w, shard);  // dispatched x tp, gathered
  const std::int64_t per_expert = routed / local;
  const std::int64_t fe = m.expert_ffn() / tp;
  const std::int64_t width = (m.gated_mlp ? 2 : 1);
  ops.push_back(r.linear("router", own, h, experts, false));
  ops.push_back(r.top_k_gating("router_topk", own, experts));
  ops.push_back(r.copy("permute", dispatched * h));
  if (m.moe.shared_experts > 0) {
    // The shared experts' MLP (TEColumnParallelLinear, TERowParallelLinear:
    // ln2 is its own TENorm in an MoE layer, so fc1 casts its input).
    const std::int64_t fs = m.moe.shared_experts * m.expert_ffn() / tp;
    const std::int64_t shards = shard.sequence_parallel ? tp : 1;
    ops.push_back(r.layer_linear("shared_fc1", t, h, width * fs, false,
                                 {.row_parallel = false, .norm_fused = false, .sequence_shards = shards}));
    ops.push_back(
        r.elementwise(m.gated_mlp ? "shared_silu" : "shared_act", KernelOp::Gelu, t, fs, 1));  // no bias
    if (m.gated_mlp) ops.push_back(r.elementwise("shared_gate", KernelOp::Mul, t, fs, 2));
    ops.push_back(r.layer_linear("shared_fc2", t, fs, h, false,
                                 {.row_parallel = true, .norm_fused = false, .sequence_shards = shards}));
  }
  const std::size_t first_routed = ops.size();
  ops.push_back(r.grouped_linear("fc1", local, per_expert, h, width * fe));
  ops.push_back(
      r.elementwise(m.gated_mlp ? "silu" : "gelu", KernelOp::Gelu, routed, fe, 1));  // experts have no bias
  if (m.gated_mlp) ops.push_back(r.elementwise("gate", KernelOp::Mul, routed, fe, 2));
  ops.push_back(r.grouped_linear("fc2", local, per_expert, fe, h));
  // The expert outputs weighted by the router and summed back per token
  // (the rank's own tokens).
  ops.push_back(r.elementwise("unpermute", KernelOp::Mul, dispatched, h, 2));
  // The experts' GEMMs compute `routed` tokens where the model's work is t x
  // top_k (each rank's share of the group's t x top_k routed tokens): their
  // model FLOPs (the GEMMs', model_flops) are that share of their work, the
  // rest padding. (The other routed ops have no GEMM.)
  const double useful = std::min(1.0, static_cast<double>(t * m.moe.top_k) / static_cast<double>(routed));
  for (std::size_t i = first_routed; i < ops.size(); ++i) {
    ops[i].padding_flops = Flops(ops[i].gemm_flops().count() * (1.0 - useful));
  }
  // The experts return no bias (Megatron-Core), so none is added here.
  ops.push_back(r.bias_dropout_add("residual2", shard.sequence_parallel ? t / tp : t, h, m.dropout, false));
  return ops;
}

std::vector<OpKernels> embedding_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  m.validate();
  check_workload(w);
  check_sharding(m, w, shard);
  const node_model::OpRules r = w.rules();
  const std::int64_t t = w.micro_batch * w.seq_len;
  const std::int64_t tv = shard.sequence_parallel ? t / shard.tp : t;
  std::vector<OpKernels> ops;
  ops.push_back(r.embedding("embedding", t, padded_vocab_per_rank(m, w, shard.tp), m.hidden));
  if (m.learned_positions) {
    // Megatron adds the position table on every token, then scatters the
    // sum to the sequence-parallel shards (LanguageModelEmbedding reduces
    // and scatters in one step only without a position table): the add is
    // over t tokens, the dropout over the shard.
    ops.push_back(r.embedding("position", t, w.seq_len, m.hidden));
    ops.push_back(r.elementwise("embedding_add", KernelOp::Add, t, m.hidden, 0));
  }
  if (m.dropout) ops.push_back(r.dropout("embedding_dropout", tv, m.hidden));
  return ops;
}

std::vector<OpKernels> lm_head_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  m.validate();
  check_workload(w);
  check_sharding(m, w, shard);
  const node_model::OpRules r = w.rules();
  const std::int64_t t = w.micro_batch * w.seq_len;
  const std::int64_t tv = shard.sequence_parallel ? t / shard.tp : t;
  const std::int64_t v = padded_vocab_per_rank(m, w, shard.tp);
  std::vector<OpKernels> ops;
  ops.push_back(r.layer_norm("ln_f", tv, m.hidden, !m.rms_norm));
  // A tied LM head shares the word embedding's weight (its parameters are
  // the embedding's). Under Megatron its weight gradient still goes to the
  // shared main gradient: with gradient_accumulation_fusion the wgrad GEMM
  // accumulates into it, without it the hook adds its .grad. Under eager,
  // autograd sums the two uses' gradients into the one .grad whose
  // accumulation the embedding counts: the GEMM alone.
  OpKernels head = r.linear("lm_head", t, m.hidden, v, false);
  if (m.tied_embeddings) {
    if (!node_model::is_megatron(w.framework)) head.weight_grad.truncate(1, 1);
    head.params = 0;
  }
  ops.push_back(std::move(head));
  // Vocabulary-parallel cross-entropy on FP32 logits (t x v per rank): the
  // conversion of 16-bit logits to FP32, the max and sum reductions (one read
  // each, counted together as one read-write pass), the in-place subtract of
  // the max, the exp, the divide by the sum. Its backward is one in-place
  // multiply of the saved softmax (and the conversion back to 16 bits).
  const std::int64_t logits = t * v;
  const node_model::DType f32 = node_model::DType::FP32;
  auto pass = [&](const char* name, int backward) {
    OpKernels op;
    op.name = name;
    op.forward.add(node_model::flat_kernel(KernelOp::MulU, logits, f32));
    for (int i = 0; i < backward; ++i) op.input_grad.add(node_model::flat_kernel(KernelOp::MulU, logits, f32));
    return op;
  };
  if (node_model::dtype_bytes(w.dtype) == 2) {
    OpKernels cvt;
    cvt.name = "loss.to_fp32";
    cvt.forward.add(node_model::memory_pass(logits * 6, f32));
    cvt.input_grad.add(node_model::memory_pass(logits * 6, f32));
    ops.push_back(std::move(cvt));
  }
  ops.push_back(pass("loss.reductions", 0));
  ops.push_back(pass("loss.shift", 0));
  ops.push_back(pass("loss.exp", 0));
  ops.push_back(pass("loss.normalize", 1));
  return ops;
}

}  // namespace tessera::parallelism
