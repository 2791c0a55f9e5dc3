/// Oniguruma-compatible regex splitting on PCRE2; split_regex.h says what is rewritten and why.
#include "optimized/text/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace statecut {
namespace {

// Letters and numbers assigned in Unicode 15.0-16.0 (Oniguruma has them, PCRE2 10.42 does not), and White_Space.
constexpr const char* kLettersAfter14 =
    R"(\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D65}\x{10D6F}-\x{10D85})"
    R"(\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240}\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5}\x{113B7})"
    R"(\x{113D1}\x{113D3}\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F})"
    R"(\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155})"
    R"(\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB}\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739})"
    R"(\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
constexpr const char* kNumbersAfter14 =
    R"(\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59}\x{16130}-\x{16139})"
    R"(\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3}\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";
constexpr const char* kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

[[noreturn]] void regex_fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error(path + ": " + problem);
}

/// Per-thread match state: a JIT stack serves one thread at a time, a match context carries it.
struct Scratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  Scratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~Scratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

}  // namespace

struct SplitRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

std::string SplitRegex::widen(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const std::string_view rest(p.data() + i, p.size() - i);
      const char* add = nullptr;
      const char* base = "";
      size_t len = 2;
      if (rest.substr(0, 5) == "\\p{L}") {
        add = kLettersAfter14, base = "\\p{L}", len = 5;
      } else if (rest.substr(0, 5) == "\\p{N}") {
        add = kNumbersAfter14, base = "\\p{N}", len = 5;
      } else if (p[i + 1] == 's') {
        add = kWhiteSpace;
      } else if (p[i + 1] == 'S' && !in_class) {
        add = kWhiteSpace, base = "^";
      }
      if (add)
        out += in_class ? std::string(base) + add : std::string("[") + base + add + "]";
      else
        out.append(p, i, 2);  // any other escape, kept whole so "\\[" is not a class
      i += len - 1;
    } else if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is literal
    } else if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const size_t end = p.find(":]", i + 2);  // POSIX class [:name:]
      const size_t stop = end == std::string::npos ? p.size() : end + 2;
      out.append(p, i, stop - i);
      i = stop - 1;
    } else {
      if (in_class && c == ']') in_class = false;
      out += c;
    }
  }
  return out;
}

SplitRegex::SplitRegex(const std::string& pattern, const std::string& path)
    : code_(std::make_unique<Code>()), path_(path) {
  const std::string widened = widen(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(widened.data()), widened.size(), PCRE2_UTF | PCRE2_UCP,
                              &err, &offset, nullptr);
  if (!code_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    regex_fail(path, "pre_tokenizer regex does not compile (" + std::string(reinterpret_cast<const char*>(msg)) + ")");
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);  // where JIT is unavailable the interpreter runs
}

SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;
SplitRegex::~SplitRegex() = default;

void SplitRegex::split(std::string_view s, std::vector<std::string_view>& pieces) const {
  thread_local Scratch scratch;
  size_t pos = 0, prev = 0;
  while (pos < s.size()) {
    const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos,
                               PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) regex_fail(path_, "pre_tokenizer regex failed (PCRE2 error " + std::to_string(rc) + ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
    if (ov[0] == ov[1]) {  // empty: step over one character
      pos = ov[1] + 1;
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (ov[0] > prev) pieces.push_back(s.substr(prev, ov[0] - prev));
    pieces.push_back(s.substr(ov[0], ov[1] - ov[0]));
    prev = pos = ov[1];
  }
  if (prev < s.size()) pieces.push_back(s.substr(prev));
}

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-#&~ ").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace statecut
