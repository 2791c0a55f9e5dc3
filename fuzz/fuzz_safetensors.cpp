// libFuzzer target for the safetensors parser. Built with clang-14 -fsanitize=fuzzer,address,undefined by
// ci/test.d/fuzz_safetensors.sh (outside the main CMake build). Contract checked on every input:
//   - parsing either succeeds or throws io::Error (anything else escapes and libFuzzer reports it);
//   - an accepted file converts every tensor without touching bytes outside the input (ASan);
//   - re-writing an accepted file and parsing that again yields the same tensors (writer/reader agree).
#include <cstring>

#include "optimized/io/safetensors.h"

using statecut::io::Error;
using statecut::io::SafetensorsFile;
using statecut::io::SafetensorsWriter;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const SafetensorsFile f = SafetensorsFile::from_bytes(data, size, "fuzz");
    SafetensorsWriter w;
    double sink = 0;
    for (const auto& n : f.names()) {
      const auto& t = f.tensor(n);
      for (double v : statecut::io::to_double(t)) sink += v;
      w.add(t);
    }
    w.set_metadata(f.metadata());
    const auto bytes = w.to_bytes();
    const SafetensorsFile g = SafetensorsFile::from_bytes(bytes.data(), bytes.size(), "rewritten");
    if (g.names().size() != f.names().size()) __builtin_trap();
    for (const auto& n : f.names()) {
      const auto& a = f.tensor(n);
      const auto& b = g.tensor(n);
      if (a.dtype != b.dtype || a.shape != b.shape || a.nbytes != b.nbytes ||
          (a.nbytes && std::memcmp(a.data, b.data, a.nbytes) != 0))
        __builtin_trap();
    }
    if (g.metadata() != f.metadata()) __builtin_trap();
    (void)sink;
  } catch (const Error&) {
    // expected for malformed input
  }
  return 0;
}
