// What every part of the module shares: Status to Python exception, timeouts, names of enums,
// Python objects held from ferry's threads, and the module's wrapper types.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/ferry.hpp"

namespace ferry::python {

namespace nb = nanobind;

// A ferry error on its way to Python: the translator (module.cpp) raises the ferry.Error
// subclass of its code (ferry/_errors.py) carrying the message and where it was created.
struct StatusError {
  Status status;
};

// Raises the Status when it is not ok.
inline void check(Status status) {
  if (!status.ok()) throw StatusError{std::move(status)};
}
template <typename T>
T take(Result<T> result) {
  if (!result.ok()) throw StatusError{std::move(result).status()};
  return std::move(result).value();
}

// str(object), as Python computes it.
std::string text_of(nb::handle object);

// A CUDA stream given as an int, or as an object carrying one (torch: cuda_stream, cupy: ptr);
// TypeError otherwise.
std::uintptr_t stream_handle(nb::handle stream);

// Seconds (None: forever) to a ferry Timeout. Negative or NaN: ValueError.
Timeout to_timeout(std::optional<double> seconds, const char* argument = "timeout");

// An enumerator and its name as Python spells it (the C++ enumerator's name).
template <typename Enum>
struct EnumName {
  const char* name;
  Enum value;
};
// The enumerator called `name` among `names`; InvalidArgumentError listing them otherwise.
template <typename Enum, std::size_t N>
Enum enum_from(std::string_view name, const EnumName<Enum> (&names)[N], const char* what) {
  std::string choices;
  for (const auto& entry : names) {
    if (name == entry.name) return entry.value;
    choices += (choices.empty() ? "" : ", ") + std::string(entry.name);
  }
  throw StatusError{Status(ErrorCode::invalid_argument, "unknown " + std::string(what) + " '" +
                                                            std::string(name) + "' (" + choices +
                                                            ")")};
}

// Names as Python spells them (the C++ enumerators' names).
MemoryKind memory_kind_from(std::string_view name);
QueueKind queue_kind_from(std::string_view name);
ElementType element_type_from(std::string_view name);
std::string error_code_name(ErrorCode code);

// Whether Python code may run: false once the interpreter is finalizing (a thread taking the GIL
// then would be stopped or hang), so ferry's threads leave Python alone from then on.
bool python_running();

// A reference to a Python object that may be dropped on any thread (a pipeline's callback held by
// ferry's threads): the last owner takes the GIL to drop it, or leaks it once the interpreter is
// finalizing (nothing may touch Python then).
class SharedPyObject {
 public:
  SharedPyObject() = default;
  explicit SharedPyObject(nb::object object);
  nb::handle get() const { return holder_ ? holder_->handle : nb::handle(); }
  explicit operator bool() const { return holder_ != nullptr; }

 private:
  struct Holder {
    PyObject* handle = nullptr;
    ~Holder();
  };
  std::shared_ptr<Holder> holder_;
};

// The Python exception being handled, as a ferry Status (for errors raised by callbacks that
// ferry's threads run): a ferry.Error keeps its code, anything else is ErrorCode::internal with
// "TypeName: message". Clears the Python error. Needs the GIL.
Status status_from_python_error(std::string_view what);

// ---- Wrapper types (bound in memory.cpp, queue.cpp) ----

struct PyDevice;

// Element types of tensors exchanged by DLPack.
struct DType {
  std::string name = "uint8";
  std::uint8_t code = 1;  // DLPack: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  std::uint8_t bits = 8;
  std::uint32_t itemsize() const { return bits / 8; }
};
DType dtype_from(std::string_view name);
// Bytes of a tensor of `shape` and `dtype`, checked: InvalidArgumentError for a negative extent
// or a size past 64 bits (naming `call`).
std::uint64_t byte_count(const DType& dtype, const std::vector<std::int64_t>& shape,
                         const char* call);

// A typed view of ferry memory: what ops write and DLPack exports. It holds the memory (a buffer
// or a lease range) alive, knows when its contents are ready, and remembers the CUDA streams it
// was handed to, so that releasing it orders ferry behind them.
struct PyTensor {
  BufferRef ref;               // the bytes viewed: offset 0 of ref is element 0
  DType dtype;
  std::vector<std::int64_t> shape;
  TimelinePoint ready;         // contents complete here (no timeline: already)
  Device device;               // the device whose memory this is
  std::vector<std::uintptr_t> consumer_streams;  // DLPack consumers' CUDA streams
  std::mutex mutex;            // guards consumer_streams

  std::uint64_t nbytes() const;
  // The point at which every consumer stream's work so far completes, on the compute queue;
  // no timeline where there were none (or on a backend without streams).
  TimelinePoint consumers_done();
};

struct PyBuffer {
  Buffer buffer;
  Device device;
};

struct PyLease {
  Lease lease;
  Device device;
};

struct PyPool {
  StagingPool pool;
  Device device;
};

struct PyDevice {
  Device device;
  // Default staging pools for upload()/download() and the pipelines, made on first use.
  std::mutex pools_mutex;
  std::optional<StagingPool> upload_pool;
  std::optional<StagingPool> readback_pool;
  StagingPool default_pool(MemoryKind kind);
  PyDevice() = default;
  PyDevice(const PyDevice&) = delete;
  PyDevice& operator=(const PyDevice&) = delete;
  ~PyDevice();
};

// Memory arguments: a Buffer, a Lease or a Tensor (its range). Tensors' ready points (not yet
// reached) are appended to `waits` when given.
BufferRef memory_ref(nb::handle object, std::vector<TimelinePoint>* waits = nullptr,
                     const char* argument = "memory");

// A host array's bytes (buffer protocol, C-contiguous, with its element format), held while
// `view` lives.
struct HostBytes {
  Py_buffer view{};
  bool held = false;
  HostBytes() = default;
  // InvalidArgumentError naming `argument` when `object` has no such buffer.
  HostBytes(nb::handle object, bool writable, const char* argument);
  // The same without raising: false (the Python error cleared) when `object` has no such buffer.
  bool acquire(nb::handle object, bool writable);
  HostBytes(const HostBytes&) = delete;
  HostBytes& operator=(const HostBytes&) = delete;
  HostBytes(HostBytes&& other) noexcept : view(other.view), held(other.held) { other.held = false; }
  ~HostBytes();
  std::span<std::byte> bytes() const {
    return {static_cast<std::byte*>(view.buf), static_cast<std::size_t>(view.len)};
  }
};

// A range of `ref`: [offset, offset + size) of it (out_of_range otherwise), naming `argument`.
BufferRef sub_ref(const BufferRef& ref, std::uint64_t offset, std::uint64_t size,
                  const char* argument);
// A Python object for a new tensor (owned by Python).
nb::object make_tensor(BufferRef ref, DType dtype, std::vector<std::int64_t> shape,
                       TimelinePoint ready, Device device);
// The dtype name and shape of an array-like (numpy, torch, ...): uint8 [nbytes] when it has none.
void array_type(nb::handle array, std::uint64_t nbytes, DType& dtype,
                std::vector<std::int64_t>& shape);
// TimelinePoints from a Python sequence of them.
std::vector<TimelinePoint> points_from(nb::handle sequence, const char* argument);

using DeviceClass = nb::class_<PyDevice>;
void bind_memory(nb::module_& m, DeviceClass& device);
void bind_queue(nb::module_& m, DeviceClass& device);
void bind_dlpack(nb::module_& m);
void bind_pipelines(nb::module_& m);
void bind_search(nb::module_& m);
// Closes the pipelines still alive (at interpreter exit, before finalizing: their threads run
// Python callbacks).
void close_live_pipelines();

}  // namespace ferry::python
