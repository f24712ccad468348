// Conversions shared by the module's parts (convert.hpp).
#include "convert.hpp"

#include <nanobind/stl/string.h>

#include <cmath>
#include <limits>

namespace ferry::python {

namespace {

[[noreturn]] void invalid(std::string message) {
  throw StatusError{Status(ErrorCode::invalid_argument, std::move(message))};
}

}  // namespace

std::string text_of(nb::handle object) {
  nb::object text = nb::steal(PyObject_Str(object.ptr()));
  if (!text.is_valid()) throw nb::python_error();
  return nb::cast<std::string>(text);
}

Timeout to_timeout(std::optional<double> seconds, const char* argument) {
  if (!seconds) return kInfinite;
  const double s = *seconds;
  if (std::isnan(s) || s < 0) {
    throw nb::value_error((std::string(argument) + " must be >= 0 seconds or None").c_str());
  }
  // Beyond ~292 years the nanosecond count overflows: that is forever.
  if (s >= 9.0e9) return kInfinite;
  return Timeout(static_cast<Timeout::rep>(s * 1e9));
}

MemoryKind memory_kind_from(std::string_view name) {
  static constexpr EnumName<MemoryKind> kKinds[] = {{"device", MemoryKind::device},
                                                    {"host_upload", MemoryKind::host_upload},
                                                    {"host_readback", MemoryKind::host_readback}};
  return enum_from(name, kKinds, "memory kind");
}

QueueKind queue_kind_from(std::string_view name) {
  static constexpr EnumName<QueueKind> kKinds[] = {{"compute", QueueKind::compute},
                                                   {"upload", QueueKind::upload},
                                                   {"download", QueueKind::download}};
  return enum_from(name, kKinds, "queue kind");
}

ElementType element_type_from(std::string_view name) {
  static constexpr EnumName<ElementType> kTypes[] = {{"float32", ElementType::float32},
                                                     {"float16", ElementType::float16},
                                                     {"bfloat16", ElementType::bfloat16}};
  return enum_from(name, kTypes, "element type");
}

std::string error_code_name(ErrorCode code) { return std::string(to_string(code)); }

DType dtype_from(std::string_view name) {
  struct Entry {
    const char* name;
    std::uint8_t code;
    std::uint8_t bits;
  };
  static constexpr Entry kTypes[] = {
      {"uint8", 1, 8},     {"int8", 0, 8},      {"uint16", 1, 16},   {"int16", 0, 16},
      {"uint32", 1, 32},   {"int32", 0, 32},    {"uint64", 1, 64},   {"int64", 0, 64},
      {"float16", 2, 16},  {"bfloat16", 4, 16}, {"float32", 2, 32},  {"float64", 2, 64},
      {"bool", 6, 8},
  };
  for (const Entry& entry : kTypes) {
    if (name == entry.name) return DType{entry.name, entry.code, entry.bits};
  }
  invalid("unknown dtype '" + std::string(name) +
          "' (uint8, int8, uint16, int16, uint32, int32, uint64, int64, float16, bfloat16, "
          "float32, float64 or bool)");
}

SharedPyObject::SharedPyObject(nb::object object) : holder_(std::make_shared<Holder>()) {
  holder_->handle = object.release().ptr();
}

bool python_running() {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing() != 0;
#else
  const bool finalizing = _Py_IsFinalizing() != 0;
#endif
  return !finalizing && nb::is_alive();
}

SharedPyObject::Holder::~Holder() {
  if (handle == nullptr || !python_running()) return;  // finalizing: leave it
  nb::gil_scoped_acquire gil;
  Py_DECREF(handle);
}

Status status_from_python_error(std::string_view what) {
  nb::python_error error;  // takes (and clears) the error being handled
  nb::handle type = error.type();
  nb::object value = nb::borrow(error.value());
  std::string type_name = text_of(type.attr("__name__"));
  std::string text = text_of(value);
  ErrorCode code = ErrorCode::internal;
  // A ferry.Error raised by the callback keeps its code.
  if (nb::hasattr(value, "code") && nb::hasattr(value, "where")) {
    const std::string name = text_of(value.attr("code"));
    for (int c = 0; c < kErrorCodeCount; ++c) {
      if (to_string(static_cast<ErrorCode>(c)) == name) code = static_cast<ErrorCode>(c);
    }
    if (nb::hasattr(value, "message")) text = text_of(value.attr("message"));
  }
  return Status(code, std::string(what) + " raised " + type_name + ": " + text);
}

std::uintptr_t stream_handle(nb::handle stream) {
  if (nb::hasattr(stream, "cuda_stream")) return nb::cast<std::uintptr_t>(stream.attr("cuda_stream"));
  if (nb::hasattr(stream, "ptr")) return nb::cast<std::uintptr_t>(stream.attr("ptr"));
  if (PyLong_Check(stream.ptr()) == 0) {
    throw nb::type_error("a CUDA stream is an int, or an object with `cuda_stream` (torch) or "
                         "`ptr` (cupy)");
  }
  return nb::cast<std::uintptr_t>(stream);
}

std::uint64_t byte_count(const DType& dtype, const std::vector<std::int64_t>& shape,
                         const char* call) {
  std::uint64_t n = dtype.itemsize();
  for (const std::int64_t extent : shape) {
    if (extent < 0) invalid(std::string(call) + ": negative extent " + std::to_string(extent));
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(extent), &n)) {
      invalid(std::string(call) + ": the shape's size overflows 64 bits");
    }
  }
  return n;
}

// Shapes are checked when tensors are made (byte_count), so this cannot overflow.
std::uint64_t PyTensor::nbytes() const { return byte_count(dtype, shape, "Tensor"); }

TimelinePoint PyTensor::consumers_done() {
  std::vector<std::uintptr_t> streams;
  {
    std::lock_guard lock(mutex);
    streams.swap(consumer_streams);
  }
  TimelinePoint done;
  if (!device) return done;
  for (const std::uintptr_t stream : streams) {
    done = take(native_stream_point(device.queue(QueueKind::compute), stream));
  }
  return done;
}

StagingPool PyDevice::default_pool(MemoryKind kind) {
  std::lock_guard lock(pools_mutex);
  auto& pool = kind == MemoryKind::host_upload ? upload_pool : readback_pool;
  if (!pool) {
    StagingPoolOptions options;
    options.kind = kind;
    options.slab_bytes = 16ull << 20;
    options.max_slabs = 4;
    options.reserved_slabs = 1;
    pool = take(device.create_staging_pool(options));
  }
  return *pool;
}

BufferRef memory_ref(nb::handle object, std::vector<TimelinePoint>* waits, const char* argument) {
  const auto released = [argument](const char* what) {
    return StatusError{Status(ErrorCode::released,
                              std::string(argument) + ": the " + what + " was released")};
  };
  if (nb::isinstance<PyBuffer>(object)) {
    const Buffer& buffer = nb::cast<PyBuffer&>(object).buffer;
    if (!buffer) throw released("buffer");
    return BufferRef(buffer);
  }
  if (nb::isinstance<PyLease>(object)) {
    const Lease& lease = nb::cast<PyLease&>(object).lease;
    if (!lease) throw released("lease");
    return BufferRef(lease);
  }
  if (nb::isinstance<PyTensor>(object)) {
    PyTensor& tensor = nb::cast<PyTensor&>(object);
    if (!tensor.ref.buffer) throw released("tensor's memory (its batch or buffer)");
    if (waits != nullptr && tensor.ready.timeline && !tensor.ready.reached()) {
      waits->push_back(tensor.ready);
    }
    return tensor.ref;
  }
  throw nb::type_error((std::string(argument) + " must be a ferry Buffer, Lease or Tensor, not " +
                        text_of(object.type().attr("__name__")))
                           .c_str());
}

bool HostBytes::acquire(nb::handle object, bool writable) {
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(object.ptr(), &view, flags) != 0) {
    PyErr_Clear();
    return false;
  }
  held = true;
  return true;
}

HostBytes::HostBytes(nb::handle object, bool writable, const char* argument) {
  if (!acquire(object, writable)) {
    invalid(std::string(argument) + " must be a " + (writable ? "writable " : "") +
            "C-contiguous host array (buffer protocol), not " +
            text_of(object.type().attr("__name__")) +
            (writable ? " (or it is read-only / not contiguous)" : " (or it is not contiguous)"));
  }
}

HostBytes::~HostBytes() {
  if (held) PyBuffer_Release(&view);
}

}  // namespace ferry::python
