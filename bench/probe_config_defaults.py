"""Prints the config defaults and weight-tying rules of the installed transformers that statecut's loaders mirror
(issue: config-key audit, 2026-12-04): Mamba2Config, Qwen3_5TextConfig / Qwen3_5Config, Qwen3NextConfig, and which
tensor a model uses when the config ties the embeddings but the checkpoint stores a different lm_head.weight.
Run on the device machine: python3 bench/probe_config_defaults.py"""
import json, os, tempfile
import torch, transformers
from safetensors.torch import load_file, save_file

print("transformers", transformers.__version__)


def show(name, cfg, keys):
    d = {}
    for k in keys:
        v = getattr(cfg, k, "<absent>")
        d[k] = v if isinstance(v, (int, float, str, bool, type(None), list, dict)) else repr(v)
    print(name, json.dumps(d, default=str))


m = transformers.Mamba2Config()
show("Mamba2Config", m, ["n_groups", "num_heads", "head_dim", "expand", "hidden_size", "state_size", "tie_word_embeddings",
                         "norm_before_gate", "rms_norm", "time_step_limit", "layer_norm_epsilon", "use_bias", "use_conv_bias"])
qk = ["head_dim", "num_key_value_heads", "num_attention_heads", "hidden_size", "partial_rotary_factor", "rope_parameters",
      "tie_word_embeddings", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
      "linear_value_head_dim", "linear_conv_kernel_dim", "rms_norm_eps", "attention_bias", "layer_types",
      "num_hidden_layers", "attn_output_gate", "num_experts", "decoder_sparse_step", "mlp_only_layers"]
for cls in ["Qwen3_5TextConfig", "Qwen3NextConfig"]:
    try:
        show(cls, getattr(transformers, cls)(), qk)
    except Exception as e:
        print(cls, "ERROR", repr(e)[:300])
try:
    c = transformers.Qwen3_5Config()
    print("Qwen3_5Config top tie", getattr(c, "tie_word_embeddings", "<absent>"), "text tie",
          getattr(c.text_config, "tie_word_embeddings", "<absent>"))
except Exception as e:
    print("Qwen3_5Config ERROR", repr(e)[:300])

# Tied config, stored lm_head.weight different from the embeddings: which one does the loaded model use?
for cls_name, kw in [("Mamba2", dict(num_heads=4, head_dim=16, hidden_size=32, state_size=16, n_groups=1,
                                     num_hidden_layers=1, vocab_size=64, expand=2)),
                     ("Qwen3_5Text", dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                          num_key_value_heads=1, head_dim=16, linear_num_key_heads=2,
                                          linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8,
                                          vocab_size=64, layer_types=["linear_attention"]))]:
    try:
        cfg = getattr(transformers, cls_name + "Config")(tie_word_embeddings=True, **kw)
        model_cls = getattr(transformers, cls_name.replace("Text", "") + "ForCausalLM")
        model = model_cls(cfg)
        d = tempfile.mkdtemp()
        model.save_pretrained(d)
        f = os.path.join(d, "model.safetensors")
        sd = load_file(f)
        emb = [k for k in sd if k.endswith("embed_tokens.weight") or k.endswith("embeddings.weight")][0]
        sd["lm_head.weight"] = torch.randn_like(sd[emb])
        save_file(sd, f, metadata={"format": "pt"})
        m2 = model_cls.from_pretrained(d)
        head = m2.get_output_embeddings().weight
        print(cls_name, "tied config + different stored lm_head: model uses",
              "embeddings" if torch.equal(head, m2.get_input_embeddings().weight) else
              "stored lm_head" if torch.equal(head, sd["lm_head.weight"]) else "neither")
    except Exception as e:
        print(cls_name, "tie probe ERROR", repr(e)[:400])
