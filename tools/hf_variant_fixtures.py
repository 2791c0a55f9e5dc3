#!/usr/bin/env python3
"""Small HF transformers checkpoints with configs unlike tests/data/fixtures' (other group counts, odd head and state
dims, biases, tied embeddings, a dt clamp, GQA ratios, other layer orders), each with transformers' own fp32 logits:
the oracle of tests/torch/golden_hf_variants.cpp. Run where transformers is installed (the H200 of bench/README.md):

    python3 tools/hf_variant_fixtures.py OUT_DIR

writes OUT_DIR/<name>/{config.json, model.safetensors, golden.safetensors, NOTE.txt}; golden.safetensors holds
run0.input_ids [2, 45] and run1.input_ids [1, 130] (three chunks of 64) with their logits (fp32), the fixtures' keys.
Weights are transformers' random init (seed 0 per variant) with every norm weight, bias, A_log, dt_bias and D moved
by noise, so that a tensor mapped to the wrong place (or dropped) shows in the logits. A variant transformers refuses is reported
and skipped.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

VOCAB = 128


def mamba2(name, **kw):
    base = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, expand=2, conv_kernel=4, chunk_size=64,
                initializer_range=0.1, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    base.update(kw)
    return name, "mamba2", base


def qwen(name, model_type, **kw):
    base = dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=80, num_hidden_layers=4, head_dim=16,
                num_attention_heads=2, num_key_value_heads=1, linear_conv_kernel_dim=4, linear_key_head_dim=16,
                linear_num_key_heads=2, linear_num_value_heads=4, linear_value_head_dim=12, rms_norm_eps=1e-6,
                initializer_range=0.1,
                layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])
    base.update(kw)
    if model_type == "qwen3_next":  # dense MLPs in every layer (statecut refuses sparse-MoE layers)
        base.update(num_experts=0, mlp_only_layers=list(range(base["num_hidden_layers"])), decoder_sparse_step=1)
    prf = base.pop("partial_rotary_factor", 0.25)
    theta = base.pop("rope_theta", 10000.0)
    base["partial_rotary_factor"] = prf
    base["rope_parameters"] = {"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": prf}
    return name, model_type, base


VARIANTS = [
    # two groups of four heads each (B and C per group), d_state 16, head dim 8
    mamba2("hf_mamba2_groups2", num_heads=8, head_dim=8, n_groups=2, state_size=16),
    # biases on the projections, none on the conv, tied embeddings, the residual stream in the activation dtype
    mamba2("hf_mamba2_bias_tied", num_heads=4, head_dim=16, n_groups=1, state_size=12, use_bias=True,
           use_conv_bias=False, tie_word_embeddings=True, residual_in_fp32=False),
    # dt clamped to [0.05, 0.5], a conv of width 3, d_state 89 (an odd key dim), two heads of 32
    mamba2("hf_mamba2_clamp_dk89", num_heads=2, head_dim=32, n_groups=1, state_size=89, conv_kernel=3,
           time_step_limit=(0.05, 0.5)),
    # head dim 6 (not a multiple of 4: the CUDA kernels decline it), four groups of two heads, d_state 20
    mamba2("hf_mamba2_hd6_groups4", hidden_size=24, num_heads=8, head_dim=6, n_groups=4, state_size=20),
    # one key head for three value heads, key dim 24, value dim 20; full attention first and last, GQA 4:2, head dim
    # 12 with half of it rotated; tied embeddings; a conv of width 3
    qwen("hf_qwen3_5_gva3_fullfirst", "qwen3_5_text", linear_num_key_heads=1, linear_num_value_heads=3,
         linear_key_head_dim=24, linear_value_head_dim=20, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
         partial_rotary_factor=0.5, tie_word_embeddings=True, linear_conv_kernel_dim=3,
         layer_types=["full_attention", "linear_attention", "linear_attention", "full_attention"]),
    # key dim 89, value dim 36, two key and two value heads; five layers, softmax in the middle with biases on its
    # projections; rope theta 5e5, norm eps 1e-5
    qwen("hf_qwen3_5_dk89", "qwen3_5_text", num_hidden_layers=5, linear_num_key_heads=2, linear_num_value_heads=2,
         linear_key_head_dim=89, linear_value_head_dim=36, attention_bias=True, rope_theta=5e5, rms_norm_eps=1e-5,
         layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention",
                      "linear_attention"]),
    # Qwen3-Next's packed projections with one key head for three value heads and GQA 4:1
    qwen("hf_qwen3_next_gva3", "qwen3_next", linear_num_key_heads=1, linear_num_value_heads=3,
         linear_key_head_dim=24, linear_value_head_dim=20, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
         layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"]),
]


def perturb(model, gen):
    with torch.no_grad():
        for n, p in model.named_parameters():
            leaf = n.rsplit(".", 1)[-1]
            # transformers initialises biases to 0 and norms to 1: noise on them, or a dropped bias goes unseen
            if "norm" in n or leaf in ("A_log", "dt_bias", "D", "bias"):
                p.add_(0.2 * torch.randn(p.shape, generator=gen))


def main(out):
    os.makedirs(out, exist_ok=True)
    ok = 0
    for name, model_type, kw in VARIANTS:
        try:
            torch.manual_seed(0)
            cfg = AutoConfig.for_model(model_type, **kw)
            model = AutoModelForCausalLM.from_config(cfg).float().eval()
            gen = torch.Generator().manual_seed(1)
            perturb(model, gen)
            d = os.path.join(out, name)
            model.save_pretrained(d, safe_serialization=True)
            golden = {}
            for run, (b, t) in enumerate([(2, 45), (1, 130)]):
                ids = torch.randint(0, VOCAB, (b, t), generator=gen)
                with torch.no_grad():
                    logits = model(input_ids=ids).logits.float()
                golden[f"run{run}.input_ids"] = ids.contiguous()
                golden[f"run{run}.logits"] = logits.contiguous()
            save_file(golden, os.path.join(d, "golden.safetensors"))
            params = sum(p.numel() for p in model.parameters())
            with open(os.path.join(d, "NOTE.txt"), "w") as f:
                f.write(f"{name}: transformers {model.__class__.__name__}, {params} parameters, random seed 0 with "
                        f"perturbed norms; golden = transformers' fp32 logits (tools/hf_variant_fixtures.py)\n")
            for extra in ("generation_config.json",):
                if os.path.exists(os.path.join(d, extra)):
                    os.remove(os.path.join(d, extra))
            print(json.dumps({"variant": name, "params": params, "ok": True}))
            ok += 1
        except Exception as e:  # a config transformers refuses: report, go on
            print(json.dumps({"variant": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:300]}))
    return 0 if ok == len(VARIANTS) else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: hf_variant_fixtures.py OUT_DIR")
    sys.exit(main(sys.argv[1]))
