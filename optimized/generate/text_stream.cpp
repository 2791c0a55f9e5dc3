// The streaming detokenizer (text_stream.h).
#include "optimized/generate/text_stream.h"

namespace statecut {

namespace {
bool ends_in_replacement(const std::string& s) { return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0; }
}  // namespace

std::string TextStream::push(int64_t id) {
  ids_.push_back(id);
  if (tok_.byte_level()) {
    read_ = prefix_ = ids_.size();
    return tok_.decode({id});
  }
  // A run of byte-fallback pieces decodes as a whole (HF's ByteFallback: valid UTF-8, else U+FFFD per byte): no
  // text of it is final until a piece of another kind follows.
  if (tok_.byte_piece(id)) return {};
  const std::vector<int64_t> before(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_),
                                    ids_.begin() + static_cast<std::ptrdiff_t>(read_));
  const std::vector<int64_t> now(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_), ids_.end());
  const auto texts = tok_.decode_batch({before, now});
  if (texts[1].size() <= texts[0].size() || ends_in_replacement(texts[1])) return {};
  prefix_ = read_;
  read_ = ids_.size();
  return texts[1].substr(texts[0].size());
}

std::string TextStream::finish() {
  if (read_ == ids_.size()) return {};
  const std::vector<int64_t> before(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_),
                                    ids_.begin() + static_cast<std::ptrdiff_t>(read_));
  const std::vector<int64_t> now(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_), ids_.end());
  const auto texts = tok_.decode_batch({before, now});
  prefix_ = read_ = ids_.size();
  return texts[1].size() > texts[0].size() ? texts[1].substr(texts[0].size()) : std::string();
}

}  // namespace statecut
