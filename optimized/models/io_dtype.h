/// LibTorch dtype → safetensors dtype, the one mapping the checkpoint writers use (surgery, train). Its inverse,
/// torch_dtype, is in weight_source.h. Kept in its own header so that only the writers include it.
#pragma once
#include <c10/core/ScalarType.h>

#include <stdexcept>
#include <string>

#include "optimized/io/safetensors.h"

namespace statecut {

/// Throws std::runtime_error "no safetensors dtype for torch dtype <name>" for dtypes safetensors lacks.
inline io::DType io_dtype_of(c10::ScalarType d) {
  switch (d) {
    case c10::ScalarType::Float: return io::DType::F32;
    case c10::ScalarType::Double: return io::DType::F64;
    case c10::ScalarType::BFloat16: return io::DType::BF16;
    case c10::ScalarType::Half: return io::DType::F16;
    case c10::ScalarType::Long: return io::DType::I64;
    case c10::ScalarType::Int: return io::DType::I32;
    case c10::ScalarType::Short: return io::DType::I16;
    case c10::ScalarType::Char: return io::DType::I8;
    case c10::ScalarType::Byte: return io::DType::U8;
    case c10::ScalarType::Bool: return io::DType::BOOL;
    default: break;
  }
  throw std::runtime_error(std::string("no safetensors dtype for torch dtype ") + c10::toString(d));
}

}  // namespace statecut
