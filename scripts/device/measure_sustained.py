#!/usr/bin/env python3
"""Burst against sustained throughput of 16-bit GEMMs and of a training step.

Run on a lent GPU machine:  OUT=dir python3 measure_sustained.py
For each GEMM shape: after 1.5 s idle (clocks back at their maximum) the first
three executions are timed one by one (burst); then the same GEMM runs back to
back for SUSTAIN_S seconds and the last half is timed (sustained, under the
card's power limit). nvidia-smi samples clocks and power every 100 ms
(sustained_smi.csv). Then two GPT training steps (measure_16bit.Gpt) run for
STEP_S seconds each: every iteration's time is written (steps.csv). GEMMS=0
skips the GEMMs; STEPS=large runs GPT-3-sized layers instead (hidden 4096-12288,
unfused attention or FlashAttention).
"""
import csv
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_16bit as m16  # noqa: E402

OUT = os.environ.get("OUT", ".")
SUSTAIN_S = float(os.environ.get("SUSTAIN_S", "4"))
STEP_S = float(os.environ.get("STEP_S", "10"))
DEV = torch.device("cuda")
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def ev():
    return torch.cuda.Event(enable_timing=True)


def gemms(rows):
    # (M, N, K) in BLAS names: C[M,N] = A[M,K] B[K,N]
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 49152, 12288), (8192, 12288, 49152),
              (2048, 4608, 12288), (2048, 12288, 1536), (4096, 6144, 2048), (16384, 16384, 16384),
              (2048, 2048, 2048)]
    for dname, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        for (m, n, k) in shapes:
            if dname == "fp16" and (m, n, k) not in ((8192, 8192, 8192), (8192, 49152, 12288)):
                continue
            a = torch.randn(m, k, device=DEV, dtype=dt)
            b = torch.randn(k, n, device=DEV, dtype=dt)
            torch.matmul(a, b)
            torch.cuda.synchronize()
            time.sleep(1.5)
            burst = []
            for _ in range(3):
                s, e = ev(), ev()
                s.record()
                torch.matmul(a, b)
                e.record()
                torch.cuda.synchronize()
                burst.append(s.elapsed_time(e))
            one = burst[-1]
            per = max(1, int(20 / max(one, 1e-3)))  # ~20 ms per timed batch
            start = time.time()
            batches = []
            while time.time() - start < SUSTAIN_S:
                s, e = ev(), ev()
                s.record()
                for _ in range(per):
                    torch.matmul(a, b)
                e.record()
                torch.cuda.synchronize()
                batches.append((time.time() - start, s.elapsed_time(e) / per))
            late = sorted(t for (ts, t) in batches if ts > SUSTAIN_S / 2)
            sus = late[len(late) // 2]
            flop = 2.0 * m * n * k
            rows.append([dname, m, n, k, f"{burst[0]:.6f}", f"{burst[1]:.6f}", f"{burst[2]:.6f}", f"{sus:.6f}",
                         f"{flop / min(burst) / 1e9:.1f}", f"{flop / sus / 1e9:.1f}", len(late)])
            log(f"{dname} {m}x{n}x{k}: burst {flop / min(burst) / 1e9:.0f} TFLOP/s, sustained "
                f"{flop / sus / 1e9:.0f} TFLOP/s")
            del a, b


STEP_CONFIGS = {
    # layers, hidden, heads, seq, micro-batch, FlashAttention (SDPA)
    "small": ((8, 2048, 16, 2048, 4, False), (2, 8192, 64, 2048, 1, False), (4, 4096, 32, 2048, 2, False)),
    "large": ((2, 12288, 96, 2048, 1, False), (2, 12288, 96, 2048, 1, True), (4, 8192, 64, 2048, 2, True),
              (8, 4096, 32, 2048, 4, True)),
}


def steps(rows, configs):
    for (L, h, nh, s, mb, flash) in configs:
        step = m16.TrainStep(L, h, nh, s, mb, flash)
        label = f"L{L} h{h} s{s} mb{mb}" + (" flash" if flash else "")
        torch.cuda.synchronize()
        time.sleep(1.5)
        start = time.time()
        i = 0
        while time.time() - start < STEP_S:
            a, b, mid = ev(), ev(), ev()
            a.record()
            step.fwd_bwd()
            mid.record()
            step.optim()
            b.record()
            torch.cuda.synchronize()
            rows.append([label, i, f"{time.time() - start:.3f}", f"{a.elapsed_time(b):.4f}",
                         f"{a.elapsed_time(mid):.4f}", f"{mid.elapsed_time(b):.4f}"])
            i += 1
        its = [float(r[3]) for r in rows if r[0] == label]
        log(f"step {label}: first {its[0]:.2f} ms, 2nd-4th median {sorted(its[1:4])[1]:.2f} ms, "
            f"last-half median {sorted(its[len(its) // 2:])[len(its[len(its) // 2:]) // 2]:.2f} ms over {len(its)}")
        del step
        torch.cuda.empty_cache()


def main():
    smi = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
         "clocks_event_reasons.active", "--format=csv", "-lms", "100"],
        stdout=open(os.path.join(OUT, "sustained_smi.csv"), "w"), stderr=subprocess.STDOUT)
    g, st = [], []
    try:
        if os.environ.get("GEMMS", "1") == "1":
            gemms(g)
    finally:
        with open(os.path.join(OUT, "burst_sustained.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["dtype", "M", "N", "K", "burst1_ms", "burst2_ms", "burst3_ms", "sustained_ms",
                        "burst_TFLOPs", "sustained_TFLOPs", "sustained_batches"])
            w.writerows(g)
    try:
        steps(st, STEP_CONFIGS[os.environ.get("STEPS", "small")])
    finally:
        with open(os.path.join(OUT, "steps.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["config", "iteration", "t_s", "ms", "fwd_bwd_ms", "optimizer_ms"])
            w.writerows(st)
        smi.terminate()
    log("done")


if __name__ == "__main__":
    main()
