#include "optimized/tokenizer.h"

#ifdef STATECUT_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

#include <filesystem>
#include <stdexcept>

namespace statecut {

struct Tokenizer::Impl {
  std::string model_path;  // empty = byte-level
#ifdef STATECUT_HAVE_SENTENCEPIECE
  sentencepiece::SentencePieceProcessor sp;
#endif
  std::vector<int64_t> piece_bytes;  // per id, filled once at load
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::for_checkpoint(const std::string& dir) {
  Tokenizer t;
  const std::string path = (std::filesystem::path(dir) / "tokenizer.model").string();
  if (!std::filesystem::exists(path)) return t;
#ifndef STATECUT_HAVE_SENTENCEPIECE
  throw std::runtime_error(path + ": this build has no SentencePiece (libsentencepiece-dev) to read it");
#else
  const auto status = t.impl_->sp.Load(path);
  if (!status.ok()) throw std::runtime_error(path + ": cannot load SentencePiece model: " + status.ToString());
  t.impl_->model_path = path;
  const int n = t.impl_->sp.GetPieceSize();
  t.impl_->piece_bytes.resize(n);
  for (int id = 0; id < n; ++id) {
    int64_t b = 0;
    if (t.impl_->sp.IsControl(id) || t.impl_->sp.IsUnknown(id)) {
      b = 0;
    } else if (t.impl_->sp.IsByte(id)) {
      b = 1;  // <0xAB> byte-fallback piece
    } else {
      const std::string p = t.impl_->sp.IdToPiece(id);
      // U+2581 (3 bytes in UTF-8) marks a space: it stands for one byte of text.
      for (size_t i = 0; i < p.size(); ++i) {
        if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
          b += 1;
          i += 2;
        } else {
          b += 1;
        }
      }
    }
    t.impl_->piece_bytes[id] = b;
  }
  return t;
#endif
}

bool Tokenizer::byte_level() const { return impl_->model_path.empty(); }

std::string Tokenizer::describe() const {
  return byte_level() ? std::string("bytes") : "sentencepiece:" + impl_->model_path;
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  if (byte_level()) {
    ids.reserve(text.size());
    for (unsigned char c : text) ids.push_back(static_cast<int64_t>(c));
    return ids;
  }
#ifdef STATECUT_HAVE_SENTENCEPIECE
  std::vector<int> sp_ids;
  const auto status = impl_->sp.Encode(text, &sp_ids);
  if (!status.ok()) throw std::runtime_error(impl_->model_path + ": encode failed: " + status.ToString());
  ids.assign(sp_ids.begin(), sp_ids.end());
#endif
  return ids;
}

int64_t Tokenizer::bytes_of(int64_t id) const {
  if (byte_level()) return 1;
  if (id < 0 || id >= static_cast<int64_t>(impl_->piece_bytes.size())) return 0;
  return impl_->piece_bytes[id];
}

int64_t Tokenizer::vocab_size() const {
  return byte_level() ? 256 : static_cast<int64_t>(impl_->piece_bytes.size());
}

}  // namespace statecut
