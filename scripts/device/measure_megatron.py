#!/usr/bin/env python3
"""Megatron-LM's training step of one tensor-parallel rank, with Megatron's own kernel choices.

Run on a lent GPU machine (PyTorch with CUDA and nvcc), beside measure_16bit.py:
    OUT=dir MEGATRON_SOFTMAX_DIR=dir python3 measure_megatron.py
(STEPS=hidden:tp,... picks configurations, PHASES=1 profiles each one's forward, backward and
optimizer apart, PROFILE=0 skips the whole-step profiles of hidden 4096 at tp 1 and 8.)
MEGATRON_SOFTMAX_DIR holds Megatron-LM's `megatron/fused_kernels/scaled_upper_triang_masked_softmax.h`
(not part of Tessera: bring it from a Megatron-LM checkout). It is compiled here with a small binding
of our own and the flags Megatron builds it with; without it the step uses PyTorch's softmax and the
rows say so (`softmax` in the note).

What runs is Megatron's GPT layer as Megatron-LM's 2022-2023 releases run it (Megatron-DeepSpeed,
which vTrain measured, shares the layer's kernels) in bf16 on one rank of `tp` (heads, MLP columns and vocabulary split; no tensor-parallel communication,
as in tests/data/h200/tp_steps.csv):
- linears: `matmul(x, W^T)` then `+ bias` (LinearWithGradAccumulationAndAsyncCommunication), the
  backward's input gradient `dy W`, the weight gradient accumulated straight into the FP32
  `main_grad` by `cublasGemmEx` with beta 1 (gradient-accumulation fusion, apex's
  wgrad_gemm_accum_fp32), the bias gradient `dy.sum(0)`; fc1, the projection and fc2 skip their
  bias add (fused into the next kernel);
- fused kernels: the scaled causal softmax (Megatron's CUDA kernel), bias-GeLU and
  bias-dropout-add as Megatron-LM compiles them today (`torch.compile`; nvFuser scripts earlier);
  PyTorch's layer norm kernel in place of apex's fused one;
- the loss: Megatron's vocabulary-parallel cross-entropy on FP32 logits (max, shift, exp, sum,
  log, in-place softmax for the backward);
- the other parameters' gradients added to `main_grad` by a hook (Megatron's DDP hook);
- the optimizer: the gradient norm (multi-tensor, read on the host, as Megatron's clipping does),
  PyTorch's fused AdamW on FP32 masters (apex FusedAdam's stand-in), the masters copied to the
  bf16 weights (multi-tensor), the main-gradient buffer zeroed (one kernel).
Each configuration runs for 1.5 s, then 8 steps are timed (medians of the forward to the loss,
the backward, the optimizer and the iteration) with CUDA events. The vocabulary is padded as
Megatron pads it (to a multiple of 128 x tp); the `vocab` column is the unpadded 50257.
"""
import gc
import math
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_16bit as m  # noqa: E402  (timers, L2 flush, the direct cuBLAS call, the profiler)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEV = m.DEV
VOCAB = 50257
P_DROP = 0.1
NOTE = ("one tensor-parallel rank, no all-reduces; Megatron-LM's layer: fused causal softmax ({softmax}), "
        "bias-GeLU and bias-dropout-add ({fuser}), PyTorch layer norm, FP32 main-gradient accumulation fused "
        "into the weight-gradient GEMMs, vocabulary-parallel cross-entropy; grad norm, fused AdamW, "
        "master copy, main-grad zeroing")

# ------------------------------------------------------------------ Megatron's fused softmax
SOFTMAX = None  # the compiled extension, or None (PyTorch's softmax then)
SOFTMAX_NAME = "PyTorch softmax"

BINDING = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "scaled_upper_triang_masked_softmax.h"

// Our binding of Megatron's dispatch functions: [batches, s, s] in, softmax out; the backward in place.
torch::Tensor fwd(torch::Tensor input, double scale) {
  TORCH_CHECK(input.dim() == 3 && input.is_contiguous() && input.size(1) == input.size(2));
  const int b = input.size(0), s = input.size(1);
  auto out = torch::empty_like(input);
  if (input.scalar_type() == at::kBFloat16) {
    dispatch_scaled_upper_triang_masked_softmax_forward<c10::BFloat16, c10::BFloat16, float>(
        out.data_ptr<c10::BFloat16>(), input.data_ptr<c10::BFloat16>(), c10::BFloat16(float(scale)), s, s, b);
  } else {
    TORCH_CHECK(input.scalar_type() == at::kHalf);
    dispatch_scaled_upper_triang_masked_softmax_forward<c10::Half, c10::Half, float>(
        out.data_ptr<c10::Half>(), input.data_ptr<c10::Half>(), c10::Half(float(scale)), s, s, b);
  }
  return out;
}

torch::Tensor bwd(torch::Tensor grads, torch::Tensor probs, double scale) {
  grads = grads.contiguous();
  probs = probs.contiguous();
  const int b = grads.size(0), s = grads.size(1);
  if (grads.scalar_type() == at::kBFloat16) {
    dispatch_scaled_upper_triang_masked_softmax_backward<c10::BFloat16, c10::BFloat16, float>(
        grads.data_ptr<c10::BFloat16>(), grads.data_ptr<c10::BFloat16>(), probs.data_ptr<c10::BFloat16>(),
        float(scale), s, s, b);
  } else {
    dispatch_scaled_upper_triang_masked_softmax_backward<c10::Half, c10::Half, float>(
        grads.data_ptr<c10::Half>(), grads.data_ptr<c10::Half>(), probs.data_ptr<c10::Half>(), float(scale), s, s, b);
  }
  return grads;
}
"""


def build_softmax():
    global SOFTMAX, SOFTMAX_NAME
    src = os.environ.get("MEGATRON_SOFTMAX_DIR", "")
    if not src or not os.path.exists(os.path.join(src, "scaled_upper_triang_masked_softmax.h")):
        m.log("megatron softmax: MEGATRON_SOFTMAX_DIR has no header, PyTorch's softmax instead")
        return
    from torch.utils.cpp_extension import load_inline
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    os.environ.setdefault("MAX_JOBS", "8")
    try:
        SOFTMAX = load_inline(
            name="megatron_causal_softmax",
            cpp_sources=("torch::Tensor fwd(torch::Tensor input, double scale);\n"
                         "torch::Tensor bwd(torch::Tensor grads, torch::Tensor probs, double scale);\n"), cuda_sources=BINDING, functions=["fwd", "bwd"],
            extra_include_paths=[src], verbose=False,
            extra_cuda_cflags=["-O3", "--use_fast_math", "-U__CUDA_NO_HALF_OPERATORS__",
                               "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_BFLOAT16_OPERATORS__",
                               "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr",
                               "--expt-extended-lambda"])
        # Check against PyTorch before it is used.
        x = torch.randn(8, 256, 256, device=DEV, dtype=torch.bfloat16)
        mask = torch.triu(torch.ones(256, 256, dtype=torch.bool, device=DEV), 1)
        ref = torch.softmax((x.float() * 0.5).masked_fill(mask, float("-inf")), -1)
        err = (SOFTMAX.fwd(x, 0.5).float() - ref).abs().max().item()
        if not err < 2e-2:
            raise RuntimeError(f"fused softmax disagrees with PyTorch (max abs error {err})")
        SOFTMAX_NAME = "Megatron's kernel"
        m.log(f"megatron softmax: built, max abs error {err:.1e}")
    except Exception:  # noqa: BLE001
        SOFTMAX = None
        m.log("megatron softmax: build failed, PyTorch's softmax instead: " + traceback.format_exc()[-1500:])


class CausalSoftmax(torch.autograd.Function):
    """ScaledUpperTriangMaskedSoftmax: [b * np, s, s] scores, scale, implicit causal mask."""

    @staticmethod
    def forward(ctx, x, scale):
        probs = SOFTMAX.fwd(x.contiguous(), scale)
        ctx.scale = scale
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, g):
        (probs,) = ctx.saved_tensors
        return SOFTMAX.bwd(g.contiguous(), probs, ctx.scale), None


def causal_softmax(scores, scale, mask):
    if SOFTMAX is not None:
        return CausalSoftmax.apply(scores, scale)
    return torch.softmax((scores * scale).masked_fill(mask, float("-inf")), -1)


# ------------------------------------------------------------------ fused element-wise functions
def _bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def _bias_gelu_back(g, bias, y):
    x = bias + y
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + tanh_out)
    return ff * g


def _bias_dropout_add(x, bias, residual, prob: float):
    return residual + F.dropout(x + bias, p=prob, training=True)


FUSER = "eager"
bias_gelu, bias_gelu_back, bias_dropout_add = _bias_gelu, _bias_gelu_back, _bias_dropout_add


def build_fuser():
    """Megatron-LM's jit_fuser (torch.compile), checked on small tensors; eager if it fails."""
    global FUSER, bias_gelu, bias_gelu_back, bias_dropout_add
    try:
        torch._dynamo.config.recompile_limit = 512  # one graph per shape: every layer shape of the run
        torch._dynamo.config.cache_size_limit = 512
        fns = [torch.compile(f, dynamic=True) for f in (_bias_gelu, _bias_gelu_back, _bias_dropout_add)]
        y, b = m.rnd(64, 256), m.rnd(256)
        err = (fns[0](b, y).float() - _bias_gelu(b, y).float()).abs().max().item()
        err = max(err, (fns[1](y, b, y).float() - _bias_gelu_back(y, b, y).float()).abs().max().item())
        x = m.rnd(64, 256).requires_grad_(True)
        fns[2](x, b, y, P_DROP).sum().backward()
        if not err < 5e-2:
            raise RuntimeError(f"compiled functions disagree with eager ({err})")
        bias_gelu, bias_gelu_back, bias_dropout_add = fns
        FUSER = "torch.compile"
        m.log(f"fuser: torch.compile, max abs error {err:.1e}")
    except Exception:  # noqa: BLE001
        m.log("fuser: torch.compile failed, eager instead: " + traceback.format_exc()[-1200:])


class BiasGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, bias):
        ctx.save_for_backward(y, bias)
        return bias_gelu(bias, y)

    @staticmethod
    def backward(ctx, g):
        y, bias = ctx.saved_tensors
        tmp = bias_gelu_back(g, bias, y)
        return tmp, tmp.reshape(-1, tmp.shape[-1]).sum(0)


# ------------------------------------------------------------------ linears, loss
CUBLAS = None


class Linear(torch.autograd.Function):
    """x W^T (+ b); backward: dy W, the weight gradient accumulated into W.main_grad (FP32)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        out = torch.matmul(x, weight.t())
        return out + bias if bias is not None else out

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        grad_input = g.matmul(weight)
        g2 = g.reshape(-1, g.shape[-1]).contiguous()
        CUBLAS.wgrad(x.reshape(-1, x.shape[-1]), g2, weight.main_grad, True)
        return grad_input, None, (g2.sum(dim=0) if ctx.has_bias else None)


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Megatron's cross-entropy over one rank's vocabulary shard (FP32 logits), without its
    three all-reduces (max, target logit, sum of exponentials)."""

    @staticmethod
    def forward(ctx, logits, target, start, end):
        logits_max = torch.max(logits, dim=-1)[0]
        logits = logits - logits_max.unsqueeze(dim=-1)
        target_mask = (target < start) | (target >= end)
        masked_target = target.clone() - start
        masked_target[target_mask] = 0
        logits_2d = logits.view(-1, logits.size(-1))
        masked_target_1d = masked_target.view(-1)
        arange_1d = torch.arange(0, logits_2d.size(0), device=logits.device)
        predicted = logits_2d[arange_1d, masked_target_1d].clone().contiguous().view_as(target)
        predicted[target_mask] = 0.0
        exp_logits = logits
        torch.exp(logits, out=exp_logits)
        sum_exp = exp_logits.sum(dim=-1)
        loss = torch.log(sum_exp) - predicted
        exp_logits.div_(sum_exp.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss

    @staticmethod
    def backward(ctx, g):
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        grad_2d = softmax.view(-1, softmax.size(-1))
        arange_1d = torch.arange(0, grad_2d.size(0), device=softmax.device)
        grad_2d[arange_1d, masked_target_1d] -= 1.0 - target_mask.view(-1).float()
        softmax.mul_(g.unsqueeze(dim=-1))
        return softmax, None, None, None


# ------------------------------------------------------------------ the model of one rank
def param(*shape, std=0.02, zero=False):
    t = torch.zeros(*shape, device=DEV) if zero else torch.randn(*shape, device=DEV) * std
    return torch.nn.Parameter(t.to(torch.bfloat16))


class Layer(torch.nn.Module):
    def __init__(self, h, heads, tp, number):
        super().__init__()
        self.h, self.np, self.hn = h, heads // tp, h // heads
        self.number = number  # apply_query_key_layer_scaling: scores / (sqrt(hn) * n), softmax x n
        hp = self.np * self.hn
        self.ln1_w, self.ln1_b = param(h, std=0), param(h, zero=True)
        self.qkv_w, self.qkv_b = param(3 * hp, h), param(3 * hp, zero=True)
        self.proj_w, self.proj_b = param(h, hp), param(h, zero=True)
        self.ln2_w, self.ln2_b = param(h, std=0), param(h, zero=True)
        self.fc1_w, self.fc1_b = param(4 * h // tp, h), param(4 * h // tp, zero=True)
        self.fc2_w, self.fc2_b = param(h, 4 * h // tp), param(h, zero=True)
        with torch.no_grad():
            self.ln1_w.fill_(1.0)
            self.ln2_w.fill_(1.0)

    def forward(self, x, mask):
        s, b, h = x.shape
        np_, hn = self.np, self.hn
        ln = F.layer_norm(x, (h,), self.ln1_w, self.ln1_b, 1e-5)
        mixed = Linear.apply(ln, self.qkv_w, self.qkv_b).view(s, b, np_, 3 * hn)
        q, k, v = torch.split(mixed, hn, dim=-1)
        q, k, v = (t.reshape(s, b * np_, hn) for t in (q, k, v))
        norm = math.sqrt(hn) * self.number
        buf = torch.empty(b * np_, s, s, dtype=x.dtype, device=x.device)
        scores = torch.baddbmm(buf, q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2), beta=0.0,
                               alpha=1.0 / norm)
        probs = causal_softmax(scores, float(self.number), mask)
        probs = F.dropout(probs, P_DROP, True)
        ctx = torch.bmm(probs, v.transpose(0, 1))
        ctx = ctx.view(b, np_, s, hn).permute(2, 0, 1, 3).contiguous().view(s, b, np_ * hn)
        x = bias_dropout_add(Linear.apply(ctx, self.proj_w, None), self.proj_b, x, P_DROP)
        ln = F.layer_norm(x, (h,), self.ln2_w, self.ln2_b, 1e-5)
        inter = BiasGelu.apply(Linear.apply(ln, self.fc1_w, None), self.fc1_b)
        return bias_dropout_add(Linear.apply(inter, self.fc2_w, None), self.fc2_b, x, P_DROP)


class Gpt(torch.nn.Module):
    def __init__(self, layers, h, heads, seq, tp):
        super().__init__()
        mult = 128 * tp
        self.vocab = (VOCAB + mult - 1) // mult * mult // tp  # this rank's padded shard
        self.emb = param(self.vocab, h)
        self.pos = param(seq, h)
        self.layers = torch.nn.ModuleList(Layer(h, heads, tp, i + 1) for i in range(layers))
        self.lnf_w, self.lnf_b = param(h, std=0), param(h, zero=True)
        with torch.no_grad():
            self.lnf_w.fill_(1.0)
        self.tp = tp

    def forward(self, tokens, mask):
        # VocabParallelEmbedding: tokens outside this rank's shard masked (tp > 1), looked up, zeroed.
        if self.tp > 1:
            in_mask = tokens >= self.vocab
            masked = tokens.clone()
            masked[in_mask] = 0
            x = F.embedding(masked, self.emb)
            x[in_mask, :] = 0.0
        else:
            x = F.embedding(tokens, self.emb)
        x = x + F.embedding(torch.arange(tokens.shape[1], device=DEV), self.pos)[None]
        x = x.transpose(0, 1).contiguous()  # [s, b, h]
        x = F.dropout(x, P_DROP, True)
        for layer in self.layers:
            x = layer(x, mask)
        x = F.layer_norm(x, (x.shape[-1],), self.lnf_w, self.lnf_b, 1e-5)
        return Linear.apply(x, self.emb, None)  # tied LM head: [s, b, vocab / tp]


class MegatronStep:
    def __init__(self, layers, hidden, heads, seq, micro_batch, tp):
        torch.manual_seed(0)
        self.model = Gpt(layers, hidden, heads, seq, tp)
        self.params = list(self.model.parameters())
        self.n_params = sum(p.numel() for p in self.params)
        self.main_grad = torch.zeros(self.n_params, dtype=torch.float32, device=DEV)  # Megatron's grad buffer
        offset = 0
        self.masters = []
        for p in self.params:
            p.main_grad = self.main_grad[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
            p.register_post_accumulate_grad_hook(self._hook)
            mp = p.detach().float().clone().requires_grad_(True)
            mp.grad = p.main_grad  # main_param.grad = model_param.main_grad (FP32: the same storage)
            self.masters.append(mp)
        self.opt = torch.optim.AdamW(self.masters, lr=1e-5, fused=True)
        self.mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=DEV), 1)
        self.tokens = torch.randint(0, VOCAB, (micro_batch, seq), device=DEV)
        self.labels = torch.randint(0, VOCAB, (seq, micro_batch), device=DEV)
        self.end = self.model.vocab

    @staticmethod
    def _hook(p):
        # Megatron's DDP hook: the parameter's 16-bit gradient added to its main gradient.
        if p.grad is not None:
            p.main_grad.add_(p.grad)
            p.grad = None

    def forward(self):
        logits = self.model(self.tokens, self.mask)
        losses = VocabParallelCrossEntropy.apply(logits.float(), self.labels, 0, self.end)
        return losses.sum() / losses.numel()

    def fwd_bwd(self):
        self.forward().backward()

    def optim(self):
        norms = torch._foreach_norm([mp.grad for mp in self.masters])
        total = torch.linalg.vector_norm(torch.stack(norms)).item()  # clip_grad_norm reads it on the host
        coef = 1.0 / (total + 1e-6)
        if coef < 1.0:
            torch._foreach_mul_([mp.grad for mp in self.masters], coef)
        self.opt.step()
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.masters)
        self.main_grad.zero_()


HEADER = ["layers", "hidden", "heads", "seq", "micro_batch", "vocab", "params", "dtype", "flash_attention",
          "fwd_bwd_ms", "optimizer_ms", "iteration_ms", "iters", "tp", "training.framework", "training.optimizer",
          "fwd_ms", "bwd_ms", "note"]


def section_steps(rows, warm_s=1.5):
    layers = ((4, 4096, 32, 2048, 2), (2, 8192, 64, 2048, 1), (2, 12288, 96, 2048, 1), (8, 2048, 16, 1024, 8))
    # tp 1 and 8 of every shape first, then 4 and 2 (a run cut short keeps the ends of the range)
    configs = [(L, h, nh, s, mb, tp) for tps in ((1, 8), (4, 2)) for (L, h, nh, s, mb) in layers for tp in tps]
    # STEPS=h:tp,h:tp (say 12288:1,8192:1) runs only those; PHASES=1 also profiles each one's forward,
    # backward and optimizer apart (other_megatron_phases.csv).
    only = [tuple(int(v) for v in c.split(":")) for c in os.environ.get("STEPS", "").split(",") if c]
    if only:
        configs = [c for c in configs if (c[1], c[5]) in only]
    for (L, h, nh, s, mb, tp) in configs:
        if m.left() < 25:
            m.log("megatron steps: time limit")
            return
        step = None
        try:
            step = MegatronStep(L, h, nh, s, mb, tp)
            fb, op, it, n, fwd, bwd = m.time_step(step, warm_s, split=True)
            note = NOTE.format(softmax=SOFTMAX_NAME, fuser=FUSER)
            rows.append([L, h, nh, s, mb, VOCAB, step.n_params, "bf16", "false", f"{fb:.4f}", f"{op:.4f}",
                         f"{it:.4f}", n, tp, "megatron", "fused-adam", f"{fwd:.4f}", f"{bwd:.4f}", note])
            m.log(f"megatron step L{L} h{h} s{s} mb{mb} tp{tp}: fwd {fwd:.2f} bwd {bwd:.2f} opt {op:.2f} ms")
            if (h, tp) in ((4096, 1), (4096, 8)) and os.environ.get("PROFILE", "1") == "1":
                m.profile_step(step.fwd_bwd, step.optim, f"megatron L{L} h{h} s{s} mb{mb} tp{tp}")
            if os.environ.get("PHASES") == "1":
                profile_phases(step, f"megatron L{L} h{h} s{s} mb{mb} tp{tp}")
        except Exception:  # noqa: BLE001
            m.log("megatron step failed: " + traceback.format_exc()[-1200:])
        step = None
        gc.collect()
        torch.cuda.empty_cache()


def profile_phases(step, label, top=60):
    """Per-kernel device time (torch.profiler) of the forward (to the loss), the backward and the
    optimizer step apart, the `top` largest of each: rows of other_megatron_phases.csv."""
    def one(fn, phase):
        out, rows = m.profile_rows(fn, f"{label} {phase}", top)
        PHASES.extend(rows)
        return out

    try:
        loss = one(step.forward, "forward")
        one(loss.backward, "backward")
        one(step.optim, "optimizer")
    except Exception:  # noqa: BLE001
        m.log("phase profile failed: " + traceback.format_exc()[-1200:])


PHASES = []


def section_softmax(rows):
    """Megatron's fused causal softmax alone (after an L2 flush), forward and backward, against
    PyTorch's masked softmax of the same scores."""
    if SOFTMAX is None:
        return
    for s in (1024, 2048):
        for bn in (16, 64, 128):
            x = m.rnd(bn, s, s)
            y = SOFTMAX.fwd(x, 1.0)
            g = m.rnd(bn, s, s)
            nbytes = x.numel() * 2
            fwd_ms, n = m.time_alone(lambda: SOFTMAX.fwd(x, 1.0), min_ms=8, max_iters=60)
            bwd_ms, _ = m.time_alone(lambda: SOFTMAX.bwd(g, y, 1.0), min_ms=8, max_iters=60)
            rows.append(["megatron_causal_softmax", f"{fwd_ms:.6f}", m.GPU, "bf16", bn * s, s, 2 * nbytes, n])
            rows.append(["megatron_causal_softmax_bwd", f"{bwd_ms:.6f}", m.GPU, "bf16", bn * s, s, 3 * nbytes, n])
            del x, y, g
    m.log(f"softmax: {len(rows)} rows")


def main():
    global CUBLAS
    os.makedirs(m.OUT, exist_ok=True)
    m.log(f"GPU {m.GPU}, torch {torch.__version__}, budget {m.BUDGET_S:.0f} s")
    m.run_section("env", m.section_env)
    CUBLAS = m.Cublas()
    build_fuser()
    build_softmax()
    rows = []
    m.run_section("megatron steps", lambda: section_steps(rows))
    m.write_csv("megatron_steps.csv", HEADER, rows)
    if m.PROFILE:
        m.write_csv("other_megatron.csv", m.OTHER_HEADER, m.PROFILE)
    if PHASES:
        m.write_csv("other_megatron_phases.csv", m.OTHER_HEADER, PHASES)
    sm = []
    m.run_section("softmax", lambda: section_softmax(sm))
    m.write_csv("megatron_softmax.csv", ["OPName", "Latency", "Device", "dtype", "B", "H", "bytes_min", "iters"], sm)
    m.log("done")


if __name__ == "__main__":
    sys.exit(main())
