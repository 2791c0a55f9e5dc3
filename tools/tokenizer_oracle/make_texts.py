"""Texts for the tokenizer oracle (oracle.py): hand-made edge cases (whitespace runs, digit groups, contractions,
scripts of every kind, combining marks NFC composes, emoji sequences, controls, code), the Qwen3 fixture's 156 texts,
windows of the shared corpora, and random strings over many Unicode blocks. Seeded.

  python3 tools/tokenizer_oracle/make_texts.py OUT.jsonl [SHARED_DIR (../shared)] [SEED (20261205)]
"""
import json, os, random, sys
out_path = sys.argv[1]
shared = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared")
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 20261205)
out = []
hand = [
  "", " ", "  ", "\n", "\n\n", " \n ", "\t", "a", "A", "Hello, world!", "hello world", " hello", "hello ",
  "Hello World\n\nHow are you?\n", "  two leading", "trailing two  ", "x" * 300, "          ten spaces",
  "a" + " " * 40 + "b", "\n" * 12 + "x", "\r\n\r\n", "a\rb\r\nc\n\rd", "\x0b\x0c\x1c\x1d\x1e\x85 ctrl",
  "1", "12", "123", "1234", "12345", "1234567", "3.14159265358979", "-0.5e-10", "1,000,000.00", "٠١٢٣٤٥٦٧٨٩ ١٢",
  "०१२३ ४५६", "①②③ ¹²³ ½ ¼", "2024-12-05T09:22:56Z", "0x1F600 0b1010 0o777", "v1.2.3-rc.4+build.5",
  "it's I'm you're he'll we've they'd DON'T CAN'T Y'ALL", "'s 'S 'm 'M 'll 'LL 've 'VE 're 'RE 'd 'D 't 'T",
  "don’t it’s ‘quoted’ “double”", "l'homme d'accord aujourd'hui", "rock'n'roll o'clock",
  "café naïve résumé coöperate", "cafe\u0301 nai\u0308ve A\u030a \u1100\u1161\u11a8 e\u0301\u0323",
  "Å Å Å", "ﬁ ﬂ ﬀ ﬃ ﬄ", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３", "ℌℑℜ ℕℤℚ ℵ", "Ω Ω K K", "ǅ ǈ ǋ ǲ",
  "Привет, мир! Как дела?", "Γειά σου Κόσμε", "مرحبا بالعالم، كيف حالك؟", "שָׁלוֹם עוֹלָם", "नमस्ते दुनिया, क्षत्रिय",
  "สวัสดีชาวโลก", "안녕하세요 세계", "你好，世界！今天天气很好。", "日本語のテキストです。カタカナ、ひらがな。",
  "Tiếng Việt có dấu: Người Việt", "ກະວີ ລາວ", "ትግርኛ አማርኛ", "ᚠᛇᚻ᛫ᛒᛦᚦ", "ꦗꦮ ᮞᮥᮔ᮪ᮓ", "𐌰𐌱𐌲 𓀀𓀁",
  "emoji 🙂😀😂🤣 👍🏽 👩‍👩‍👧‍👦 🇩🇪🇯🇵🏳️‍🌈 ❤️ ☺︎", "🩷🫠🪿 🫨", "∑∫∂√∞≈≠≤≥ ∀x∈ℝ: x²≥0", "→ ⇒ ↔ ⟨a|b⟩",
  "\u00a0nbsp\u2003em\u2009thin\u200bzw\u200c\u200d\u2060\ufeffbom", "\u3000ideographic space", "soft\u00adhyphen",
  "\u202eRTL override\u202c \u2066isolate\u2069", "tab\tsep\tvalues\t\t\n", "    indented\n        more\n\tmixed",
  "def foo(x):\n    return x ** 2  # squared\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }",
  "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }", "SELECT * FROM t WHERE a >= 10 AND b <> 'x';",
  "<html><body class=\"x\">&amp; &lt;tag&gt;</body></html>", "{\"key\": [1, 2.5, null, true], \"k2\": \"v\"}",
  "https://example.com/path?q=1&r=two#frag user@example.org", "C:\\Users\\name\\file.txt /usr/local/bin",
  "!!!???...,,,;;;::: ---___=== +++ *** ### @@@ $$$ %%% ^^^ &&& ||| ~~~ ``` '''", "((([[[{{{}}}]]])))",
  "a.b,c;d:e!f?g", "....", "…", "—–-", "¡Hola! ¿Qué tal?", "«guillemets» „Anführungszeichen“",
  "Straße GROSS ẞ", "İstanbul ıi İI", "ΣΊΣΥΦΟΣ σίσυφος ς", "ǰ̌ ΐ ﬓ", "\U0001d400\U0001d41a \U0001d7ce",
  "AbCdEfGhIjKlMnOpQrStUvWxYz", "camelCaseIdentifier snake_case_id SCREAMING_CASE kebab-case",
  "The quick brown fox jumps over the lazy dog. 1234567890",
  "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.",
]
out += hand
for l in open(os.path.join(shared, "fixtures", "tokenizer_qwen3", "golden.jsonl"), encoding="utf-8"):
  out.append(json.loads(l)["text"])
def windows(path, n, maxlen):
  data = open(path, encoding="utf-8", errors="strict").read()
  for _ in range(n):
    L = rng.choice([1, 2, 3, 5, 8, 20, 50, 200, maxlen])
    s = rng.randrange(0, len(data) - L)
    out.append(data[s:s + L])
for p, n in [("fortunes.txt", 80), ("pydocs_train.txt", 80), ("wordnet.txt", 60)]:
  windows(os.path.join(shared, "corpora", p), n, 3000)
blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff), (0x400, 0x4ff), (0x530, 0x58f),
          (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f), (0x980, 0x9ff), (0xe00, 0xe7f), (0x10a0, 0x10ff),
          (0x1100, 0x11ff), (0x1e00, 0x1eff), (0x2000, 0x206f), (0x2070, 0x209f), (0x20a0, 0x20cf),
          (0x2100, 0x214f), (0x2190, 0x21ff), (0x2200, 0x22ff), (0x2460, 0x24ff), (0x2500, 0x257f),
          (0x2600, 0x26ff), (0x3000, 0x303f), (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3),
          (0xfb00, 0xfb4f), (0xfe00, 0xfe0f), (0xff00, 0xffef), (0x1d400, 0x1d7ff), (0x1f300, 0x1faff),
          (0x20000, 0x2a6df), (0xe0000, 0xe007f), (0x0, 0x1f)]
for _ in range(150):
  n = rng.choice([1, 2, 3, 5, 10, 30, 100])
  s = []
  for _ in range(n):
    r = rng.random()
    if r < 0.25: s.append(rng.choice(" \n\t"))
    elif r < 0.35: s.append(rng.choice("0123456789"))
    elif r < 0.45: s.append(rng.choice("'sStTdDmMlLvVeErR"))
    else:
      a, b = rng.choice(blocks)
      c = rng.randint(a, b)
      if 0xd800 <= c <= 0xdfff: c = 0x41
      s.append(chr(c))
  out.append("".join(s))
with open(out_path, "w", encoding="utf-8") as f:
  for t in out: f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
print(len(out), "texts")
