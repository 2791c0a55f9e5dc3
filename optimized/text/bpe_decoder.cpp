/// tokenizer.json decoders for character-level BPE; bpe_decoder.h gives each step.
#include "optimized/text/bpe_decoder.h"

#include <algorithm>
#include <stdexcept>

#include "optimized/text/bpe_normalizer.h"
#include "optimized/text/utf8.h"

namespace statecut {
namespace {

using json = nlohmann::json;

[[noreturn]] void decoder_fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error(path + ": " + problem);
}

std::string string_field(const json& j, const char* key, const std::string& path, const std::string& what) {
  if (!j.contains(key) || !j[key].is_string()) decoder_fail(path, what + " has no string \"" + key + "\"");
  return j[key].get<std::string>();
}

/// The byte of a byte-fallback token "<0xHH>", or -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

std::string metaspace_scheme(const json& s, const std::string& path, const std::string& what) {
  const bool given = s.contains("prepend_scheme") && !s["prepend_scheme"].is_null();
  if (given && !s["prepend_scheme"].is_string()) decoder_fail(path, what + " prepend_scheme is not a string");
  const bool aps = !s.contains("add_prefix_space") || s["add_prefix_space"].is_null() || s["add_prefix_space"].get<bool>();
  const std::string scheme = given ? s["prepend_scheme"].get<std::string>() : aps ? "always" : "never";
  if (scheme != "always" && scheme != "first" && scheme != "never")
    decoder_fail(path, what + " prepend_scheme '" + scheme + "' is none of always, first, never");
  if (s.contains("add_prefix_space") && !aps && (!given || scheme != "never"))
    decoder_fail(path, what + " add_prefix_space false does not match its prepend_scheme (tokenizers refuses the file)");
  return scheme;
}

std::string metaspace_replacement(const json& s, const std::string& path, const std::string& what) {
  const std::string r = string_field(s, "replacement", path, what);
  size_t bad = 0;
  if (r.empty() || utf8::valid_seq(r, 0, bad) != r.size())
    decoder_fail(path, what + " replacement '" + r + "' is not one character (tokenizers refuses the file)");
  return r;
}

BpeDecoder BpeDecoder::from_json(const json& d, const std::string& path) {
  BpeDecoder out;
  if (d.is_null()) {
    out.joiner_ = " ";
    return out;
  }
  std::vector<json> steps;
  const std::string type = d.is_object() ? d.value("type", std::string("(none)")) : std::string("null");
  if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array())
    steps.assign(d["decoders"].begin(), d["decoders"].end());
  else
    steps.push_back(d);
  for (const json& s : steps) {
    const std::string t = s.is_object() ? s.value("type", std::string("(none)")) : std::string("null");
    Step st{};
    if (t == "Replace") {
      st.kind = Kind::Replace;
      const json pat = s.value("pattern", json::object());
      if (!pat.contains("String") || !pat["String"].is_string())
        decoder_fail(path, "unsupported decoder Replace with a Regex pattern (only String)");
      st.from = pat["String"].get<std::string>();
      st.to = string_field(s, "content", path, "decoder Replace");
    } else if (t == "ByteFallback") {
      st.kind = Kind::ByteFallback;
    } else if (t == "Fuse") {
      st.kind = Kind::Fuse;
    } else if (t == "Strip") {
      st.kind = Kind::Strip;
      st.from = string_field(s, "content", path, "decoder Strip");
      size_t bad = 0;
      if (st.from.empty() || utf8::valid_seq(st.from, 0, bad) != st.from.size())
        decoder_fail(path, "decoder Strip content is not one character");
      if (!s.contains("start") || !s["start"].is_number_unsigned() || !s.contains("stop") || !s["stop"].is_number_unsigned())
        decoder_fail(path, "decoder Strip lacks a \"start\" or \"stop\" count");
      st.start = s["start"].get<size_t>(), st.stop = s["stop"].get<size_t>();
    } else if (t == "Metaspace") {
      st.kind = Kind::Metaspace;
      st.to = metaspace_replacement(s, path, "decoder Metaspace");
      st.first_drops = metaspace_scheme(s, path, "decoder Metaspace") != "never";
    } else {
      decoder_fail(path, "unsupported decoder '" + t +
                             "' (byte-level BPE takes ByteLevel; character BPE Replace, ByteFallback, Fuse, Strip, "
                             "Metaspace)");
    }
    out.steps_.push_back(std::move(st));
  }
  return out;
}

std::string BpeDecoder::decode(std::vector<std::string> tokens) const {
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Kind::Replace:
        for (auto& t : tokens) t = replace_all(t, st.from, st.to);
        break;
      case Kind::ByteFallback: {
        std::vector<std::string> out;
        std::string run;
        size_t run_tokens = 0;
        auto flush = [&] {
          if (run_tokens == 0) return;
          size_t bad = 0;
          bool valid = true;
          for (size_t i = 0; i < run.size() && valid;) {
            const size_t n = utf8::valid_seq(run, i, bad);
            valid = n > 0;
            i += n;
          }
          if (valid) out.push_back(run);
          else out.insert(out.end(), run_tokens, "\xEF\xBF\xBD");
          run.clear(), run_tokens = 0;
        };
        for (auto& t : tokens) {
          if (const int b = byte_token(t); b >= 0) {
            run += static_cast<char>(b), ++run_tokens;
            continue;
          }
          flush();
          out.push_back(std::move(t));
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case Kind::Fuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, all);
        break;
      }
      case Kind::Strip:
        for (auto& t : tokens) {
          size_t b = 0, e = t.size();
          for (size_t k = 0; k < st.start && t.compare(b, st.from.size(), st.from) == 0 && b < e; ++k) b += st.from.size();
          for (size_t k = 0; k < st.stop && e >= b + st.from.size() && t.compare(e - st.from.size(), st.from.size(), st.from) == 0; ++k)
            e -= st.from.size();
          t = t.substr(b, e - b);
        }
        break;
      case Kind::Metaspace:
        for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = replace_all(tokens[i], st.to, i == 0 && st.first_drops ? "" : " ");
        break;
    }
  }
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) out += (i ? joiner_ : std::string()) + tokens[i];
  return out;
}

}  // namespace statecut
