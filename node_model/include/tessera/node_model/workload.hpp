#pragma once
// One description of a transformer's kernels: for every operator the kernels
// of its forward pass, its input-gradient pass (B) and its weight-gradient
// pass (W), as a framework launches them. The HF operator graphs
// (model_graph.hpp) and the parallelism planner both build on these rules,
// so what `validate models` checks is what the planner forecasts.
//
// Two framework profiles:
//  - PyTorchEager: PyTorch eager mode, unfused, as NeuSight measured it
//    (every elementwise op its own kernel, gradients accumulated into .grad).
//  - Megatron: Megatron-LM / Megatron-DeepSpeed: fused scale-mask-softmax
//    (16-bit), fused bias-GeLU and bias-dropout-add, apex fused layer norm,
//    gradients accumulated per micro-batch into main gradients, the fused
//    mixed-precision Adam step over master weights.
// Each pass carries the kernels the node model times (a fused kernel is
// given as the traffic-equivalent kernels of the node model's classes) and
// the number of kernel launches the host issues for it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/kernel.hpp"

namespace tessera::node_model {

/// PyTorchEager: PyTorch eager as NeuSight measured it. Megatron:
/// Megatron-LM. MegatronDeepSpeed: Megatron-DeepSpeed, the same kernels and
/// mixed precision as Megatron-LM, with DeepSpeed's pipeline engine for
/// pipeline parallelism (its own exchanges: no scatter-gather, its own host
/// cost per exchange; docs/calibration.md).
enum class Framework { PyTorchEager, Megatron, MegatronDeepSpeed };
/// "pytorch-eager", "megatron", "megatron-deepspeed".
std::string_view to_string(Framework f);
/// Parses the names above; throws InputError listing them.
Framework parse_framework(std::string_view text);
/// Megatron-LM or Megatron-DeepSpeed: Megatron's kernels and host model.
inline bool is_megatron(Framework f) { return f != Framework::PyTorchEager; }

/// What a kernel of a pass does where its class (Kernel::op) does not say:
/// Transformer Engine's FP8 casts and transposes (ProfileOptions::fp8;
/// OpRules::layer_linear, grouped_linear), memory passes timed as the MulU
/// class of their traffic (memory_pass) like the other conversions and
/// accumulations. A label for the kernels table (`tessera kernels`): no
/// predictor reads it. None: the class says it.
enum class KernelRole : std::uint8_t { None, Cast, Transpose, CastTranspose };
/// "", "cast", "transpose", "cast+transpose".
std::string_view to_string(KernelRole role);

/// The kernels of one pass of an operator.
struct Pass {
  std::vector<Kernel> kernels;
  /// Per kernel: whether it is a further part of a kernel launched before it
  /// (added with no launch of its own: a fused kernel that the node model
  /// times as several traffic-equivalent kernels, such as FlashAttention's
  /// GEMMs or a weight-gradient GEMM's main-gradient accumulation). Such a
  /// part pays no launch floor (KernelPredictor::predict_part).
  std::vector<bool> part;
  /// Per kernel: what it does where its class does not say (KernelRole).
  std::vector<KernelRole> role;
  /// Kernel launches the host issues for this pass (a fused kernel that the
  /// node model times as several traffic-equivalent kernels is one launch).
  /// 64-bit: a multi-tensor optimizer of 10^16 parameters issues 6 x 10^8
  /// launches per pass, and a pass of several overflowed an int into a
  /// negative host time.
  std::int64_t launches = 0;

  void add(const Kernel& k, std::int64_t launch = 1, KernelRole r = KernelRole::None) {
    kernels.push_back(k);
    part.push_back(launch == 0);
    role.push_back(r);
    launches += launch;
  }
  void append(const Pass& p) {
    kernels.insert(kernels.end(), p.kernels.begin(), p.kernels.end());
    part.insert(part.end(), p.part.begin(), p.part.end());
    role.insert(role.end(), p.role.begin(), p.role.end());
    launches += p.launches;
  }
  /// Keeps the first `n` kernels, which are `launches` launches.
  void truncate(std::size_t n, std::int64_t launch_count) {
    kernels.resize(n);
    part.resize(n);
    role.resize(n);
    launches = launch_count;
  }
  [[nodiscard]] bool empty() const { return kernels.empty() && launches == 0; }
};

/// An operator's three passes (Qi et al., "Zero Bubble Pipeline Parallelism":
/// F, B, W). `input_grad` produces the gradient of the operator's inputs (what
/// the previous operator waits for); `weight_grad` the gradients of its
/// parameters, including their accumulation (deferrable).
struct OpKernels {
  std::string name;
  Pass forward, input_grad, weight_grad;
  /// Parameters of the operator (0 for none).
  std::int64_t params = 0;
  /// Work in the passes that repeats the forward (FlashAttention's backward
  /// recomputes QK^T): hardware FLOPs, not model FLOPs.
  Flops recomputed_flops;
  /// GEMM work on padding (a mixture of experts' capacity slack and routing
  /// imbalance): hardware FLOPs, not model FLOPs.
  Flops padding_flops;
  /// Kernels that run once per iteration and model chunk, in the forward of
  /// the chunk's first micro-batch (before the op's forward kernels), not in
  /// later micro-batches nor in a recomputed forward: Transformer Engine's
  /// FP8 weight casts (ProfileOptions::fp8), which it caches across the
  /// micro-batches of an iteration (Megatron-Core sets is_first_microbatch
  /// on the model chunk for its first micro-batch; OpRules::layer_linear).
  /// Hardware work only. Empty otherwise.
  Pass weight_cast;

  /// The GEMMs' work in the three passes (model FLOPs count only these,
  /// less recomputed_flops and padding_flops).
  [[nodiscard]] Flops gemm_flops() const {
    double f = 0;
    for (const Pass* p : {&forward, &input_grad, &weight_grad}) {
      for (const Kernel& k : p->kernels) {
        if (is_gemm(k.op)) f += k.flops().count();
      }
    }
    return Flops(f);
  }
};

/// Options of a framework profile that change kernels.
struct ProfileOptions {
  /// Megatron: the weight-gradient GEMM accumulates straight into the main
  /// gradient (gradient accumulation fusion, Megatron-LM's and
  /// Megatron-DeepSpeed's default with apex since 2022; off with
  /// --no-gradient-accumulation-fusion), so there is no separate
  /// accumulation pass per micro-batch for GEMM weights.
  bool grad_accumulation_fusion = true;
  /// Megatron: gradients go to the contiguous main-gradient buffer of
  /// Megatron's own DDP (--DDP-impl local; accumulated per micro-batch,
  /// zeroed by the optimizer). false: PyTorch DDP (--DDP-impl torch), whose
  /// gradients live in .grad: the first micro-batch writes them, later ones
  /// add to them (the planner charges that add), and zero_grad frees them.
  bool main_grad = true;
  /// PyTorch eager: false (the default): zero_grad(set_to_none=True),
  /// PyTorch 2's default: the first micro-batch's backward writes `.grad`,
  /// later ones add to it, which the planner charges per layer (as for
  /// PyTorch DDP under Megatron). true: every backward adds each gradient to
  /// `.grad`, which the weight-gradient passes charge
  /// (zero_grad(set_to_none=False), PyTorch 1.x's default, and the
  /// convention of NeuSight's per-op measurements, whose backward latencies
  /// include that accumulation: GraphBuilder asks for it). The scenario key
  /// `training.zero_grad` sets it (`set_to_none` by default).
  bool eager_accumulate_every_backward = false;
  /// FP8 training as NVIDIA Transformer Engine runs it under Megatron-Core
  /// (`training.dtype: fp8`; the OpRules dtype stays bf16): the GEMMs of the
  /// transformer layers' linears (OpRules::layer_linear: QKV, projection,
  /// fc1, fc2, the experts' grouped GEMMs) run in FP8 (E4M3 forward, E5M2
  /// gradients, 1 byte each, BF16 output) behind Transformer Engine's casts
  /// to FP8 (memory passes; the weights' once per iteration,
  /// OpKernels::weight_cast); everything else runs in bf16
  /// (docs/node_model.md, docs/parallelism.md "FP8 training").
  bool fp8 = false;
};

/// Where a layer linear sits in Megatron-Core's Transformer Engine layer
/// (get_gpt_layer_with_transformer_engine_spec), which decides how
/// Transformer Engine gets its operands to FP8 (ProfileOptions::fp8 only;
/// OpRules::layer_linear).
struct TeLinear {
  /// TERowParallelLinear (proj, fc2, a shared expert's fc2); else
  /// column-parallel (qkv, fc1, a shared expert's fc1).
  bool row_parallel = false;
  /// TELayerNormColumnParallelLinear (a dense layer's qkv and fc1): the
  /// layer norm before it writes its output in FP8 (that norm is the
  /// layer's own `ln1` / `ln2` op), so the linear casts no input.
  bool norm_fused = false;
  /// Ranks sharing the sequence: tp with sequence parallelism (Transformer
  /// Engine's sequence_parallel), else 1.
  std::int64_t sequence_shards = 1;
};

/// Whether Megatron's fused scale-mask-softmax CUDA kernel
/// (`scaled_upper_triang_masked_softmax`, causal) takes attention scores of
/// `batches` (micro-batch x heads per rank) matrices of `sq` x `sk` in 16
/// bits, as `FusedScaleMaskSoftmax` decides. Megatron-DeepSpeed (and
/// Megatron-LM of 2021): 16 < sk <= 2048, sq and `batches` multiples of 4.
/// Megatron-LM (`is_kernel_available`): 16 < sk <= 4096, sq and sk multiples
/// of 4, `batches` a multiple of 4 and of the kernel's batches per block (8
/// for sk <= 128). Otherwise Megatron runs its torch path
/// (OpRules::attention_softmax). False for PyTorch eager and for FP32.
bool fused_softmax_available(Framework framework, DType dtype, std::int64_t batches, std::int64_t sq,
                             std::int64_t sk);

/// Why the fused kernel of a Megatron `framework` does not take the shape
/// ("takes micro_batch x heads per rank score matrices in multiples of 4
/// only (6 here)"), or empty where it does: the rule of
/// fused_softmax_available for 16-bit scores, said.
std::string fused_softmax_refusal(Framework framework, std::int64_t batches, std::int64_t sq,
                                  std::int64_t sk);

/// The rule table. Pure: builds kernel lists, times nothing.
class OpRules {
 public:
  /// Throws InputError for ProfileOptions::fp8 with a dtype other than bf16.
  OpRules(Framework framework, DType dtype, ProfileOptions options = {});

  [[nodiscard]] Framework framework() const { return framework_; }
  [[nodiscard]] DType dtype() const { return dtype_; }
  /// Element type of the gradients parameters accumulate into: FP32 main
  /// gradients under Megatron with bf16 (Megatron forces them) and FP32;
  /// the training dtype otherwise (Megatron's fp16 default, PyTorch's .grad).
  [[nodiscard]] DType grad_dtype() const;

  /// y = x W (+ b): `rows` x `in` times `in` x `out`.
  [[nodiscard]] OpKernels linear(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out,
                                 bool bias) const;
  /// A linear of a transformer layer (QKV, attention projection, fc1, fc2):
  /// linear() with, under ProfileOptions::fp8, FP8 GEMMs and Transformer
  /// Engine's kernels that get their operands to FP8 (TE 1.x's _Linear and
  /// _LayerNormLinear, TransformerEngineBaseModule.grad_output_preprocess;
  /// Hopper's FP8 GEMMs take transposed copies, so each operand is also
  /// transposed for the GEMM that needs it). `rows` are the GEMM's (with
  /// sequence parallelism the gathered sequence); `te` where the linear sits.
  ///  - The weight (in x out): cast with its transpose (cast_transpose:
  ///    reads 2 bytes, writes 1 + 1 per element, the amax fused in) once
  ///    per iteration, in OpKernels::weight_cast.
  ///  - The input x (rows x in): none where the norm writes it in FP8
  ///    (`norm_fused`); else cast with its transpose (4 bytes per element),
  ///    or under sequence parallelism cast alone (3 bytes per element; a
  ///    column-parallel linear casts its own shard, rows / shards, and the
  ///    planner all-gathers the FP8 copy). Where it was not transposed
  ///    (`norm_fused`, or sequence parallelism) the weight-gradient pass
  ///    transposes the FP8 input (fp8_transpose: 1 + 1 bytes per element
  ///    of rows x in) before its GEMM.
  ///  - The output gradient dy (rows x out), before the input-gradient
  ///    GEMM: cast with its transpose (4 bytes per element; with a bias its
  ///    gradient fused in, cast_transpose_bgrad, so no bias pass of its
  ///    own); a row-parallel linear under sequence parallelism casts its
  ///    shard (3 bytes per element of rows / shards), which the planner
  ///    all-gathers in FP8, then transposes the gathered dy (2 bytes per
  ///    element).
  [[nodiscard]] OpKernels layer_linear(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out,
                                       bool bias, TeLinear te = {}) const;
  /// Element type of the layer GEMMs: FP8 under ProfileOptions::fp8, else dtype().
  [[nodiscard]] DType layer_gemm_dtype() const { return options_.fp8 ? DType::FP8 : dtype_; }
  /// A mixture of experts' grouped GEMM (Megatron-core's GroupedMLP):
  /// `groups` experts, each y = x W on `rows` tokens, `rows` x `in` times
  /// `in` x `out`, no bias, one launch each way; timed by the node model as
  /// the batched GEMM of those shapes. The weight gradient is a grouped GEMM
  /// too (accumulated into the main gradient as linear()'s). Under
  /// ProfileOptions::fp8 the three grouped GEMMs run in FP8 behind
  /// Transformer Engine's casts with their transposes (GroupedLinear, no
  /// tensor parallelism of its own): the tokens (groups x rows x in) in the
  /// forward, dy (groups x rows x out) before the input-gradient GEMM, 4
  /// bytes per element each, and the weights (groups x in x out) once per
  /// iteration (OpKernels::weight_cast).
  [[nodiscard]] OpKernels grouped_linear(std::string name, std::int64_t groups, std::int64_t rows,
                                         std::int64_t in, std::int64_t out) const;
  /// A mixture of experts' gating after the router GEMM: the softmax over
  /// `experts` logits of each of `tokens` tokens and the top-k selection (a
  /// second row pass); backward: the softmax's.
  [[nodiscard]] OpKernels top_k_gating(std::string name, std::int64_t tokens, std::int64_t experts) const;
  /// Batched GEMM of two activations, B x (M x K) @ (K x N): both gradients
  /// are input gradients.
  [[nodiscard]] OpKernels bmm(std::string name, std::int64_t b, std::int64_t m, std::int64_t n,
                              std::int64_t k) const;
  /// Layer norm over rows of `cols` (with its gain and bias); without `bias`
  /// RMSNorm (a gain alone; the same passes, memory-bound either way).
  [[nodiscard]] OpKernels layer_norm(std::string name, std::int64_t rows, std::int64_t cols,
                                     bool bias = true) const;
  /// Row softmax, in the profile's element type unless `dtype` is given.
  [[nodiscard]] OpKernels softmax(std::string name, std::int64_t rows, std::int64_t cols,
                                  std::optional<DType> dtype = std::nullopt) const;
  /// An elementwise op whose gradient takes `grad_kernels` elementwise
  /// kernels, in the profile's element type unless `dtype` is given.
  [[nodiscard]] OpKernels elementwise(std::string name, KernelOp op, std::int64_t rows, std::int64_t cols,
                                      int grad_kernels, std::optional<DType> dtype = std::nullopt) const;
  /// Dropout (training): a mask multiply each way.
  [[nodiscard]] OpKernels dropout(std::string name, std::int64_t rows, std::int64_t cols) const;
  /// A copy (permute + contiguous); `grad`: its gradient is a copy too.
  [[nodiscard]] OpKernels copy(std::string name, std::int64_t elements, bool grad = true) const;
  /// Embedding lookup of `tokens` rows from a table of `table_rows` x `hidden`.
  /// `table_rows` 0: the table's size is not known (an op graph read without
  /// its model's config): the backward is the scatter-add alone, without
  /// zeroing the table's gradient or accumulating it.
  [[nodiscard]] OpKernels embedding(std::string name, std::int64_t tokens, std::int64_t table_rows,
                                    std::int64_t hidden) const;

  // Attention and MLP pieces whose kernels depend on the framework.

  /// Scaled, causally masked softmax of attention scores: `batches`
  /// (micro-batch x heads of a rank) matrices of `sq` x `sk`. Megatron
  /// 16-bit: one fused kernel each way where its CUDA kernel takes the shape
  /// (fused_softmax_available); otherwise Megatron's torch path, in FP32
  /// (`attention_softmax_in_fp32`): a cast to FP32, the query-key
  /// layer-scaling multiply, the causal masked_fill_, the softmax and a cast
  /// back, each its own kernel both ways. FP32 Megatron (whose fused kernels
  /// are 16-bit only) and eager: a scale, a mask and a softmax.
  [[nodiscard]] std::vector<OpKernels> attention_softmax(const std::string& prefix, std::int64_t batches,
                                                         std::int64_t sq, std::int64_t sk) const;
  /// FlashAttention (Dao et al. 2022; FlashAttention-2's kernels): causal
  /// attention of `b` (micro-batch x heads) heads of `s` tokens and head size
  /// `d` as one fused kernel each way. Forward: QK^T and PV (the FLOPs of the
  /// unfused `scores` and `context` bmms); backward: the recomputed QK^T and
  /// the four gradient GEMMs. No softmax, mask or dropout kernel runs on its
  /// own. The node model has no fused-attention class: the GEMMs are timed
  /// as the tensor-core GEMMs of those shapes (docs/node_model.md).
  [[nodiscard]] OpKernels flash_attention(std::string name, std::int64_t b, std::int64_t s,
                                          std::int64_t d) const;
  /// Bias add + GeLU after the MLP's first linear (whose bias it adds).
  /// Megatron: one fused kernel (bias_gelu), with the bias gradient as a
  /// reduction; eager: the bias is in the linear, GeLU is its own kernel.
  /// `bias_cols`: the bias's width (default `cols`; a gated MLP's fc1 bias
  /// covers gate and up, 2 x cols); 0 (Megatron's --disable-bias-linear):
  /// the activation alone, no bias gradient.
  [[nodiscard]] OpKernels bias_gelu(std::string name, std::int64_t rows, std::int64_t cols,
                                    std::optional<std::int64_t> bias_cols = std::nullopt) const;
  /// Megatron's fused SwiGLU (bias_swiglu_impl, on unless
  /// --no-bias-swiglu-fusion) on the gated fc1's `rows` x 2 `cols` output:
  /// forward one kernel reading gate and up and writing SiLU(gate) x up (a
  /// binary op's traffic); backward one kernel reading the output gradient,
  /// gate and up and writing both their gradients (five streams of `rows` x
  /// `cols`: a binary op and a two-stream pass, one launch). Its bias, when
  /// `bias_cols` > 0, as bias_gelu's.
  [[nodiscard]] OpKernels bias_swiglu(std::string name, std::int64_t rows, std::int64_t cols,
                                      std::int64_t bias_cols) const;
  /// Bias add + dropout + residual add after a row-parallel linear.
  /// Megatron: one fused kernel (bias_dropout_add), backward: the dropout
  /// mask multiply, the bias-gradient reduction and the residual-gradient add.
  /// Without `dropout` (probability 0): no mask multiply either way; without
  /// `bias` (--disable-bias-linear): no bias gradient.
  [[nodiscard]] OpKernels bias_dropout_add(std::string name, std::int64_t rows, std::int64_t cols,
                                           bool dropout = true, bool bias = true) const;

  /// Accumulation of `params` parameters' gradients (of `tensors` tensors)
  /// after one backward: PyTorch's .grad add, Megatron's main_grad add
  /// (empty with gradient-accumulation fusion for GEMM weights).
  [[nodiscard]] Pass grad_accumulation(std::int64_t params, int tensors = 1) const;

  /// The optimizer step over `params` parameters (of `tensors` tensors):
  /// eager Adam (6 passes, one launch per pass and tensor) or, `fused`, apex's
  /// multi-tensor FusedAdam; under Megatron with 16-bit training the mixed-
  /// precision steps around it (unscale and inf check for fp16, gradient norm
  /// with `clip`, copy of the FP32 master weights to the model's, zeroing the
  /// main gradients). Eager with 16-bit training updates FP32 master weights
  /// too (the copies the memory model holds): the 16-bit gradients copied to
  /// FP32 before the update (then, with fp16, unscaled with the inf/nan check
  /// as PyTorch's GradScaler does) and the masters copied back to the 16-bit
  /// weights after it, multi-tensor. Multi-tensor kernels launch once per 320 chunks
  /// of 64 Ki elements (apex `multi_tensor_apply`). `main_grads`: the
  /// gradients the zeroing clears, the rank's whole main-gradient buffer
  /// where the step updates a shard of it (ZeRO-1/2; 0: `params`).
  [[nodiscard]] Pass optimizer(std::int64_t params, int tensors, bool fused, bool clip,
                               std::int64_t main_grads = 0) const;

 private:
  /// linear() with its GEMMs in `gemm` (FP8: behind the casts of layer_linear()).
  [[nodiscard]] OpKernels linear_in(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out,
                                    bool bias, DType gemm, TeLinear te = {}) const;
  [[nodiscard]] bool megatron() const { return is_megatron(framework_); }
  Framework framework_;
  DType dtype_;
  ProfileOptions options_;
};

/// A kernel that streams `bytes` through memory (read and write), as the
/// node model's unary elementwise class (MulU) of the given element type over
/// rows of kFlatRow: optimizer passes, gradient reductions, conversions.
Kernel memory_pass(std::int64_t bytes, DType dtype);
inline constexpr std::int64_t kFlatRow = 4096;
/// An elementwise kernel over `elements` contiguous elements as rows of kFlatRow.
Kernel flat_kernel(KernelOp op, std::int64_t elements, DType dtype);
/// Launches of one apex multi-tensor kernel over `elements` elements.
std::int64_t multi_tensor_launches(std::int64_t elements);

}  // namespace tessera::node_model
