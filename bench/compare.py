#!/usr/bin/env python3
"""Regression gate for the benchmarks (issue 14 item 6): compare measured figures with a baseline file.

    bench/compare.py BASELINE.json RESULT.json [RESULT.json ...]

Figures are ratios that survive a noisy machine: speedup vs dk 128, fraction of the same-run copy bandwidth, the 50%
model's speedup over the full one, and the decode step against its byte floor. Two kinds of result file are read:
  - Google Benchmark JSON of bench_cuda_gated_delta (`--benchmark_out_format=json`): entries named like
    "decode/B:64/dk:64/vfirst:1/manual_time" whose counters (speedup_vs_dk128, of_copy, vs_fla) sit in the entry;
  - `statecut bench --json` with `--compare`: models[i].decode[j].x_floor, speedup[0].decode/prefill[j].speedup.
Each baseline figure says where it lives ("kernels": match + counter; "model": figure + batch [+ model index]),
its value, whether higher or lower is better, and a margin (a fraction). A figure fails when it is worse than the
baseline by more than its margin; a figure absent from every result file is reported as missing, which also fails
unless the figure is marked "optional" (vs_fla exists only when fla's times were given); figures of a kind with no
result file of that kind are skipped (a model-bench run alone is checked on its own figures). Exit 0 when every figure
holds, 1 otherwise, 2 on unreadable input.
"""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"compare.py: {path}: {e}", file=sys.stderr)
        sys.exit(2)


def kernel_value(results, fig):
    for r in results:
        for b in r.get("benchmarks", []):
            name = b.get("name", "")
            if (name == fig["match"] or name.startswith(fig["match"] + "/")) and fig["counter"] in b:
                return float(b[fig["counter"]])
    return None


def model_value(results, fig):
    for r in results:
        if "models" not in r:
            continue
        batch = fig.get("batch")
        if fig["figure"] == "x_floor":
            models = r["models"]
            i = fig.get("model", 0)
            if i < len(models):
                for d in models[i].get("decode", []):
                    if d.get("batch") == batch and "x_floor" in d:
                        return float(d["x_floor"])
        elif fig["figure"] in ("decode_speedup", "prefill_speedup"):
            part = "decode" if fig["figure"] == "decode_speedup" else "prefill"
            for s in r.get("speedup", []):
                for d in s.get(part, []):
                    if d.get("batch") == batch and ("tokens" not in fig or d.get("tokens") == fig["tokens"]):
                        return float(d["speedup"])
    return None


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    base = load(argv[1])
    results = [load(p) for p in argv[2:]]
    given = {"kernels" for r in results if "benchmarks" in r} | {"model" for r in results if "models" in r}
    bad = skipped = 0
    print(f"{'figure':58} {'baseline':>9} {'measured':>9} {'limit':>9}  verdict")
    for fig in base["figures"]:
        got = kernel_value(results, fig) if fig["bench"] == "kernels" else model_value(results, fig)
        lower = fig.get("lower_is_better", False)
        v, m = float(fig["value"]), float(fig["margin"])
        limit = v * (1 + m) if lower else v * (1 - m)
        if got is None:
            if fig["bench"] not in given:
                verdict, missing = f"skip (no {fig['bench']} results given)", False
            else:
                missing = not fig.get("optional")
                verdict = "MISSING" if missing else "skip (optional, absent)"
            bad += 1 if missing else 0
            skipped += 0 if missing else 1
            print(f"{fig['name']:58} {v:9.3f} {'-':>9} {limit:9.3f}  {verdict}")
            continue
        ok = got <= limit if lower else got >= limit
        bad += 0 if ok else 1
        print(f"{fig['name']:58} {v:9.3f} {got:9.3f} {limit:9.3f}  {'ok' if ok else 'SLOWER'}")
    n = len(base["figures"]) - skipped
    print(f"{n - bad} of {n} figures hold against {argv[1]} ({skipped} skipped)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
