// safetensors reader (mmap, zero-copy, validating); the writer is in safetensors_writer.cpp.
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
#include "optimized/io/safetensors.h"
#include "optimized/io/safetensors_internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace statecut::io {
namespace {

using json = nlohmann::json;
using detail::mul_overflows;
using detail::printable;

constexpr std::size_t kMaxHeader = std::size_t{100} << 20;  // the official reader's limit

struct DTypeInfo {
  DType d;
  const char* name;
  std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::BOOL, "BOOL", 1}, {DType::U8, "U8", 1},         {DType::I8, "I8", 1},
    {DType::U16, "U16", 2},   {DType::I16, "I16", 2},       {DType::U32, "U32", 4},
    {DType::I32, "I32", 4},   {DType::U64, "U64", 8},       {DType::I64, "I64", 8},
    {DType::F16, "F16", 2},   {DType::BF16, "BF16", 2},     {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},   {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

[[noreturn]] void fail(const std::string& file, const std::string& problem) {
  throw Error(printable(file) + ": " + printable(problem));
}
[[noreturn]] void fail(const std::string& file, const std::string& tensor, const std::string& problem) {
  throw Error(printable(file) + ": " + printable(tensor) + ": " + printable(problem));
}

/// SAX handler that builds the header DOM while rejecting what a safetensors header never holds:
/// duplicate keys at any level (nlohmann's DOM parser silently keeps the last) and nesting deeper
/// than top object → entry object → shape array (which also bounds memory on hostile input).
class HeaderSax : public nlohmann::json_sax<json> {
 public:
  json root;
  std::string error;

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t&) override { return reject("binary value in header"); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    json& obj = *stack_.back();
    if (obj.contains(k)) {
      std::string where = stack_.size() == 1 ? k : current_key_[0];
      return reject(stack_.size() == 1 ? "duplicate tensor name '" + k + "'"
                                       : "duplicate key '" + k + "' in entry '" + where + "'");
    }
    if (current_key_.size() < stack_.size()) current_key_.resize(stack_.size());
    current_key_[stack_.size() - 1] = k;
    slot_ = &obj[k];
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    return reject(std::string("malformed JSON header: ") + ex.what());
  }

 private:
  std::vector<json*> stack_;
  std::vector<std::string> current_key_;
  json* slot_ = nullptr;

  bool reject(std::string msg) {
    if (error.empty()) error = std::move(msg);
    return false;
  }
  json* place(json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool value(json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(json&& v) {
    if (stack_.size() >= 3) return reject("header JSON is nested deeper than a safetensors header allows");
    stack_.push_back(place(std::move(v)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
};

/// Reads a JSON integer ≥ 0 (an integral float such as 3.0 is refused: shapes and offsets are integers).
bool as_index(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(man), -24);  // subnormal: man · 2^-24
  else if (exp == 31) v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(man | 0x400), exp - 25);
  return sign ? -v : v;
}

double bf16_to_double(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// float8 e4m3fn (OCP / torch.float8_e4m3fn): bias 7, no infinities, S.1111.111 is NaN, max 448.
double e4m3_to_double(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 0x7;
  double v;
  if (exp == 0xf && man == 0x7) v = std::numeric_limits<double>::quiet_NaN();
  else if (exp == 0) v = std::ldexp(static_cast<double>(man), -9);  // subnormal: man/8 · 2^-6
  else v = std::ldexp(static_cast<double>(man | 0x8), exp - 10);
  return sign ? -v : v;
}

/// float8 e5m2 (torch.float8_e5m2): IEEE-like, bias 15, infinities and NaNs.
double e5m2_to_double(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 2) & 0x1f, man = b & 0x3;
  double v;
  if (exp == 0x1f) v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(static_cast<double>(man), -16);  // subnormal: man/4 · 2^-14
  else v = std::ldexp(static_cast<double>(man | 0x4), exp - 17);
  return sign ? -v : v;
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // unaligned-safe; files are little-endian like every host we build for
  return v;
}

template <typename Out>
void convert(const TensorView& t, Out* out) {
  const std::size_t n = t.nbytes / dtype_size(t.dtype);
  const std::byte* p = t.data;
  switch (t.dtype) {
    case DType::BOOL: for (std::size_t i = 0; i < n; ++i) out[i] = load<uint8_t>(p + i) != 0; break;
    case DType::U8: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<uint8_t>(p + i)); break;
    case DType::I8: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<int8_t>(p + i)); break;
    case DType::U16: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<uint16_t>(p + 2 * i)); break;
    case DType::I16: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<int16_t>(p + 2 * i)); break;
    case DType::U32: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<uint32_t>(p + 4 * i)); break;
    case DType::I32: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<int32_t>(p + 4 * i)); break;
    case DType::U64: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<uint64_t>(p + 8 * i)); break;
    case DType::I64: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<int64_t>(p + 8 * i)); break;
    case DType::F16:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(half_to_double(load<uint16_t>(p + 2 * i)));
      break;
    case DType::BF16:
      // bf16 → f32 is exact (a shift), so both outputs take the float path.
      for (std::size_t i = 0; i < n; ++i) {
        const uint32_t bits = static_cast<uint32_t>(load<uint16_t>(p + 2 * i)) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out[i] = static_cast<Out>(f);
      }
      break;
    case DType::F32: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<float>(p + 4 * i)); break;
    case DType::F64: for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(load<double>(p + 8 * i)); break;
    case DType::F8_E4M3:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(e4m3_to_double(load<uint8_t>(p + i)));
      break;
    case DType::F8_E5M2:
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<Out>(e5m2_to_double(load<uint8_t>(p + i)));
      break;
  }
}

template <typename Out>
std::vector<Out> convert(const TensorView& t) {
  std::vector<Out> out(t.nbytes / dtype_size(t.dtype));
  convert(t, out.data());
  return out;
}

}  // namespace

namespace detail {

/// Printable form of a name for a one-line message: control bytes and quotes escaped.
std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
  *out = a * b;
  return false;
}

}  // namespace detail

// ---- dtypes ----------------------------------------------------------------

const char* dtype_name(DType d) {
  for (const auto& i : kDTypes)
    if (i.d == d) return i.name;
  return "?";
}

DType dtype_from_name(const std::string& s) {
  for (const auto& i : kDTypes)
    if (s == i.name) return i.d;
  throw Error("unknown dtype '" + printable(s) + "'");
}

std::size_t dtype_size(DType d) {
  for (const auto& i : kDTypes)
    if (i.d == d) return i.size;
  return 0;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<double> to_double(const TensorView& t) { return convert<double>(t); }
std::vector<float> to_float(const TensorView& t) { return convert<float>(t); }
void to_double(const TensorView& t, double* out) { convert(t, out); }
void to_float(const TensorView& t, float* out) { convert(t, out); }

double bf16_bits_to_double(uint16_t b) { return bf16_to_double(b); }
double f16_bits_to_double(uint16_t b) { return half_to_double(b); }
double f8_e4m3_bits_to_double(uint8_t b) { return e4m3_to_double(b); }
double f8_e5m2_bits_to_double(uint8_t b) { return e5m2_to_double(b); }

// ---- reader ----------------------------------------------------------------

struct SafetensorsFile::Impl {
  std::string path;
  void* map = nullptr;
  std::size_t map_len = 0;
  std::vector<std::byte> owned;
  const std::byte* base = nullptr;
  std::size_t size = 0;
  std::vector<std::string> names;
  std::unordered_map<std::string, TensorView> tensors;
  std::map<std::string, std::string> metadata;

  ~Impl() {
    if (map) ::munmap(map, map_len);
  }
  void parse();
};

void SafetensorsFile::Impl::parse() {
  const std::string& f = path;
  if (size < 8) fail(f, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  const uint64_t n = load<uint64_t>(base);
  if (n > kMaxHeader)
    fail(f, "not a safetensors file: header length " + std::to_string(n) + " exceeds the " +
                std::to_string(kMaxHeader >> 20) + " MiB limit");
  if (n > size - 8)
    fail(f, "not a safetensors file: header length " + std::to_string(n) + " runs past the end of the file (" +
                std::to_string(size) + " bytes)");
  if (n == 0 || static_cast<char>(base[8]) != '{') fail(f, "header does not start with '{'");
  const char* hb = reinterpret_cast<const char*>(base + 8);

  HeaderSax sax;
  const bool ok = json::sax_parse(hb, hb + n, &sax, nlohmann::detail::input_format_t::json, /*strict=*/true);
  if (!ok || !sax.error.empty()) fail(f, sax.error.empty() ? "malformed JSON header" : sax.error);
  if (!sax.root.is_object()) fail(f, "header is not a JSON object");

  const std::byte* buf = base + 8 + n;
  const uint64_t buf_size = size - 8 - n;
  struct Span {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  tensors.reserve(sax.root.size());
  for (auto& [name, entry] : sax.root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(f, "__metadata__", "is not an object of strings");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(f, "__metadata__", "value of '" + k + "' is not a string");
        metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) fail(f, name, "entry is not an object");
    for (auto& [k, v] : entry.items()) {
      (void)v;
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(f, name, "unknown key '" + k + "'");
    }
    if (!entry.contains("dtype")) fail(f, name, "missing dtype");
    if (!entry.contains("shape")) fail(f, name, "missing shape");
    if (!entry.contains("data_offsets")) fail(f, name, "missing data_offsets");
    const json& jd = entry["dtype"];
    const json& js = entry["shape"];
    const json& jo = entry["data_offsets"];
    if (!jd.is_string()) fail(f, name, "dtype is not a string");
    DType dt;
    try {
      dt = dtype_from_name(jd.get<std::string>());
    } catch (const Error& e) {
      fail(f, name, e.what());
    }
    if (!js.is_array()) fail(f, name, "shape is not an array");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const json& d : js) {
      uint64_t v;
      if (!as_index(d, &v) || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(f, name, "shape " + js.dump() + " has an entry that is not a non-negative integer");
      if (mul_overflows(numel, v, &numel)) fail(f, name, "shape " + js.dump() + " overflows");
      shape.push_back(static_cast<int64_t>(v));
    }
    if (!jo.is_array() || jo.size() != 2) fail(f, name, "data_offsets is not a pair [begin, end]");
    uint64_t b, e;
    if (!as_index(jo[0], &b) || !as_index(jo[1], &e))
      fail(f, name, "data_offsets " + jo.dump() + " are not non-negative integers");
    if (b > e) fail(f, name, "data_offsets " + jo.dump() + " end before they begin");
    if (e > buf_size)
      fail(f, name, "data_offsets " + jo.dump() + " run past the data buffer (" + std::to_string(buf_size) + " bytes)");
    uint64_t want;
    if (mul_overflows(numel, dtype_size(dt), &want) || want != e - b)
      fail(f, name, "shape " + js.dump() + " x " + dtype_name(dt) + " (" + std::to_string(dtype_size(dt)) +
                        " bytes) does not match the byte span " + std::to_string(e - b) + " of data_offsets " +
                        jo.dump());
    TensorView tv;
    tv.name = name;
    tv.dtype = dt;
    tv.shape = std::move(shape);
    tv.data = buf + b;
    tv.nbytes = static_cast<std::size_t>(e - b);
    auto it = tensors.emplace(name, std::move(tv)).first;
    spans.push_back({b, e, &it->first});
  }

  // The buffer must be covered exactly: sorted by begin, each tensor starts where the previous ends.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : (a.end != b.end ? a.end < b.end : *a.name < *b.name);
  });
  uint64_t pos = 0;
  const std::string* prev = nullptr;
  for (const Span& s : spans) {
    const std::string offs = "[" + std::to_string(s.begin) + "," + std::to_string(s.end) + "]";
    if (s.begin < pos)
      fail(f, *s.name, "data_offsets " + offs + " overlap tensor '" + *prev + "' (ends at " + std::to_string(pos) + ")");
    if (s.begin > pos)
      fail(f, *s.name, "data_offsets " + offs + " leave a gap of " + std::to_string(s.begin - pos) +
                           " unindexed bytes before them");
    pos = s.end;
    prev = s.name;
    names.push_back(*s.name);
  }
  if (pos != buf_size)
    fail(f, std::to_string(buf_size - pos) + " bytes at the end of the data buffer are not indexed by any tensor");
}

SafetensorsFile::SafetensorsFile() : impl_(std::make_unique<Impl>()) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile file;
  Impl& m = *file.impl_;
  m.path = path;
  // O_NONBLOCK: a FIFO in a file's place would block open() until some writer came; it is refused below instead.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  m.size = static_cast<std::size_t>(st.st_size);
  if (m.size > 0) {
    void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(path, std::string("cannot map: ") + std::strerror(err));
    }
    m.map = p;
    m.map_len = m.size;
    m.base = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  m.parse();
  return file;
}

SafetensorsFile SafetensorsFile::from_buffer(std::vector<std::byte> bytes, const std::string& label) {
  SafetensorsFile file;
  Impl& m = *file.impl_;
  m.path = label;
  m.owned = std::move(bytes);
  m.base = m.owned.data();
  m.size = m.owned.size();
  m.parse();
  return file;
}

SafetensorsFile SafetensorsFile::from_bytes(const void* data, std::size_t size, const std::string& label) {
  const auto* p = static_cast<const std::byte*>(data);
  return from_buffer(std::vector<std::byte>(p, p + size), label);
}

const std::string& SafetensorsFile::path() const { return impl_->path; }
const std::vector<std::string>& SafetensorsFile::names() const { return impl_->names; }
bool SafetensorsFile::has(const std::string& name) const { return impl_->tensors.count(name) != 0; }
const TensorView& SafetensorsFile::tensor(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end()) fail(impl_->path, "missing tensor '" + name + "'");
  return it->second;
}
const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return impl_->metadata; }

void SafetensorsFile::release(const TensorView& t) const {
  if (!impl_->map || t.nbytes == 0) return;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data), end = begin + t.nbytes;
  const auto lo = (begin + page - 1) / page * page, hi = end / page * page;  // whole pages inside the tensor only
  const auto map_lo = reinterpret_cast<std::uintptr_t>(impl_->map);
  if (hi <= lo || lo < map_lo || hi > map_lo + impl_->map_len) return;
  ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);  // read-only file pages: refetched on the next read
}
std::size_t SafetensorsFile::header_size() const { return static_cast<std::size_t>(load<uint64_t>(impl_->base)); }

}  // namespace statecut::io
