/// UTF-8 helpers shared by the text code: decode/append one code point, validation with Rust's lossy repair, and
/// Unicode White_Space.
///   valid_seq:  the well-formed byte sequences of Unicode Table 3-7 (no overlongs, no surrogates, <= U+10FFFF);
///   lossy:      String::from_utf8_lossy: each maximal invalid subpart -> U+FFFD (the W3C/Unicode practice that
///               Python's errors="replace" follows too).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace statecut::utf8 {

/// The code point starting at s[i] of VALID UTF-8; advances i past it.
inline char32_t next(std::string_view s, size_t& i) {
  const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
  char32_t cp;
  if (b(0) < 0x80) {
    cp = b(0), i += 1;
  } else if (b(0) < 0xE0) {
    cp = ((b(0) & 0x1F) << 6) | (b(1) & 0x3F), i += 2;
  } else if (b(0) < 0xF0) {
    cp = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F), i += 3;
  } else {
    cp = ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F), i += 4;
  }
  return cp;
}

inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Length (1..4) of the well-formed sequence at s[i]; 0 when there is none, with `bad` = the length of the maximal
/// invalid subpart there (>= 1).
inline size_t valid_seq(std::string_view s, size_t i, size_t& bad) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char b0 = b(0);
  bad = 1;
  if (b0 < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3, lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4, lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    if (b(k) < (k == 1 ? lo : 0x80) || b(k) > (k == 1 ? hi : 0xBF)) return 0;
    bad = k + 1;
  }
  return n;
}

/// Writes the lossy repair of `s` to `out` and returns true, or returns false (out untouched) when s is valid.
inline bool lossy(std::string_view s, std::string& out) {
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_seq(s, i, bad);
    if (n == 0) break;
    i += n;
  }
  if (i == s.size()) return false;
  out.assign(s.data(), i);
  while (i < s.size()) {
    const size_t n = valid_seq(s, i, bad);
    if (n) {
      out.append(s.data() + i, n), i += n;
    } else {
      out += "\xEF\xBF\xBD", i += bad;
    }
  }
  return true;
}

/// Unicode White_Space (Rust regex's and Oniguruma's `\s`).
inline bool white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Python's str.isspace(): White_Space plus the separators U+001C..U+001F (bidi classes B and S), what str.rstrip()
/// removes.
inline bool python_space(char32_t c) { return white_space(c) || (c >= 0x1C && c <= 0x1F); }

/// The length of `s` without its trailing python_space code points (Python's s.rstrip() on valid UTF-8; a trailing
/// byte that does not end a well-formed sequence stops the strip).
inline size_t rstrip_python_space(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;  // the lead byte of the last code point: back over at most three continuation bytes
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t bad = 0;
    if (valid_seq(s, start, bad) != end - start) break;
    size_t i = start;
    if (!python_space(next(s, i))) break;
    end = start;
  }
  return end;
}

/// Offset of the first byte that starts no well-formed sequence, or std::string_view::npos when `s` is valid UTF-8.
inline size_t first_invalid(std::string_view s) {
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    const size_t n = valid_seq(s, i, bad);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

}  // namespace statecut::utf8
