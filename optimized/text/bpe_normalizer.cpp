/// tokenizer.json normalizers; bpe_normalizer.h gives each step.
#include "optimized/text/bpe_normalizer.h"

#include <stdexcept>

#include "optimized/text/unicode_nfc.h"

namespace statecut {

std::string replace_all(std::string_view s, const std::string& from, const std::string& to) {
  if (from.empty()) return std::string(s);
  std::string out;
  size_t done = 0;
  for (size_t at = s.find(from); at != std::string_view::npos; at = s.find(from, done)) {
    out.append(s, done, at - done);
    out += to;
    done = at + from.size();
  }
  out.append(s, done, std::string_view::npos);
  return out;
}

BpeNormalizer BpeNormalizer::from_json(const nlohmann::json& n, const std::string& path) {
  BpeNormalizer out;
  std::vector<nlohmann::json> steps;
  if (n.is_object() && n.value("type", std::string()) == "Sequence" && n.contains("normalizers") &&
      n["normalizers"].is_array())
    steps.assign(n["normalizers"].begin(), n["normalizers"].end());
  else if (!n.is_null())
    steps.push_back(n);
  for (const auto& s : steps) {
    const std::string t = s.is_object() ? s.value("type", std::string("(none)")) : std::string("null");
    if (t == "NFC") {
      out.steps_.push_back({Kind::Nfc, {}, {}});
    } else if (t == "Prepend" && s.contains("prepend") && s["prepend"].is_string()) {
      out.steps_.push_back({Kind::Prepend, s["prepend"].get<std::string>(), {}});
    } else if (t == "Replace" && s.contains("pattern") && s["pattern"].is_object() && s["pattern"].contains("String") &&
               s["pattern"]["String"].is_string() && s.contains("content") && s["content"].is_string()) {
      const std::string from = s["pattern"]["String"].get<std::string>();
      if (from.empty()) throw std::runtime_error(path + ": normalizer Replace has an empty pattern");
      out.steps_.push_back({Kind::Replace, from, s["content"].get<std::string>()});
    } else {
      throw std::runtime_error(path + ": unsupported normalizer '" + t +
                               "' (only NFC, Prepend, Replace of a String, and Sequences of them)");
    }
  }
  return out;
}

bool BpeNormalizer::leaves(std::string_view s) const {
  for (const Step& st : steps_) {
    if (st.kind == Kind::Nfc && !nfc_quick_check(s)) return false;
    if (st.kind == Kind::Prepend && !s.empty()) return false;
    if (st.kind == Kind::Replace && s.find(st.a) != std::string_view::npos) return false;
  }
  return true;
}

std::string BpeNormalizer::normalize(std::string_view in) const {
  std::string s(in);
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Kind::Nfc:
        if (!nfc_quick_check(s)) s = nfc(s);
        break;
      case Kind::Prepend:
        if (!s.empty()) s = st.a + s;
        break;
      case Kind::Replace:
        s = replace_all(s, st.a, st.b);
        break;
    }
  }
  return s;
}

}  // namespace statecut
