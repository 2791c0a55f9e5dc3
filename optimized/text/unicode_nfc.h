/// Unicode Normalization Form C (UAX #15) as HF tokenizers' `NFC` normalizer applies it:
///   NFC(s) = compose(reorder(decompose(s)))
///   decompose: each code point -> its full canonical decomposition (recursive; Hangul syllables algorithmic);
///   reorder:   within each run of non-starters (ccc != 0), a stable sort by canonical combining class;
///   compose:   left to right, a character C joins the last starter L to the primary composite of (L, C) when
///              nothing between them has ccc 0 or ccc >= ccc(C) (C is not "blocked"); Hangul L+V, LV+T likewise.
/// The tables (unicode_nfc_tables.inc, made by tools/gen_unicode_nfc_tables.py) are Unicode 9.0's, as in HF's crate
/// unicode-normalization-alignments: characters assigned later have ccc 0 and no decomposition.
///
/// Fast path (UAX #15 quick check): a string whose code points all lie below U+0300, or none of which has ccc != 0
/// or NFC_Quick_Check No/Maybe, is returned unchanged without decoding it twice.
/// Input must be valid UTF-8 (callers decode lossily first); the output is valid UTF-8.
#pragma once
#include <string>
#include <string_view>

namespace statecut {

/// The NFC form of `utf8`.
std::string nfc(std::string_view utf8);

/// True when nfc(utf8) == utf8 is certain from the quick check alone (no code point that NFC could touch).
bool nfc_quick_check(std::string_view utf8);

}  // namespace statecut
