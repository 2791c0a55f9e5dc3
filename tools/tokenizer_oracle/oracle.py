"""HF tokenizers' ids (and where transformers' AutoTokenizer gives others, those) for every text of TEXTS.jsonl, for
every folder under ROOT holding a tokenizer.json: the golden files statecut's tokenizers are held to. Run where
`tokenizers` and `transformers` are installed (the device machine); nothing is downloaded.

  python3 tools/tokenizer_oracle/oracle.py ROOT TEXTS.jsonl OUT

Writes OUT/<name>.jsonl ({"text", "ids", "decoded"}: encode(text, add_special_tokens=False).ids and
decode(ids, skip_special_tokens=False)) over the texts plus each tokenizer's added tokens set in context,
OUT/<name>.tf.jsonl (the same from transformers' AutoTokenizer on the folder: its ids and its decode) and
OUT/oracle.log (where the two disagree).
"""
import json, os, sys
root, texts_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
log = open(os.path.join(out, "oracle.log"), "w")
def say(*a):
  print(*a); print(*a, file=log); log.flush()
import tokenizers
say("tokenizers", tokenizers.__version__)
try:
  import transformers; say("transformers", transformers.__version__)
except Exception as e:
  transformers = None; say("no transformers", e)
texts = [json.loads(l)["text"] for l in open(texts_path, encoding="utf-8")]
for name in sorted(os.listdir(root)):
  d = os.path.join(root, name)
  if not os.path.isfile(os.path.join(d, "tokenizer.json")): continue
  try:
    tok = tokenizers.Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
  except Exception as e:
    say(name, "tokenizers refuses:", repr(e)[:300]); continue
  specials = [t.content for t in tok.get_added_tokens_decoder().values()][:40]
  extra = []
  for s in specials:
    extra += [s, "hi" + s + "there", " " + s + " x", "a\n" + s + "\nb " + s + s]
  mine = texts + extra
  with open(os.path.join(out, name + ".jsonl"), "w", encoding="utf-8") as f:
    for t in mine:
      ids = tok.encode(t, add_special_tokens=False).ids
      f.write(json.dumps({"text": t, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)}, ensure_ascii=False) + "\n")
  say(name, "tokenizers:", len(mine), "texts")
  if transformers is None: continue
  try:
    at = transformers.AutoTokenizer.from_pretrained(d, local_files_only=True)
    diff = ddiff = 0
    with open(os.path.join(out, name + ".tf.jsonl"), "w", encoding="utf-8") as f:
      for t in mine:
        a = at(t, add_special_tokens=False)["input_ids"]
        b = tok.encode(t, add_special_tokens=False).ids
        da = at.decode(a, skip_special_tokens=False)
        diff += a != b
        ddiff += a == b and da != tok.decode(b, skip_special_tokens=False)
        f.write(json.dumps({"text": t, "ids": a, "decoded": da}, ensure_ascii=False) + "\n")
    say(name, "transformers", type(at).__name__, "ids differ from tokenizers' on", diff, "texts, decodes on", ddiff)
  except Exception as e:
    say(name, "transformers failed:", repr(e)[:300])
