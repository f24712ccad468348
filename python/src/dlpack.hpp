// DLPack's C ABI (https://dmlc.github.io/dlpack/latest/c_api.html): the unversioned structs
// every framework exchanges through "dltensor" capsules, DLPack 1.0's versioned one, and the
// module's DLPack entry points.
#pragma once

#include <cstdint>
#include <optional>

#include "convert.hpp"

namespace ferry::python {

namespace dl {

enum DeviceType : std::int32_t {
  kCPU = 1,
  kCUDA = 2,
  kCUDAHost = 3,
  kCUDAManaged = 13,
};

struct Device {
  std::int32_t device_type;
  std::int32_t device_id;
};

struct DataType {
  std::uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  std::uint8_t bits;
  std::uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  std::int32_t ndim;
  DataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements; null: compact row-major
  std::uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

// DLPack 1.0: the versioned struct ("dltensor_versioned" capsules), with flags (read-only).
struct Version {
  std::uint32_t major;
  std::uint32_t minor;
};

inline constexpr std::uint64_t kFlagReadOnly = 1;

struct ManagedTensorVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned* self);
  std::uint64_t flags;
  Tensor dl_tensor;
};

}  // namespace dl

// Tensor.__dlpack__ / __dlpack_device__ (Buffer and Lease export themselves as uint8 tensors).
nb::object tensor_dlpack(nb::handle tensor, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy);
nb::tuple tensor_dlpack_device(nb::handle tensor);

}  // namespace ferry::python
