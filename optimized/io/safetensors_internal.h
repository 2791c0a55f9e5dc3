/// Helpers shared by the safetensors reader and writer (not part of the public API).
#pragma once
#include <cstdint>
#include <string>

namespace statecut::io::detail {

/// Printable form of a name for a one-line message: control bytes escaped as \xNN.
std::string printable(const std::string& s);
/// *out = a * b unless that overflows 64 bits (then true and *out untouched).
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out);

}  // namespace statecut::io::detail
