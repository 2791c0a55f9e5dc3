#!/usr/bin/env python3
"""Bench_CompareCatchesASlowdown: bench/compare.py passes the measured H200 figures and fails a deliberate slowdown.

H100 (bench/baselines/h100.json, model figures only): its committed model bench holds; the same with the full
model's batch-8 step 20% slower (ms/step and x_floor x 1.2, the skinny GEMM's gain lost) fails on exactly that figure.

Model bench: the committed `statecut bench --json` of the 1.3B DeltaNet (bench/baselines/h200_model_bench_dn13.json)
holds; the same file with the 50% model's decode step 20% slower at batch 64 (its ms/step x 1.2, the speedup / 1.2)
fails on exactly that figure. Kernels: a Google Benchmark JSON written from the baseline's own values holds; the
same with the decode's copy fraction at B = 256 down 15% fails; a kernels file lacking a required figure fails as
MISSING. Unreadable input exits 2.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
compare = os.path.join(root, "bench", "compare.py")
baseline = os.path.join(root, "bench", "baselines", "h200.json")
model = os.path.join(root, "bench", "baselines", "h200_model_bench_dn13.json")
failures = []


h100 = os.path.join(root, "bench", "baselines", "h100.json")
h100_model = os.path.join(root, "bench", "baselines", "h100_model_bench_dn13.json")


def run(*files, base=baseline):
    r = subprocess.run([sys.executable, compare, base, *files], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(cond, what, out):
    if not cond:
        failures.append(what + "\n" + out)


def dump(obj, d, name):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        json.dump(obj, f)
    return p


with tempfile.TemporaryDirectory() as d:
    rc, out = run(model)
    expect(rc == 0 and "SLOWER" not in out, "the measured model bench must hold", out)

    slow = json.load(open(model))
    for f in slow["models"][1]["decode"]:
        if f["batch"] == 64:
            f["ms_per_step"] *= 1.2
    for s in slow["speedup"][0]["decode"]:
        if s["batch"] == 64:
            s["speedup"] /= 1.2
    rc, out = run(dump(slow, d, "slow_model.json"))
    bad = [l for l in out.splitlines() if l.endswith("SLOWER")]
    expect(rc == 1 and len(bad) == 1 and "decode speedup B=64" in bad[0], "a 20% slower 50% decode at B=64 must fail", out)

    base = json.load(open(baseline))
    benches = []
    for fig in base["figures"]:
        if fig["bench"] == "kernels" and not fig.get("optional"):
            benches.append({"name": fig["match"] + "/manual_time", fig["counter"]: fig["value"]})
    good = {"context": {}, "benchmarks": benches}
    rc, out = run(dump(good, d, "kernels.json"), model)
    expect(rc == 0, "kernel figures equal to the baseline must hold", out)

    worse = copy.deepcopy(good)
    for b in worse["benchmarks"]:
        if b["name"].startswith("decode/B:256/dk:128/vfirst:1/") and "of_copy" in b:
            b["of_copy"] *= 0.85
    rc, out = run(dump(worse, d, "kernels_slow.json"))
    expect(rc == 1 and "B=256 dk=128: fraction of copy bandwidth" in "".join(l for l in out.splitlines() if "SLOWER" in l),
           "a 15% lower copy fraction must fail", out)

    short = copy.deepcopy(good)
    short["benchmarks"] = short["benchmarks"][1:]
    rc, out = run(dump(short, d, "kernels_short.json"))
    expect(rc == 1 and "MISSING" in out, "a missing kernel figure must fail", out)

    rc, out = run(os.path.join(d, "absent.json"))
    expect(rc == 2, "an unreadable result file exits 2", out)

    rc, out = run(h100_model, base=h100)
    expect(rc == 0 and "SLOWER" not in out, "the measured H100 model bench must hold against h100.json", out)

    slow8 = json.load(open(h100_model))
    for f in slow8["models"][0]["decode"]:
        if f["batch"] == 8:
            f["ms_per_step"] *= 1.2
            f["x_floor"] *= 1.2
    rc, out = run(dump(slow8, d, "slow8_h100.json"), base=h100)
    bad = [l for l in out.splitlines() if l.endswith("SLOWER")]
    expect(rc == 1 and len(bad) == 1 and "full: decode step / byte floor B=8" in bad[0],
           "a 20% slower full-model step at B=8 must fail against h100.json", out)

for f in failures:
    print("FAILED:", f)
print(f"Bench_CompareCatchesASlowdown: {8 - len(failures)} of 8 cases as expected")
sys.exit(1 if failures else 0)
