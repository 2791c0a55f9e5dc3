// safetensors reader (mmap, zero-copy, validating) and writer (canonical layout, atomic rename).
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

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
  *out = a * b;
  return false;
}

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
    fail(f, "header length " + std::to_string(n) + " exceeds the " + std::to_string(kMaxHeader >> 20) + " MiB limit");
  if (n > size - 8)
    fail(f, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
                " bytes)");
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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
std::size_t SafetensorsFile::header_size() const { return static_cast<std::size_t>(load<uint64_t>(impl_->base)); }

// ---- writer ----------------------------------------------------------------

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

void write_all(int fd, const void* data, std::size_t n, const std::string& tmp) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(tmp + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                            std::size_t nbytes) {
  check_entry(name, dtype, shape, nbytes);
  Entry e{name, dtype, std::move(shape), {}};
  const auto* p = static_cast<const std::byte*>(data);
  e.bytes.assign(p, p + nbytes);
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add_borrowed(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                     const void* data, std::size_t nbytes) {
  check_entry(name, dtype, shape, nbytes);
  Entry e{name, dtype, std::move(shape), {}};
  e.borrowed = static_cast<const std::byte*>(data);
  e.borrowed_size = nbytes;
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
    write_all(fd, &n, 8, tmp);
    write_all(fd, header.data(), header.size(), tmp);
    for (const Entry* e : order) {
      if (e->borrowed) write_all(fd, e->borrowed, e->borrowed_size, tmp);
      else write_all(fd, e->bytes.data(), e->bytes.size(), tmp);
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
