/// safetensors checkpoints: memory-mapped reader with zero-copy views, and an atomic writer.
///
/// Format (https://huggingface.co/docs/safetensors): u64 little-endian header length N, then N bytes
/// of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
/// then the byte buffer; offsets are relative to the buffer start. The reader validates everything
/// DESIGN.md §6 lists and throws io::Error with a one-line message naming the file, the tensor and the problem.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace statecut::io {

/// A one-line, user-facing error: "<file>: <tensor>: <problem>".
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DType { BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2 };

const char* dtype_name(DType d);          ///< "F32", ...
DType dtype_from_name(const std::string&); ///< throws Error on an unknown name
std::size_t dtype_size(DType d);          ///< bytes per element

/// A view into a mapped file (or an owned buffer); valid while its SafetensorsFile lives.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
  int64_t numel() const;
};

/// Converts any numeric dtype (incl. BF16/F16/F8) to double, row-major.
std::vector<double> to_double(const TensorView& t);
/// Converts to float, row-major.
std::vector<float> to_float(const TensorView& t);
/// Convert into caller memory of t.numel() elements, without allocating (loading into preallocated tensors).
void to_double(const TensorView& t, double* out);
void to_float(const TensorView& t, float* out);

/// Single-value decoders of the narrow float formats (bit pattern → exact double).
double bf16_bits_to_double(uint16_t bits);
double f16_bits_to_double(uint16_t bits);     ///< IEEE binary16, subnormals, inf, NaN
double f8_e4m3_bits_to_double(uint8_t bits);  ///< e4m3fn: bias 7, no inf, 0x7F/0xFF NaN, max 448
double f8_e5m2_bits_to_double(uint8_t bits);  ///< e5m2: bias 15, IEEE-like inf/NaN

class SafetensorsFile {
 public:
  /// Maps `path` read-only and validates the header; throws io::Error.
  static SafetensorsFile open(const std::string& path);
  /// Parses an in-memory file (owned copy); `label` stands for the file name in errors. Used by the fuzzer.
  static SafetensorsFile from_buffer(std::vector<std::byte> bytes, const std::string& label = "<buffer>");
  static SafetensorsFile from_bytes(const void* data, std::size_t size, const std::string& label = "<buffer>");
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const;
  /// Tensor names in file order (sorted by data offset).
  const std::vector<std::string>& names() const;
  bool has(const std::string& name) const;
  /// Throws io::Error "<file>: missing tensor '<name>'".
  const TensorView& tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const;
  /// Length N of the JSON header (incl. padding); the data buffer starts at byte 8 + N.
  std::size_t header_size() const;
  /// Gives the resident pages of a mapped tensor back (madvise MADV_DONTNEED on the whole pages inside its bytes): the
  /// view stays valid, a later read brings the pages back from the file. For a caller done with a tensor of a large
  /// checkpoint (copied, checked or written out), so a pass over the file does not keep all of it resident. No-op
  /// for a file parsed from memory.
  void release(const TensorView& t) const;

 private:
  SafetensorsFile();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Builds a safetensors file. write() lays the buffer out as the official writer does (its dtype enum
/// rank, i.e. alignment, descending, then name: every tensor aligned to its element size), emits compact JSON with
/// __metadata__ first, pads the header with spaces to 8 bytes, writes to a temporary sibling and
/// renames it into place. Output is a pure function of the entries, so read → re-write is byte-identical.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, std::size_t nbytes);
  void add(const TensorView& t) { add(t.name, t.dtype, t.shape, t.data, t.nbytes); }
  /// Like add() but without a copy: `data` must stay valid until write() returns (large checkpoints).
  /// `written`, if given, runs once the entry's bytes are in the file (SafetensorsFile::release for mapped data).
  void add_borrowed(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                    std::size_t nbytes, std::function<void()> written = {});
  void set_metadata(std::map<std::string, std::string> m);
  /// Throws io::Error on a duplicate name; a failed write leaves no file at `path` (nor a temporary).
  void write(const std::string& path) const;
  /// The whole file write() would produce, in memory (tests, fuzzing).
  std::vector<std::byte> to_bytes() const;
  /// The padded header write() would emit (tensors in the official writer's order).
  std::string header_json() const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
    const std::byte* borrowed = nullptr;
    std::size_t borrowed_size = 0;
    std::function<void()> written;
  };
  std::vector<const Entry*> layout() const;  ///< entries in buffer order
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace statecut::io
