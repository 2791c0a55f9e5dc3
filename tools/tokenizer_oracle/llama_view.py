"""Writes the tokenizer.json that transformers 5's LlamaTokenizer builds from a folder (its json's vocab, merges and
added tokens; no normalizer; Metaspace "▁" with the prepend scheme of tokenizer_config.json's add_prefix_space and
legacy, split false; decoder Replace, ByteFallback, Fuse, Strip), so that HF tokenizers alone (oracle_node.js) gives
transformers' ids on a machine without transformers. Read from transformers' models/llama/tokenization_llama.py and
tokenization_utils_tokenizers.py (5.x); checked against transformers 5.17 itself by oracle.py on the device.

  python3 tools/tokenizer_oracle/llama_view.py SRC_DIR OUT_DIR
"""
import json, os, sys
src, out = sys.argv[1], sys.argv[2]
tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
cfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
aps = cfg.get("add_prefix_space")
aps = True if aps is None else aps
scheme = ("always" if cfg.get("legacy") is True else "first") if aps else "never"
m = tok["model"]
tok["model"] = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                "vocab": m["vocab"], "merges": m["merges"]}
tok["normalizer"] = None
tok["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": False}
dec = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]
if aps:
  dec.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
tok["decoder"] = {"type": "Sequence", "decoders": dec}
os.makedirs(out, exist_ok=True)
json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
print(out, "prepend_scheme", scheme, "strip", aps)
