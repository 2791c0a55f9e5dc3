"""The peer of `statecut bench` (issue 14.5): the same checkpoints in fla's own model classes, as an fla user runs them
(transformers' from_pretrained, bf16, eager PyTorch around fla's Triton kernels, fla's cache), same batch and lengths;
for transformers' own models (the Qwen3.5 hybrid) the same through transformers, with fla's kernels when importable.

  decode: a prompt of P random tokens per sequence (prefill with use_cache=True), then S steps of one token each
          through model(ids, past_key_values=cache, use_cache=True); ms per step = the median of S CUDA-synchronised
          steps after 3 warm-up steps (greedy ids, as `statecut bench`).
  prefill: model(ids) of B x T tokens without a cache (logits kept, as statecut's prefill figure), median of 5 after
          one warm-up call.
  train:  one forward + backward of B x T tokens (model(ids, labels=ids).loss.backward(), every parameter trainable,
          bf16), median of 3 after one warm-up: the PyTorch + fla figure beside `statecut finetune --device cuda`.

fla is read from an ignored folder (.fla: the public repository's fla/ package, fetched, never committed) and used for
the measurement only. One JSON object per line on stdout, flushed as soon as it is measured (a run cut short keeps what
it timed). Triton compiles fla's kernels on first use (~1 min per new shape on a fresh machine): keep the shape list
short.

usage: PYTHONPATH=.fla python3 bench/fla_model_decode.py CKPT [CKPT...] [--decode 1,64] [--prefill 8x2048]
       [--prompt 512] [--steps 32]
"""
import argparse
import json
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM

try:  # registers fla's configs and models with transformers' Auto classes; transformers' own hybrids (Qwen3.5) run
    import fla  # noqa: F401  without it, on its kernels when it is importable and on PyTorch otherwise
    HAVE_FLA = True
except ImportError:
    HAVE_FLA = False


def sync_ms(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--decode", default="1,64")
    ap.add_argument("--prefill", default="8x2048")
    ap.add_argument("--train", default="")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=32)
    a = ap.parse_args()
    torch.manual_seed(0)
    for ck in a.checkpoints:
        t0 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(ck, dtype=torch.bfloat16).cuda().eval()
        vocab = model.config.vocab_size
        print(json.dumps({"checkpoint": ck, "model": type(model).__name__, "fla": HAVE_FLA, "load_s": round(time.perf_counter() - t0, 1)}),
              flush=True)
        for spec in filter(None, a.train.split(",")):
            B, T = (int(x) for x in spec.split("x"))
            ids = torch.randint(0, vocab, (B, T), device="cuda")

            def step():
                model.zero_grad(set_to_none=True)
                model(input_ids=ids, labels=ids).loss.backward()
            try:
                step()
                ms = statistics.median(sync_ms(step)[0] for _ in range(3))
                rec = {"checkpoint": ck, "train": f"{B}x{T}", "ms": round(ms, 3), "tokens_per_s": round(B * T / ms * 1e3)}
            except Exception as e:  # noqa: BLE001
                rec = {"checkpoint": ck, "train": f"{B}x{T}", "error": str(e).splitlines()[0][:200]}
            model.zero_grad(set_to_none=True)
            print(json.dumps(rec), flush=True)
        with torch.no_grad():
            for spec in filter(None, a.prefill.split(",")):
                B, T = (int(x) for x in spec.split("x"))
                ids = torch.randint(0, vocab, (B, T), device="cuda")
                try:
                    model(input_ids=ids, use_cache=False)
                    times = [sync_ms(lambda: model(input_ids=ids, use_cache=False))[0] for _ in range(5)]
                    ms = statistics.median(times)
                    rec = {"checkpoint": ck, "prefill": f"{B}x{T}", "ms": round(ms, 3),
                           "tokens_per_s": round(B * T / ms * 1e3)}
                except Exception as e:  # noqa: BLE001 (reported, the next shape still runs)
                    rec = {"checkpoint": ck, "prefill": f"{B}x{T}", "error": str(e).splitlines()[0][:200]}
                print(json.dumps(rec), flush=True)
            for B in (int(x) for x in a.decode.split(",") if x):
                try:
                    ids = torch.randint(0, vocab, (B, a.prompt), device="cuda")
                    out = model(input_ids=ids, use_cache=True)
                    cache = out.past_key_values
                    nxt = out.logits[:, -1:].argmax(-1)
                    times = []
                    for s in range(3 + a.steps):
                        ms, out = sync_ms(lambda: model(input_ids=nxt, past_key_values=cache, use_cache=True))
                        cache = out.past_key_values
                        nxt = out.logits[:, -1:].argmax(-1)
                        if s >= 3:
                            times.append(ms)
                    ms = statistics.median(times)
                    rec = {"checkpoint": ck, "decode_batch": B, "ms_per_step": round(ms, 3),
                           "tokens_per_s": round(B / ms * 1e3)}
                except Exception as e:  # noqa: BLE001
                    rec = {"checkpoint": ck, "decode_batch": B, "error": str(e).splitlines()[0][:200]}
                print(json.dumps(rec), flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
