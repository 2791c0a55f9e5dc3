"""fla's Triton chunk_gated_delta_rule against statecut's chunk kernel at the issue-6 prefill shapes, same inputs,
same timing (CUDA events, 256 MiB L2 flush before every call, median). Writes "prefill B T K fla_ms" lines for
bench_cuda_gated_delta (STATECUT_FLA_TIMES) and prints a table. fla is read from an ignored folder (.fla) and used
for the measurement only.

usage: PYTHONPATH=.fla python3 bench/cuda_fla_compare.py <libstatecut_cuda_torch.so> <out.txt>
env: FLA_K=128,64 times only those key dims (default 128,96,64,32); FLA_H (heads, default 16), FLA_V (value dim,
default 128) and FLA_SHAPES (B x T list, default 1x8192,8x2048,8x8192,32x2048) time another layer's shape, e.g. Gated
DeltaNet 1.3B's FLA_H=6 FLA_K=256,128 FLA_V=512 FLA_SHAPES=8x2048 (its full and 50%-pruned key dims). The out file's
lines carry B, T and K only: keep it for bench_cuda_gated_delta at the default H and V.

Triton compiles (and autotunes) fla's kernels once per key dim: on a fresh GPU machine that took ~60 s for the first
shape and ~45 s for each new K (2026-11-30), so all 16 shapes need ~4-5 minutes. The key dim is the outer loop (one
compile per K) and every line is flushed as soon as it is measured, so a run cut short keeps what it timed.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F
from fla.ops.gated_delta_rule import chunk_gated_delta_rule

torch.ops.load_library(sys.argv[1])
out_path = sys.argv[2]
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def bench(fn, reps=15):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


H = int(os.environ.get("FLA_H", "16"))
V = int(os.environ.get("FLA_V", "128"))
KS = [int(x) for x in os.environ.get("FLA_K", "128,96,64,32").split(",")]
SHAPES = [tuple(int(n) for n in bt.split("x"))
          for bt in os.environ.get("FLA_SHAPES", "1x8192,8x2048,8x8192,32x2048").split(",")]
rows = []
t_start = time.time()
with open(out_path, "w") as f:
    for K in KS:
        for B, T in SHAPES:
            g0 = torch.Generator(device="cuda").manual_seed(K)
            q = torch.randn(B, T, H, K, device="cuda", dtype=torch.bfloat16, generator=g0)
            k = torch.randn(B, T, H, K, device="cuda", dtype=torch.bfloat16, generator=g0)
            v = torch.randn(B, T, H, V, device="cuda", dtype=torch.bfloat16, generator=g0)
            g = F.logsigmoid(torch.randn(B, T, H, device="cuda", generator=g0)).float() * 0.3
            beta = torch.rand(B, T, H, device="cuda", generator=g0).float()
            scale = K ** -0.5

            def run_fla():
                return chunk_gated_delta_rule(q, k, v, g=g, beta=beta.to(q.dtype), scale=scale,
                                              output_final_state=True, use_qk_l2norm_in_kernel=True)

            def run_ours():
                return torch.ops.statecut.gated_delta_rule_chunk(q, k, v, g, beta, scale, None, True, None, True,
                                                                 False, None, None, False, False)

            o_f, s_f = run_fla()
            o_o, s_o = run_ours()
            err = ((o_f.float() - o_o.float()).norm() / o_f.float().norm()).item()
            serr = ((s_f.float() - s_o).norm() / s_f.float().norm()).item()
            t_f, t_o = bench(run_fla), bench(run_ours)
            f.write(f"prefill {B} {T} {K} {t_f:.5f}\n")
            f.flush()
            rows.append((B, T, K, t_f, t_o, err, serr))
            print(f"B={B} T={T} K={K}: fla {t_f:.3f} ms ours {t_o:.3f} ms ratio {t_f / t_o:.2f}  "
                  f"|o_fla-o_ours|/|o_fla| {err:.2e} state {serr:.2e}  [{time.time() - t_start:.0f} s]", flush=True)
print(f"H = {H}, V = {V}")
print("| B x T | K | fla ms | ours ms | fla/ours |")
print("| --- | --- | --- | --- | --- |")
for B, T, K, t_f, t_o, err, serr in rows:
    print(f"| {B}x{T} | {K} | {t_f:.3f} | {t_o:.3f} | {t_f / t_o:.2f} |")
