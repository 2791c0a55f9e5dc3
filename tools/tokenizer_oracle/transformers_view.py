"""Writes the tokenizer.json that transformers 5's AutoTokenizer amounts to for a checkpoint folder, so that HF
tokenizers alone (oracle_node.js) gives transformers' ids on a machine without transformers. The class: tokenizer_config
.json's tokenizer_class against config.json's model_type (models/auto/tokenization_auto.py, 5.x after PR #44127); a
class with its own __init__ keeps only the json's vocab, merges and added tokens and builds the rest
(models/llama/tokenization_llama.py, gpt2, gpt_neox, qwen2, qwen3_5, ...: the table in
optimized/text/transformers_class.h, written here again from transformers' source, not from statecut's code). Checked
against transformers 5.17 itself by oracle.py on the device. Prints the class; writes nothing new for the json as it is.

  python3 tools/tokenizer_oracle/transformers_view.py SRC_DIR OUT_DIR
"""
import json, os, sys
src, out = sys.argv[1], sys.argv[2]
def load(name):
  p = os.path.join(src, name)
  return json.load(open(p, encoding="utf-8")) if os.path.exists(p) else {}
tok, cfg, model_cfg = load("tokenizer.json"), load("tokenizer_config.json"), load("config.json")
REG = {}
for t in "gpt_neox mamba mamba2 falcon_mamba mpt olmo olmoe rwkv xlstm".split(): REG[t] = "GPTNeoXTokenizer"
for t in "qwen2 qwen2_moe qwen3 qwen3_moe qwen3_next qwen3_vl qwen3_vl_moe".split(): REG[t] = "Qwen2Tokenizer"
for t in "qwen3_5 qwen3_5_moe".split(): REG[t] = "Qwen3_5Tokenizer"
for t in "gpt2 gpt_neo gptj opt phi starcoder2 dbrx codegen".split(): REG[t] = "GPT2Tokenizer"
for t in ("mistral mixtral mistral3 ministral ministral3 pixtral voxtral granite granitemoe granitemoehybrid "
          "granitemoeshared olmo2 olmo3 olmo_hybrid flex_olmo gpt_bigcode stablelm glm glm4 glm4_moe persimmon phi3 "
          "phi3_v phimoe deepseek_v2 deepseek_v3 jamba internlm2 nemotron llava llava_next minicpm3 ernie4_5 "
          "ernie4_5_moe").split(): REG[t] = "TokenizersBackend"
REG["code_llama"] = "CodeLlamaTokenizer"
hub = cfg.get("tokenizer_class") or model_cfg.get("tokenizer_class") or ""
if hub.endswith("Fast") and hub != "Fast": hub = hub[:-4]
if hub == "PreTrainedTokenizer": hub = "TokenizersBackend"
mt = model_cfg.get("model_type") or ""
reg = REG.get(mt)
if hub and reg and reg != hub:
  cls = reg if (reg == "TokenizersBackend" or mt == "qwen2") else hub
else:
  cls = hub or reg or "TokenizersBackend"
M = "\u2581"
m = tok["model"]
bpe = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
       "fuse_unk": True, "byte_fallback": True, "ignore_merges": False, "vocab": m["vocab"], "merges": m["merges"]}
aps = cfg.get("add_prefix_space")
if cls == "LlamaTokenizer":
  aps = True if aps is None else aps
  scheme = ("always" if cfg.get("legacy") is True else "first") if aps else "never"
  tok["normalizer"] = None
  tok["pre_tokenizer"] = {"type": "Metaspace", "replacement": M, "prepend_scheme": scheme, "split": False}
  dec = [{"type": "Replace", "pattern": {"String": M}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]
  if aps: dec.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
  tok["decoder"] = {"type": "Sequence", "decoders": dec}
elif cls in ("GPT2Tokenizer", "RobertaTokenizer", "CodeGenTokenizer", "WhisperTokenizer", "GPTNeoXTokenizer",
             "Qwen2Tokenizer", "Qwen3_5Tokenizer"):
  aps = bool(aps)
  bpe.update(fuse_unk=False, byte_fallback=False)
  tok["normalizer"] = {"type": "NFC"} if cls in ("GPTNeoXTokenizer", "Qwen2Tokenizer", "Qwen3_5Tokenizer") else None
  bl = lambda rx: {"type": "ByteLevel", "add_prefix_space": aps, "trim_offsets": True, "use_regex": rx}
  if cls.startswith("Qwen"):
    letters = r"\p{L}" if cls == "Qwen2Tokenizer" else r"[\p{L}\p{M}]"
    other = r"\p{L}\p{N}" if cls == "Qwen2Tokenizer" else r"\p{L}\p{M}\p{N}"
    rx = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?" + letters + r"+|\p{N}| ?[^\s" + other +
          r"]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": rx}, "behavior": "Isolated", "invert": False}, bl(False)]}
  else:
    tok["pre_tokenizer"] = bl(True)
  tok["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
else:
  bpe = None  # the json as it is
# tokenizer_config.json's added_tokens_decoder (tokenization_utils_base.py _from_pretrained, TokenizersBackend.__init__):
# its entries in id order, after the json's when the json is read as it is (same content: new flags, same id), alone
# when the class rebuilt the tokenizer.
atd = cfg.get("added_tokens_decoder") or {}
if atd:
  mine = []
  for k in sorted(atd, key=int):
    v = atd[k]; sp = bool(v.get("special", False))
    mine.append({"id": int(k), "content": v["content"], "single_word": bool(v.get("single_word", False)),
                 "lstrip": bool(v.get("lstrip", False)), "rstrip": bool(v.get("rstrip", False)),
                 "normalized": v.get("normalized", not sp) if v.get("normalized") is not None else not sp,
                 "special": sp})
  tok["added_tokens"] = (tok.get("added_tokens", []) if bpe is None else []) + mine
# then every named special token not yet among the added tokens, as AddedToken(content, special=True)
named = [cfg.get(k) for k in "bos_token eos_token unk_token sep_token pad_token cls_token mask_token".split()]
for k in ("additional_special_tokens", "extra_special_tokens"):
  v = cfg.get(k) or []
  named += list(v.values()) if isinstance(v, dict) else list(v)
have = {a["content"] for a in tok.get("added_tokens", [])}
extra = []
for v in named:
  c = v if isinstance(v, str) else (v or {}).get("content") if isinstance(v, dict) else None
  if not c or c in have: continue
  have.add(c)
  d = v if isinstance(v, dict) else {}
  extra.append({"id": 0, "content": c, "single_word": bool(d.get("single_word", False)), "lstrip": bool(d.get("lstrip", False)),
                "rstrip": bool(d.get("rstrip", False)), "normalized": False, "special": True})
if extra:
  tok["added_tokens"] = tok.get("added_tokens", []) + extra
if not atd and not extra and bpe is None:
  print(src, cls, "(the json as it is)")
  sys.exit(0)
if bpe is not None:
  tok["model"] = bpe
os.makedirs(out, exist_ok=True)
json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
print(src, cls, "->", out)
