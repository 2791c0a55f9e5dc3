// Every dtype converts to double/float exactly: hand-picked bit patterns (normals, subnormals, limits,
// inf/NaN, -0) for the narrow floats, an exhaustive cross-check (f16 against the compiler's _Float16,
// e5m2 against f16 since e5m2 is f16's top byte), and the extremes of every integer type.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "optimized/io/safetensors.h"
#include "tests/io/io_test_util.h"

namespace statecut::io {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
TensorView view_of(const std::vector<T>& v, DType d) {
  TensorView t;
  t.name = "t";
  t.dtype = d;
  t.shape = {static_cast<int64_t>(v.size())};
  t.data = reinterpret_cast<const std::byte*>(v.data());
  t.nbytes = v.size() * sizeof(T);
  return t;
}

/// Checks bits → value through both the scalar decoder and to_double/to_float of a one-element view.
template <typename Bits>
void expect_value(DType d, double (*decode)(Bits), Bits bits, double want) {
  SCOPED_TRACE(std::string(dtype_name(d)) + " bits 0x" + [&] {
    char b[8];
    std::snprintf(b, sizeof b, "%x", unsigned(bits));
    return std::string(b);
  }());
  const double got = decode(bits);
  const std::vector<Bits> one{bits};
  const double via_view = to_double(view_of(one, d))[0];
  const float via_float = to_float(view_of(one, d))[0];
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got));
    EXPECT_TRUE(std::isnan(via_view));
    EXPECT_TRUE(std::isnan(via_float));
    return;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(via_view, want);
  EXPECT_EQ(via_float, static_cast<float>(want));  // every narrow float is exactly representable in f32
  EXPECT_EQ(std::signbit(got), std::signbit(want));
}

/// A hand-picked code of a narrow float and its exact value.
struct Code {
  unsigned bits;
  double want;
};

template <typename Bits>
void expect_values(DType d, double (*decode)(Bits), std::initializer_list<Code> codes) {
  for (const Code& c : codes) expect_value<Bits>(d, decode, static_cast<Bits>(c.bits), c.want);
}

TEST(Unit_DtypeConversion, bfloat16HandValues) {
  expect_values<uint16_t>(DType::BF16, bf16_bits_to_double, {
      {0x3F80, 1.0},
      {0xC000, -2.0},
      {0x3EAB, 0.333984375},              // 1/3 rounded to 8 significant bits
      {0x0001, std::ldexp(1.0, -133)},    // smallest subnormal
      {0x7F7F, std::ldexp(255.0, 120)},   // largest finite
      {0x7F80, kInf},
      {0xFF80, -kInf},
      {0x7FC0, NAN},
      {0x8000, -0.0},
  });
}

TEST(Unit_DtypeConversion, float16HandValuesIncludingSubnormals) {
  expect_values<uint16_t>(DType::F16, f16_bits_to_double, {
      {0x3C00, 1.0},
      {0x3555, 0.333251953125},
      {0x0001, std::ldexp(1.0, -24)},     // smallest subnormal
      {0x03FF, std::ldexp(1023.0, -24)},  // largest subnormal
      {0x0400, std::ldexp(1.0, -14)},     // smallest normal
      {0x8001, -std::ldexp(1.0, -24)},
      {0x7BFF, 65504.0},
      {0x7C00, kInf},
      {0xFC00, -kInf},
      {0x7E00, NAN},
      {0x8000, -0.0},
  });
}

TEST(Unit_DtypeConversion, float8E4m3HandValues) {
  expect_values<uint8_t>(DType::F8_E4M3, f8_e4m3_bits_to_double, {
      {0x38, 1.0},
      {0xB8, -1.0},
      {0x7E, 448.0},                      // max finite
      {0x78, 256.0},                      // exponent field 15 is finite
      {0x7F, NAN},
      {0xFF, NAN},
      {0x01, std::ldexp(1.0, -9)},        // smallest subnormal
      {0x07, std::ldexp(7.0, -9)},        // largest subnormal
      {0x08, std::ldexp(1.0, -6)},        // smallest normal
      {0x80, -0.0},
  });
}

TEST(Unit_DtypeConversion, float8E5m2HandValues) {
  expect_values<uint8_t>(DType::F8_E5M2, f8_e5m2_bits_to_double, {
      {0x3C, 1.0},
      {0xC0, -2.0},
      {0x7B, 57344.0},                    // max finite
      {0x7C, kInf},
      {0xFC, -kInf},
      {0x7D, NAN},
      {0x01, std::ldexp(1.0, -16)},       // smallest subnormal
      {0x03, std::ldexp(3.0, -16)},
      {0x04, std::ldexp(1.0, -14)},       // smallest normal
  });
}

TEST(Unit_DtypeConversion, e5m2IsTheTopByteOfFloat16ForAllCodes) {
  for (int c = 0; c < 256; ++c) {
    const double a = f8_e5m2_bits_to_double(static_cast<uint8_t>(c));
    const double b = f16_bits_to_double(static_cast<uint16_t>(c << 8));
    EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << "code " << c;
  }
}

TEST(Unit_DtypeConversion, e4m3IsOddSymmetricAndStrictlyIncreasing) {
  double prev = -1;
  for (int c = 0; c < 0x7F; ++c) {
    const double v = f8_e4m3_bits_to_double(static_cast<uint8_t>(c));
    EXPECT_GT(v, prev) << "code " << c;
    EXPECT_EQ(f8_e4m3_bits_to_double(static_cast<uint8_t>(c | 0x80)), -v) << "code " << c;
    prev = v;
  }
}

#ifdef __FLT16_MAX__
TEST(Unit_DtypeConversion, float16MatchesCompilerFloat16ForAll65536Codes) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint16_t bits = static_cast<uint16_t>(c);
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    const double want = static_cast<double>(h), got = f16_bits_to_double(bits);
    ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << "code " << c;
  }
}
#endif

TEST(Unit_DtypeConversion, integerExtremesAndBool) {
  EXPECT_EQ(to_double(view_of(std::vector<int8_t>{-128, 127}, DType::I8)), (std::vector<double>{-128, 127}));
  EXPECT_EQ(to_double(view_of(std::vector<uint8_t>{0, 255}, DType::U8)), (std::vector<double>{0, 255}));
  EXPECT_EQ(to_double(view_of(std::vector<int16_t>{-32768, 32767}, DType::I16)), (std::vector<double>{-32768, 32767}));
  EXPECT_EQ(to_double(view_of(std::vector<uint16_t>{65535}, DType::U16)), (std::vector<double>{65535}));
  EXPECT_EQ(to_double(view_of(std::vector<int32_t>{std::numeric_limits<int32_t>::min()}, DType::I32)),
            (std::vector<double>{-2147483648.0}));
  EXPECT_EQ(to_double(view_of(std::vector<uint32_t>{4294967295u}, DType::U32)), (std::vector<double>{4294967295.0}));
  EXPECT_EQ(to_double(view_of(std::vector<int64_t>{-(int64_t{1} << 62)}, DType::I64)),
            (std::vector<double>{-std::ldexp(1.0, 62)}));
  EXPECT_EQ(to_double(view_of(std::vector<uint64_t>{uint64_t{1} << 63}, DType::U64)),
            (std::vector<double>{std::ldexp(1.0, 63)}));
  EXPECT_EQ(to_float(view_of(std::vector<uint8_t>{0, 1, 2, 255}, DType::BOOL)), (std::vector<float>{0, 1, 1, 1}));
  EXPECT_EQ(to_double(view_of(std::vector<float>{-1.5f, 3e38f}, DType::F32)), (std::vector<double>{-1.5, double(3e38f)}));
  EXPECT_EQ(to_float(view_of(std::vector<double>{0.1}, DType::F64)), (std::vector<float>{0.1f}));
}

TEST(Unit_DtypeConversion, eachElementOfALongViewIsItsOwnCode) {
  // The views above hold one element; a tensor holds many: element i of the output is code i of the input, for
  // every code of the 8-bit floats and a spread of 16-bit ones.
  std::vector<uint8_t> bytes(256);
  for (int c = 0; c < 256; ++c) bytes[c] = static_cast<uint8_t>(c);
  const auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  for (const auto& [d, decode] : {std::pair{DType::F8_E4M3, &f8_e4m3_bits_to_double},
                                  std::pair{DType::F8_E5M2, &f8_e5m2_bits_to_double}}) {
    const std::vector<double> all = to_double(view_of(bytes, d));
    const std::vector<float> allf = to_float(view_of(bytes, d));
    for (int c = 0; c < 256; ++c) {
      EXPECT_TRUE(same(all[c], decode(static_cast<uint8_t>(c)))) << dtype_name(d) << " code " << c;
      EXPECT_TRUE(same(allf[c], static_cast<float>(decode(static_cast<uint8_t>(c))))) << dtype_name(d) << " code " << c;
    }
  }
  std::vector<uint16_t> halves;
  for (uint32_t c = 0; c < 65536; c += 251) halves.push_back(static_cast<uint16_t>(c));
  for (const auto& [d, decode] :
       {std::pair{DType::F16, &f16_bits_to_double}, std::pair{DType::BF16, &bf16_bits_to_double}}) {
    const std::vector<double> all = to_double(view_of(halves, d));
    for (size_t i = 0; i < halves.size(); ++i)
      EXPECT_TRUE(same(all[i], decode(halves[i]))) << dtype_name(d) << " code " << halves[i];
  }
}

TEST(Unit_DtypeConversion, intoCallerBufferEqualsAllocatingForm) {
  const std::vector<uint16_t> bits{0x3F80, 0x0001, 0xC000, 0x7BFF};
  for (DType d : {DType::BF16, DType::F16}) {
    const auto v = view_of(bits, d);
    std::vector<float> f(5, 42.0f);
    std::vector<double> g(5, 42.0);
    to_float(v, f.data());
    to_double(v, g.data());
    EXPECT_EQ(std::vector<float>(f.begin(), f.begin() + 4), to_float(v)) << dtype_name(d);
    EXPECT_EQ(std::vector<double>(g.begin(), g.begin() + 4), to_double(v)) << dtype_name(d);
    EXPECT_EQ(f[4], 42.0f);  // writes exactly numel elements
    EXPECT_EQ(g[4], 42.0);
  }
}

TEST(Unit_DtypeConversion, unalignedViewsConvert) {
  // A view into an odd address (e.g. an F32 tensor after a U8 one in a foreign file) must still convert.
  std::vector<unsigned char> buf(1 + 8);
  const float v[2] = {1.25f, -7.0f};
  std::memcpy(buf.data() + 1, v, 8);
  TensorView t;
  t.dtype = DType::F32;
  t.shape = {2};
  t.data = reinterpret_cast<const std::byte*>(buf.data() + 1);
  t.nbytes = 8;
  EXPECT_EQ(to_float(t), (std::vector<float>{1.25f, -7.0f}));
}

TEST(Unit_DtypeConversion, namesAndSizesRoundTrip) {
  const DType all[] = {DType::BOOL, DType::U8,  DType::I8,  DType::U16,  DType::I16,     DType::U32,    DType::I32,
                       DType::U64,  DType::I64, DType::F16, DType::BF16, DType::F32,     DType::F64,    DType::F8_E4M3,
                       DType::F8_E5M2};
  const std::size_t sizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
  for (std::size_t i = 0; i < std::size(all); ++i) {
    EXPECT_EQ(dtype_from_name(dtype_name(all[i])), all[i]);
    EXPECT_EQ(dtype_size(all[i]), sizes[i]) << dtype_name(all[i]);
  }
  EXPECT_THROW(dtype_from_name("F8_E4M3FN"), Error);
}

}  // namespace
}  // namespace statecut::io
