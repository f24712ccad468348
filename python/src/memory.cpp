// Memory: Buffer, StagingPool, Lease, Tensor, and Device's calls that make or move memory
// (create_buffer, empty, create_staging_pool, upload, download).
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "convert.hpp"
#include "dlpack.hpp"

namespace ferry::python {

BufferRef sub_ref(const BufferRef& ref, std::uint64_t offset, std::uint64_t size,
                  const char* argument) {
  if (!ref.buffer) {
    throw StatusError{Status(ErrorCode::released,
                             std::string(argument) + ": the " + ref.what + " was released")};
  }
  if (offset > ref.size || size > ref.size - offset) {
    throw StatusError{Status(ErrorCode::out_of_range,
                             std::string(argument) + ": bytes [" + std::to_string(offset) + ", " +
                                 std::to_string(offset) + " + " + std::to_string(size) +
                                 ") are outside its " + std::to_string(ref.size) + " bytes")};
  }
  BufferRef range = ref;
  range.base += offset;
  range.size = size;
  return range;
}

nb::object make_tensor(BufferRef ref, DType dtype, std::vector<std::int64_t> shape,
                       TimelinePoint ready, Device device) {
  auto* tensor = new PyTensor();
  tensor->ref = std::move(ref);
  tensor->dtype = std::move(dtype);
  tensor->shape = std::move(shape);
  tensor->ready = std::move(ready);
  tensor->device = std::move(device);
  return nb::cast(tensor, nb::rv_policy::take_ownership);
}

void array_type(nb::handle array, std::uint64_t nbytes, DType& dtype,
                std::vector<std::int64_t>& shape) {
  if (nb::hasattr(array, "dtype") && nb::hasattr(array, "shape")) {
    std::string name = text_of(array.attr("dtype"));
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);  // torch.float32
    if (name == "bool_") name = "bool";
    dtype = dtype_from(name);
    shape.clear();
    nb::object extents = array.attr("shape");
    const Py_ssize_t ndim = PySequence_Size(extents.ptr());
    if (ndim < 0) throw nb::python_error();
    for (Py_ssize_t i = 0; i < ndim; ++i) {
      nb::object extent = nb::steal(PySequence_GetItem(extents.ptr(), i));
      if (!extent.is_valid()) throw nb::python_error();
      const long long value = PyLong_AsLongLong(extent.ptr());
      if (value == -1 && PyErr_Occurred() != nullptr) throw nb::python_error();
      shape.push_back(value);
    }
    return;
  }
  dtype = dtype_from("uint8");
  shape = {static_cast<std::int64_t>(nbytes)};
}

namespace {

std::vector<std::int64_t> shape_or(std::optional<std::vector<std::int64_t>> shape,
                                   std::uint64_t bytes, const DType& dtype, const char* call) {
  if (!shape) {
    if (bytes % dtype.itemsize() != 0) {
      throw StatusError{Status(ErrorCode::invalid_argument,
                               std::string(call) + ": " + std::to_string(bytes) +
                                   " bytes are not a whole number of " + dtype.name + " elements")};
    }
    return {static_cast<std::int64_t>(bytes / dtype.itemsize())};
  }
  (void)byte_count(dtype, *shape, call);  // rejects negative extents and overflow
  return *shape;
}

// A view of `ref` from `offset` as a tensor of `dtype` and `shape` (default: all of the rest).
nb::object view_of(const BufferRef& ref, const Device& device, std::string_view dtype_name,
                   std::optional<std::vector<std::int64_t>> shape, std::uint64_t offset,
                   const char* call) {
  const DType dtype = dtype_from(dtype_name);
  if (offset > ref.size) {
    throw StatusError{Status(ErrorCode::out_of_range, std::string(call) + ": offset " +
                                                          std::to_string(offset) + " is past its " +
                                                          std::to_string(ref.size) + " bytes")};
  }
  std::vector<std::int64_t> extents = shape_or(std::move(shape), ref.size - offset, dtype, call);
  const BufferRef range = sub_ref(ref, offset, byte_count(dtype, extents, call), call);
  return make_tensor(range, dtype, std::move(extents), TimelinePoint{}, device);
}

// A writable NumPy view of host-reachable tensor memory (NumPy marks DLPack imports
// read-only), after waiting for the tensor's ready point; the array keeps the memory alive.
nb::object numpy_of(nb::handle object) {
  PyTensor& tensor = nb::cast<PyTensor&>(object);
  const NativeMemory memory = take(native_memory(tensor.ref));
  if (memory.kind == NativeMemoryKind::cuda_device) {
    throw StatusError{Status(ErrorCode::failed_precondition,
                             "numpy(): the tensor is CUDA device memory; download it "
                             "(Device.download) or hand it to a CUDA library by DLPack")};
  }
  if (tensor.ready.timeline) {
    nb::gil_scoped_release unlocked;
    check(tensor.ready.wait());
  }
  auto* held = new BufferRef(tensor.ref);
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<BufferRef*>(p); });
  std::vector<std::size_t> shape(tensor.shape.begin(), tensor.shape.end());
  // NumPy has no bfloat16: its bits are shown as uint16.
  const std::uint8_t code = tensor.dtype.code == 4 ? 1 : tensor.dtype.code;
  const nb::dlpack::dtype type{code, tensor.dtype.bits, 1};
  nb::ndarray<nb::numpy> array(memory.data, shape.size(), shape.data(), owner, nullptr, type,
                               nb::device::cpu::value, 0);
  return nb::cast(array, nb::rv_policy::reference);
}

nb::dict pool_stats(const StagingPool& pool) {
  const StagingPoolStats s = pool.stats();
  nb::dict d;
  d["bytes_reserved"] = s.bytes_reserved;
  d["bytes_in_use"] = s.bytes_in_use;
  d["high_water_bytes"] = s.high_water_bytes;
  d["capacity_bytes"] = s.capacity_bytes;
  d["acquires"] = s.acquires;
  d["waits"] = s.waits;
  d["slabs"] = s.slabs;
  return d;
}

std::string kind_name(MemoryKind kind) { return std::string(to_string(kind)); }

// What a Buffer or Lease exports: all of it, as a 1-D uint8 tensor.
const Buffer& memory_of(const PyBuffer& holder) { return holder.buffer; }
const Lease& memory_of(const PyLease& holder) { return holder.lease; }
template <typename Holder>
nb::object bytes_view(const Holder& holder, const char* call) {
  return view_of(BufferRef(memory_of(holder)), holder.device, "uint8", std::nullopt, 0, call);
}
template <typename Holder>
void def_dlpack_as_bytes(nb::class_<Holder>& cls, const char* doc) {
  cls.def(
         "__dlpack__",
         [](Holder& self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
            nb::handle copy) {
           return tensor_dlpack(bytes_view(self, "__dlpack__"), stream, max_version, dl_device,
                                copy);
         },
         nb::arg("stream").none() = nb::none(), nb::kw_only(),
         nb::arg("max_version").none() = nb::none(), nb::arg("dl_device").none() = nb::none(),
         nb::arg("copy").none() = nb::none(), doc)
      .def("__dlpack_device__", [](Holder& self) {
        return tensor_dlpack_device(bytes_view(self, "__dlpack_device__"));
      });
}

}  // namespace

void bind_memory(nb::module_& m, DeviceClass& device_class) {
  auto buffer_class = nb::class_<PyBuffer>(m, "Buffer",
                       "Device memory (or pinned host memory), freed once no submission uses it.")
      .def_prop_ro("size", [](PyBuffer& self) { return self.buffer.size(); })
      .def_prop_ro("kind", [](PyBuffer& self) { return kind_name(self.buffer.memory_kind()); })
      .def_prop_ro("valid", [](PyBuffer& self) { return self.buffer.valid(); })
      .def(
          "as_tensor",
          [](PyBuffer& self, std::string_view dtype,
             std::optional<std::vector<std::int64_t>> shape, std::uint64_t offset) {
            return view_of(BufferRef(self.buffer), self.device, dtype, std::move(shape), offset,
                           "Buffer.as_tensor");
          },
          nb::arg("dtype") = "uint8", nb::arg("shape") = nb::none(), nb::arg("offset") = 0,
          "A view of the buffer from `offset` as a tensor (default: all of it, 1-D).")
      .def(
          "host_view",
          [](nb::handle self) {
            PyBuffer& buffer = nb::cast<PyBuffer&>(self);
            take(buffer.buffer.host_span());  // errors for device memory or a released buffer
            nb::object tensor = view_of(BufferRef(buffer.buffer), buffer.device, "uint8",
                                        std::nullopt, 0, "Buffer.host_view");
            return nb::steal(PyMemoryView_FromObject(numpy_of(tensor).ptr()));
          },
          "A writable memoryview of a host_upload / host_readback buffer's bytes (it keeps the "
          "memory alive). Read it only after the work writing it has completed.")
      .def("release", [](PyBuffer& self) { self.buffer.release(); },
           "Gives up this handle's hold; the memory is freed once nothing uses it.")
      .def("__repr__", [](PyBuffer& self) {
        if (!self.buffer) return std::string("Buffer(released)");
        return "Buffer(" + std::to_string(self.buffer.size()) + " bytes, " +
               kind_name(self.buffer.memory_kind()) + ")";
      });

  auto lease_class = nb::class_<PyLease>(m, "Lease",
                      "A range of a staging pool's pinned slab; back in the pool once released "
                      "and no submission uses it.")
      .def_prop_ro("size", [](PyLease& self) { return self.lease.size(); })
      .def_prop_ro("valid", [](PyLease& self) { return self.lease.valid(); })
      .def_prop_ro(
          "data",
          [](PyLease& self) {
            if (!self.lease) throw StatusError{Status(ErrorCode::released, "Lease.data: released")};
            nb::object tensor = view_of(BufferRef(self.lease), self.device, "uint8", std::nullopt,
                                        0, "Lease.data");
            return nb::steal(PyMemoryView_FromObject(numpy_of(tensor).ptr()));
          },
          "A writable memoryview of the lease's bytes (it keeps the range alive): write before "
          "an upload, read after a download completed.")
      .def(
          "numpy",
          [](PyLease& self, std::string_view dtype,
             std::optional<std::vector<std::int64_t>> shape) {
            return numpy_of(view_of(BufferRef(self.lease), self.device, dtype, std::move(shape),
                                    0, "Lease.numpy"));
          },
          nb::arg("dtype") = "uint8", nb::arg("shape") = nb::none(),
          "A zero-copy NumPy view of the lease (it keeps the range alive).")
      .def(
          "as_tensor",
          [](PyLease& self, std::string_view dtype,
             std::optional<std::vector<std::int64_t>> shape, std::uint64_t offset) {
            return view_of(BufferRef(self.lease), self.device, dtype, std::move(shape), offset,
                           "Lease.as_tensor");
          },
          nb::arg("dtype") = "uint8", nb::arg("shape") = nb::none(), nb::arg("offset") = 0)
      .def("release", [](PyLease& self) { self.lease.release(); },
           "Gives up this handle's hold; the range returns to the pool when the GPU is done.")
      .def("__enter__", [](nb::handle self) { return self; })
      .def(
          "__exit__", [](PyLease& self, nb::handle, nb::handle, nb::handle) { self.lease.release(); },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none())
      .def("__repr__", [](PyLease& self) {
        if (!self.lease) return std::string("Lease(released)");
        return "Lease(" + std::to_string(self.lease.size()) + " bytes)";
      });

  def_dlpack_as_bytes(buffer_class, "The buffer as a 1-D uint8 DLPack tensor.");
  def_dlpack_as_bytes(lease_class, "The lease as a 1-D uint8 DLPack tensor.");

  nb::class_<PyPool>(m, "StagingPool", "Bounded pinned host memory, leased out in ranges.")
      .def(
          "acquire",
          [](PyPool& self, std::uint64_t size, std::optional<double> timeout) {
            const Timeout t = to_timeout(timeout);
            Result<Lease> lease = [&] {
              nb::gil_scoped_release unlocked;
              return self.pool.acquire(size, t);
            }();
            auto* leased = new PyLease{take(std::move(lease)), self.device};
            return leased;
          },
          nb::arg("size"), nb::arg("timeout") = nb::none(), nb::rv_policy::take_ownership,
          "A lease of `size` bytes; waits while the pool is full (TimeoutError after `timeout`); "
          "ResourceExhaustedError at once when size exceeds slab_bytes.")
      .def(
          "try_acquire",
          [](PyPool& self, std::uint64_t size) -> PyLease* {
            Result<Lease> lease = self.pool.try_acquire(size);
            if (!lease.ok() && lease.status().code() == ErrorCode::timeout) return nullptr;
            return new PyLease{take(std::move(lease)), self.device};
          },
          nb::arg("size"), nb::rv_policy::take_ownership,
          "A lease, or None when the pool has no room now.")
      .def("trim", [](PyPool& self) { return self.pool.trim(); },
           "Frees empty slabs beyond reserved_slabs; returns the bytes given back.")
      .def_prop_ro("stats", [](PyPool& self) { return pool_stats(self.pool); })
      .def_prop_ro("kind", [](PyPool& self) { return kind_name(self.pool.options().kind); })
      .def_prop_ro("slab_bytes", [](PyPool& self) { return self.pool.options().slab_bytes; })
      .def_prop_ro("max_slabs", [](PyPool& self) { return self.pool.options().max_slabs; });

  nb::class_<PyTensor>(m, "Tensor",
                       "A typed view of ferry memory, exchanged with other libraries by DLPack.")
      .def_prop_ro("shape",
                   [](PyTensor& self) {
                     nb::list extents;
                     for (const std::int64_t e : self.shape) extents.append(e);
                     return nb::tuple(extents);
                   })
      .def_prop_ro("dtype", [](PyTensor& self) { return self.dtype.name; })
      .def_prop_ro("nbytes", [](PyTensor& self) { return self.nbytes(); })
      .def_prop_ro("ready", [](PyTensor& self) { return self.ready; },
                   "The point at which the tensor's contents are complete.")
      .def_prop_ro("memory_kind",
                   [](PyTensor& self) {
                     if (!self.ref.buffer) return std::string("released");
                     return kind_name(Buffer(self.ref.buffer).memory_kind());
                   })
      .def("__dlpack__", &tensor_dlpack, nb::arg("stream").none() = nb::none(), nb::kw_only(),
           nb::arg("max_version").none() = nb::none(), nb::arg("dl_device").none() = nb::none(),
           nb::arg("copy").none() = nb::none(),
           "A DLPack capsule of the tensor (no copy); `stream` (a consumer's CUDA stream) is "
           "ordered after `ready` on the device, a host consumer gets the data after a host "
           "wait.")
      .def("__dlpack_device__", &tensor_dlpack_device)
      .def("numpy", [](nb::handle self) { return numpy_of(self); },
           "A zero-copy NumPy view (host-reachable memory only), after waiting for `ready`.")
      .def("__len__",
           [](PyTensor& self) {
             if (self.shape.empty()) throw nb::type_error("len() of a 0-d tensor");
             return self.shape[0];
           })
      .def("__repr__", [](PyTensor& self) {
        std::string text = "Tensor(shape=(";
        for (std::size_t i = 0; i < self.shape.size(); ++i) {
          text += std::to_string(self.shape[i]) + (self.shape.size() == 1 || i + 1 < self.shape.size() ? "," : "");
        }
        return text + "), dtype=" + self.dtype.name + ")";
      });

  device_class
      .def(
          "create_buffer",
          [](PyDevice& self, std::uint64_t size, std::string_view kind) {
            const MemoryKind memory = memory_kind_from(kind);
            Result<Buffer> buffer = [&] {
              nb::gil_scoped_release unlocked;
              return self.device.create_buffer(size, memory);
            }();
            return new PyBuffer{take(std::move(buffer)), self.device};
          },
          nb::arg("size"), nb::arg("kind") = "device", nb::rv_policy::take_ownership,
          "A buffer of `size` bytes of kind 'device', 'host_upload' or 'host_readback'.")
      .def(
          "empty",
          [](PyDevice& self, std::vector<std::int64_t> shape, std::string_view dtype,
             std::string_view kind) {
            const DType type = dtype_from(dtype);
            const std::uint64_t bytes = byte_count(type, shape, "Device.empty");
            const MemoryKind memory = memory_kind_from(kind);
            Result<Buffer> buffer = [&] {
              nb::gil_scoped_release unlocked;
              return self.device.create_buffer(bytes, memory);
            }();
            Buffer made = take(std::move(buffer));
            return make_tensor(BufferRef(made), type, std::move(shape), TimelinePoint{},
                               self.device);
          },
          nb::arg("shape"), nb::arg("dtype") = "float32", nb::arg("kind") = "device",
          "A new buffer viewed as a tensor (contents undefined).")
      .def(
          "create_staging_pool",
          [](PyDevice& self, std::string_view kind, std::uint64_t slab_bytes,
             std::uint32_t max_slabs, std::uint32_t reserved_slabs) {
            StagingPoolOptions options;
            options.kind = memory_kind_from(kind);
            options.slab_bytes = slab_bytes;
            options.max_slabs = max_slabs;
            options.reserved_slabs = reserved_slabs;
            Result<StagingPool> pool = [&] {
              nb::gil_scoped_release unlocked;
              return self.device.create_staging_pool(options);
            }();
            return new PyPool{take(std::move(pool)), self.device};
          },
          nb::arg("kind") = "host_upload", nb::arg("slab_bytes") = 64ull << 20,
          nb::arg("max_slabs") = 4, nb::arg("reserved_slabs") = 1, nb::rv_policy::take_ownership,
          "A bounded pool of pinned host memory: 'host_upload' or 'host_readback'.")
      .def(
          "upload",
          [](PyDevice& self, nb::handle array, nb::handle dst, std::uint64_t dst_offset,
             nb::handle wait, nb::handle signal, PyPool* pool) {
            HostBytes src(array, false, "upload: array");
            DType dtype;
            std::vector<std::int64_t> shape;
            array_type(array, src.bytes().size(), dtype, shape);
            SubmitSync sync;
            sync.wait = points_from(wait, "upload: wait");
            sync.signal = points_from(signal, "upload: signal");
            BufferRef target;
            if (dst.is_none()) {
              nb::gil_scoped_release unlocked;
              target = BufferRef(take(self.device.create_buffer(
                  std::max<std::uint64_t>(src.bytes().size(), 1), MemoryKind::device)));
            } else {
              target = memory_ref(dst, &sync.wait, "upload: dst");
            }
            target = sub_ref(target, dst_offset, src.bytes().size(), "upload: dst");
            const StagingPool staging =
                pool != nullptr ? pool->pool : self.default_pool(MemoryKind::host_upload);
            Result<TimelinePoint> done = [&] {
              nb::gil_scoped_release unlocked;
              return ferry::upload(self.device.queue(QueueKind::upload), staging, src.bytes(),
                                   target, 0, sync);
            }();
            return make_tensor(target, dtype, shape, take(std::move(done)), self.device);
          },
          nb::arg("array"), nb::arg("dst") = nb::none(), nb::kw_only(), nb::arg("dst_offset") = 0,
          nb::arg("wait") = nb::tuple(), nb::arg("signal") = nb::tuple(),
          nb::arg("pool").none() = nb::none(),
          "Copies a host array into `dst` (default: a new device buffer) through a staging pool "
          "on the upload queue; returns the destination as a tensor of the array's dtype and "
          "shape, ready when the copy completes. The array may be reused on return.")
      .def(
          "download",
          [](PyDevice& self, nb::handle src, nb::handle out, nb::handle wait) {
            SubmitSync sync;
            sync.wait = points_from(wait, "download: wait");
            const BufferRef source = memory_ref(src, &sync.wait, "download: src");
            DType dtype = dtype_from("uint8");
            std::vector<std::int64_t> shape{static_cast<std::int64_t>(source.size)};
            if (nb::isinstance<PyTensor>(src)) {
              dtype = nb::cast<PyTensor&>(src).dtype;
              shape = nb::cast<PyTensor&>(src).shape;
            }
            nb::object result;
            if (out.is_none()) {
              nb::object numpy = nb::module_::import_("numpy");
              // NumPy has no bfloat16: its bits come back as uint16.
              const std::string name = dtype.name == "bfloat16" ? "uint16" : dtype.name;
              nb::list extents;
              for (const std::int64_t e : shape) extents.append(e);
              result = numpy.attr("empty")(nb::tuple(extents), name);
            } else {
              result = nb::borrow(out);
            }
            HostBytes dst(result, true, "download: out");
            if (dst.bytes().size() != source.size) {
              throw StatusError{Status(ErrorCode::invalid_argument,
                                       "download: out has " + std::to_string(dst.bytes().size()) +
                                           " bytes, the source " + std::to_string(source.size))};
            }
            const StagingPool staging = self.default_pool(MemoryKind::host_readback);
            {
              nb::gil_scoped_release unlocked;
              check(ferry::download(self.device.queue(QueueKind::download), staging, source, 0,
                                    dst.bytes(), sync));
            }
            return result;
          },
          nb::arg("src"), nb::arg("out") = nb::none(), nb::kw_only(),
          nb::arg("wait") = nb::tuple(),
          "Copies `src` (Buffer, Lease or Tensor) to host memory and returns it once there: a "
          "new NumPy array of the tensor's dtype and shape (uint8 for buffers and leases; "
          "bfloat16 as uint16), or `out`. Waits (on the device) for the tensor's ready point.");
}

}  // namespace ferry::python
