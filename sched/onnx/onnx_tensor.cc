#include "sched/onnx/onnx_tensor.h"

#include "tictac/sched/graph.h"

namespace tictac::sched {
namespace {

// Bits per element of each onnx.TensorProto.DataType, 0 = not fixed-size or
// unknown. Numbers past 16 (FLOAT8*, UINT4/INT4, FLOAT4E2M1) came after the
// ONNX release this is built against, so they are listed by value.
unsigned elementBits(int type) {
  switch (type) {
    case 21:  // UINT4
    case 22:  // INT4
    case 23:  // FLOAT4E2M1
      return 4;
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::BOOL:
    case 17:  // FLOAT8E4M3FN
    case 18:  // FLOAT8E4M3FNUZ
    case 19:  // FLOAT8E5M2
    case 20:  // FLOAT8E5M2FNUZ
      return 8;
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return 16;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
      return 32;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::COMPLEX64:
      return 64;
    case onnx::TensorProto::COMPLEX128:
      return 128;
    default:
      return 0;
  }
}

uint64_t elementCount(const onnx::TensorProto& t, const std::string& where) {
  uint64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) {
      throw InputError(where + ": negative dimension " + std::to_string(d));
    }
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      throw InputError(where + ": element count overflows 64 bits");
    }
  }
  return n;
}

}  // namespace

uint64_t tensorBytes(const onnx::TensorProto& t, const std::string& where) {
  const int type = t.data_type();
  if (type == onnx::TensorProto::STRING) {
    uint64_t total = 0;
    for (const std::string& s : t.string_data()) total += s.size();
    return total;
  }
  const unsigned bits = elementBits(type);
  if (bits == 0) {
    throw InputError(where + ": " +
                     (type == onnx::TensorProto::UNDEFINED
                          ? std::string("data type is undefined")
                          : "unknown data type " + std::to_string(type)));
  }
  const uint64_t n = elementCount(t, where);
  uint64_t total_bits = 0;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(bits), &total_bits)) {
    throw InputError(where + ": size in bytes overflows 64 bits");
  }
  const uint64_t bytes = total_bits / 8 + (total_bits % 8 != 0 ? 1 : 0);
  if (t.has_raw_data() && t.data_location() != onnx::TensorProto::EXTERNAL &&
      t.raw_data().size() != bytes) {
    throw InputError(where + ": raw_data holds " + std::to_string(t.raw_data().size()) +
                     " bytes but the dims and data type say " + std::to_string(bytes) +
                     " (corrupt file?)");
  }
  return bytes;
}

uint64_t sparseTensorBytes(const onnx::SparseTensorProto& t, const std::string& where) {
  const uint64_t values = tensorBytes(t.values(), where + " values");
  const uint64_t indices = tensorBytes(t.indices(), where + " indices");
  uint64_t total = 0;
  if (__builtin_add_overflow(values, indices, &total)) {
    throw InputError(where + ": size in bytes overflows 64 bits");
  }
  return total;
}

}  // namespace tictac::sched
