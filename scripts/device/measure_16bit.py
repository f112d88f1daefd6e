#!/usr/bin/env python3
"""Measure 16-bit training kernels and a small GPT training step on one GPU.

Run on a lent GPU machine (PyTorch with CUDA):  OUT=dir python3 measure_16bit.py
(SECTIONS=a,b picks sections: tpsteps, recompute [RECOMPUTE_PROFILE=1], spsteps, ckpthost, wgradacc, vocab,
gemmwarm, gemm, vector, other, e2e, sustained, xla; unset runs all)
Writes CSVs under $OUT (tests/data/h200/README.md describes each file and its
columns; GEMMs use NeuSight's convention: N is the reduction, K the output width). Every section is timed with CUDA events; each kernel timed
"alone" is preceded by a 256 MiB write that flushes the L2 (cold caches, as a
kernel inside a training step sees them); "b2b_ms" is the mean of the kernel
queued back to back (device time, warm L2 for small tensors). Inputs are random
(never zeros). Sections run in priority order and each is written as soon as
it finishes, so a run cut short keeps what it measured.
"""
import csv
import gc
import math
import os
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

OUT = os.environ.get("OUT", ".")
BUDGET_S = float(os.environ.get("BUDGET_S", "400"))
T0 = time.time()
DEV = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
GPU = torch.cuda.get_device_name()
FLUSH = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device=DEV)


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def left():
    return BUDGET_S - (time.time() - T0)


def write_csv(name, header, rows):
    path = os.path.join(OUT, name)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    log(f"wrote {name}: {len(rows)} rows")


def warm_estimate(fn):
    """Runs fn once to warm up, then once timed: its rough time in ms (at least 1 us)."""
    fn()
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    return max(s.elapsed_time(e), 1e-3)


def time_alone(fn, min_ms=12.0, max_iters=100, min_iters=5):
    """Median time (ms) of fn launched alone after an L2 flush."""
    est = warm_estimate(fn)
    n = int(max(min_iters, min(max_iters, min_ms / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        FLUSH.random_(0, 127) if i == 0 else FLUSH.add_(1)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in zip(starts, ends))
    return t[len(t) // 2], n


def time_b2b(fn, min_ms=5.0, max_iters=2000):
    """Mean time (ms) of fn queued back to back (device time when the host keeps up)."""
    est = warm_estimate(fn)
    n = int(max(3, min(max_iters, min_ms / est)))
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n


def time_graph(fn, reps=15, max_bytes=2 << 30, out_bytes=0):
    """Median device time (ms) of fn with warm caches and no host gaps: n calls
    captured in one CUDA graph, the graph replayed `reps` times (an in-step-like
    time: the kernel's inputs stay in L2 when they fit, as a producer's output
    does inside a step)."""
    est = warm_estimate(fn)
    n = int(max(1, min(200, 3.0 / est)))
    if out_bytes:
        n = int(max(1, min(n, max_bytes // max(out_bytes, 1))))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    g.replay()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        g.replay()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in zip(starts, ends))
    del g
    return t[len(t) // 2] / n, n


def rnd(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=dtype)


# --------------------------------------------------------------------------
def section_env():
    rows = []
    p = torch.cuda.get_device_properties(0)
    rows.append(["gpu", GPU])
    rows.append(["sms", p.multi_processor_count])
    rows.append(["memory_bytes", p.total_memory])
    rows.append(["l2_bytes", getattr(p, "L2_cache_size", "")])
    rows.append(["torch", torch.__version__])
    rows.append(["cuda", torch.version.cuda])
    rows.append(["cublas_note", "torch.matmul / F.linear / torch.bmm, default cuBLAS heuristics"])
    try:
        q = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,"
             "clocks.sm,temperature.gpu", "--format=csv"], capture_output=True, text=True, timeout=20)
        rows.append(["nvidia_smi", q.stdout.strip().replace("\n", " | ")])
    except Exception as ex:  # noqa: BLE001
        rows.append(["nvidia_smi", f"failed: {ex}"])
    # Two ceilings: a large device-to-device copy and a large bf16 product.
    a = torch.empty(2 * 1024**3, dtype=torch.int8, device=DEV)
    b = torch.empty_like(a)
    ms = time_b2b(lambda: b.copy_(a), min_ms=20)
    rows.append(["copy_GBps_read_plus_write", f"{2 * a.numel() / ms / 1e6:.1f}"])
    del a, b
    x, y = rnd(8192, 8192), rnd(8192, 8192)
    ms = time_b2b(lambda: torch.matmul(x, y), min_ms=50)
    rows.append(["bf16_8192cube_TFLOPs", f"{2 * 8192**3 / ms / 1e9:.1f}"])
    write_csv("env.csv", ["key", "value"], rows)
    for r in rows:
        log(f"  {r[0]}: {r[1]}")


# --------------------------------------------------------------------------
GEMM_HEADER = ["OPName", "Latency", "b2b_ms", "Device", "dtype", "pass", "layout", "source",
               "B", "M", "N", "K", "iters"]


def gemm_row(op, dtype_name, pas, layout, source, B, M, N, K, fn, b2b=False):
    """One GEMM C[B,M,N] = A[B,M,K] x B[B,K,N] (BLAS names), written in NeuSight's
    column convention: its N is the reduction and its K the output width."""
    ms, n = time_alone(fn)
    bb = f"{time_b2b(fn):.6f}" if b2b else ""
    return [op, f"{ms:.6f}", bb, GPU, dtype_name, pas, layout, source, B, M, K, N, n]


def linear_shapes():
    """Megatron transformer GEMMs: QKV, attention projection, MLP up and down, per TP degree."""
    shapes = set()
    for h in (1024, 2048, 4096, 5120, 8192, 12288):
        for tp in (1, 2, 4, 8):
            if h // tp < 256:
                continue
            for t in (1024, 2048, 4096, 8192):
                for n_out, k_in in ((3 * h // tp, h), (h, h // tp), (4 * h // tp, h), (h, 4 * h // tp)):
                    shapes.add((t, n_out, k_in))
    return sorted(shapes)


def linear_operands(t, n_out, k_in, dt):
    """A linear layer's operands for t tokens: input x [t, k_in], weight w [n_out, k_in] and
    output gradient dy [t, n_out]."""
    return rnd(t, k_in, dtype=dt), rnd(n_out, k_in, dtype=dt), rnd(t, n_out, dtype=dt)


def section_gemm(rows, dtypes=(("bf16", torch.bfloat16),), source="transformer", limit_s=150):
    t_end = time.time() + limit_s
    for dname, dt in dtypes:
        for (t, n_out, k_in) in linear_shapes():
            if time.time() > t_end or left() < 60:
                log(f"gemm {dname}: time limit, stopping")
                return
            x, w, dy = linear_operands(t, n_out, k_in, dt)
            # forward y = x W^T; input gradient dx = dy W; weight gradient dW = dy^T x
            rows.append(gemm_row("linear", dname, "fwd", "tn", source, 1, t, n_out, k_in,
                                 lambda: F.linear(x, w)))
            rows.append(gemm_row("linear", dname, "dgrad", "nn", source, 1, t, k_in, n_out,
                                 lambda: torch.matmul(dy, w)))
            rows.append(gemm_row("linear", dname, "wgrad", "nt", source, 1, n_out, k_in, t,
                                 lambda: torch.matmul(dy.t(), x)))
            del x, w, dy
        log(f"gemm {dname}: {len(rows)} rows so far")


WARM_HEADER = ["OPName", "Latency", "cold_ms", "Device", "dtype", "pass", "layout", "source",
               "B", "M", "N", "K", "iters"]


def section_gemm_warm(rows, dtypes=(("bf16", torch.bfloat16), ("fp16", torch.float16)), limit_s=220):
    """The transformer GEMMs of section_gemm and the attention products, each timed
    warm (time_graph: Latency) and, in the same session, alone after an L2 flush
    (cold_ms): the in-step time and the cold one side by side."""
    t_end = time.time() + limit_s
    for dname, dt in dtypes:
        shapes = linear_shapes() if dname == "bf16" else linear_shapes()[::3]
        for (t, n_out, k_in) in shapes:
            if time.time() > t_end or left() < 40:
                log(f"gemm warm {dname}: time limit, stopping")
                return
            x, w, dy = linear_operands(t, n_out, k_in, dt)
            y = torch.empty(t, n_out, device=DEV, dtype=dt)
            dx = torch.empty(t, k_in, device=DEV, dtype=dt)
            dw = torch.empty(n_out, k_in, device=DEV, dtype=dt)
            for pas, layout, M, N, K, fn in (
                    ("fwd", "tn", t, n_out, k_in, lambda: torch.matmul(x, w.t(), out=y)),
                    ("dgrad", "nn", t, k_in, n_out, lambda: torch.matmul(dy, w, out=dx)),
                    ("wgrad", "nt", n_out, k_in, t, lambda: torch.matmul(dy.t(), x, out=dw))):
                warm, n = time_graph(fn)
                cold, _ = time_alone(fn)
                # NeuSight's columns: N is the reduction, K the output width.
                rows.append(["linear", f"{warm:.6f}", f"{cold:.6f}", GPU, dname, pas, layout, "transformer",
                             1, M, K, N, n])
            del x, w, dy, y, dx, dw
        log(f"gemm warm {dname}: {len(rows)} rows so far")
    for d, s_, bn in ((64, 1024, 16), (64, 1024, 64), (64, 2048, 32), (128, 2048, 16), (128, 2048, 64),
                      (128, 4096, 16)):
        if time.time() > t_end or left() < 40:
            return
        q, k = rnd(bn, s_, d), rnd(bn, s_, d)
        p = rnd(bn, s_, s_)
        sc = torch.empty(bn, s_, s_, device=DEV, dtype=torch.bfloat16)
        cx = torch.empty(bn, s_, d, device=DEV, dtype=torch.bfloat16)
        for pas, layout, M, N, K, fn in (
                ("fwd", "nt", s_, s_, d, lambda: torch.bmm(q, k.transpose(1, 2), out=sc)),
                ("fwd", "nn", s_, d, s_, lambda: torch.bmm(p, k, out=cx))):
            warm, n = time_graph(fn)
            cold, _ = time_alone(fn)
            rows.append(["bmm", f"{warm:.6f}", f"{cold:.6f}", GPU, "bf16", pas, layout, "attention",
                         bn, M, K, N, n])
        del q, k, p, sc, cx
    log(f"gemm warm: done, {len(rows)} rows")


def section_vocab(rows, dtypes=(("fp16", torch.float16), ("bf16", torch.bfloat16))):
    """The LM head's GEMMs with vTrain's unpadded vocabulary split, 50257 // tp output rows
    per rank (odd at tp 1, a multiple of 8 at tp 2, of 4 at tp 4, of 2 at tp 8), each beside
    the same GEMM at Megatron's padded width (the vocabulary padded to a multiple of 128 x tp:
    50304, 25216, 12672, 6400 rows per rank): whether cuBLAS runs a 16-bit GEMM whose width
    is no multiple of 8 slower than its FLOPs say (docs/calibration.md, "Looked at again
    (2026-12-07)": the shape of vTrain's tp-1 excess). `source` is vocab-unpadded-tpN or
    vocab-padded-tpN, so that each alignment is a group of its own; validate with
    tessera validate kernels --data vocab.csv --device NAME (the model has no alignment
    feature: an unpadded group's error beside its padded group's is the slowdown)."""
    for dname, dt in dtypes:
        for tp in (1, 2, 4, 8):
            raw = 50257 // tp
            padded = -(-50257 // (128 * tp)) * 128
            for n_out, source in ((raw, f"vocab-unpadded-tp{tp}"), (padded, f"vocab-padded-tp{tp}")):
                for h in (1024, 2048):
                    for t in (2048, 4096, 8192):
                        if left() < 20:
                            log("vocab: time limit, stopping")
                            return
                        x, w, dy = linear_operands(t, n_out, h, dt)
                        rows.append(gemm_row("linear", dname, "fwd", "tn", source, 1, t, n_out, h,
                                             lambda: F.linear(x, w), b2b=True))
                        rows.append(gemm_row("linear", dname, "dgrad", "nn", source, 1, t, h, n_out,
                                             lambda: torch.matmul(dy, w), b2b=True))
                        rows.append(gemm_row("linear", dname, "wgrad", "nt", source, 1, n_out, h, t,
                                             lambda: torch.matmul(dy.t(), x), b2b=True))
                        del x, w, dy
        log(f"vocab {dname}: {len(rows)} rows so far")


def section_attention_bmm(rows):
    # Megatron's unfused attention: scores [bn,s,s] = q k^T (K = d), context [bn,s,d] = p v (K = s),
    # and their backward products (same two shapes, other layouts).
    combos = []
    for d, s_list, bn_list in ((64, (1024, 2048), (16, 32, 64, 128)), (128, (2048, 4096), (8, 16, 32, 64, 96))):
        for s in s_list:
            for bn in bn_list:
                if bn * s * s * 2 > 6 * 1024**3:
                    continue
                combos.append((d, s, bn))
    for d, s, bn in combos:
        if left() < 60:
            return
        q, k = rnd(bn, s, d), rnd(bn, s, d)
        p = rnd(bn, s, s)
        rows.append(gemm_row("bmm", "bf16", "fwd", "nt", "attention", bn, s, s, d,
                             lambda: torch.bmm(q, k.transpose(1, 2))))
        rows.append(gemm_row("bmm", "bf16", "fwd", "nn", "attention", bn, s, d, s,
                             lambda: torch.bmm(p, k)))
        rows.append(gemm_row("bmm", "bf16", "bwd", "tn", "attention", bn, s, d, s,
                             lambda: torch.bmm(p.transpose(1, 2), q)))
        del q, k, p
    log(f"attention bmm: done, {len(rows)} rows so far")


def section_xla_grid(rows, dtypes):
    # The OpenXLA table's grid (b in 1,2,4; m,n,k in 256..4096; A and B row-major),
    # re-measured here: how far this GPU and this library sit from the table the
    # tensor-core model was fit to.
    dims = (256, 512, 1024, 2048, 4096)
    for dname, dt, tf32 in dtypes:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for b in (1, 2, 4):
            for m in dims:
                for n in dims:
                    for k in dims:
                        if left() < 45:
                            torch.backends.cuda.matmul.allow_tf32 = False
                            return
                        a = rnd(b, m, k, dtype=dt)
                        c = rnd(b, k, n, dtype=dt)
                        fn = (lambda: torch.matmul(a[0], c[0])) if b == 1 else (lambda: torch.bmm(a, c))
                        rows.append(gemm_row("bmm" if b > 1 else "linear", dname, "fwd", "nn", "xla-grid",
                                             b, m, n, k, fn, b2b=True))
                        del a, c
        log(f"xla grid {dname}: {len(rows)} rows so far")
    torch.backends.cuda.matmul.allow_tf32 = False


# --------------------------------------------------------------------------
VEC_HEADER = ["OPName", "Latency", "b2b_ms", "Device", "dtype", "B", "H", "bytes_min", "iters"]


def section_vector(rows):
    grid = [(r, h) for r in (2048, 8192, 32768) for h in (1024, 2048, 4096, 8192, 12288)]
    grid += [(4096, 16384), (16384, 16384), (65536, 4096)]
    for (r, h) in grid:
        if left() < 90:
            log("vector: time limit")
            return
        x, y, dy = rnd(r, h), rnd(r, h), rnd(r, h)
        w, bias = rnd(h), rnd(h)
        nbytes = r * h * 2
        out, mean, rstd = torch.ops.aten.native_layer_norm(x, [h], w, bias, 1e-5)
        ops = [
            ("add", 3 * nbytes, lambda: torch.add(x, y)),
            ("mul", 3 * nbytes, lambda: torch.mul(x, y)),
            ("gelu", 2 * nbytes, lambda: F.gelu(x, approximate="tanh")),
            ("gelu_bwd", 3 * nbytes, lambda: torch.ops.aten.gelu_backward(dy, x, approximate="tanh")),
            ("ln", 2 * nbytes, lambda: F.layer_norm(x, (h,), w, bias)),
            ("ln_bwd", 3 * nbytes, lambda: torch.ops.aten.native_layer_norm_backward(
                dy, x, [h], mean, rstd, w, bias, [True, True, True])),
            ("dropout", 2 * nbytes + r * h, lambda: torch.ops.aten.native_dropout(x, 0.1, True)),
            ("softmax", 2 * nbytes, lambda: torch.softmax(x, -1)),
            ("softmax_bwd", 3 * nbytes, lambda: torch.ops.aten._softmax_backward_data(out, x, -1, torch.bfloat16)),
            ("to_fp32", 3 * nbytes, lambda: x.float()),
        ]
        for name, b_min, fn in ops:
            ms, n = time_alone(fn, min_ms=8, max_iters=60)
            bb = time_b2b(fn, min_ms=3)
            rows.append([name, f"{ms:.6f}", f"{bb:.6f}", GPU, "bf16", r, h, b_min, n])
        del x, y, dy, w, bias, out, mean, rstd
    # Attention-shaped softmax (rows = b*heads*s, H = s)
    for s in (512, 1024, 2048, 4096):
        for bn in (16, 64):
            if left() < 90:
                return
            x = rnd(bn * s, s)
            yv = torch.softmax(x, -1)
            nbytes = x.numel() * 2
            for name, b_min, fn in (("softmax", 2 * nbytes, lambda: torch.softmax(x, -1)),
                                    ("softmax_bwd", 3 * nbytes,
                                     lambda: torch.ops.aten._softmax_backward_data(yv, x, -1, torch.bfloat16))):
                ms, n = time_alone(fn, min_ms=8, max_iters=60)
                rows.append([name, f"{ms:.6f}", f"{time_b2b(fn, min_ms=3):.6f}", GPU, "bf16", bn * s, s, b_min, n])
            del x, yv
    log(f"vector: {len(rows)} rows")


OTHER_HEADER = ["what", "ms", "detail"]


def section_other(rows):
    # Per-op host floor of PyTorch eager (tiny kernels queued from Python) and the device floor
    # (the same kernels replayed from a CUDA graph).
    x = torch.ones(1, device=DEV)
    rows.append(["eager_tiny_add_per_op", f"{time_b2b(lambda: x.add_(1.0), min_ms=20, max_iters=5000):.6f}",
                 "x.add_(1) on 1 element, queued from Python"])
    a, b = rnd(64, 64), rnd(64, 64)
    rows.append(["eager_tiny_mm_per_op", f"{time_b2b(lambda: torch.mm(a, b), min_ms=20, max_iters=5000):.6f}",
                 "64x64x64 bf16 mm queued from Python"])
    ms, _ = time_alone(lambda: torch.mm(a, b))
    rows.append(["alone_tiny_mm", f"{ms:.6f}", "64^3 bf16 mm timed alone after an L2 flush"])
    try:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                x.add_(1.0)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            for _ in range(200):
                x.add_(1.0)
        ms = time_b2b(lambda: g.replay(), min_ms=20)
        rows.append(["graph_tiny_add_per_kernel", f"{ms / 200:.6f}", "200 tiny adds in one CUDA graph"])
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2):
            for _ in range(200):
                torch.mm(a, b)
        ms = time_b2b(lambda: g2.replay(), min_ms=20)
        rows.append(["graph_tiny_mm_per_kernel", f"{ms / 200:.6f}", "200 64^3 bf16 mm in one CUDA graph"])
    except Exception:  # noqa: BLE001
        rows.append(["graph", "", "failed: " + traceback.format_exc().splitlines()[-1]])
    # Fused Adam(W) on FP32 master weights (Megatron's optimizer step: FP32 params, grads, two moments)
    for n in (1 << 24, 1 << 26, 1 << 28):
        if left() < 70:
            break
        p = torch.nn.Parameter(torch.randn(n, device=DEV))
        p.grad = torch.randn(n, device=DEV)
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        opt.step()
        ms, it = time_alone(lambda: opt.step(), min_ms=20, max_iters=30)
        rows.append(["fused_adamw_fp32_step", f"{ms:.6f}", f"params={n}; 16 B read + 12 B written per param min"])
        del p, opt
    # Many-tensor Adam (a model's parameter list: 200 tensors)
    ps = [torch.nn.Parameter(torch.randn(1 << 20, device=DEV)) for _ in range(200)]
    for p in ps:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(ps, lr=1e-4, fused=True)
    opt.step()
    ms, _ = time_alone(lambda: opt.step(), min_ms=20, max_iters=30)
    rows.append(["fused_adamw_fp32_step_200_tensors", f"{ms:.6f}", f"params={200 << 20} in 200 tensors"])
    del ps, opt
    # Cross-entropy over a 50304 vocabulary in FP32 (as Megatron computes it), forward + backward
    for t in (2048, 8192):
        logits = rnd(t, 50304).requires_grad_(True)
        tgt = torch.randint(0, 50304, (t,), device=DEV)

        def ce():
            loss = F.cross_entropy(logits.float(), tgt)
            torch.autograd.grad(loss, logits)
        ms, _ = time_alone(ce, min_ms=20, max_iters=30)
        rows.append(["cross_entropy_fp32_fwd_bwd", f"{ms:.6f}", f"tokens={t} vocab=50304 bf16 logits"])
        del logits
    # Flash attention (SDPA) forward and forward+backward, causal
    for (bsz, nh, s, d) in ((1, 16, 2048, 128), (2, 32, 2048, 128), (1, 64, 2048, 128), (4, 16, 2048, 64),
                            (1, 32, 4096, 128), (8, 16, 1024, 64)):
        if left() < 60:
            break
        q, k, v = (rnd(bsz, nh, s, d).requires_grad_(True) for _ in range(3))
        do = rnd(bsz, nh, s, d)
        ms, _ = time_alone(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        rows.append(["sdpa_causal_fwd", f"{ms:.6f}", f"b={bsz} heads={nh} s={s} d={d}"])

        def fb():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.autograd.grad(o, (q, k, v), do)
        ms, _ = time_alone(fb)
        rows.append(["sdpa_causal_fwd_bwd", f"{ms:.6f}", f"b={bsz} heads={nh} s={s} d={d}"])
        del q, k, v, do
    log(f"other: {len(rows)} rows")


# --------------------------------------------------------------------------
class Gather(torch.autograd.Function):
    """Sequence parallelism's all-gather on one rank, without NCCL: the rows of all tp ranks in one
    buffer (zeros where the other ranks' rows would land); backward keeps this rank's rows (the
    reduce-scatter's local share)."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.n = x.shape[0]
        out = torch.zeros((x.shape[0] * tp,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
        out[:x.shape[0]].copy_(x)
        return out

    @staticmethod
    def backward(ctx, g):
        return g[:ctx.n].clone(), None


class ReduceScatter(torch.autograd.Function):
    """Sequence parallelism's reduce-scatter on one rank, without NCCL: this rank's rows; backward
    gathers as Gather does."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return x[:x.shape[0] // tp].clone()

    @staticmethod
    def backward(ctx, g):
        out = torch.zeros((g.shape[0] * ctx.tp,) + tuple(g.shape[1:]), dtype=g.dtype, device=g.device)
        out[:g.shape[0]].copy_(g)
        return out, None


class Block(torch.nn.Module):
    """A Megatron-style GPT layer in plain PyTorch: pre-LN, fused QKV, unfused attention
    (scaled scores, causal mask, softmax, dropout), projection, bias-dropout-add, MLP with GeLU."""

    def __init__(self, h, heads, p_drop, flash=False, tp=1, recompute="none", sp=False):
        super().__init__()
        # sp: Megatron's sequence parallelism on one rank: the layer norms, dropouts and residuals
        # on s / tp rows; the all-gather before QKV and fc1 and the reduce-scatter after the
        # projection and fc2 stand in as their local copies (Gather, ReduceScatter).
        self.sp = sp and tp > 1
        # recompute "selective": the core attention (scores, mask, softmax, dropout, context)
        # recomputed in the backward, as Megatron's selective recomputation does.
        self.recompute = recompute
        # tp > 1: one tensor-parallel rank's share (Megatron's column-parallel QKV and fc1,
        # row-parallel projection and fc2: heads / tp heads, 4h / tp MLP columns), without
        # the all-reduces that would join the ranks.
        self.h, self.heads, self.p, self.flash, self.tp = h, heads // tp, p_drop, flash, tp
        self.ln1 = torch.nn.LayerNorm(h)
        self.qkv = torch.nn.Linear(h, 3 * h // tp)
        self.proj = torch.nn.Linear(h // tp, h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.fc1 = torch.nn.Linear(h, 4 * h // tp)
        self.fc2 = torch.nn.Linear(4 * h // tp, h)

    def gather(self, x):
        return Gather.apply(x, self.tp) if self.sp else x

    def scatter(self, x):
        return ReduceScatter.apply(x, self.tp) if self.sp else x

    def forward(self, x, mask):
        if self.sp:
            return self.forward_sp(x, mask)
        s, b, h = x.shape
        nh, d = self.heads, h // (self.heads * self.tp)
        h = nh * d  # this rank's attention width
        qkv = self.qkv(self.ln1(x)).view(s, b * nh, 3 * d)
        q, k, v = qkv.split(d, dim=-1)
        if self.flash:  # one fused attention kernel each way (PyTorch's SDPA, causal)
            q, k, v = (t.reshape(s, b, nh, d).permute(1, 2, 0, 3) for t in (q, k, v))
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                                 is_causal=True)
            ctx = ctx.permute(2, 0, 1, 3).reshape(s, b, h)
            x = x + F.dropout(self.proj(ctx), self.p, self.training)
            return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")), self.p,
                                 self.training)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        if self.recompute == "selective":
            ctx = checkpoint(self.core_attention, q, k, v, mask, use_reentrant=True)
        else:
            ctx = self.core_attention(q, k, v, mask)
        ctx = ctx.transpose(0, 1).reshape(s, b, h)
        x = x + F.dropout(self.proj(ctx), self.p, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")), self.p, self.training)

    def forward_sp(self, x, mask):
        """The layer under sequence parallelism (unfused attention): x holds this rank's s / tp rows."""
        full = self.gather(self.ln1(x))
        s, b, h = full.shape
        nh, d = self.heads, h // (self.heads * self.tp)
        qkv = self.qkv(full).view(s, b * nh, 3 * d)
        q, k, v = (t.transpose(0, 1) for t in qkv.split(d, dim=-1))
        if self.recompute == "selective":
            ctx = checkpoint(self.core_attention, q, k, v, mask, use_reentrant=True)
        else:
            ctx = self.core_attention(q, k, v, mask)
        ctx = ctx.transpose(0, 1).reshape(s, b, nh * d)
        x = x + F.dropout(self.scatter(self.proj(ctx)), self.p, self.training)
        y = self.fc2(F.gelu(self.fc1(self.gather(self.ln2(x))), approximate="tanh"))
        return x + F.dropout(self.scatter(y), self.p, self.training)

    def core_attention(self, q, k, v, mask):
        """Scaled scores, causal mask, softmax, dropout and context of [b * heads, s, d] operands."""
        bn, s, d = q.shape
        scores = torch.baddbmm(torch.empty(bn, s, s, dtype=q.dtype, device=q.device), q, k.transpose(1, 2),
                               beta=0.0, alpha=1.0 / math.sqrt(d))
        probs = F.dropout(torch.softmax(scores.masked_fill(mask, float("-inf")), -1), self.p, self.training)
        return torch.bmm(probs, v)


class Gpt(torch.nn.Module):
    def __init__(self, layers, h, heads, vocab, seq, p_drop, flash=False, tp=1, recompute="none", sp=False):
        super().__init__()
        self.sp, self.tp = sp and tp > 1, tp
        # recompute "full": each layer's input kept, the layer run again in the backward
        # (Megatron's full recomputation, uniform method, one layer per checkpoint).
        self.recompute = recompute
        self.emb = torch.nn.Embedding(vocab // tp, h)  # vocabulary-parallel: this rank's rows
        self.pos = torch.nn.Embedding(seq, h)
        self.blocks = torch.nn.ModuleList(Block(h, heads, p_drop, flash, tp, recompute, sp) for _ in range(layers))
        self.lnf = torch.nn.LayerNorm(h)
        self.p = p_drop

    def forward(self, tokens, mask):
        s = tokens.shape[0]
        x = self.emb(tokens) + self.pos(torch.arange(s, device=tokens.device))[:, None, :]
        if self.sp:  # into the sequence-parallel region: this rank's rows
            x = ReduceScatter.apply(x, self.tp)
        x = F.dropout(x, self.p, self.training)
        for blk in self.blocks:
            x = checkpoint(blk, x, mask, use_reentrant=True) if self.recompute == "full" else blk(x, mask)
        x = self.lnf(x)
        if self.sp:  # gathered before the LM head
            x = Gather.apply(x, self.tp)
        logits = F.linear(x, self.emb.weight)  # tied LM head
        return logits


class TrainStep:
    """One GPT training step as Megatron's mixed precision runs it: the model in bf16, FP32 master
    weights and main gradients, fused AdamW on them. fwd_bwd() and optim() are its two phases."""

    def __init__(self, layers, hidden, heads, seq, micro_batch, flash=False, vocab=50304, tp=1, recompute="none",
                 sp=False):
        torch.manual_seed(0)
        with torch.device(DEV):
            self.model = Gpt(layers, hidden, heads, vocab, seq, 0.1, flash, tp, recompute, sp).to(torch.bfloat16)
        self.model.train()
        vocab //= tp  # a tensor-parallel rank's vocabulary shard (logits and loss on it alone)
        self.vocab = vocab
        self.params = list(self.model.parameters())
        self.n_params = sum(p.numel() for p in self.params)
        self.master = [p.detach().float().clone().requires_grad_(True) for p in self.params]
        for m in self.master:
            m.grad = torch.zeros_like(m)
        self.opt = torch.optim.AdamW(self.master, lr=1e-5, fused=True)
        self.mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=DEV), 1)
        self.tokens = torch.randint(0, vocab, (seq, micro_batch), device=DEV)
        self.labels = torch.randint(0, vocab, (seq * micro_batch,), device=DEV)

    def forward(self):
        """The forward pass and the loss (gradients of the last step dropped first)."""
        for p in self.params:
            p.grad = None
        logits = self.model(self.tokens, self.mask)
        return F.cross_entropy(logits.view(-1, self.vocab).float(), self.labels)

    def fwd_bwd(self):
        self.forward().backward()

    def optim(self):
        for p, m in zip(self.params, self.master):
            m.grad.copy_(p.grad)  # main_grad (FP32) from the 16-bit grad
        self.opt.step()
        with torch.no_grad():
            for p, m in zip(self.params, self.master):
                p.copy_(m)


# `training.optimizer` (a scenario key path: `tessera validate steps` sets it per row) records
# TrainStep.optim: fused AdamW on FP32 master weights.
E2E_HEADER = ["layers", "hidden", "heads", "seq", "micro_batch", "vocab", "params", "dtype",
              "fwd_bwd_ms", "optimizer_ms", "iteration_ms", "iters", "training.optimizer", "note"]


def section_e2e(rows):
    configs = [
        # layers, hidden, heads, seq, micro-batch
        (8, 1024, 16, 1024, 4),
        (8, 2048, 16, 2048, 1),
        (8, 2048, 16, 2048, 4),
        (4, 4096, 32, 2048, 1),
        (4, 4096, 32, 2048, 2),
        (2, 8192, 64, 2048, 1),
    ]
    vocab = 50304
    for (L, h, nh, s, mb) in configs:
        if left() < 45:
            log("e2e: time limit")
            return
        try:
            step = TrainStep(L, h, nh, s, mb, vocab=vocab)
            n_params, fwd_bwd, optim = step.n_params, step.fwd_bwd, step.optim
            for _ in range(3):
                fwd_bwd()
                optim()
            torch.cuda.synchronize()
            n = 8
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(3 * n)]
            for i in range(n):
                ev[3 * i].record()
                fwd_bwd()
                ev[3 * i + 1].record()
                optim()
                ev[3 * i + 2].record()
            torch.cuda.synchronize()
            fb = sorted(ev[3 * i].elapsed_time(ev[3 * i + 1]) for i in range(n))[n // 2]
            op = sorted(ev[3 * i + 1].elapsed_time(ev[3 * i + 2]) for i in range(n))[n // 2]
            it = sorted(ev[3 * i].elapsed_time(ev[3 * i + 2]) for i in range(n))[n // 2]
            rows.append([L, h, nh, s, mb, vocab, n_params, "bf16", f"{fb:.4f}", f"{op:.4f}", f"{it:.4f}", n,
                         "fused-adam", "plain PyTorch eager, unfused attention, dropout 0.1, tied LM head, no recompute"])
            log(f"e2e L{L} h{h} s{s} mb{mb}: fwd+bwd {fb:.2f} ms, optimizer {op:.2f} ms")
            if (L, h, mb) == (8, 2048, 4):
                profile_step(fwd_bwd, optim, f"L{L} h{h} s{s} mb{mb}")
            del step, fwd_bwd, optim
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            log("e2e failed: " + traceback.format_exc())
            torch.cuda.empty_cache()


def time_step(step, warm_s, n=8, split=False):
    """Runs step for warm_s first (the card at its power state under load), then times n steps:
    the medians of forward + backward, optimizer and iteration (ms), and n; with split, also the
    medians of the forward (to the loss) and of the backward."""
    t_end = time.time() + warm_s
    i = 0
    while i < 3 or time.time() < t_end:
        step.fwd_bwd()
        step.optim()
        torch.cuda.synchronize()
        i += 1
    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(n)]
    for i in range(n):
        ev[i][0].record()
        loss = step.forward()
        ev[i][1].record()
        loss.backward()
        ev[i][2].record()
        step.optim()
        ev[i][3].record()
    torch.cuda.synchronize()

    def med(a, b):
        return sorted(e[a].elapsed_time(e[b]) for e in ev)[n // 2]

    if split:
        return med(0, 2), med(2, 3), med(0, 3), n, med(0, 1), med(1, 2)
    return med(0, 2), med(2, 3), med(0, 3), n


TP_HEADER = E2E_HEADER[:8] + ["flash_attention"] + E2E_HEADER[8:-2] + ["tp", "training.optimizer", "note"]


def section_tp_steps(rows, warm_s=1.5):
    """Training steps of one tensor-parallel rank (Block's tp): the same layers split 1-8 ways,
    each step run for warm_s first (the card at its power state under load), then timed."""
    layers = ((8, 2048, 16, 1024, 8), (4, 4096, 32, 2048, 2), (2, 8192, 64, 2048, 1), (2, 12288, 96, 2048, 1))
    if os.environ.get("TP_STEPS") == "small":  # host-bound: small layers, micro-batches 1 and 2
        layers = ((8, 1024, 16, 1024, 1), (8, 1024, 16, 1024, 2), (8, 2048, 16, 1024, 1), (8, 2048, 16, 1024, 2))
    configs = [(L, h, nh, s, mb, tp) for (L, h, nh, s, mb) in layers for tp in (1, 2, 4, 8)]
    vocab = 50304
    for (L, h, nh, s, mb, tp) in configs:
        if left() < 30:
            log("tp steps: time limit")
            return
        try:
            step = TrainStep(L, h, nh, s, mb, vocab=vocab, tp=tp)
            fb, op, it, n = time_step(step, warm_s)
            rows.append([L, h, nh, s, mb, vocab, step.n_params, "bf16", "false", f"{fb:.4f}", f"{op:.4f}", f"{it:.4f}",
                         n, tp, "fused-adam", "one tensor-parallel rank, no all-reduces; plain PyTorch eager, unfused attention, "
                             "dropout 0.1, tied LM head, no recompute"])
            log(f"tp step L{L} h{h} s{s} mb{mb} tp{tp}: fwd+bwd {fb:.2f} ms, optimizer {op:.2f} ms")
            del step
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            # (an out-of-memory error keeps the failed step alive through its
            # traceback: drop both before the next configuration)
            log("tp step failed: " + traceback.format_exc().splitlines()[-1])
            step = None
            gc.collect()
            torch.cuda.empty_cache()


RECOMPUTE_HEADER = TP_HEADER[:-1] + ["parallelism.recompute", "fwd_ms", "bwd_ms", "note"]


def section_recompute(rows, warm_s=1.5):
    """One tensor-parallel rank's steps (tp 1 and 8) with activation recomputation none, selective
    (the core attention) and full (every layer), in that order per layer shape, so each
    recomputed step has its baseline from the same session."""
    layers = ((4, 4096, 32, 2048, 2), (2, 8192, 64, 2048, 1), (2, 12288, 96, 2048, 1))
    vocab = 50304
    for (L, h, nh, s, mb) in layers:
        for tp in (8, 1):
            for rc in ("none", "selective", "full"):
                if left() < 30:
                    log("recompute: time limit")
                    return
                step = None
                try:
                    step = TrainStep(L, h, nh, s, mb, vocab=vocab, tp=tp, recompute=rc)
                    fb, op, it, n, fw, bw = time_step(step, warm_s, split=True)
                    rows.append([L, h, nh, s, mb, vocab, step.n_params, "bf16", "false", f"{fb:.4f}", f"{op:.4f}",
                                 f"{it:.4f}", n, tp, "fused-adam", rc, f"{fw:.4f}", f"{bw:.4f}",
                                 "one tensor-parallel rank, no all-reduces; plain PyTorch eager, unfused attention, "
                                 "dropout 0.1, tied LM head; recomputation by torch.utils.checkpoint (reentrant)"])
                    log(f"recompute {rc} L{L} h{h} s{s} mb{mb} tp{tp}: fwd {fw:.2f} ms, bwd {bw:.2f} ms, "
                        f"optimizer {op:.2f} ms")
                    if os.environ.get("RECOMPUTE_PROFILE") and rc != "selective" and (h, tp) in ((12288, 1), (4096, 8)):
                        profile_step(step.fwd_bwd, step.optim, f"L{L} h{h} s{s} mb{mb} tp{tp} recompute {rc}")
                except Exception:  # noqa: BLE001
                    log("recompute step failed: " + traceback.format_exc().splitlines()[-1])
                step = None
                gc.collect()
                torch.cuda.empty_cache()


SP_HEADER = TP_HEADER[:-1] + ["parallelism.sequence_parallel", "parallelism.recompute", "fwd_ms", "bwd_ms", "note"]


def section_sp_steps(rows, warm_s=1.5):
    """One tensor-parallel rank's steps (tp 4 and 8) without and with sequence parallelism (the
    collectives' outputs as local copies), the latter also with selective recomputation
    (Korthikanti et al.'s configuration)."""
    layers = ((4, 4096, 32, 2048, 2), (2, 8192, 64, 2048, 1), (2, 12288, 96, 2048, 1))
    vocab = 50304
    for (L, h, nh, s, mb) in layers:
        for tp in (8, 4):
            for sp, rc in ((False, "none"), (True, "none"), (True, "selective")):
                if left() < 20:
                    log("sp steps: time limit")
                    return
                step = None
                try:
                    step = TrainStep(L, h, nh, s, mb, vocab=vocab, tp=tp, recompute=rc, sp=sp)
                    fb, op, it, n, fw, bw = time_step(step, warm_s, split=True)
                    rows.append([L, h, nh, s, mb, vocab, step.n_params, "bf16", "false", f"{fb:.4f}", f"{op:.4f}",
                                 f"{it:.4f}", n, tp, "fused-adam", "true" if sp else "false", rc, f"{fw:.4f}",
                                 f"{bw:.4f}",
                                 "one tensor-parallel rank, no collectives (sequence parallelism's all-gather and "
                                 "reduce-scatter as local copies into zeroed buffers); plain PyTorch eager, unfused "
                                 "attention, dropout 0.1, tied LM head"])
                    log(f"sp={sp} {rc} L{L} h{h} tp{tp}: fwd {fw:.2f} ms, bwd {bw:.2f} ms, optimizer {op:.2f} ms")
                except Exception:  # noqa: BLE001
                    log("sp step failed: " + traceback.format_exc().splitlines()[-1])
                step = None
                gc.collect()
                torch.cuda.empty_cache()


CKPT_HEADER = ["layers", "hidden", "heads", "seq", "micro_batch", "recompute", "use_reentrant", "fwd_bwd_ms",
               "kernels_per_step", "steps", "note"]


def section_checkpoint_host(rows, n=60):
    """The host's cost of activation checkpointing: host-bound steps (tiny layers, so the GPU waits
    for the host) with recomputation none, selective and full, by torch.utils.checkpoint reentrant
    (as Megatron's CheckpointFunction) and non-reentrant; the wall time per forward + backward
    (n steps, synchronised at the end) and the kernels each step launches (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    global checkpoint
    base = checkpoint
    for (L, h, nh, s, mb) in ((8, 256, 4, 128, 1), (16, 256, 4, 128, 1)):
        for reentrant in (True, False):
            for rc in ("none", "selective", "full"):
                if rc == "none" and not reentrant:
                    continue
                if left() < 15:
                    log("checkpoint host: time limit")
                    return
                checkpoint = (lambda *a, use_reentrant=True, **k: base(*a, use_reentrant=reentrant, **k))
                try:
                    step = TrainStep(L, h, nh, s, mb, vocab=512, recompute=rc)
                    for _ in range(20):
                        step.fwd_bwd()
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    for _ in range(n):
                        step.fwd_bwd()
                    torch.cuda.synchronize()
                    ms = (time.perf_counter() - t0) * 1e3 / n
                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        step.fwd_bwd()
                        torch.cuda.synchronize()
                    kernels = sum(e.count for e in prof.key_averages() if getattr(e, "device_time_total", 0) > 0)
                    rows.append([L, h, nh, s, mb, rc, "true" if reentrant else "false", f"{ms:.4f}", kernels, n,
                                 "host-bound: wall time per forward + backward, synchronised once per n steps"])
                    log(f"checkpoint host L{L} {rc} reentrant={reentrant}: {ms:.3f} ms, {kernels} kernels")
                except Exception:  # noqa: BLE001
                    log("checkpoint host failed: " + traceback.format_exc().splitlines()[-1])
                finally:
                    checkpoint = base
                step = None
                gc.collect()


# --------------------------------------------------------------------------
# Megatron's gradient-accumulation fusion: the weight-gradient GEMM accumulates into the FP32
# main gradient (apex fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32: cublasGemmEx with
# 16-bit A and B, FP32 C, beta = 1), called here through ctypes on PyTorch's own libcublas.
class Cublas:
    R_32F, R_16F, R_16BF = 0, 2, 14
    COMPUTE_32F = 68
    OP_N, OP_T = 0, 1

    def __init__(self):
        import ctypes
        self.ct = ctypes
        torch.matmul(rnd(64, 64), rnd(64, 64))  # PyTorch loads libcublas
        torch.cuda.synchronize()
        path = None
        with open("/proc/self/maps") as f:
            for line in f:
                name = line.strip().split()[-1]
                if "libcublas.so" in name and "libcublasLt" not in name:
                    path = name
                    break
        if path is None:
            raise RuntimeError("libcublas is not loaded")
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.handle = ctypes.c_void_p()
        if self.lib.cublasCreate_v2(ctypes.byref(self.handle)) != 0:
            raise RuntimeError("cublasCreate failed")
        self.lib.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        fp = ctypes.POINTER(ctypes.c_float)
        i, v = ctypes.c_int, ctypes.c_void_p
        self.lib.cublasGemmEx.argtypes = [v, i, i, i, i, i, fp, v, i, i, v, i, i, fp, v, i, i, i, i]
        self.lib.cublasGemmEx.restype = i
        self.one, self.zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        self.algo = 99  # CUBLAS_GEMM_DEFAULT_TENSOR_OP, as apex

    def wgrad(self, x, dy, w_grad, accumulate):
        """w_grad[out, in] (+)= dy[t, out]^T x[t, in] (apex's call: column-major m = in, n = out, k = t)."""
        t, k_in = x.shape
        n_out = dy.shape[1]
        ab = self.R_16BF if x.dtype == torch.bfloat16 else self.R_16F
        cty = self.R_32F if w_grad.dtype == torch.float32 else ab
        st = self.lib.cublasGemmEx(self.handle, self.OP_N, self.OP_T, k_in, n_out, t, self.ct.byref(self.one),
                                   self.ct.c_void_p(x.data_ptr()), ab, k_in, self.ct.c_void_p(dy.data_ptr()), ab,
                                   n_out, self.ct.byref(self.one if accumulate else self.zero),
                                   self.ct.c_void_p(w_grad.data_ptr()), cty, k_in, self.COMPUTE_32F, self.algo)
        if st != 0:
            raise RuntimeError(f"cublasGemmEx returned {st}")


WGRAD_HEADER = ["dtype", "tokens", "in", "out", "hidden", "tp", "linear", "torch_ms", "gemmex_16bit_ms",
                "gemmex_fp32_accumulate_ms", "fp32_add_ms", "check_max_rel_err"]


def section_wgrad_accumulate(rows):
    """Megatron's weight-gradient GEMMs, each timed alone after an L2 flush: PyTorch's dy^T x (16-bit
    output), the same product through cublasGemmEx (16-bit output, beta 0), the fused accumulation
    into an FP32 main gradient (FP32 output, beta 1), and the unfused alternative's add
    (main_grad += grad, FP32 += 16-bit)."""
    cb = Cublas()
    log(f"wgrad: {cb.path}")
    # Correctness first: the fused call against PyTorch in FP32.
    x, dy = rnd(512, 384), rnd(512, 256)
    acc = torch.ones(256, 384, device=DEV)
    cb.wgrad(x, dy, acc, True)
    ref = 1 + dy.float().t() @ x.float()
    check = ((acc - ref).abs().max() / ref.abs().max()).item()
    log(f"wgrad: fused accumulation check, max relative error {check:.2e}")
    if not check < 1e-2:
        raise RuntimeError(f"fused accumulation disagrees with PyTorch ({check})")
    for dname, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        for h in (4096, 8192, 12288):
            for tp in (1, 8):
                for t in (2048, 8192):
                    for lin, n_out, k_in in (("qkv", 3 * h // tp, h), ("proj", h, h // tp),
                                             ("fc1", 4 * h // tp, h), ("fc2", h, 4 * h // tp)):
                        if left() < 20:
                            log("wgrad: time limit")
                            return
                        x, dy = rnd(t, k_in, dtype=dt), rnd(t, n_out, dtype=dt)
                        g16 = torch.empty(n_out, k_in, dtype=dt, device=DEV)
                        main = torch.zeros(n_out, k_in, dtype=torch.float32, device=DEV)
                        ms_torch, _ = time_alone(lambda: torch.matmul(dy.t(), x))
                        ms_16, _ = time_alone(lambda: cb.wgrad(x, dy, g16, False))
                        ms_acc, n = time_alone(lambda: cb.wgrad(x, dy, main, True))
                        ms_add, _ = time_alone(lambda: main.add_(g16))
                        rows.append([dname, t, k_in, n_out, h, tp, lin, f"{ms_torch:.6f}", f"{ms_16:.6f}",
                                     f"{ms_acc:.6f}", f"{ms_add:.6f}", f"{check:.2e}"])
                        del x, dy, g16, main
                log(f"wgrad {dname} h{h}: {len(rows)} rows")


PROFILE = []


def profile_rows(fn, label, top=40):
    """Runs fn under torch.profiler: its result, and rows (as other.csv's) of the total device time
    and of the `top` kernel names by device time."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    items = []
    for evt in prof.key_averages():
        us = getattr(evt, "device_time_total", None)
        if us is None:
            us = getattr(evt, "cuda_time_total", 0)
        if us > 0:
            items.append((us, evt.count, evt.key))
    items.sort(reverse=True)
    total = sum(i[0] for i in items)
    rows = [[f"profile_total {label}", f"{total / 1e3:.6f}", f"{len(items)} kernel names"]]
    for us, count, key in items[:top]:
        rows.append([f"profile {label}", f"{us / 1e3:.6f}", f"count={count} {key[:150]}"])
    return out, rows


def profile_step(fwd_bwd, optim, label):
    """Per-kernel device time of one training step (torch.profiler), the 40 largest."""
    try:
        PROFILE.extend(profile_rows(lambda: (fwd_bwd(), optim()), label)[1])
    except Exception:  # noqa: BLE001
        log("profile failed: " + traceback.format_exc())


def section_sustained(rows, seconds=20):
    # bf16 8192^3 products back to back for `seconds`, with nvidia-smi sampling clocks and power:
    # does throughput drop as the card heats and meets its power limit?
    smi_path = os.path.join(OUT, "smi.csv")
    smi = None
    try:
        smi = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
             "clocks_event_reasons.active", "--format=csv", "-lms", "500"],
            stdout=open(smi_path, "w"), stderr=subprocess.STDOUT)
    except Exception as ex:  # noqa: BLE001
        log(f"nvidia-smi sampling failed: {ex}")
    x, y = rnd(8192, 8192), rnd(8192, 8192)
    flop = 2 * 8192**3
    start = time.time()
    while time.time() - start < seconds:
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(100):
            torch.matmul(x, y)
        e.record()
        torch.cuda.synchronize()
        ms = s.elapsed_time(e)
        rows.append([f"{time.time() - start:.2f}", f"{ms / 100:.6f}", f"{100 * flop / ms / 1e9:.1f}"])
    if smi:
        smi.terminate()
    log(f"sustained: first {rows[0][2]} TFLOP/s, last {rows[-1][2]} TFLOP/s")


def want(section):
    """SECTIONS=gemm,xla (say) runs only those; unset runs all."""
    only = os.environ.get("SECTIONS", "")
    return not only or section in only.split(",")


def run_section(name, fn):
    try:
        fn()
    except Exception:  # noqa: BLE001
        log(f"{name} failed: " + traceback.format_exc())


def table_section(key, label, section, file, header):
    """Runs section(rows) when SECTIONS wants `key` and writes its rows to `file`."""
    if want(key):
        rows = []
        run_section(label, lambda: section(rows))
        write_csv(file, header, rows)


def main():
    os.makedirs(OUT, exist_ok=True)
    log(f"GPU {GPU}, torch {torch.__version__}, budget {BUDGET_S:.0f} s")
    run_section("env", section_env)
    table_section("tpsteps", "tp steps", section_tp_steps, "tp_steps.csv", TP_HEADER)
    table_section("spsteps", "sp steps", section_sp_steps, "sp_steps.csv", SP_HEADER)
    table_section("ckpthost", "checkpoint host", section_checkpoint_host, "checkpoint_host.csv", CKPT_HEADER)
    table_section("wgradacc", "wgrad accumulate", section_wgrad_accumulate, "wgrad_accumulate.csv", WGRAD_HEADER)
    table_section("recompute", "recompute", section_recompute, "recompute_steps.csv", RECOMPUTE_HEADER)
    if want("recompute") and PROFILE:
        write_csv("other_recompute.csv", OTHER_HEADER, list(PROFILE))
    table_section("vocab", "vocab", section_vocab, "vocab.csv", GEMM_HEADER)
    table_section("gemmwarm", "gemm warm",
                  lambda rows: section_gemm_warm(rows, limit_s=float(os.environ.get("GEMMWARM_S", "220"))),
                  "gemm_warm.csv", WARM_HEADER)
    if want("gemm"):
        gemm = []
        for name, fn in (("transformer", lambda: section_gemm(gemm, limit_s=130)),
                         ("attention", lambda: section_attention_bmm(gemm)),
                         ("fp16", lambda: section_gemm(gemm, dtypes=(("fp16", torch.float16),),
                                                       source="transformer", limit_s=15))):
            run_section(f"gemm {name}", fn)
            write_csv("gemm.csv", GEMM_HEADER, gemm)
    if want("vector"):
        vec = []
        run_section("vector", lambda: section_vector(vec))
        write_csv("vector.csv", VEC_HEADER, vec)
    other = []
    if want("other"):
        run_section("other", lambda: section_other(other))
        write_csv("other.csv", OTHER_HEADER, other)
    if want("e2e"):
        e2e = []
        run_section("e2e", lambda: section_e2e(e2e))
        write_csv("e2e.csv", E2E_HEADER, e2e)
        if PROFILE:
            write_csv("other.csv", OTHER_HEADER, other + PROFILE)
    if want("sustained") and left() > 30:
        sus = []
        run_section("sustained", lambda: section_sustained(
            sus, seconds=min(float(os.environ.get("SUSTAIN_S", "20")), left() - 25)))
        write_csv("sustained.csv", ["t_s", "ms_per_gemm", "TFLOPs"], sus)
    if want("xla") and left() > 50:
        xla = []
        run_section("xla grid", lambda: section_xla_grid(
            xla, (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True))))
        write_csv("xla_grid.csv", GEMM_HEADER, xla)
    log("done")


if __name__ == "__main__":
    sys.exit(main())
