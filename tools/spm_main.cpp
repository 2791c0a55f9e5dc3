// statecut-spm: SentencePiece for statecut in a process of its own.
//
// Why a separate executable: Debian's libsentencepiece.so.0 (0.1.97) carries its own copy of protobuf-lite and
// exports it (≈1,500 dynamic symbols google::protobuf::*), while LibTorch 1.13 pulls the system
// libprotobuf.so.32 (3.21.12). In one process the dynamic linker binds every google::protobuf symbol to whichever
// library comes first, so code built against one protobuf runs the other's functions on its own data layouts:
// statecut crashed in static initialisers before main. This program links SentencePiece only (no LibTorch, no
// system protobuf); optimized/text/tokenizer.cpp runs it and reads its output.
//
// Usage (one line of error on stderr and exit 1 on any failure):
//   statecut-spm MODEL info     → "vocab N" then N lines "<id> <bytes> <kind>" (kind: normal|byte|control|unknown|unused)
//   statecut-spm MODEL encode   → reads UTF-8 text on stdin (all of it, one piece of text, newlines included),
//                                 writes the ids separated by spaces and a final newline
//   statecut-spm MODEL decode   → reads lines of ids (separated by spaces) on stdin; for each line writes
//                                 "<n>\n" and then the n bytes of its text (DecodeIds), so texts may hold newlines
// <bytes> is the number of UTF-8 bytes of text the piece stands for: its piece string with U+2581 (the space
// marker, 3 bytes) counted as 1; byte-fallback pieces <0xAB> 1; control and unknown pieces 0.
#include <sentencepiece_processor.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "%s\n", msg.c_str());
  return 1;
}

int64_t piece_bytes(const sentencepiece::SentencePieceProcessor& sp, int id) {
  if (sp.IsControl(id) || sp.IsUnknown(id) || sp.IsUnused(id)) return 0;
  if (sp.IsByte(id)) return 1;
  const std::string p = sp.IdToPiece(id);
  int64_t b = 0;
  for (std::size_t i = 0; i < p.size(); ++i, ++b) {
    if (p.compare(i, 3, "\xE2\x96\x81") == 0) i += 2;  // "▁" stands for one space byte
  }
  return b;
}

const char* kind(const sentencepiece::SentencePieceProcessor& sp, int id) {
  if (sp.IsControl(id)) return "control";
  if (sp.IsUnknown(id)) return "unknown";
  if (sp.IsByte(id)) return "byte";
  if (sp.IsUnused(id)) return "unused";
  return "normal";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage: statecut-spm MODEL info|encode|decode");
  const std::string model = argv[1], mode = argv[2];
  sentencepiece::SentencePieceProcessor sp;
  const auto st = sp.Load(model);
  if (!st.ok()) return fail(model + ": not a SentencePiece model: " + st.ToString());
  if (mode == "info") {
    const int n = sp.GetPieceSize();
    std::string out = "vocab " + std::to_string(n) + "\n";
    for (int id = 0; id < n; ++id)
      out += std::to_string(id) + " " + std::to_string(piece_bytes(sp, id)) + " " + kind(sp, id) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else if (mode == "encode") {
    std::ios::sync_with_stdio(false);
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return fail(model + ": cannot read the text on stdin");
    std::vector<int> ids;
    const auto es = sp.Encode(text, &ids);
    if (!es.ok()) return fail(model + ": encode failed: " + es.ToString());
    std::string out;
    out.reserve(ids.size() * 4);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else if (mode == "decode") {
    std::ios::sync_with_stdio(false);
    std::string line, out;
    while (std::getline(std::cin, line)) {
      std::vector<int> ids;
      std::istringstream in(line);
      for (long long v; in >> v;) {
        if (v < 0 || v >= sp.GetPieceSize()) return fail(model + ": decode: id " + std::to_string(v) + " is not a piece");
        ids.push_back(static_cast<int>(v));
      }
      if (!in.eof()) return fail(model + ": decode: a line holds something other than ids");
      std::string text;
      const auto ds = sp.Decode(ids, &text);
      if (!ds.ok()) return fail(model + ": decode failed: " + ds.ToString());
      out += std::to_string(text.size()) + "\n" + text;
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    return fail("statecut-spm: unknown mode '" + mode + "' (info, encode or decode)");
  }
  return std::fflush(stdout) == 0 ? 0 : fail("statecut-spm: cannot write stdout");
}
