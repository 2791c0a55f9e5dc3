/// Reading of tokenizer.json's added tokens; bpe_added_tokens.h says how ids are assigned.
#include "optimized/text/bpe_added_tokens.h"

#include <stdexcept>

namespace statecut::bpe {

std::vector<AddedEntry> read_added_tokens(const nlohmann::json& j, const std::unordered_map<std::string, int32_t>& vocab,
                                          const std::string& path) {
  using json = nlohmann::json;
  const auto fail = [&](const std::string& problem) {
    std::string msg = path + ": " + problem;  // one line, whatever a token's content holds
    std::replace_if(msg.begin(), msg.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    throw std::runtime_error(msg);
  };
  std::vector<AddedEntry> added_tokens;
  {
    const json added = j.value("added_tokens", json::array());
    if (!added.is_array()) fail("\"added_tokens\" is not a list");
    std::unordered_map<std::string, size_t> by_content;
    int64_t next_id = static_cast<int64_t>(vocab.size());
    for (const json& a : added) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        fail("an added token lacks an integer \"id\" or a string \"content\"");
      const std::string content = a["content"].get<std::string>();
      if (a["id"].is_number_unsigned() ? a["id"].get<uint64_t>() > INT32_MAX
                                       : a["id"].get<int64_t>() < 0 || a["id"].get<int64_t>() > INT32_MAX)
        fail("added token \"" + content + "\": id " + a["id"].dump() + " is outside [0, 2^31 - 1]");
      for (const char* f : {"single_word", "lstrip", "rstrip", "normalized", "special"})
        if (!a.contains(f) || !a[f].is_boolean())
          fail("added token \"" + content + "\" lacks a true/false \"" + f + "\" (tokenizers refuses the file)");
      if (a["single_word"].get<bool>()) fail("unsupported added token option single_word true");
      if (content.empty()) continue;  // tokenizers ignores empty added tokens
      AddedEntry t{content, 0, a["normalized"].get<bool>(), a["lstrip"].get<bool>(), a["rstrip"].get<bool>(),
                   a["special"].get<bool>()};
      if (const auto it = by_content.find(content); it != by_content.end()) {
        t.id = added_tokens[it->second].id;
        t.special = t.special || added_tokens[it->second].special;
        added_tokens[it->second] = t;
        continue;
      }
      if (const auto v = vocab.find(content); v != vocab.end()) {
        t.id = v->second;
      } else {
        if (next_id > INT32_MAX) fail("added token \"" + content + "\": no 32-bit id left");
        t.id = static_cast<int32_t>(next_id++);
      }
      by_content[content] = added_tokens.size();
      added_tokens.push_back(std::move(t));
    }
  }
  return added_tokens;
}

}  // namespace statecut::bpe
