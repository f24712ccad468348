// DLPack both ways: ferry tensors as "dltensor" capsules (with the stream handshake through
// ferry's timelines, ferry/interop.hpp) and other libraries' arrays as ferry tensors, no copies.
#include "dlpack.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <algorithm>

namespace ferry::python {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";

struct ExportContext {
  dl::ManagedTensor managed{};
  dl::ManagedTensorVersioned versioned{};
  BufferRef ref;  // keeps the memory alive while the consumer holds it
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

void delete_export(dl::ManagedTensor* managed) {
  delete static_cast<ExportContext*>(managed->manager_ctx);
}
void delete_versioned_export(dl::ManagedTensorVersioned* managed) {
  delete static_cast<ExportContext*>(managed->manager_ctx);
}

void capsule_destructor(PyObject* capsule) {
  // Never consumed: the capsule still owns the tensor.
  if (PyCapsule_IsValid(capsule, kCapsuleName) != 0) {
    auto* managed = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  } else if (PyCapsule_IsValid(capsule, kVersionedName) != 0) {
    auto* managed =
        static_cast<dl::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
}

dl::Device dl_device_of(const NativeMemory& memory) {
  switch (memory.kind) {
    case NativeMemoryKind::host: return {dl::kCPU, 0};
    case NativeMemoryKind::cuda_pinned_host: return {dl::kCUDAHost, 0};
    case NativeMemoryKind::cuda_device: return {dl::kCUDA, memory.device_ordinal};
  }
  return {dl::kCPU, 0};
}

// A stream argument as DLPack gives it: None, -1 (no synchronization) or a handle.
std::optional<std::intptr_t> stream_argument(nb::handle stream) {
  if (stream.is_none()) return std::nullopt;
  return nb::cast<std::intptr_t>(stream);
}

// Runs `release(argument)` where Python may be used: at once when this thread holds the GIL,
// else as a pending call on the main thread, so that a ferry thread dropping imported memory
// never blocks on the interpreter; never once it is finalizing (the process is ending: leaked).
void release_with_python(int (*release)(void*), void* argument) {
  if (PyGILState_Check() != 0) {
    (void)release(argument);
    return;
  }
  if (!python_running()) return;
  (void)Py_AddPendingCall(release, argument);  // a full queue leaks it rather than blocking
}

// The DLManagedTensor of an imported array, handed back to its producer's deleter (NumPy's and
// CuPy's take the GIL) when ferry is done with the memory.
template <typename Managed>
void release_import(Managed* managed) {
  if (managed == nullptr || managed->deleter == nullptr) return;
  release_with_python(
      [](void* argument) -> int {
        auto* m = static_cast<Managed*>(argument);
        m->deleter(m);
        return 0;
      },
      managed);
}

// A buffer-protocol export held for an imported host array, released the same way.
struct HeldView {
  Py_buffer view{};
};
void release_view(HeldView* held) {
  if (held == nullptr) return;
  release_with_python(
      [](void* argument) -> int {
        auto* h = static_cast<HeldView*>(argument);
        PyBuffer_Release(&h->view);
        delete h;
        return 0;
      },
      held);
}

[[noreturn]] void fail(ErrorCode code, std::string message) {
  throw StatusError{Status(code, "from_dlpack: " + std::move(message))};
}

DType dtype_of(const dl::DataType& type) {
  if (type.lanes != 1) fail(ErrorCode::invalid_argument, "vector dtypes (lanes > 1) are not supported");
  const char* name = nullptr;
  switch (type.code) {
    case 0: name = type.bits == 8 ? "int8" : type.bits == 16 ? "int16" : type.bits == 32 ? "int32" : type.bits == 64 ? "int64" : nullptr; break;
    case 1: name = type.bits == 8 ? "uint8" : type.bits == 16 ? "uint16" : type.bits == 32 ? "uint32" : type.bits == 64 ? "uint64" : nullptr; break;
    case 2: name = type.bits == 16 ? "float16" : type.bits == 32 ? "float32" : type.bits == 64 ? "float64" : nullptr; break;
    case 4: name = type.bits == 16 ? "bfloat16" : nullptr; break;
    case 6: name = type.bits == 8 ? "bool" : nullptr; break;
    default: break;
  }
  if (name == nullptr) {
    fail(ErrorCode::invalid_argument, "unsupported dtype (DLPack code " + std::to_string(type.code) +
                                          ", " + std::to_string(type.bits) + " bits)");
  }
  return dtype_from(name);
}

std::string describe_strides(const dl::Tensor& t) {
  std::string text = "(";
  for (int i = 0; i < t.ndim; ++i) text += std::to_string(t.strides[i]) + (i + 1 < t.ndim ? ", " : "");
  return text + ")";
}

nb::object wrap_import(PyDevice& device, std::span<std::byte> bytes, MemoryKind kind,
                       std::shared_ptr<void> owner, DType dtype, std::vector<std::int64_t> shape,
                       bool cuda_device_memory) {
  Result<Buffer> buffer = [&] {
    nb::gil_scoped_release unlocked;
    return wrap_native_memory(device.device, bytes, kind, std::move(owner));
  }();
  Buffer wrapped = take(std::move(buffer));
  TimelinePoint ready;
  if (cuda_device_memory) {
    // The producer ordered the legacy default stream after its work (stream=1); the compute
    // queue now waits for that stream, and the tensor is ready at the point after.
    nb::gil_scoped_release unlocked;
    ready = take(native_stream_point(device.device.queue(QueueKind::compute), 1));
  }
  return make_tensor(BufferRef(wrapped), std::move(dtype), std::move(shape), std::move(ready),
                     device.device);
}

nb::object from_dlpack(nb::handle array, PyDevice& device, std::optional<std::string> kind_name) {
  // ferry's own objects: the same memory.
  if (nb::isinstance<PyTensor>(array)) return nb::borrow(array);
  if (nb::isinstance<PyBuffer>(array) || nb::isinstance<PyLease>(array)) {
    return nb::getattr(array, "as_tensor")();
  }
  const Backend backend = device.device.backend();
  std::optional<MemoryKind> kind;
  if (kind_name) kind = memory_kind_from(*kind_name);

  if (!nb::hasattr(array, "__dlpack__")) {
    // A buffer-protocol object (bytearray, memoryview, array.array): host memory.
    auto* held = new HeldView();
    if (PyObject_GetBuffer(array.ptr(), &held->view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) {
      PyErr_Clear();
      delete held;
      fail(ErrorCode::invalid_argument,
           "the object has neither __dlpack__ nor a writable C-contiguous buffer");
    }
    std::span<std::byte> bytes(static_cast<std::byte*>(held->view.buf),
                               static_cast<std::size_t>(held->view.len));
    std::shared_ptr<void> owner(held, [](void* h) { release_view(static_cast<HeldView*>(h)); });
    const MemoryKind chosen =
        kind.value_or(backend == Backend::cpu ? MemoryKind::device : MemoryKind::host_upload);
    return wrap_import(device, bytes, chosen, std::move(owner), dtype_from("uint8"),
                       {static_cast<std::int64_t>(bytes.size())}, false);
  }

  const nb::tuple where = nb::cast<nb::tuple>(array.attr("__dlpack_device__")());
  const int device_type = nb::cast<int>(where[0]);
  const bool cuda_memory = device_type == dl::kCUDA || device_type == dl::kCUDAManaged;
  if (device_type != dl::kCPU && device_type != dl::kCUDAHost && !cuda_memory) {
    fail(ErrorCode::unavailable, "memory of DLPack device type " + std::to_string(device_type) +
                                     " cannot be used by ferry (CPU, CUDA host and CUDA device "
                                     "memory can)");
  }
  if (cuda_memory && backend != Backend::cuda) {
    fail(ErrorCode::unavailable,
         "CUDA device memory cannot be used by a " + std::string(to_string(backend)) +
             " device; open a CUDA device, or copy it to host memory first");
  }
  if (cuda_memory && kind && *kind != MemoryKind::device) {
    fail(ErrorCode::invalid_argument, "CUDA device memory can only be wrapped as kind 'device'");
  }
  // CUDA memory: the producer orders the legacy default stream after its work (1, as DLPack
  // numbers it); host memory: no stream (None). DLPack 1.0 first (it can say "read-only", so
  // NumPy exports read-only arrays through it), the unversioned form from older producers.
  nb::object stream = cuda_memory ? nb::object(nb::int_(1)) : nb::object(nb::none());
  nb::object capsule;
  {
    nb::dict arguments;
    arguments["stream"] = stream;
    arguments["max_version"] = nb::make_tuple(1, 0);
    PyObject* versioned =
        PyObject_Call(array.attr("__dlpack__").ptr(), nb::tuple().ptr(), arguments.ptr());
    if (versioned != nullptr) {
      capsule = nb::steal(versioned);
    } else if (PyErr_ExceptionMatches(PyExc_TypeError) != 0) {
      PyErr_Clear();  // a producer without max_version
      capsule = cuda_memory ? array.attr("__dlpack__")(nb::arg("stream") = 1)
                            : array.attr("__dlpack__")();
    } else {
      throw nb::python_error();
    }
  }
  const dl::Tensor* tensor = nullptr;
  std::shared_ptr<void> owner;
  if (PyCapsule_IsValid(capsule.ptr(), kVersionedName) != 0) {
    auto* managed = static_cast<dl::ManagedTensorVersioned*>(
        PyCapsule_GetPointer(capsule.ptr(), kVersionedName));
    // Consumed: from here on ferry owns it (and gives it back through its deleter).
    PyCapsule_SetName(capsule.ptr(), kUsedVersionedName);
    owner = std::shared_ptr<void>(managed, [](void* m) {
      release_import(static_cast<dl::ManagedTensorVersioned*>(m));
    });
    if ((managed->flags & dl::kFlagReadOnly) != 0) {
      fail(ErrorCode::invalid_argument,
           "the array is read-only, and ferry memory is writable (commands may write it); pass "
           "a writable array (numpy.array(x) copies one)");
    }
    tensor = &managed->dl_tensor;
  } else if (PyCapsule_IsValid(capsule.ptr(), kCapsuleName) != 0) {
    auto* managed =
        static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
    PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName);
    owner = std::shared_ptr<void>(managed, [](void* m) {
      release_import(static_cast<dl::ManagedTensor*>(m));
    });
    tensor = &managed->dl_tensor;
  } else {
    fail(ErrorCode::invalid_argument, "__dlpack__ did not return a DLPack capsule");
  }

  const dl::Tensor& t = *tensor;
  const DType dtype = dtype_of(t.dtype);
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) {
    std::int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t.strides[i] != expected) {
        fail(ErrorCode::invalid_argument,
             "the array is not C-contiguous (strides " + describe_strides(t) +
                 " in elements): ferry wraps contiguous memory only; make it contiguous first "
                 "(.contiguous(), numpy.ascontiguousarray)");
      }
      expected *= shape[i];
    }
  }
  const std::uint64_t nbytes = byte_count(dtype, shape, "from_dlpack");
  if (nbytes == 0) fail(ErrorCode::invalid_argument, "the array is empty: ferry memory cannot be");
  std::span<std::byte> bytes(static_cast<std::byte*>(t.data) + t.byte_offset, nbytes);
  MemoryKind chosen = MemoryKind::device;
  if (!cuda_memory) {
    chosen = kind.value_or(backend == Backend::cpu ? MemoryKind::device : MemoryKind::host_upload);
  }
  return wrap_import(device, bytes, chosen, std::move(owner), dtype, std::move(shape),
                     cuda_memory);
}

}  // namespace

nb::tuple tensor_dlpack_device(nb::handle object) {
  PyTensor& tensor = nb::cast<PyTensor&>(object);
  const NativeMemory memory = take(native_memory(tensor.ref));
  const dl::Device where = dl_device_of(memory);
  return nb::make_tuple(where.device_type, where.device_id);
}

nb::object tensor_dlpack(nb::handle object, nb::handle stream, nb::handle max_version,
                         nb::handle dl_device, nb::handle copy) {
  PyTensor& tensor = nb::cast<PyTensor&>(object);
  // A consumer that takes DLPack 1.0 gets a versioned capsule (NumPy then imports it writable);
  // others the unversioned one.
  bool versioned = false;
  if (!max_version.is_none()) {
    const nb::tuple version = nb::cast<nb::tuple>(max_version);
    versioned = version.size() >= 1 && nb::cast<int>(version[0]) >= 1;
  }
  const NativeMemory memory = take(native_memory(tensor.ref));
  const dl::Device where = dl_device_of(memory);
  if (!copy.is_none() && nb::cast<bool>(copy)) {
    throw nb::buffer_error("ferry exports its memory without copying (copy=True is not supported)");
  }
  if (!dl_device.is_none()) {
    const nb::tuple asked = nb::cast<nb::tuple>(dl_device);
    if (nb::cast<int>(asked[0]) != where.device_type || nb::cast<int>(asked[1]) != where.device_id) {
      throw nb::buffer_error("ferry cannot export this tensor to another device (no copies)");
    }
  }
  // The handshake: the consumer's stream (or the host) is ordered after the tensor's ready point.
  std::optional<std::intptr_t> consumer = stream_argument(stream);
  if (memory.kind == NativeMemoryKind::cuda_device && !consumer) consumer = 1;  // DLPack: legacy
  if (consumer && *consumer != -1) {
    const auto handle = static_cast<std::uintptr_t>(*consumer);
    {
      nb::gil_scoped_release unlocked;
      check(native_stream_wait(tensor.ready, handle));
    }
    if (memory.kind != NativeMemoryKind::host) {
      std::lock_guard lock(tensor.mutex);
      auto& streams = tensor.consumer_streams;
      if (std::find(streams.begin(), streams.end(), handle) == streams.end()) {
        streams.push_back(handle);
      }
    }
  } else if (!consumer) {
    nb::gil_scoped_release unlocked;
    if (tensor.ready.timeline) check(tensor.ready.wait());  // a host consumer reads at once
  }

  auto context = std::make_unique<ExportContext>();
  context->ref = tensor.ref;
  context->shape = tensor.shape;
  context->strides.resize(tensor.shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = tensor.shape.size(); i-- > 0;) {
    context->strides[i] = stride;
    stride *= tensor.shape[i];
  }
  dl::Tensor& t = versioned ? context->versioned.dl_tensor : context->managed.dl_tensor;
  t.data = memory.data;
  t.device = where;
  t.ndim = static_cast<std::int32_t>(tensor.shape.size());
  t.dtype = {tensor.dtype.code, tensor.dtype.bits, 1};
  t.shape = context->shape.data();
  t.strides = context->strides.data();
  t.byte_offset = 0;
  PyObject* capsule = nullptr;
  if (versioned) {
    context->versioned.version = {1, 0};
    context->versioned.manager_ctx = context.get();
    context->versioned.deleter = delete_versioned_export;
    context->versioned.flags = 0;
    capsule = PyCapsule_New(&context->versioned, kVersionedName, capsule_destructor);
  } else {
    context->managed.manager_ctx = context.get();
    context->managed.deleter = delete_export;
    capsule = PyCapsule_New(&context->managed, kCapsuleName, capsule_destructor);
  }
  if (capsule == nullptr) throw nb::python_error();
  context.release();  // owned by the capsule (or its consumer) now
  return nb::steal(capsule);
}

void bind_dlpack(nb::module_& m) {
  m.def("from_dlpack", &from_dlpack, nb::arg("array"), nb::arg("device"),
        nb::arg("kind").none() = nb::none(),
        "Wraps a torch / cupy / jax / numpy array (anything with __dlpack__, or a writable "
        "buffer-protocol object) as a ferry Tensor without copying: CUDA device memory on a "
        "CUDA device (ready once the producer's stream work is done, without a host wait), host "
        "memory as device memory on the CPU backend and as host_upload (or `kind`) memory on "
        "GPU backends (pinned memory used as it is, other memory registered). Raises with the "
        "reason when the memory cannot be used without a copy.");
}

}  // namespace ferry::python
