/// NFC: the algorithm of UAX #15 over the Unicode 9.0 tables of unicode_nfc_tables.inc (unicode_nfc.h says why 9.0).
#include "optimized/text/unicode_nfc.h"

#include "optimized/text/utf8.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

namespace statecut {
namespace {

struct NfcDecomp {
  char32_t cp, a, b;
};
struct NfcCompose {
  char32_t a, b, cp;
};
struct NfcRun {
  char32_t first, last;
  unsigned ccc;
};
#include "optimized/text/unicode_nfc_tables.inc"

// Hangul syllables are composed arithmetically (Unicode ch. 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

const NfcRun* find_run(const NfcRun* begin, const NfcRun* end, char32_t cp) {
  const NfcRun* it = std::upper_bound(begin, end, cp, [](char32_t c, const NfcRun& r) { return c < r.first; });
  if (it == begin) return nullptr;
  --it;
  return cp <= it->last ? it : nullptr;
}

unsigned ccc(char32_t cp) {
  if (cp < 0x300) return 0;
  const NfcRun* r = find_run(std::begin(kNfcCcc), std::end(kNfcCcc), cp);
  return r ? r->ccc : 0;
}

bool unstable(char32_t cp) {
  return cp >= 0x300 && find_run(std::begin(kNfcUnstable), std::end(kNfcUnstable), cp) != nullptr;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* it = std::lower_bound(std::begin(kNfcDecomp), std::end(kNfcDecomp), cp,
                                    [](const NfcDecomp& d, char32_t c) { return d.cp < c; });
  if (it == std::end(kNfcDecomp) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  decompose(it->a, out);
  if (it->b != 0) decompose(it->b, out);
}

// The primary composite of (a, b), or 0 when there is none.
char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* it = std::lower_bound(std::begin(kNfcCompose), std::end(kNfcCompose), std::make_pair(a, b),
                                    [](const NfcCompose& c, const std::pair<char32_t, char32_t>& k) {
                                      return c.a != k.first ? c.a < k.first : c.b < k.second;
                                    });
  return (it != std::end(kNfcCompose) && it->a == a && it->b == b) ? it->cp : 0;
}

}  // namespace

bool nfc_quick_check(std::string_view utf8) {
  size_t i = 0;
  while (i < utf8.size()) {
    if (static_cast<unsigned char>(utf8[i]) < 0xCC) {  // ASCII, a continuation byte, or a lead below U+0300
      ++i;
      continue;
    }
    if (unstable(utf8::next(utf8, i))) return false;
  }
  return true;
}

namespace {

// NFC of a segment that starts at a stable code point or the text's start and ends before one or at its end.
void nfc_segment(std::string_view seg, std::string& result) {
  std::vector<char32_t> cps;
  cps.reserve(seg.size());
  for (size_t i = 0; i < seg.size();) decompose(utf8::next(seg, i), cps);

  // Canonical order: stable insertion sort of each run of non-starters by combining class.
  for (size_t i = 1; i < cps.size(); ++i) {
    const unsigned c = ccc(cps[i]);
    if (c == 0) continue;
    for (size_t j = i; j > 0; --j) {
      const unsigned p = ccc(cps[j - 1]);
      if (p == 0 || p <= c) break;
      std::swap(cps[j - 1], cps[j]);
    }
  }

  // Canonical composition: `last_cc` is the class of the last character kept after the current starter.
  std::vector<char32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;
  unsigned last_cc = 0;
  for (char32_t cp : cps) {
    const unsigned cc = ccc(cp);
    if (starter != SIZE_MAX) {
      const bool adjacent = starter + 1 == out.size();
      if (adjacent || (last_cc != 0 && last_cc < cc)) {
        if (const char32_t composite = compose_pair(out[starter], cp)) {
          out[starter] = composite;
          continue;
        }
      }
    }
    if (cc == 0) starter = out.size();
    last_cc = cc;
    out.push_back(cp);
  }
  for (char32_t cp : out) utf8::append(result, cp);
}

}  // namespace

std::string nfc(std::string_view utf8) {
  // A stable code point (ccc 0, NFC_Quick_Check Yes) neither composes with what precedes it nor lets a later
  // character reorder or compose across it, so the text splits before each one (UAX #15, section 9): only the
  // segments around unstable code points are rewritten, the rest is copied.
  std::string result;
  size_t copied = 0, last_stable = 0, i = 0;
  while (i < utf8.size()) {
    const size_t start = i;
    if (static_cast<unsigned char>(utf8[i]) < 0xCC) {
      ++i;
      if ((static_cast<unsigned char>(utf8[start]) & 0xC0) != 0x80) last_stable = start;
      continue;
    }
    if (!unstable(utf8::next(utf8, i))) {
      last_stable = start;
      continue;
    }
    size_t end = i;  // extend over the following unstable code points
    while (end < utf8.size()) {
      size_t k = end;
      if (!unstable(utf8::next(utf8, k))) break;
      end = k;
    }
    if (result.empty()) result.reserve(utf8.size() + 16);
    result.append(utf8.data() + copied, last_stable - copied);
    nfc_segment(utf8.substr(last_stable, end - last_stable), result);
    copied = last_stable = i = end;
  }
  if (copied == 0) return std::string(utf8);
  result.append(utf8.data() + copied, utf8.size() - copied);
  return result;
}

}  // namespace statecut
