// sched/onnx/onnx_tensor.h: the size in bytes of an ONNX tensor, the amount a
// worker receives for an initializer. Internal to sched/onnx (needs protobuf).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace tictac::sched {

// Element count (product of dims; 1 for a scalar) x element size of the data
// type; 4-bit types round up to whole bytes, strings count their bytes.
// Throws InputError, prefixed with `where` (e.g. "model.onnx: initializer
// 'w'"), for an undefined or unknown data type, a negative dim, a size that
// overflows 64 bits, or raw_data whose length disagrees with the dims.
uint64_t tensorBytes(const onnx::TensorProto& t, const std::string& where);

// Values plus indices of a sparse initializer, as sent on the wire.
uint64_t sparseTensorBytes(const onnx::SparseTensorProto& t, const std::string& where);

}  // namespace tictac::sched
