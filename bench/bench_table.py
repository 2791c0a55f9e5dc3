"""`statecut bench --json` as summary lines: per checkpoint its size, state and copy bandwidth, each decode batch
against its byte floor, each prefill, then the speedup rows. Used by the device scripts (bench/decode_h200*.sh).

usage: python3 bench/bench_table.py BENCH.json
"""
import json, sys
j = json.load(open(sys.argv[1]))
for m in j["models"]:
    print(f'{m["checkpoint"]}: {m["parameters"]/1e6:.0f}M params, weights/step {m["weight_bytes_per_step"]/1e9:.2f} GB, '
          f'state {m["state_bytes_per_seq"]/2**20:.1f} MiB/seq, copy bw {m["bandwidth_bytes_per_s"]/1e12:.2f} TB/s, '
          f'max batch ~{m["max_batch_estimate"]}')
    for f in m["decode"]:
        print(f'  decode B={f["batch"]:4d}: ' + (f'{f["ms_per_step"]:8.3f} ms/step {f["tokens_per_s"]:10.0f} tok/s '
              f'floor {f["floor_ms"]:.3f} ms = {f["x_floor"]:.2f}x graph={f["cuda_graph"]} check={f["check_rel_err"]:.1e}'
              if "ms_per_step" in f else f["error"]))
    for f in m["prefill"]:
        print(f'  prefill {f["batch"]}x{f["tokens"]}: ' + (f'{f["tokens_per_s"]:10.0f} tok/s {f["seconds"]*1e3:.2f} ms peak {f["peak_bytes"]/2**30:.2f} GiB'
              if "tokens_per_s" in f else f["error"]))
for s in j.get("speedup", []):
    print(f'speedup {s.get("checkpoint", "")}: decode ' + " ".join(f'B={d["batch"]}:{d["speedup"]:.2f}x' for d in s["decode"]) +
          "; prefill " + " ".join(f'{p["batch"]}x{p["tokens"]}:{p["speedup"]:.2f}x' for p in s["prefill"]))
