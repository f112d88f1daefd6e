#include "tessera/parallelism/transformer.hpp"

#include <array>
#include <fmt/format.h>

#include "tessera/error.hpp"

namespace tessera::parallelism {

using node_model::Kernel;
using node_model::KernelOp;

std::int64_t TransformerConfig::params_per_layer() const {
  const std::int64_t h = hidden;
  const std::int64_t f = ffn_hidden;
  // QKV (3h^2+3h) + projection (h^2+h) + fc1 (hf+f) + fc2 (fh+h) + 2 layer norms (4h)
  return 4 * h * h + 2 * h * f + f + 9 * h;
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
}

namespace {
const std::array<TransformerConfig, 4>& presets() {
  static const std::array<TransformerConfig, 4> kPresets{{
      {"gpt2-large", 36, 1280, 20, 5120, 50257},
      {"gpt2-xl", 48, 1600, 25, 6400, 50257},
      {"gpt3-xl", 24, 2048, 16, 8192, 50257},
      {"gpt3-175b", 96, 12288, 96, 49152, 50257},
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

std::vector<Op> layer_forward_ops(const TransformerConfig& m, const Workload& w) {
  m.validate();
  check_workload(w);
  const auto dt = w.dtype;
  const std::int64_t t = w.micro_batch * w.seq_len;  // tokens
  const std::int64_t h = m.hidden, f = m.ffn_hidden, s = w.seq_len;
  const std::int64_t bh = w.micro_batch * m.heads, d = m.hidden / m.heads;
  return {
      {"ln1", Kernel::vector(KernelOp::LayerNorm, t, h, dt)},
      {"qkv", Kernel::gemm(KernelOp::Linear, 1, t, 3 * h, h, dt)},
      {"scores", Kernel::gemm(KernelOp::Bmm, bh, s, s, d, dt)},
      {"scale", Kernel::vector(KernelOp::DivU, bh * s, s, dt)},
      {"softmax", Kernel::vector(KernelOp::Softmax, bh * s, s, dt)},
      {"context", Kernel::gemm(KernelOp::Bmm, bh, s, d, s, dt)},
      {"proj", Kernel::gemm(KernelOp::Linear, 1, t, h, h, dt)},
      {"residual1", Kernel::vector(KernelOp::Add, t, h, dt)},
      {"ln2", Kernel::vector(KernelOp::LayerNorm, t, h, dt)},
      {"fc1", Kernel::gemm(KernelOp::Linear, 1, t, f, h, dt)},
      {"gelu", Kernel::vector(KernelOp::Gelu, t, f, dt)},
      {"fc2", Kernel::gemm(KernelOp::Linear, 1, t, h, f, dt)},
      {"residual2", Kernel::vector(KernelOp::Add, t, h, dt)},
  };
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
  const KernelOp op = (k.op == KernelOp::Add || k.op == KernelOp::DivU) ? k.op : KernelOp::Mul;
  out.push_back({fwd.name + ".grad", Kernel::vector(op, k.b, k.h, k.dtype)});
}

}  // namespace

std::vector<Op> backward_ops(const std::vector<Op>& forward) {
  std::vector<Op> out;
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) append_backward(*it, out);
  return out;
}

std::vector<Op> layer_backward_ops(const TransformerConfig& m, const Workload& w) {
  return backward_ops(layer_forward_ops(m, w));
}

std::vector<Op> embedding_forward_ops(const TransformerConfig& m, const Workload& w) {
  m.validate();
  check_workload(w);
  const std::int64_t t = w.micro_batch * w.seq_len;
  return {
      {"embedding", Kernel::vector(KernelOp::Copy, t, m.hidden, w.dtype)},
      {"position", Kernel::vector(KernelOp::Add, t, m.hidden, w.dtype)},
  };
}

std::vector<Op> lm_head_forward_ops(const TransformerConfig& m, const Workload& w) {
  m.validate();
  check_workload(w);
  const std::int64_t t = w.micro_batch * w.seq_len;
  return {
      {"ln_f", Kernel::vector(KernelOp::LayerNorm, t, m.hidden, w.dtype)},
      {"lm_head", Kernel::gemm(KernelOp::Linear, 1, t, m.vocab, m.hidden, w.dtype)},
      {"loss", Kernel::vector(KernelOp::Softmax, t, m.vocab, w.dtype)},
  };
}

std::vector<Op> optimizer_ops(std::int64_t params, node_model::DType state_dtype) {
  if (params <= 0) throw InputError(fmt::format("optimizer: parameter count must be positive (got {})", params));
  const auto dt = state_dtype;
  return {
      {"adam.m_decay", Kernel::vector(KernelOp::MulU, 1, params, dt)},
      {"adam.m_update", Kernel::vector(KernelOp::Add, 1, params, dt)},
      {"adam.v_decay", Kernel::vector(KernelOp::MulU, 1, params, dt)},
      {"adam.v_update", Kernel::vector(KernelOp::Mul, 1, params, dt)},
      {"adam.step", Kernel::vector(KernelOp::Div, 1, params, dt)},
      {"adam.apply", Kernel::vector(KernelOp::Add, 1, params, dt)},
  };
}

}  // namespace tessera::parallelism
