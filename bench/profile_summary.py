"""Sums a Kineto Chrome trace (statecut-profile-step) by GPU kernel: time, launches, share, and the GPU's busy span,
so one look says whether a step is bound by a few large kernels or by the number of launches.

usage: python3 bench/profile_summary.py TRACE.json [TOP=25] [--within RANGE]
  --within RANGE  only the kernels launched inside the CPU ranges named RANGE (statecut-profile-step records
                  "statecut_prefill" and "statecut_decode_step"), linked to their launch by Kineto's correlation id;
                  counts are then also given per range (launches per decode step).
  --by-op         also sums the GPU time by the CPU operator that launched it: the innermost aten:: operator and,
                  in a backward pass, the autograd node around it ("MmBackward0 > aten::mm"), so one look says which
                  operations of a training step cost what.
  --shapes        with --by-op: a second table keyed by the innermost operator's input shapes too (traces recorded
                  with shapes, as statecut-profile-step records them), so that two copies of different tensors are
                  told apart.
"""
import collections
import json
import sys


def main():
    args = sys.argv[1:]
    within = None
    by_op = "--by-op" in args
    if by_op:
        args.remove("--by-op")
    shapes = "--shapes" in args
    if shapes:
        args.remove("--shapes")
    if "--within" in args:
        i = args.index("--within")
        within = args[i + 1]
        del args[i:i + 2]
    trace = json.load(open(args[0]))
    top = int(args[1]) if len(args) > 1 else 25
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    ev = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ranges = 1
    if within:
        spans = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == within and e.get("cat") != "kernel"]
        if not spans:
            print(f"no CPU range named {within} in the trace")
            return 1
        ranges = len(spans)
        inside = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and
                  "correlation" in e.get("args", {}) and any(a <= e["ts"] <= b for a, b in spans)}
        ev = [e for e in ev if e.get("args", {}).get("correlation") in inside]
        print(f"{within}: {ranges} ranges, {len(ev) / ranges:.1f} GPU activities per range")
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
        print(f"{us / 1e3:9.3f} ms {100 * us / busy:5.1f}% {cnt[name]:6d}x "
              f"({cnt[name] / ranges:5.1f}/range) {us / cnt[name]:8.2f} us  {name}")
    if by_op:
        print_by_op(events, ev, ranges, busy, top)
        if shapes:
            print_by_op(events, ev, ranges, busy, top, shapes=True)
    return 0


def launch_owners(events, shapes=False):
    """Correlation id of each launch -> "node > innermost op" (with its input shapes when asked), from the CPU
    operator spans enclosing the launch."""
    ops = collections.defaultdict(list)
    launches = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            name = e["name"]
            dims = e.get("args", {}).get("Input Dims")
            if shapes and dims and name.startswith("aten::"):
                name += " " + json.dumps([d for d in dims if d]).replace(" ", "")
            ops[e.get("tid")].append((e["ts"], e["ts"] + e["dur"], name))
        elif e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e.get("tid")].append((e["ts"], e["args"]["correlation"]))
    owner = {}
    for tid, ls in launches.items():
        spans = sorted(ops.get(tid, []), key=lambda s: (s[0], -s[1]))
        stack, i = [], 0
        for ts, corr in sorted(ls):
            while i < len(spans) and spans[i][0] <= ts:
                stack.append(spans[i])
                i += 1
            stack = [s for s in stack if s[1] >= ts]  # spans still open at this launch, outermost first
            node = next((s[2].split(": ", 1)[-1] for s in stack if s[2].startswith("autograd::engine")), "forward")
            inner = next((s[2] for s in reversed(stack) if s[2].startswith("aten::")), stack[-1][2] if stack else "?")
            owner[corr] = f"{node} > {inner}"
    return owner


def print_by_op(events, ev, ranges, busy, top, shapes=False):
    owner = launch_owners(events, shapes)
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    for e in ev:
        name = owner.get(e.get("args", {}).get("correlation"), "?")
        tot[name] += e["dur"]
        cnt[name] += 1
    print("--- by operator (autograd node > innermost aten op" + (", its input shapes)" if shapes else ")"))
    for name, us in sorted(tot.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{us / 1e3:9.3f} ms {100 * us / busy:5.1f}% {cnt[name]:6d}x ({cnt[name] / ranges:7.1f}/range)  {name}")


if __name__ == "__main__":
    sys.exit(main())
