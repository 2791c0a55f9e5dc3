/// GPT-2's byte -> character map (bytes_to_unicode), written out independently of the code under test: the tests'
/// way to spell a byte-level vocabulary. One definition for every file of tests/text (they share a unity build in CI).
#pragma once
#include <string>

namespace statecut::test {

inline std::string byte_symbol(int b) {
  auto printable = [](int k) { return (k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF); };
  int cp = b;
  if (!printable(b)) {
    cp = 0x100;
    for (int k = 0; k < b; ++k) cp += printable(k) ? 0 : 1;
  }
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  std::string out;
  out += static_cast<char>(0xC0 | (cp >> 6));
  out += static_cast<char>(0x80 | (cp & 0x3F));
  return out;
}

}  // namespace statecut::test
