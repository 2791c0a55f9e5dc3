// safetensors writer (canonical layout, atomic rename).
//
// Layout the writer produces, chosen to match the official Rust/Python writer byte for byte so that
// a checkpoint written by `safetensors.torch.save_file` re-writes to identical bytes:
//   - tensors in the buffer sorted by the official dtype rank (its enum, declared in increasing
//     alignment order), largest first, then by name (every tensor then starts at a multiple of its
//     element size, because the buffer starts 8-aligned);
//   - compact JSON: "__metadata__" first (only when non-empty), then the tensors in buffer order,
//     each as {"dtype":..,"shape":[..],"data_offsets":[b,e]};
//   - the header padded with spaces (0x20) to a multiple of 8 bytes.
// The format itself only requires the offsets to cover the buffer exactly (no gaps, no overlap),
// which is what the reader enforces; it accepts any key order and any trailing whitespace.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "optimized/io/safetensors.h"
#include "optimized/io/safetensors_internal.h"

namespace statecut::io {

using detail::mul_overflows;
using detail::printable;
using json = nlohmann::json;

namespace {

void check_entry(const std::string& name, DType dtype, const std::vector<int64_t>& shape, std::size_t nbytes) {
  if (name == "__metadata__") throw Error("safetensors writer: __metadata__: reserved name");
  uint64_t numel = 1;
  for (int64_t s : shape) {
    if (s < 0 || mul_overflows(numel, static_cast<uint64_t>(s), &numel))
      throw Error("safetensors writer: " + printable(name) + ": invalid shape");
  }
  uint64_t want = 0;
  if (mul_overflows(numel, dtype_size(dtype), &want) || want != nbytes)
    throw Error("safetensors writer: " + printable(name) + ": " + std::to_string(nbytes) + " bytes given, shape x " +
                dtype_name(dtype) + " needs " + std::to_string(want));
}

/// Writes all n bytes; a failure names `target` (the file the user asked for), not the temporary being written.
void write_all(int fd, const void* data, std::size_t n, const std::string& target) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(printable(target) + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                            std::size_t nbytes) {
  check_entry(name, dtype, shape, nbytes);
  Entry e{};
  e.name = name, e.dtype = dtype, e.shape = std::move(shape);
  const auto* p = static_cast<const std::byte*>(data);
  e.bytes.assign(p, p + nbytes);
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add_borrowed(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                     const void* data, std::size_t nbytes, std::function<void()> written) {
  check_entry(name, dtype, shape, nbytes);
  Entry e{};
  e.name = name, e.dtype = dtype, e.shape = std::move(shape);
  e.borrowed = static_cast<const std::byte*>(data);
  e.borrowed_size = nbytes;
  e.written = std::move(written);
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::set_metadata(std::map<std::string, std::string> m) { metadata_ = std::move(m); }

namespace {
/// Rank of a dtype in the official Rust `Dtype` enum, which is declared in increasing alignment order:
/// BOOL, (F4, F6_*), U8, I8, F8_E5M2, F8_E4M3, (F8_E8M0), I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64.
/// Its writer sorts tensors by this rank descending, then by name; we do the same for byte identity.
int official_rank(DType d) {
  switch (d) {
    case DType::BOOL: return 0;
    case DType::U8: return 4;
    case DType::I8: return 5;
    case DType::F8_E5M2: return 6;
    case DType::F8_E4M3: return 7;
    case DType::I16: return 9;
    case DType::U16: return 10;
    case DType::F16: return 11;
    case DType::BF16: return 12;
    case DType::I32: return 13;
    case DType::U32: return 14;
    case DType::F32: return 15;
    case DType::F64: return 16;
    case DType::I64: return 17;
    case DType::U64: return 18;
  }
  return -1;
}
}  // namespace

std::vector<const SafetensorsWriter::Entry*> SafetensorsWriter::layout() const {
  std::vector<const Entry*> order;
  for (const Entry& e : entries_) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    const int ra = official_rank(a->dtype), rb = official_rank(b->dtype);
    return ra != rb ? ra > rb : a->name < b->name;
  });
  return order;
}

std::string SafetensorsWriter::header_json() const {
  const std::vector<const Entry*> order = layout();
  {
    std::vector<const std::string*> names;
    for (const Entry& e : entries_) names.push_back(&e.name);
    std::sort(names.begin(), names.end(), [](auto* a, auto* b) { return *a < *b; });
    for (std::size_t i = 1; i < names.size(); ++i)
      if (*names[i] == *names[i - 1]) throw Error("safetensors writer: " + printable(*names[i]) + ": duplicate tensor name");
  }
  std::string h = "{";
  if (!metadata_.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata_) {
      if (!first) h += ',';
      first = false;
      h += json(k).dump() + ":" + json(v).dump();
    }
    h += "}";
  }
  uint64_t off = 0;
  for (const Entry* e : order) {
    if (h.size() > 1) h += ',';
    h += json(e->name).dump();
    h += ":{\"dtype\":\"";
    h += dtype_name(e->dtype);
    h += "\",\"shape\":[";
    for (std::size_t i = 0; i < e->shape.size(); ++i) {
      if (i) h += ',';
      h += std::to_string(e->shape[i]);
    }
    const uint64_t n = e->borrowed ? e->borrowed_size : e->bytes.size();
    h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + n) + "]}";
    off += n;
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  return h;
}

namespace {
std::string encode_header(const SafetensorsWriter& w, const std::string& path) {
  try {
    return w.header_json();
  } catch (const nlohmann::json::exception& ex) {  // e.g. a name that is not valid UTF-8
    throw Error(printable(path) + ": cannot encode header: " + ex.what());
  }
}
}  // namespace

std::vector<std::byte> SafetensorsWriter::to_bytes() const {
  const std::string header = encode_header(*this, "<memory>");
  const std::vector<const Entry*> order = layout();
  std::vector<std::byte> out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  const auto* h = reinterpret_cast<const std::byte*>(header.data());
  out.insert(out.end(), h, h + header.size());
  for (const Entry* e : order) {
    if (e->borrowed) out.insert(out.end(), e->borrowed, e->borrowed + e->borrowed_size);
    else out.insert(out.end(), e->bytes.begin(), e->bytes.end());
  }
  return out;
}

void SafetensorsWriter::write(const std::string& path) const {
  const std::string header = encode_header(*this, path);
  const std::vector<const Entry*> order = layout();

  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(printable(path) + ": cannot create temporary file: " + std::strerror(errno));
  try {
    const uint64_t n = header.size();
    write_all(fd, &n, 8, path);
    write_all(fd, header.data(), header.size(), path);
    for (const Entry* e : order) {
      if (e->borrowed) write_all(fd, e->borrowed, e->borrowed_size, path);
      else write_all(fd, e->bytes.data(), e->bytes.size(), path);
      if (e->written) e->written();
    }
    if (::fsync(fd) != 0) throw Error(printable(path) + ": fsync failed: " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(printable(path) + ": close failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(printable(path) + ": cannot rename into place: " + std::strerror(err));
  }
}

}  // namespace statecut::io
