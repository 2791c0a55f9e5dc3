/// The two hash tables of the BPE encoder (bpe_tokenizer.cpp), open addressing with linear probing:
///   MergeTable: merge pair (left id, right id) -> {rank, merged id}; built once per tokenizer (~150k entries).
///   WordCache:  pre-token bytes -> their ids; keys and ids sit in two flat buffers, so a hit allocates nothing.
/// Both keep the load factor <= 1/2. Internal to optimized/text.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace statecut::bpe {

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t x;
    std::memcpy(&x, s.data() + i, 8);
    h = (h ^ x) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  uint64_t x = 0;
  std::memcpy(&x, s.data() + i, s.size() - i);
  h = (h ^ x) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

struct MergeEntry {
  int32_t rank, new_id;
};

/// Open-addressing map (a, b) -> merge, built once at load (faster than std::unordered_map on the BPE path).
class MergeTable {
 public:
  MergeTable() { reserve(0); }
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Slot{kEmpty, {0, 0}});
  }
  void put(int32_t a, int32_t b, MergeEntry e) {  // a pair listed twice keeps the later entry, as in HF
    const uint64_t k = key(a, b);
    size_t i = mix(k) & (slots_.size() - 1);
    while (slots_[i].key != kEmpty && slots_[i].key != k) i = (i + 1) & (slots_.size() - 1);
    slots_[i] = {k, e};
  }
  const MergeEntry* find(int32_t a, int32_t b) const {
    const uint64_t k = key(a, b);
    for (size_t i = mix(k) & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == k) return &slots_[i].entry;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are < 2^31, so no pair has this key
  struct Slot {
    uint64_t key;
    MergeEntry entry;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    return k ^ (k >> 33);
  }
  std::vector<Slot> slots_;
};

/// Pre-token bytes -> ids; keys and ids live in two flat buffers. Stops growing at kMaxWords (about 20 MB).
class WordCache {
 public:
  static constexpr size_t kMaxWords = size_t{1} << 18, kMaxWordBytes = 256;
  WordCache() : slots_(64) {}

  /// Appends the ids of `w` to `out`, from the cache or from compute(std::vector<int32_t>&) (which appends them).
  template <class Compute>
  void get(std::string_view w, std::vector<int64_t>& out, Compute&& compute) {
    if (w.size() > kMaxWordBytes) {
      scratch_.clear();
      compute(scratch_);
      out.insert(out.end(), scratch_.begin(), scratch_.end());
      return;
    }
    const uint64_t h = hash_bytes(w);
    size_t i = h & (slots_.size() - 1);
    for (; slots_[i].used; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.hash == h && std::string_view(keys_.data() + s.key_off, s.key_len) == w) {
        out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
        return;
      }
    }
    const size_t off = ids_.size();
    compute(ids_);
    out.insert(out.end(), ids_.begin() + off, ids_.end());
    if (words_ >= kMaxWords) {
      ids_.resize(off);
      return;
    }
    slots_[i] = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(w.size()), static_cast<uint32_t>(off),
                 static_cast<uint32_t>(ids_.size() - off), true};
    keys_.append(w);
    if (++words_ * 2 > slots_.size()) grow();
  }

 private:
  struct Slot {
    uint64_t hash;
    uint32_t key_off, key_len, ids_off, ids_len;
    bool used;
  };
  void grow() {
    std::vector<Slot> bigger(slots_.size() * 2);
    for (const Slot& s : slots_) {
      if (!s.used) continue;
      size_t i = s.hash & (bigger.size() - 1);
      while (bigger[i].used) i = (i + 1) & (bigger.size() - 1);
      bigger[i] = s;
    }
    slots_.swap(bigger);
  }
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_, scratch_;
  size_t words_ = 0;
};

}  // namespace statecut::bpe
