#!/usr/bin/env python3
"""Small fla checkpoints with configs unlike tests/data/fixtures' (the layer options fla's DeltaNet and Gated
DeltaNet take: output gate, qk activations and the sum norm, no beta, no short conv, negative eigenvalues, grouped
values, other head dims), each with fla's own fp32 logits: the oracle of tests/torch/golden_variants.cpp beside
tools/hf_variant_fixtures.py's. Run on a CUDA machine with fla importable (PYTHONPATH holding its fla/ package):

    python3 tools/fla_variant_fixtures.py OUT_DIR

The models run in fp32 with attn_mode 'fused_recurrent' (fla's chunk delta-rule kernel refuses fp32, and its TF32
dots would blur the golden) and TF32 off, so the golden is fp32 throughout. Files and keys as hf_variant_fixtures.py:
OUT_DIR/<name>/{config.json, model.safetensors, golden.safetensors, NOTE.txt}, run0 [2, 45] and run1 [1, 130].
"""
import json
import os
import sys
import traceback

import torch
from safetensors.torch import save_file

from fla.models import DeltaNetConfig, DeltaNetForCausalLM, GatedDeltaNetConfig, GatedDeltaNetForCausalLM

VOCAB = 128
COMMON = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, hidden_ratio=2, attn_mode="fused_recurrent",
              fuse_norm=False, fuse_swiglu=False, fuse_cross_entropy=False, initializer_range=0.1)

VARIANTS = [
    # output gate (FusedRMSNormGated), elu+1 features with the sum norm, a conv bias, 4 heads of dk 16 and dv 8
    # (fla at bc3b101 cannot build tied embeddings under transformers 5.17: its _tied_weights_keys is a list)
    ("fla_delta_net_gate_elu_sum", DeltaNetConfig, DeltaNetForCausalLM,
     dict(num_heads=4, expand_k=1.0, expand_v=0.5, use_gate=True, qk_activation="elu", qk_norm="sum", conv_bias=True)),
    # no beta (beta = 1), no short conv, identity features (L2 norm only), three layers, norm eps 1e-5
    ("fla_delta_net_nobeta_noconv", DeltaNetConfig, DeltaNetForCausalLM,
     dict(num_heads=2, use_beta=False, use_short_conv=False, qk_activation="identity", num_hidden_layers=3,
          norm_eps=1e-5)),
    # negative eigenvalues (beta in (0, 2)), relu features, dk 24 (expand_k 0.75), a conv of width 3
    ("fla_delta_net_negeig_relu_dk24", DeltaNetConfig, DeltaNetForCausalLM,
     dict(num_heads=2, expand_k=0.75, qk_activation="relu", allow_neg_eigval=True, conv_size=3)),
    # three value heads per key head, head dim 24, dv 36, no output gate, negative eigenvalues
    ("fla_gated_deltanet_gva3_nogate", GatedDeltaNetConfig, GatedDeltaNetForCausalLM,
     dict(num_heads=2, num_v_heads=6, head_dim=24, expand_v=1.5, use_gate=False, allow_neg_eigval=True)),
    # one head of dk 89 and dv 89 (not a multiple of 4: the CUDA kernels decline it), no short conv, intermediate 96
    ("fla_gated_deltanet_dk89_noconv", GatedDeltaNetConfig, GatedDeltaNetForCausalLM,
     dict(num_heads=1, head_dim=89, expand_v=1.0, use_short_conv=False, intermediate_size=96)),
]


def perturb(model, gen):
    with torch.no_grad():
        for n, p in model.named_parameters():
            leaf = n.rsplit(".", 1)[-1]
            if "norm" in n or leaf in ("A_log", "dt_bias", "D", "bias"):
                p.add_(0.2 * torch.randn(p.shape, generator=gen).to(p.device))


def main(out):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(out, exist_ok=True)
    ok = 0
    for name, cfg_cls, model_cls, kw in VARIANTS:
        try:
            torch.manual_seed(0)
            args = dict(COMMON)
            args.update(kw)
            model = model_cls(cfg_cls(**args)).float().cuda().eval()
            gen = torch.Generator().manual_seed(1)
            perturb(model, gen)
            d = os.path.join(out, name)
            # fla's models name their tied weights as a list, which transformers 5's save_pretrained no longer takes:
            # the config and the state dict are written directly (the tied lm_head left out, as transformers does)
            os.makedirs(d, exist_ok=True)
            model.config.to_json_file(os.path.join(d, "config.json"))
            sd = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
            if model.config.tie_word_embeddings:
                sd.pop("lm_head.weight", None)
            save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
            golden = {}
            for run, (b, t) in enumerate([(2, 45), (1, 130)]):
                ids = torch.randint(0, VOCAB, (b, t), generator=gen)
                with torch.no_grad():
                    logits = model(input_ids=ids.cuda()).logits.float().cpu()
                golden[f"run{run}.input_ids"] = ids.contiguous()
                golden[f"run{run}.logits"] = logits.contiguous()
            save_file(golden, os.path.join(d, "golden.safetensors"))
            params = sum(p.numel() for p in model.parameters())
            with open(os.path.join(d, "NOTE.txt"), "w") as f:
                f.write(f"{name}: fla {model_cls.__name__}, {params} parameters, random seed 0 with perturbed norms "
                        f"and biases; golden = fla's fp32 logits, fused_recurrent (tools/fla_variant_fixtures.py)\n")
            if os.path.exists(os.path.join(d, "generation_config.json")):
                os.remove(os.path.join(d, "generation_config.json"))
            print(json.dumps({"variant": name, "params": params, "ok": True}))
            ok += 1
        except Exception as e:  # a config fla refuses: report, go on
            traceback.print_exc()
            print(json.dumps({"variant": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:300]}))
    return 0 if ok == len(VARIANTS) else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fla_variant_fixtures.py OUT_DIR")
    sys.exit(main(sys.argv[1]))
