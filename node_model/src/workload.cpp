#include "tessera/node_model/workload.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tessera/error.hpp"
#include "tessera/names.hpp"

namespace tessera::node_model {

std::string_view to_string(Framework f) {
  switch (f) {
    case Framework::PyTorchEager:
      return "pytorch-eager";
    case Framework::Megatron:
      return "megatron";
    case Framework::MegatronDeepSpeed:
      return "megatron-deepspeed";
  }
  return "?";
}

std::string_view to_string(KernelRole role) {
  switch (role) {
    case KernelRole::None:
      return "";
    case KernelRole::Cast:
      return "cast";
    case KernelRole::Transpose:
      return "transpose";
    case KernelRole::CastTranspose:
      return "cast+transpose";
  }
  return "?";
}

Framework parse_framework(std::string_view text) {
  const std::string s = ascii_lower(text);
  if (s == "pytorch-eager") return Framework::PyTorchEager;
  if (s == "megatron") return Framework::Megatron;
  if (s == "megatron-deepspeed") return Framework::MegatronDeepSpeed;
  // The names users give the stacks (helper 147: no suggestion for them).
  const std::string hint =
      s == "megatron-lm" || s == "megatron-core" || s == "megatron_lm" ? ", did you mean 'megatron'?"
      : s == "deepspeed" || s == "megatron_deepspeed"  ? ", did you mean 'megatron-deepspeed'?"
      : s == "pytorch" || s == "eager" || s == "torch" ? ", did you mean 'pytorch-eager'?"
                                                       : "";
  throw InputError(fmt::format(
      "unknown framework '{}'{} (expected megatron, megatron-deepspeed or pytorch-eager)", text, hint));
}

Kernel flat_kernel(KernelOp op, std::int64_t elements, DType dtype) {
  if (elements <= 0)
    throw InputError(fmt::format("flat kernel: element count must be positive (got {})", elements));
  const std::int64_t rows = (elements + kFlatRow - 1) / kFlatRow;
  return Kernel::vector(op, rows, kFlatRow, dtype);
}

Kernel memory_pass(std::int64_t bytes, DType dtype) {
  // MulU reads and writes each element once: 2 x elements x size bytes.
  const std::int64_t per = 2LL * dtype_bytes(dtype);
  return flat_kernel(KernelOp::MulU, std::max<std::int64_t>(1, (bytes + per - 1) / per), dtype);
}

std::int64_t multi_tensor_launches(std::int64_t elements) {
  // apex multi_tensor_apply: chunks of 2048 * 32 elements, at most 320
  // blocks (chunks) per launch.
  constexpr std::int64_t kChunk = 2048LL * 32;
  constexpr std::int64_t kBlocks = 320;
  const std::int64_t chunks = (elements + kChunk - 1) / kChunk;
  return std::max<std::int64_t>(1, (chunks + kBlocks - 1) / kBlocks);
}

OpRules::OpRules(Framework framework, DType dtype, ProfileOptions options)
    : framework_(framework), dtype_(dtype), options_(options) {
  if (options_.fp8 && dtype_ != DType::BF16) {
    throw InputError(fmt::format("fp8 training keeps its non-GEMM kernels in bf16 (got {})", to_string(dtype_)));
  }
}

DType OpRules::grad_dtype() const {
  if (megatron() && dtype_ == DType::BF16) return DType::FP32;
  return dtype_;
}

namespace {
/// The rule of Megatron's fused softmax kernel (fused_softmax_available),
/// the first condition a shape breaks: kept apart from its wording, so that
/// planning, which asks per layer, formats nothing.
enum class SoftmaxRule { Takes, Keys, Sequence, Batches };
struct SoftmaxShape {
  bool ds;                 ///< Megatron-DeepSpeed's kernel (keys up to 2048)
  std::int64_t max_keys;   ///< 2048 or 4096
  std::int64_t per_block;  ///< score matrices per CUDA block (8 for short keys under Megatron-LM)
};
SoftmaxShape softmax_shape(Framework framework, std::int64_t sk) {
  const bool ds = framework == Framework::MegatronDeepSpeed;
  return {ds, ds ? 2048 : 4096, ds || sk > 128 ? 4 : 8};
}
SoftmaxRule softmax_rule(Framework framework, std::int64_t batches, std::int64_t sq, std::int64_t sk) {
  const SoftmaxShape k = softmax_shape(framework, sk);
  if (sk <= 16 || sk > k.max_keys) return SoftmaxRule::Keys;
  if (sq % 4 != 0 || (!k.ds && sk % 4 != 0)) return SoftmaxRule::Sequence;
  if (batches % k.per_block != 0) return SoftmaxRule::Batches;
  return SoftmaxRule::Takes;
}
}  // namespace

bool fused_softmax_available(Framework framework, DType dtype, std::int64_t batches, std::int64_t sq,
                             std::int64_t sk) {
  if (!is_megatron(framework) || dtype_bytes(dtype) != 2) return false;
  return softmax_rule(framework, batches, sq, sk) == SoftmaxRule::Takes;
}

std::string fused_softmax_refusal(Framework framework, std::int64_t batches, std::int64_t sq,
                                  std::int64_t sk) {
  const SoftmaxShape k = softmax_shape(framework, sk);
  switch (softmax_rule(framework, batches, sq, sk)) {
    case SoftmaxRule::Keys:
      return fmt::format("takes more than 16 and at most {} keys only (sequence {} here)", k.max_keys, sk);
    case SoftmaxRule::Sequence:
      return fmt::format("takes sequences that are multiples of 4 only ({} here)", sq);
    case SoftmaxRule::Batches:
      return fmt::format(
          "takes micro_batch x heads per rank score matrices in multiples of {} only ({} here)", k.per_block,
          batches);
    case SoftmaxRule::Takes:
      break;
  }
  return {};
}

namespace {
/// Gradient kernel of an elementwise op: a scalar op's gradient is the same
/// scalar op on the incoming gradient (one stream in, one out); anything else
/// reads the incoming gradient and a saved tensor (a binary multiply).
KernelOp grad_op(KernelOp op) {
  return op == KernelOp::MulU || op == KernelOp::DivU ? KernelOp::MulU : KernelOp::Mul;
}

/// One of Transformer Engine's FP8 kernels: the memory pass it is timed as,
/// and what it does (for the kernels table).
struct Fp8Kernel {
  Kernel kernel;
  KernelRole role;
};
void add_fp8(Pass& pass, const Fp8Kernel& k) { pass.add(k.kernel, 1, k.role); }

/// Transformer Engine's FP8 kernels (TE 1.x, transformer_engine/pytorch/
/// module/linear.py, layernorm_linear.py, base.py), as memory passes over a
/// `rows` x `cols` tensor. fp8_cast_transpose_fused (and its bgrad form):
/// reads the bf16 tensor (2 bytes), writes the FP8 copy and its transpose
/// (1 + 1), the amax reduced in the same kernel.
Fp8Kernel fp8_cast_transpose(std::int64_t rows, std::int64_t cols) {
  return {memory_pass(rows * cols * 4, DType::BF16), KernelRole::CastTranspose};
}
/// cast_to_fp8: reads 2 bytes, writes the FP8 copy (1).
Fp8Kernel fp8_cast(std::int64_t rows, std::int64_t cols) {
  return {memory_pass(rows * cols * 3, DType::BF16), KernelRole::Cast};
}
/// fp8_transpose: reads the FP8 tensor (1 byte), writes its transpose (1).
Fp8Kernel fp8_transpose(std::int64_t rows, std::int64_t cols) {
  return {memory_pass(rows * cols * 2, DType::BF16), KernelRole::Transpose};
}
}  // namespace

OpKernels OpRules::linear(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out,
                          bool bias) const {
  return linear_in(std::move(name), rows, in, out, bias, dtype_);
}

OpKernels OpRules::layer_linear(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out,
                                bool bias, TeLinear te) const {
  return linear_in(std::move(name), rows, in, out, bias, layer_gemm_dtype(), te);
}

OpKernels OpRules::linear_in(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out, bool bias,
                             DType gemm, TeLinear te) const {
  OpKernels op;
  op.name = std::move(name);
  op.params = in * out + (bias ? out : 0);
  const bool fp8 = gemm == DType::FP8;
  const std::int64_t shards = std::max<std::int64_t>(1, te.sequence_shards);
  const bool sp = shards > 1;
  // grad_output.sum(0): a pass of its own, or under FP8 inside the dy cast
  // (cast_transpose_bgrad, where no gather comes before it).
  const Kernel bias_grad = memory_pass(rows * out * dtype_bytes(dtype_), dtype_);
  const bool bgrad_fused = bias && fp8 && !(te.row_parallel && sp);
  if (fp8) {
    // The weight, once per iteration (cached while is_first_microbatch is
    // false: update_fp8_weights in _Linear.forward / _LayerNormLinear.forward).
    add_fp8(op.weight_cast, fp8_cast_transpose(in, out));
    // x: written in FP8 by the norm (_LayerNormLinear); cast alone under
    // sequence parallelism (a column-parallel linear its own shard, before
    // the FP8 all-gather); else cast with its transpose.
    if (!te.norm_fused) {
      if (sp) {
        add_fp8(op.forward, fp8_cast(te.row_parallel ? rows : rows / shards, in));
      } else {
        add_fp8(op.forward, fp8_cast_transpose(rows, in));
      }
    }
    // dy (E5M2): grad_output_preprocess. A row-parallel linear under
    // sequence parallelism casts its shard, all-gathers the FP8 copy (the
    // planner's collective) and transposes what it gathered.
    if (te.row_parallel && sp) {
      add_fp8(op.input_grad, fp8_cast(rows / shards, out));
      add_fp8(op.input_grad, fp8_transpose(rows, out));
    } else {
      add_fp8(op.input_grad, fp8_cast_transpose(rows, out));
    }
  }
  op.forward.add(Kernel::gemm(KernelOp::Linear, 1, rows, out, in, gemm));
  op.input_grad.add(Kernel::gemm(KernelOp::Linear, 1, rows, in, out, gemm));
  // The weight gradient's FP8 input where no transpose was written with it:
  // fp8_transpose of the (gathered) input before the wgrad GEMM.
  if (fp8 && (te.norm_fused || sp)) add_fp8(op.weight_grad, fp8_transpose(rows, in));
  op.weight_grad.add(Kernel::gemm(KernelOp::Linear, 1, in, out, rows, gemm));
  if (!megatron()) {
    // Eager: .grad of the weight and bias accumulated (one add; NeuSight's
    // acc_latency), the bias gradient inside autograd's addmm backward.
    if (options_.eager_accumulate_every_backward) {
      op.weight_grad.add(Kernel::vector(KernelOp::Add, 1, in * out + out, dtype_));
    }
    return op;
  }
  const bool fused = options_.main_grad && options_.grad_accumulation_fusion;
  // The wgrad GEMM reads and writes the main gradient (beta = 1): a part of
  // its launch, listed right after it (before the bias gradient's kernel).
  if (fused) op.weight_grad.add(memory_pass(in * out * dtype_bytes(grad_dtype()), grad_dtype()), 0);
  if (bias && !bgrad_fused) op.weight_grad.add(bias_grad);  // grad_output.sum(0)
  if (!options_.main_grad) return op;  // .grad written by the GEMM (PyTorch DDP)
  if (fused) {
    if (bias) op.weight_grad.append(grad_accumulation(out));
  } else {
    op.weight_grad.append(grad_accumulation(in * out + (bias ? out : 0), bias ? 2 : 1));
  }
  return op;
}

OpKernels OpRules::grouped_linear(std::string name, std::int64_t groups, std::int64_t rows, std::int64_t in,
                                  std::int64_t out) const {
  OpKernels op;
  op.name = std::move(name);
  op.params = groups * in * out;
  const DType gemm = layer_gemm_dtype();
  if (gemm == DType::FP8) {
    // Transformer Engine's GroupedLinear (no tensor or sequence parallelism
    // of its own): the tokens and dy cast with their transposes, the
    // weights once per iteration.
    add_fp8(op.forward, fp8_cast_transpose(groups * rows, in));
    add_fp8(op.input_grad, fp8_cast_transpose(groups * rows, out));
    add_fp8(op.weight_cast, fp8_cast_transpose(groups * in, out));
  }
  op.forward.add(Kernel::gemm(KernelOp::Bmm, groups, rows, out, in, gemm));
  op.input_grad.add(Kernel::gemm(KernelOp::Bmm, groups, rows, in, out, gemm));
  op.weight_grad.add(Kernel::gemm(KernelOp::Bmm, groups, in, out, rows, gemm));
  if (!megatron()) {
    if (options_.eager_accumulate_every_backward) {
      op.weight_grad.add(Kernel::vector(KernelOp::Add, 1, groups * in * out, dtype_));  // .grad accumulated
    }
    return op;
  }
  if (!options_.main_grad) return op;
  if (options_.grad_accumulation_fusion) {
    op.weight_grad.add(memory_pass(groups * in * out * dtype_bytes(grad_dtype()), grad_dtype()), 0);
  } else {
    op.weight_grad.append(grad_accumulation(groups * in * out));
  }
  return op;
}

OpKernels OpRules::top_k_gating(std::string name, std::int64_t tokens, std::int64_t experts) const {
  OpKernels op = softmax(std::move(name), tokens, experts);
  op.forward.add(Kernel::vector(KernelOp::Softmax, tokens, experts, dtype_));  // top-k: one more row pass
  return op;
}

OpKernels OpRules::bmm(std::string name, std::int64_t b, std::int64_t m, std::int64_t n,
                       std::int64_t k) const {
  OpKernels op;
  op.name = std::move(name);
  op.forward.add(Kernel::gemm(KernelOp::Bmm, b, m, n, k, dtype_));
  op.input_grad.add(Kernel::gemm(KernelOp::Bmm, b, m, k, n, dtype_));
  op.input_grad.add(Kernel::gemm(KernelOp::Bmm, b, k, n, m, dtype_));
  return op;
}

OpKernels OpRules::layer_norm(std::string name, std::int64_t rows, std::int64_t cols, bool bias) const {
  OpKernels op;
  op.name = std::move(name);
  const int tensors = bias ? 2 : 1;  // gain (and bias)
  op.params = tensors * cols;
  op.forward.add(Kernel::vector(KernelOp::LayerNorm, rows, cols, dtype_));
  // Two row passes (the input gradient; the gain/bias gradients), as apex's
  // fused layer norm (three launches: input gradient, partial and final
  // gain/bias reductions) and PyTorch's native one (two launches).
  const Kernel pass = Kernel::vector(KernelOp::LayerNorm, rows, cols, dtype_);
  op.input_grad.add(pass);
  op.input_grad.add(pass, megatron() ? 2 : 1);
  op.weight_grad.append(grad_accumulation(tensors * cols, tensors));
  return op;
}

OpKernels OpRules::softmax(std::string name, std::int64_t rows, std::int64_t cols,
                           std::optional<DType> dtype) const {
  OpKernels op;
  op.name = std::move(name);
  const Kernel fwd = Kernel::vector(KernelOp::Softmax, rows, cols, dtype.value_or(dtype_));
  op.forward.add(fwd);
  const auto bw = softmax_backward(fwd);
  op.input_grad.add(bw[0]);
  op.input_grad.add(bw[1], 0);  // one backward kernel reading y and dy
  return op;
}

OpKernels OpRules::elementwise(std::string name, KernelOp kop, std::int64_t rows, std::int64_t cols,
                               int grad_kernels, std::optional<DType> dtype) const {
  OpKernels op;
  op.name = std::move(name);
  const DType dt = dtype.value_or(dtype_);
  op.forward.add(Kernel::vector(kop, rows, cols, dt));
  for (int i = 0; i < grad_kernels; ++i) op.input_grad.add(Kernel::vector(grad_op(kop), rows, cols, dt));
  return op;
}

OpKernels OpRules::dropout(std::string name, std::int64_t rows, std::int64_t cols) const {
  OpKernels op;
  op.name = std::move(name);
  op.forward.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));
  op.input_grad.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));
  return op;
}

OpKernels OpRules::copy(std::string name, std::int64_t elements, bool grad) const {
  OpKernels op;
  op.name = std::move(name);
  op.forward.add(Kernel::vector(KernelOp::Copy, 1, elements, dtype_));
  if (grad) op.input_grad.add(Kernel::vector(KernelOp::Copy, 1, elements, dtype_));
  return op;
}

OpKernels OpRules::embedding(std::string name, std::int64_t tokens, std::int64_t table_rows,
                             std::int64_t hidden) const {
  OpKernels op;
  op.name = std::move(name);
  op.params = table_rows * hidden;
  op.forward.add(Kernel::vector(KernelOp::Copy, tokens, hidden, dtype_));
  // embedding_dense_backward: zero the table gradient (a fill writes the
  // table once and reads nothing: a memory pass of the table's bytes, where
  // a copy moved them twice; helper 72), scatter-add the tokens.
  if (table_rows > 0) op.weight_grad.add(memory_pass(table_rows * hidden * dtype_bytes(dtype_), dtype_));
  op.weight_grad.add(Kernel::vector(KernelOp::Add, tokens, hidden, dtype_));
  if (table_rows > 0) op.weight_grad.append(grad_accumulation(table_rows * hidden));
  return op;
}

std::vector<OpKernels> OpRules::attention_softmax(const std::string& prefix, std::int64_t batches,
                                                  std::int64_t sq, std::int64_t sk) const {
  const std::int64_t rows = batches * sq;
  if (fused_softmax_available(framework_, dtype_, batches, sq, sk)) {
    // scaled_upper_triang_masked_softmax: scale, causal mask and softmax in
    // one kernel each way. Its backward reads y and dy and writes dx in one
    // pass: the traffic of a binary elementwise kernel (PyTorch's own softmax
    // backward, OpRules::softmax, makes two passes).
    OpKernels op;
    op.name = prefix + "softmax";
    op.forward.add(Kernel::vector(KernelOp::Softmax, rows, sk, dtype_));
    op.input_grad.add(Kernel::vector(KernelOp::Mul, rows, sk, dtype_));
    return {op};
  }
  if (megatron() && dtype_bytes(dtype_) == 2) {
    // A shape the fused kernel does not take (8-way tensor parallelism of 16
    // heads at micro-batch 1: 2 score matrices; longer sequences): Megatron's
    // forward_torch_softmax with the softmax in FP32, as query-key layer
    // scaling sets it: the scores cast to FP32, multiplied by the layer's
    // scale, masked (masked_fill_), softmaxed and cast back, one kernel each
    // way per step (the casts read 2 and write 4 bytes per element, or the
    // reverse).
    const std::int64_t elements = rows * sk;
    const DType f32 = DType::FP32;
    auto cast = [&](const char* name) {
      OpKernels op;
      op.name = prefix + name;
      op.forward.add(memory_pass(elements * 6, f32));
      op.input_grad.add(memory_pass(elements * 6, f32));
      return op;
    };
    return {cast("softmax_to_fp32"), elementwise(prefix + "scale", KernelOp::DivU, rows, sk, 1, f32),
            elementwise(prefix + "mask", KernelOp::MulU, rows, sk, 1, f32),
            softmax(prefix + "softmax", rows, sk, f32), cast("softmax_to_16bit")};
  }
  // Megatron's FusedScaleMaskSoftmax has CUDA kernels for 16-bit inputs
  // only; otherwise (and under eager) the scale, the causal mask, the
  // softmax.
  return {elementwise(prefix + "scale", KernelOp::DivU, rows, sk, 1),
          elementwise(prefix + "mask", KernelOp::MulU, rows, sk, 1), softmax(prefix + "softmax", rows, sk)};
}

OpKernels OpRules::flash_attention(std::string name, std::int64_t b, std::int64_t s, std::int64_t d) const {
  OpKernels op;
  op.name = std::move(name);
  // One launch each way; the kernels are the GEMMs it runs on its tiles.
  op.forward.add(Kernel::gemm(KernelOp::Bmm, b, s, s, d, dtype_));      // S = QK^T
  op.forward.add(Kernel::gemm(KernelOp::Bmm, b, s, d, s, dtype_), 0);   // O = PV
  const Kernel recompute = Kernel::gemm(KernelOp::Bmm, b, s, s, d, dtype_);
  op.input_grad.add(recompute);                                          // S = QK^T again
  op.input_grad.add(Kernel::gemm(KernelOp::Bmm, b, s, s, d, dtype_), 0);  // dP = dO V^T
  op.input_grad.add(Kernel::gemm(KernelOp::Bmm, b, s, d, s, dtype_), 0);  // dV = P^T dO
  op.input_grad.add(Kernel::gemm(KernelOp::Bmm, b, s, d, s, dtype_), 0);  // dQ = dS K
  op.input_grad.add(Kernel::gemm(KernelOp::Bmm, b, s, d, s, dtype_), 0);  // dK = dS^T Q
  op.recomputed_flops = recompute.flops();
  return op;
}

OpKernels OpRules::bias_gelu(std::string name, std::int64_t rows, std::int64_t cols,
                             std::optional<std::int64_t> bias_cols) const {
  OpKernels op;
  op.name = std::move(name);
  op.forward.add(Kernel::vector(KernelOp::Gelu, rows, cols, dtype_));
  op.input_grad.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));
  const std::int64_t b = bias_cols.value_or(cols);
  if (megatron() && b > 0) {
    op.params = b;
    op.weight_grad.add(memory_pass(rows * b * dtype_bytes(dtype_), dtype_));  // bias gradient
    op.weight_grad.append(grad_accumulation(b));
  }
  return op;
}

OpKernels OpRules::bias_swiglu(std::string name, std::int64_t rows, std::int64_t cols,
                               std::int64_t bias_cols) const {
  OpKernels op;
  op.name = std::move(name);
  op.forward.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));  // gate, up -> out
  op.input_grad.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));
  op.input_grad.add(memory_pass(2 * rows * cols * dtype_bytes(dtype_), dtype_), 0);  // the second gradient
  if (bias_cols > 0) {
    op.params = bias_cols;
    op.weight_grad.add(memory_pass(rows * bias_cols * dtype_bytes(dtype_), dtype_));  // bias gradient
    op.weight_grad.append(grad_accumulation(bias_cols));
  }
  return op;
}

OpKernels OpRules::bias_dropout_add(std::string name, std::int64_t rows, std::int64_t cols, bool dropout,
                                    bool bias) const {
  OpKernels op;
  op.name = std::move(name);
  if (megatron()) {
    op.forward.add(Kernel::vector(KernelOp::Add, rows, cols, dtype_));
    if (dropout) op.input_grad.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));  // dropout mask
    op.input_grad.add(Kernel::vector(KernelOp::Add, rows, cols, dtype_));  // residual gradients meet
    if (bias) {
      op.params = cols;
      op.weight_grad.add(memory_pass(rows * cols * dtype_bytes(dtype_), dtype_));  // bias gradient
      op.weight_grad.append(grad_accumulation(cols));
    }
    return op;
  }
  // Eager: the bias is in the linear; dropout and the residual add.
  if (dropout) op.forward.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));
  op.forward.add(Kernel::vector(KernelOp::Add, rows, cols, dtype_));
  if (dropout) op.input_grad.add(Kernel::vector(KernelOp::Mul, rows, cols, dtype_));
  op.input_grad.add(Kernel::vector(KernelOp::Add, rows, cols, dtype_));
  return op;
}

Pass OpRules::grad_accumulation(std::int64_t params, int tensors) const {
  Pass p;
  if (params <= 0) return p;
  if (!megatron()) {
    if (options_.eager_accumulate_every_backward)
      p.add(Kernel::vector(KernelOp::Add, 1, params, dtype_), tensors);
    return p;
  }
  // PyTorch DDP: .grad is written by the backward kernels (later
  // micro-batches' adds are charged by the planner).
  if (!options_.main_grad) return p;
  // main_grad (grad dtype) += grad (training dtype), one launch per tensor.
  const DType g = grad_dtype();
  p.add(memory_pass(params * (dtype_bytes(dtype_) + 2LL * dtype_bytes(g)), g), tensors);
  return p;
}

Pass OpRules::optimizer(std::int64_t params, int tensors, bool fused, bool clip,
                        std::int64_t main_grads) const {
  if (params <= 0)
    throw InputError(fmt::format("optimizer: parameter count must be positive (got {})", params));
  if (main_grads == 0) main_grads = params;
  Pass p;
  const DType f32 = DType::FP32;
  const std::int64_t mt = std::max<std::int64_t>(multi_tensor_launches(params), (tensors + 35) / 36);
  const bool mixed = dtype_bytes(dtype_) == 2;
  if (mixed && (!megatron() || dtype_ == DType::FP16)) {
    // 16-bit gradients copied to the FP32 masters' (Megatron: its FP16 main
    // gradients, .float(), one launch per tensor; eager: the 16-bit weights'
    // FP32 master copies that stage_memory holds, torch._foreach_copy_).
    // bf16 under Megatron accumulates FP32 main gradients: nothing to copy.
    p.add(memory_pass(params * (dtype_bytes(grad_dtype()) + 4LL), f32), megatron() ? tensors : mt);
    // FP16 loss scaling: unscale with the inf/nan check (Megatron's, or
    // GradScaler's _amp_foreach_non_finite_check_and_unscale_).
    if (dtype_ == DType::FP16) p.add(memory_pass(params * 8LL, f32), mt);
  }
  // Global-norm clipping (Megatron's --clip-grad, torch's clip_grad_norm_)
  // before the step, fused optimizer or not (helper 114: it priced nothing
  // with PyTorch's unfused Adam).
  if (clip) {
    p.add(memory_pass(params * 4LL, f32), mt);  // global gradient norm (one read)
    p.add(memory_pass(params * 8LL, f32), mt);  // rescale
  }
  if (!fused) {
    // PyTorch Adam: m and v decay and update, the step, the update applied.
    p.add(flat_kernel(KernelOp::MulU, params, f32), mt);
    p.add(flat_kernel(KernelOp::Add, params, f32), mt);
    p.add(flat_kernel(KernelOp::MulU, params, f32), mt);
    p.add(flat_kernel(KernelOp::Mul, params, f32), mt);
    p.add(flat_kernel(KernelOp::Div, params, f32), mt);
    p.add(flat_kernel(KernelOp::Add, params, f32), mt);
  }
  if (fused) {
    // apex FusedAdam: reads parameters, gradients and both moments, writes
    // parameters and moments (7 FP32 streams).
    p.add(memory_pass(params * 28LL, f32), mt);
  }
  // The updated FP32 masters copied to the 16-bit weights, multi-tensor.
  if (mixed) p.add(memory_pass(params * (4LL + dtype_bytes(dtype_)), f32), mt);
  // Zero Megatron's main gradients (PyTorch DDP's zero_grad sets .grad to
  // None): the whole buffer the rank accumulates into, which the
  // distributed optimizer does not shard (`main_grads`).
  if (megatron() && options_.main_grad) {
    p.add(memory_pass(main_grads * dtype_bytes(grad_dtype()), grad_dtype()), tensors);
  }
  return p;
}

}  // namespace tessera::node_model
