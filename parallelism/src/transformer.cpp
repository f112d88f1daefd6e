#include "tessera/parallelism/transformer.hpp"

#include <array>
#include <fmt/format.h>

#include "tessera/error.hpp"

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
  // 4h^2 + 2hf + f + 9h.
  return (h * qkv + qkv + h * f + f + h * h + ffn_hidden * h) / tp + 2 * h + 4 * h;
}

std::int64_t TransformerConfig::embedding_params(std::int64_t seq_len) const {
  return vocab * hidden + seq_len * hidden + 2 * hidden;  // + final layer norm
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
  if (s.sequence_parallel && w.seq_len % s.tp != 0) {
    throw InputError(fmt::format("tp ({}) must divide seq_len ({}) with sequence parallelism", s.tp, w.seq_len));
  }
}

namespace {
const std::array<TransformerConfig, 5>& presets() {
  static const std::array<TransformerConfig, 5> kPresets{{
      {"gpt2-large", 36, 1280, 20, 5120, 50257},
      {"gpt2-xl", 48, 1600, 25, 6400, 50257},
      {"gpt3-xl", 24, 2048, 16, 8192, 50257},
      {"gpt3-175b", 96, 12288, 96, 49152, 50257},
      // Llama 2 70B: grouped-query attention (8 KV heads), SwiGLU MLP.
      {"llama2-70b", 80, 8192, 64, 28672, 32000, 8, true},
  }};
  return kPresets;
}

void check_workload(const Workload& w) {
  if (w.micro_batch <= 0) throw InputError(fmt::format("micro-batch must be positive (got {})", w.micro_batch));
  if (w.seq_len <= 0) throw InputError(fmt::format("sequence length must be positive (got {})", w.seq_len));
}

struct LinearShape {
  const char* name;
  std::int64_t n, k;
};
}  // namespace

const TransformerConfig& model_preset(std::string_view name) {
  for (const auto& m : presets()) {
    if (m.name == name) return m;
  }
  std::string known;
  for (const auto& m : presets()) known += (known.empty() ? "" : ", ") + m.name;
  throw InputError(fmt::format("unknown model preset '{}' (known: {})", name, known));
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> out;
  for (const auto& m : presets()) out.push_back(m.name);
  return out;
}

std::vector<Op> layer_forward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  m.validate();
  check_workload(w);
  check_sharding(m, w, shard);
  const auto dt = w.dtype;
  const std::int64_t tp = shard.tp;
  const std::int64_t t = w.micro_batch * w.seq_len;               // tokens
  const std::int64_t tv = shard.sequence_parallel ? t / tp : t;   // tokens of the norms and residuals
  const std::int64_t h = m.hidden, f = m.ffn_hidden / tp, s = w.seq_len;
  const std::int64_t d = m.hidden / m.heads;
  const std::int64_t heads = m.heads / tp, kv = m.kv_heads_or_heads() / tp;
  const std::int64_t bh = w.micro_batch * heads;
  std::vector<Op> ops{
      {"ln1", Kernel::vector(KernelOp::LayerNorm, tv, h, dt)},
      {"qkv", Kernel::gemm(KernelOp::Linear, 1, t, (heads + 2 * kv) * d, h, dt)},
      {"scores", Kernel::gemm(KernelOp::Bmm, bh, s, s, d, dt)},
  };
  if (dt == node_model::DType::FP32 || dt == node_model::DType::TF32) {
    // Megatron's FusedScaleMaskSoftmax has CUDA kernels for 16-bit inputs
    // only; in FP32 (TF32 is FP32 data) it takes the torch path: query-key
    // layer-scaling multiply, causal masked_fill_, softmax (three kernels).
    ops.push_back({"scale", Kernel::vector(KernelOp::DivU, bh * s, s, dt)});
    ops.push_back({"mask", Kernel::vector(KernelOp::MulU, bh * s, s, dt)});
  }
  // 16-bit: scale, mask and softmax are the one fused kernel.
  for (Op op : std::vector<Op>{
           {"softmax", Kernel::vector(KernelOp::Softmax, bh * s, s, dt)},
           {"attn_dropout", Kernel::vector(KernelOp::Mul, bh * s, s, dt)},
           {"context", Kernel::gemm(KernelOp::Bmm, bh, s, d, s, dt)},
      // [b, heads, s, d] -> [s, b, heads * d]: permute(...).contiguous().
      {"context_copy", Kernel::vector(KernelOp::Copy, t, heads * d, dt)},
      {"proj", Kernel::gemm(KernelOp::Linear, 1, t, h, heads * d, dt)},
      {"residual1", Kernel::vector(KernelOp::Add, tv, h, dt)},
      {"ln2", Kernel::vector(KernelOp::LayerNorm, tv, h, dt)},
      {"fc1", Kernel::gemm(KernelOp::Linear, 1, t, (m.gated_mlp ? 2 : 1) * f, h, dt)},
      {"gelu", Kernel::vector(KernelOp::Gelu, t, f, dt)},
       }) {
    ops.push_back(std::move(op));
  }
  if (m.gated_mlp) ops.push_back({"gate", Kernel::vector(KernelOp::Mul, t, f, dt)});
  ops.push_back({"fc2", Kernel::gemm(KernelOp::Linear, 1, t, h, f, dt)});
  ops.push_back({"residual2", Kernel::vector(KernelOp::Add, tv, h, dt)});
  return ops;
}

namespace {
/// Backward of a forward op: GEMMs become a data-gradient and a weight-gradient
/// GEMM (both of the forward's FLOPs); vector ops become one kernel of the same
/// shape that reads the incoming gradient and the saved input.
void append_backward(const Op& fwd, std::vector<Op>& out) {
  const Kernel& k = fwd.kernel;
  if (k.op == KernelOp::Linear) {
    const std::int64_t rows = k.b * k.m;
    out.push_back({fwd.name + ".dgrad", Kernel::gemm(KernelOp::Linear, 1, rows, k.k, k.n, k.dtype)});
    out.push_back({fwd.name + ".wgrad", Kernel::gemm(KernelOp::Linear, 1, k.k, k.n, rows, k.dtype)});
    return;
  }
  if (k.op == KernelOp::Bmm) {
    out.push_back({fwd.name + ".grad_a", Kernel::gemm(KernelOp::Bmm, k.b, k.m, k.k, k.n, k.dtype)});
    out.push_back({fwd.name + ".grad_b", Kernel::gemm(KernelOp::Bmm, k.b, k.k, k.n, k.m, k.dtype)});
    return;
  }
  if (k.op == KernelOp::Softmax) {
    const auto bw = node_model::softmax_backward(k);
    out.push_back({fwd.name + ".grad", bw[0]});
    out.push_back({fwd.name + ".grad_dot", bw[1]});
    return;
  }
  // Adds, scalar ops (divide, masked_fill) and copies have a gradient kernel of
  // their own kind; anything else reads the incoming gradient and a saved tensor.
  const bool same = k.op == KernelOp::Add || k.op == KernelOp::DivU || k.op == KernelOp::MulU || k.op == KernelOp::Copy;
  const KernelOp op = same ? k.op : KernelOp::Mul;
  for (int i = 0; i < fwd.backward_kernels; ++i) {
    out.push_back({fwd.name + ".grad", Kernel::vector(op, k.b, k.h, k.dtype)});
  }
}

}  // namespace

std::vector<Op> backward_ops(const std::vector<Op>& forward) {
  std::vector<Op> out;
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) append_backward(*it, out);
  return out;
}

std::vector<Op> layer_backward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  return backward_ops(layer_forward_ops(m, w, shard));
}

std::vector<Op> embedding_forward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  m.validate();
  check_workload(w);
  check_sharding(m, w, shard);
  const std::int64_t t = w.micro_batch * w.seq_len;
  const std::int64_t tv = shard.sequence_parallel ? t / shard.tp : t;
  return {
      {"embedding", Kernel::vector(KernelOp::Copy, t, m.hidden, w.dtype)},
      {"position", Kernel::vector(KernelOp::Add, tv, m.hidden, w.dtype)},
  };
}

std::vector<Op> lm_head_forward_ops(const TransformerConfig& m, const Workload& w, const Sharding& shard) {
  m.validate();
  check_workload(w);
  check_sharding(m, w, shard);
  const std::int64_t t = w.micro_batch * w.seq_len;
  const std::int64_t tv = shard.sequence_parallel ? t / shard.tp : t;
  const std::int64_t v = (m.vocab + shard.tp - 1) / shard.tp;  // vocabulary-parallel
  // Megatron's vocab_parallel_cross_entropy on the FP32 logits (t x v per
  // rank): max and sum reductions (one read each, counted together as one
  // read-write pass), in-place subtract of the max, exp, divide by the sum.
  // Its backward is one in-place multiply of the saved softmax (loss.normalize).
  // Elementwise, so the logits are streamed as flat rows (flat_stream).
  const std::int64_t logits = t * v;
  return {
      {"ln_f", Kernel::vector(KernelOp::LayerNorm, tv, m.hidden, w.dtype)},
      {"lm_head", Kernel::gemm(KernelOp::Linear, 1, t, v, m.hidden, w.dtype)},
      {"loss.reductions", flat_stream(KernelOp::MulU, logits, w.dtype), 0},
      {"loss.shift", flat_stream(KernelOp::MulU, logits, w.dtype), 0},
      {"loss.exp", flat_stream(KernelOp::MulU, logits, w.dtype), 0},
      {"loss.normalize", flat_stream(KernelOp::MulU, logits, w.dtype), 1},
  };
}

Kernel flat_stream(KernelOp op, std::int64_t elements, node_model::DType dtype) {
  if (elements <= 0) throw InputError(fmt::format("flat_stream: element count must be positive (got {})", elements));
  const std::int64_t rows = (elements + kFlatStreamRow - 1) / kFlatStreamRow;
  return Kernel::vector(op, rows, kFlatStreamRow, dtype);
}

std::vector<Op> optimizer_ops(std::int64_t params, node_model::DType state_dtype) {
  if (params <= 0) throw InputError(fmt::format("optimizer: parameter count must be positive (got {})", params));
  const auto dt = state_dtype;
  return {
      {"adam.m_decay", flat_stream(KernelOp::MulU, params, dt)},
      {"adam.m_update", flat_stream(KernelOp::Add, params, dt)},
      {"adam.v_decay", flat_stream(KernelOp::MulU, params, dt)},
      {"adam.v_update", flat_stream(KernelOp::Mul, params, dt)},
      {"adam.step", flat_stream(KernelOp::Div, params, dt)},
      {"adam.apply", flat_stream(KernelOp::Add, params, dt)},
  };
}

std::vector<Op> fused_optimizer_ops(std::int64_t params, node_model::DType state_dtype, bool clip_gradients) {
  if (params <= 0) throw InputError(fmt::format("optimizer: parameter count must be positive (got {})", params));
  const auto dt = state_dtype;
  // Memory traffic as kernels of the same size: Add moves 3 streams, MulU 2.
  std::vector<Op> ops{
      {"fused_adam.read_pg", flat_stream(KernelOp::Add, params, dt)},
      {"fused_adam.moments", flat_stream(KernelOp::Add, params, dt)},
      {"fused_adam.write_v", flat_stream(KernelOp::MulU, (params + 1) / 2, dt)},
  };
  if (clip_gradients) {
    ops.push_back({"clip.grad_norm", flat_stream(KernelOp::MulU, (params + 1) / 2, dt)});
    ops.push_back({"clip.rescale", flat_stream(KernelOp::MulU, params, dt)});
  }
  return ops;
}

}  // namespace tessera::parallelism
