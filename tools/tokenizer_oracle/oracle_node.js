// The same golden files as oracle.py, from the npm build of HF tokenizers (0.23.2), for a machine without Python's
// tokenizers:  NODE_PATH=DIR/node_modules node tools/tokenizer_oracle/oracle_node.js ROOT TEXTS.jsonl OUT
// (DIR: where `npm install tokenizers@0.23.2` ran). Writes OUT/<name>.jsonl ({"text", "ids", "decoded"}) for every
// folder under ROOT holding a tokenizer.json, over the texts plus the file's added tokens set in context, as
// oracle.py does; a file tokenizers refuses gets OUT/<name>.refused holding its error.
const fs = require("fs"), path = require("path");
const { Tokenizer } = require("tokenizers");
const [root, textsPath, out] = process.argv.slice(2);
fs.mkdirSync(out, { recursive: true });
const texts = fs.readFileSync(textsPath, "utf8").split("\n").filter((l) => l.length).map((l) => JSON.parse(l).text);
(async () => {
  for (const name of fs.readdirSync(root).sort()) {
    const file = path.join(root, name, "tokenizer.json");
    if (!fs.existsSync(file)) continue;
    let tok;
    try {
      tok = Tokenizer.fromFile(file);
    } catch (e) {
      fs.writeFileSync(path.join(out, name + ".refused"), String(e.message || e) + "\n");
      console.log(name, "refused:", String(e.message || e).slice(0, 200));
      continue;
    }
    const added = (JSON.parse(fs.readFileSync(file, "utf8")).added_tokens || []).map((a) => a.content).slice(0, 40);
    const mine = texts.slice();
    for (const s of added) mine.push(s, "hi" + s + "there", " " + s + " x", "a\n" + s + "\nb " + s + s);
    const lines = [];
    for (const t of mine) {
      const ids = (await tok.encode(t, null, { addSpecialTokens: false })).getIds();
      lines.push(JSON.stringify({ text: t, ids, decoded: await tok.decode(ids, false) }));
    }
    fs.writeFileSync(path.join(out, name + ".jsonl"), lines.join("\n") + "\n");
    console.log(name, mine.length, "texts");
  }
})();
