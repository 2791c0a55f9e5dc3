"""Sums a Kineto Chrome trace (statecut-profile-step) by GPU kernel: time, launches, share, and the GPU's busy span,
so one look says whether a step is bound by a few large kernels or by the number of launches.

usage: python3 bench/profile_summary.py TRACE.json [TOP=25]
"""
import collections
import json
import sys


def main():
    trace = json.load(open(sys.argv[1]))
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    ev = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not ev:
        print("no GPU kernels in the trace")
        return 1
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    for e in ev:
        name = e["name"] if e["cat"] == "kernel" else e["cat"]
        name = name if len(name) <= 110 else name[:107] + "..."
        tot[name] += e["dur"]
        cnt[name] += 1
    busy = sum(e["dur"] for e in ev)
    span = max(e["ts"] + e["dur"] for e in ev) - min(e["ts"] for e in ev)
    print(f"{len(ev)} GPU activities, busy {busy / 1e3:.3f} ms of a {span / 1e3:.3f} ms span "
          f"({100 * busy / span:.1f}% busy), mean {busy / len(ev):.2f} us per activity")
    for name, us in sorted(tot.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{us / 1e3:9.3f} ms {100 * us / busy:5.1f}% {cnt[name]:6d}x {us / cnt[name]:8.2f} us  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
