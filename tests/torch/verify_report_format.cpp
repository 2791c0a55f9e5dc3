// How verify's report writes a figure (verify_report.h fmt): whole numbers as integers (counts of differing entries,
// failing tensors), figures in [1e-3, 1e4) with four significant digits, the rest as two-digit exponents (the
// normwise errors, 1e-16 to 1e-3), a NaN as "-" (no figure) and infinities as such.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "optimized/verify/verify_report.h"

namespace {
using statecut::verify::fmt;

TEST(Verify_Report, figuresPrintAsIntegersShortDecimalsOrExponents) {
  EXPECT_EQ(fmt(0.0), "0");
  EXPECT_EQ(fmt(2.0), "2");
  EXPECT_EQ(fmt(-3.0), "-3");
  EXPECT_EQ(fmt(123456789.0), "123456789");
  EXPECT_EQ(fmt(1e9), "1.00e+09");  // past 1e9 a whole number is an exponent too
  EXPECT_EQ(fmt(1.5), "1.5");
  EXPECT_EQ(fmt(-0.25), "-0.25");
  EXPECT_EQ(fmt(0.001), "0.001");
  EXPECT_EQ(fmt(3.14159), "3.142");
  EXPECT_EQ(fmt(1234.56), "1235");
  EXPECT_EQ(fmt(3.73e-7), "3.73e-07");
  EXPECT_EQ(fmt(9.99e-4), "9.99e-04");
  EXPECT_EQ(fmt(12345.5), "1.23e+04");
  EXPECT_EQ(fmt(std::nan("")), "-");
  EXPECT_EQ(fmt(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(fmt(-std::numeric_limits<double>::infinity()), "-inf");
}

}  // namespace
