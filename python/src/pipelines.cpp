// IngressPipeline and EgressPipeline with Python sources and consumers, run on ferry's threads.
// Python code runs there with the GIL taken for the call only; every call of ours that may wait
// for those threads (next, push, drain, close, dropping a pipeline) releases the GIL first.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <set>
#include <span>

#include "convert.hpp"

namespace ferry::python {
namespace {

// Pipelines alive, for close_live_pipelines() at interpreter exit.
template <typename Pipeline>
struct Registry {
  std::mutex mutex;
  std::set<Pipeline*> live;
  void add(Pipeline* p) {
    std::lock_guard lock(mutex);
    live.insert(p);
  }
  void remove(Pipeline* p) {
    std::lock_guard lock(mutex);
    live.erase(p);
  }
  std::vector<Pipeline*> snapshot() {
    std::lock_guard lock(mutex);
    return {live.begin(), live.end()};
  }
};

// Turns the Python error being handled (or a caught nanobind one) into a Status.
Status status_from(nb::python_error& error, std::string_view what) {
  error.restore();
  return status_from_python_error(what);
}

// ---- Ingress ----

// The source's state, shared with the producer thread: the iterator, what each item must be,
// and the item it returned last, whose memory must stay untouched until the next call
// (HostBatch::pageable).
struct IngressSourceState {
  SharedPyObject iterator;
  std::uint64_t input_bytes = 0;
  // The shapes an array item may have besides (input_bytes,): the batch's images as the layout
  // lays them out ((N, H, W, C) or (N, C, H, W)), when tightly packed.
  std::vector<std::int64_t> image_shape;
  std::unique_ptr<HostBytes> current_bytes;  // released under the GIL only
  SharedPyObject current_object;

  ~IngressSourceState() {
    if (!current_bytes || !python_running()) {
      (void)current_bytes.release();  // finalizing: leave the export, nothing may touch Python
      return;
    }
    nb::gil_scoped_acquire gil;
    current_bytes.reset();
  }
};

// "(2, 5, 7, 3)", "(210,)": a shape as Python writes it (buffer extents or a tensor's).
template <typename Extent>
std::string shape_text(std::span<const Extent> shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

// Whether an item of extents `shape` is laid out as the batch expects: flat, the images' shape,
// or that shape without its leading 1 (a batch of one image).
template <typename Extent>
bool item_shape_fits(const IngressSourceState& state, std::span<const Extent> shape) {
  if (shape.size() == 1) return true;  // the byte count is checked on its own
  const std::vector<std::int64_t>& expected = state.image_shape;
  if (expected.empty()) return false;
  std::span<const std::int64_t> compared(expected);
  if (shape.size() + 1 == expected.size() && expected.front() == 1) compared = compared.subspan(1);
  return std::equal(shape.begin(), shape.end(), compared.begin(), compared.end(),
                    [](Extent a, std::int64_t b) { return static_cast<std::int64_t>(a) == b; });
}

// What an item must be, for its error message.
std::string expected_item(const IngressSourceState& state) {
  std::string text = "a C-contiguous uint8 array of " + std::to_string(state.input_bytes) +
                     " bytes (shape (" + std::to_string(state.input_bytes) + ",)";
  if (!state.image_shape.empty()) {
    text += " or " + shape_text(std::span<const std::int64_t>(state.image_shape));
  }
  return text + "), or a Lease, host Buffer or uint8 Tensor of that many bytes";
}

// An item's element type, as the user knows it: numpy's dtype, else the buffer's format.
std::string dtype_name_of(nb::handle item, std::string_view format) {
  if (nb::hasattr(item, "dtype")) return text_of(item.attr("dtype"));
  return "buffer format '" + std::string(format) + "'";
}

Status bad_item(const IngressSourceState& state, std::uint64_t index, const std::string& what) {
  return Status(ErrorCode::invalid_argument, "ingress source item " + std::to_string(index) +
                                                 " is " + what + "; each item must be " +
                                                 expected_item(state));
}

// Batch `index` from the source: the iterator's next item, checked to be exactly one batch.
// A None, or an item of another dtype, size or shape, is that batch's error (the stream goes on
// with the next item); only the iterator's end ends the stream.
Result<std::optional<HostBatch>> next_source_batch(IngressSourceState& state, std::uint64_t index) {
  if (!python_running()) {
    return Status(ErrorCode::failed_precondition, "the Python interpreter is shutting down");
  }
  nb::gil_scoped_acquire gil;
  state.current_bytes.reset();
  state.current_object = SharedPyObject();
  try {
    PyObject* item = PyIter_Next(state.iterator.get().ptr());
    if (item == nullptr) {
      if (PyErr_Occurred() != nullptr) return status_from_python_error("the ingress source");
      return std::optional<HostBatch>();
    }
    nb::object batch = nb::steal(item);
    if (batch.is_none()) {
      return bad_item(state, index, "None (an unreadable image? the stream ends only when the "
                                    "iterator does)");
    }
    if (nb::isinstance<PyBuffer>(batch) || nb::isinstance<PyLease>(batch) ||
        nb::isinstance<PyTensor>(batch)) {
      const BufferRef memory = memory_ref(batch, nullptr, "ingress batch");
      if (nb::isinstance<PyTensor>(batch)) {
        const PyTensor& tensor = nb::cast<PyTensor&>(batch);
        if (tensor.dtype.name != "uint8") {
          return bad_item(state, index, "a Tensor of " + tensor.dtype.name);
        }
        const std::span<const std::int64_t> extents(tensor.shape);
        if (!item_shape_fits(state, extents)) {
          return bad_item(state, index, "a Tensor of shape " + shape_text(extents));
        }
      }
      if (memory.size != state.input_bytes) {
        return bad_item(state, index, "a " + text_of(batch.type().attr("__name__")) + " of " +
                                          std::to_string(memory.size) + " bytes");
      }
      state.current_object = SharedPyObject(batch);
      return std::optional<HostBatch>(HostBatch::pinned(memory));
    }
    auto bytes = std::make_unique<HostBytes>();
    if (!bytes->acquire(batch, false)) {
      return bad_item(state, index, "a " + text_of(batch.type().attr("__name__")) +
                                        " (not a C-contiguous host array: numpy.ascontiguousarray "
                                        "makes one)");
    }
    const Py_buffer& view = bytes->view;
    const std::span<const Py_ssize_t> extents(view.shape, static_cast<std::size_t>(view.ndim));
    const std::string_view format = view.format != nullptr ? view.format : "B";
    const bool uint8 = format == "B" || format == "@B" || format == "=B" || format == "<B" ||
                       format == ">B" || format == "!B";
    if (!uint8 || view.itemsize != 1) {
      return bad_item(state, index, "an array of " + dtype_name_of(batch, format) +
                                        " (convert it: numpy.asarray(x, dtype=numpy.uint8) if "
                                        "its values are pixels)");
    }
    if (static_cast<std::uint64_t>(view.len) != state.input_bytes) {
      return bad_item(state, index, "an array of " + std::to_string(view.len) + " bytes" +
                                        (extents.empty() ? "" : " (shape " + shape_text(extents) + ")"));
    }
    if (!extents.empty() && !item_shape_fits(state, extents)) {
      return bad_item(state, index, "an array of shape " + shape_text(extents));
    }
    state.current_bytes = std::move(bytes);
    return std::optional<HostBatch>(HostBatch::pageable(state.current_bytes->bytes()));
  } catch (nb::python_error& error) {
    return status_from(error, "the ingress source");
  } catch (StatusError& error) {
    return std::move(error.status);
  } catch (const std::exception& error) {
    return Status(ErrorCode::internal, std::string("the ingress source: ") + error.what());
  }
}

struct PyIngress {
  std::unique_ptr<IngressPipeline> pipeline;
  Device device;
  DType dtype;
  std::vector<std::int64_t> shape;

  PyIngress() { registry().add(this); }
  PyIngress(const PyIngress&) = delete;
  PyIngress& operator=(const PyIngress&) = delete;
  ~PyIngress() {
    registry().remove(this);
    nb::gil_scoped_release unlocked;  // closing waits for a source call, which takes the GIL
    pipeline.reset();
  }
  static Registry<PyIngress>& registry() {
    static Registry<PyIngress> instance;
    return instance;
  }
};

struct PyIngressBatch {
  IngressBatch batch;
  nb::object tensor;  // the PyTensor handed out: it records the DLPack consumers' streams
  Device device;

  // Releases the batch behind `after` (a point or a stream), else behind every stream the
  // tensor was exported to, else behind the compute queue's work so far.
  void release(nb::handle after) {
    if (!batch) return;
    TimelinePoint done;
    if (!after.is_none() && nb::isinstance<TimelinePoint>(after)) {
      done = nb::cast<TimelinePoint>(after);
    } else if (!after.is_none()) {
      const std::uintptr_t stream = stream_handle(after);
      nb::gil_scoped_release unlocked;
      done = take(native_stream_point(device.queue(QueueKind::compute), stream));
    } else if (tensor.is_valid()) {
      done = nb::cast<PyTensor&>(tensor).consumers_done();
    }
    if (done.timeline) {
      check(batch.release(done));
    } else {
      batch.release();
    }
    // The slot is the pipeline's again: later use of this tensor object raises ReleasedError
    // instead of reading a later batch.
    if (tensor.is_valid()) {
      PyTensor& view = nb::cast<PyTensor&>(tensor);
      view.ref = BufferRef();
      view.ready = TimelinePoint{};
    }
  }

  PyIngressBatch() = default;
  PyIngressBatch(const PyIngressBatch&) = delete;
  PyIngressBatch& operator=(const PyIngressBatch&) = delete;
  ~PyIngressBatch() {
    try {
      release(nb::none());
    } catch (...) {
      batch.release();  // the ordered release failed (a closed device): plain release
    }
  }
};

// ---- Egress ----

struct PyEgressChunk {
  std::uint64_t step = 0;
  std::uint32_t index = 0;
  std::uint32_t count = 1;
  std::uint64_t offset = 0;
  std::uint64_t step_bytes = 0;
  nb::object data;  // a read-only memoryview, released after the consumer call
};

// A consumer's return value is ignored, except one that means its work never ran: a coroutine
// (an `async def` consumer), a generator (one with `yield`) or any other awaitable. That is the
// step's error, not a chunk silently dropped. Needs the GIL.
Status check_consumer_result(nb::handle returned, const EgressChunk& chunk) {
  if (returned.is_none()) return Status();
  const bool coroutine = PyCoro_CheckExact(returned.ptr()) != 0;
  const bool generator = PyGen_Check(returned.ptr()) != 0;
  if (!coroutine && !generator && !nb::hasattr(returned, "__await__")) return Status();
  // Closed, so Python does not warn later that it was never awaited.
  if (nb::hasattr(returned, "close")) {
    try {
      returned.attr("close")();
    } catch (nb::python_error&) {
      // its own cleanup failed: the error below says what matters
    }
  }
  const std::string what = coroutine ? "a coroutine (an async def consumer)"
                           : generator ? "a generator (a consumer with yield)"
                                       : "an awaitable " + text_of(returned.type().attr("__name__"));
  return Status(ErrorCode::invalid_argument,
                "the egress consumer returned " + what + " for step " +
                    std::to_string(chunk.step) + ", so its work never ran; the consumer must be "
                    "a plain function that handles the chunk before it returns");
}

Status run_consumer(const SharedPyObject& consumer, const EgressChunk& chunk) {
  if (!python_running()) {
    return Status(ErrorCode::failed_precondition, "the Python interpreter is shutting down");
  }
  nb::gil_scoped_acquire gil;
  try {
    auto* view = PyMemoryView_FromMemory(
        reinterpret_cast<char*>(const_cast<std::byte*>(chunk.bytes.data())),
        static_cast<Py_ssize_t>(chunk.bytes.size()), PyBUF_READ);
    if (view == nullptr) throw nb::python_error();
    nb::object data = nb::steal(view);
    auto* info = new PyEgressChunk{chunk.step, chunk.index, chunk.count, chunk.offset,
                                   chunk.step_bytes, data};
    nb::object argument = nb::cast(info, nb::rv_policy::take_ownership);
    Status status;
    try {
      nb::object returned = consumer.get()(argument);
      status = check_consumer_result(returned, chunk);
    } catch (nb::python_error& error) {
      status = status_from(error, "the egress consumer");
    }
    // The bytes go back to the pool after this call: a view kept past it would read reused
    // memory, so refuse it loudly rather than let it go stale silently.
    nb::cast<PyEgressChunk&>(argument).data = nb::none();
    PyObject* released = PyObject_CallMethod(data.ptr(), "release", nullptr);
    if (released == nullptr) {
      PyErr_Clear();
      if (status.ok()) {
        status = Status(ErrorCode::failed_precondition,
                        "the egress consumer kept a view of chunk.data (step " +
                            std::to_string(chunk.step) +
                            ") past its call; the bytes are reused after it: copy them instead "
                            "(bytes(chunk.data), numpy.array(..., copy=True))");
      }
    } else {
      Py_DECREF(released);
    }
    return status;
  } catch (nb::python_error& error) {
    return status_from(error, "the egress consumer");
  } catch (const std::exception& error) {
    return Status(ErrorCode::internal, std::string("the egress consumer: ") + error.what());
  }
}

struct PyEgress {
  std::unique_ptr<EgressPipeline> pipeline;
  Device device;

  PyEgress() { registry().add(this); }
  PyEgress(const PyEgress&) = delete;
  PyEgress& operator=(const PyEgress&) = delete;
  ~PyEgress() {
    registry().remove(this);
    nb::gil_scoped_release unlocked;  // joining workers that may be waiting for the GIL
    pipeline.reset();
  }
  static Registry<PyEgress>& registry() {
    static Registry<PyEgress> instance;
    return instance;
  }
  EgressPipeline& get() {
    if (!pipeline) throw StatusError{Status(ErrorCode::released, "EgressPipeline: closed")};
    return *pipeline;
  }
};

nb::dict egress_stats(const EgressStats& s) {
  nb::dict d;
  d["steps_pushed"] = s.steps_pushed;
  d["steps_consumed"] = s.steps_consumed;
  d["chunks_consumed"] = s.chunks_consumed;
  d["consumer_errors"] = s.consumer_errors;
  d["chunks_dropped"] = s.chunks_dropped;
  return d;
}

}  // namespace

void close_live_pipelines() {
  const std::vector<PyIngress*> ingress = PyIngress::registry().snapshot();
  const std::vector<PyEgress*> egress = PyEgress::registry().snapshot();
  // Without the GIL: closing waits for source and consumer calls, which take it.
  nb::gil_scoped_release unlocked;
  for (PyIngress* pipeline : ingress) {
    if (pipeline->pipeline) pipeline->pipeline->close();
  }
  for (PyEgress* pipeline : egress) {
    // Delivers what was pushed, as dropping the pipeline would; errors were the consumers'.
    if (pipeline->pipeline) (void)pipeline->pipeline->close(EgressClose::drain);
  }
}

void bind_pipelines(nb::module_& m) {
  nb::class_<PyIngressBatch>(m, "IngressBatch",
                             "One transformed batch; release it (or drop it) when done.")
      .def_prop_ro("index", [](PyIngressBatch& self) { return self.batch.index(); })
      // rv_policy::reference: no keep-alive of the batch by its tensor (def_prop_ro's default),
      // which would make `del batch` (the release behind its DLPack consumers) wait for the
      // tensor object to go too.
      .def_prop_ro("tensor", [](PyIngressBatch& self) { return self.tensor; },
                   nb::rv_policy::reference,
                   "The batch's tensor (valid until the batch is released).")
      .def_prop_ro("ready", [](PyIngressBatch& self) { return self.batch.ready(); })
      .def_prop_ro("input_consumed", [](PyIngressBatch& self) { return self.batch.input_consumed(); })
      .def("release", &PyIngressBatch::release, nb::arg("after").none() = nb::none(),
           "Gives the tensor back to the pipeline; its reuse waits (on the device) for `after` "
           "(a TimelinePoint, or a CUDA stream's work so far), by default for every stream the "
           "tensor was exported to by DLPack, else for the compute queue's work so far.")
      .def("__enter__", [](nb::handle self) { return self; })
      .def(
          "__exit__",
          [](PyIngressBatch& self, nb::handle, nb::handle, nb::handle) { self.release(nb::none()); },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none());

  nb::class_<PyIngress>(m, "IngressPipeline",
                        "Streams host batches to device tensors, overlapped and bounded: "
                        "upload, then normalize on the device.")
      .def(
          "__init__",
          [](PyIngress* self, PyDevice& device, nb::handle source, const NormalizeParams& normalize,
             std::uint32_t depth, nb::handle pool, std::uint64_t chunk_bytes,
             unsigned host_threads) {
            auto state = std::make_shared<IngressSourceState>();
            state->iterator = SharedPyObject(nb::steal(PyObject_GetIter(source.ptr())));
            if (!state->iterator.get().is_valid()) throw nb::python_error();
            const NormalizeShape shape = take(resolve_normalize(normalize));
            state->input_bytes = shape.input_bytes;
            const ImageBatchLayout& input = normalize.input;
            if (shape.input_bytes == std::uint64_t{input.batch} * input.height * input.width *
                                         input.channels) {
              if (input.layout == ImageLayout::nchw) {
                state->image_shape = {input.batch, input.channels, input.height, input.width};
              } else {
                state->image_shape = {input.batch, input.height, input.width, input.channels};
              }
            }
            IngressOptions options;
            options.transform = take(normalize_transform(normalize));
            options.depth = depth;
            if (!pool.is_none()) options.pool = nb::cast<PyPool&>(pool).pool;
            options.transfer.chunk_bytes = chunk_bytes;
            options.transfer.host_threads = host_threads;
            Result<IngressPipeline> pipeline = [&] {
              nb::gil_scoped_release unlocked;
              return IngressPipeline::create(
                  device.device, options,
                  [state](std::uint64_t index) { return next_source_batch(*state, index); });
            }();
            // Made only once nothing can throw: nanobind never destroys a half-built object.
            IngressPipeline created = take(std::move(pipeline));
            auto* made = new (self) PyIngress();
            made->pipeline = std::make_unique<IngressPipeline>(std::move(created));
            made->device = device.device;
            made->dtype = dtype_from(to_string(normalize.output_type));
            if (normalize.output_layout == ImageLayout::nchw) {
              made->shape = {shape.batch, shape.channels, shape.height, shape.width};
            } else {
              made->shape = {shape.batch, shape.height, shape.width, shape.channels};
            }
          },
          nb::arg("device"), nb::arg("source"), nb::kw_only(), nb::arg("normalize"),
          nb::arg("depth") = 3, nb::arg("pool").none() = nb::none(),
          nb::arg("chunk_bytes") = 8ull << 20, nb::arg("host_threads") = 0,
          "source: an iterable of uint8 host arrays (C-contiguous, exactly normalize.input_bytes "
          "each, flat or shaped as the input images; read before the next is asked for) or of "
          "Leases / host Buffers of that size (uploaded by DMA), run on the pipeline's thread. "
          "An item that is None or of another dtype, size or shape raises from next() at its "
          "index, and the stream goes on; it ends only when the iterator does.")
      .def(
          "next",
          [](PyIngress& self, std::optional<double> timeout) -> nb::object {
            if (!self.pipeline) {
              throw StatusError{Status(ErrorCode::failed_precondition, "IngressPipeline: closed")};
            }
            const Timeout t = to_timeout(timeout);
            Result<std::optional<IngressBatch>> next = [&] {
              nb::gil_scoped_release unlocked;
              return self.pipeline->next(t);
            }();
            std::optional<IngressBatch> batch = take(std::move(next));
            if (!batch) return nb::none();
            auto* wrapped = new PyIngressBatch();
            wrapped->device = self.device;
            wrapped->tensor = make_tensor(BufferRef(batch->tensor()), self.dtype, self.shape,
                                          batch->ready(), self.device);
            wrapped->batch = std::move(*batch);
            return nb::cast(wrapped, nb::rv_policy::take_ownership);
          },
          nb::arg("timeout") = nb::none(),
          "The next batch in order, or None at the end; raises the batch's error (the next "
          "call goes on with the following batch).")
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__",
           [](nb::handle self) {
             nb::object batch = self.attr("next")();
             if (batch.is_none()) throw nb::stop_iteration();
             return batch;
           })
      .def(
          "close",
          [](PyIngress& self) {
            nb::gil_scoped_release unlocked;
            if (self.pipeline) self.pipeline->close();
          },
          "Stops asking the source and drops batches not yet taken; batches held stay valid.")
      .def_prop_ro("input_bytes", [](PyIngress& self) {
        return self.pipeline ? self.pipeline->input_bytes() : 0;
      })
      .def_prop_ro("tensor_bytes", [](PyIngress& self) {
        return self.pipeline ? self.pipeline->tensor_bytes() : 0;
      })
      .def("__enter__", [](nb::handle self) { return self; })
      .def(
          "__exit__",
          [](PyIngress& self, nb::handle, nb::handle, nb::handle) {
            nb::gil_scoped_release unlocked;
            if (self.pipeline) self.pipeline->close();
          },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none());

  nb::class_<PyEgressChunk>(m, "EgressChunk", "One chunk of a step's output, during the call.")
      .def_ro("step", &PyEgressChunk::step)
      .def_ro("index", &PyEgressChunk::index)
      .def_ro("count", &PyEgressChunk::count)
      .def_ro("offset", &PyEgressChunk::offset)
      .def_ro("step_bytes", &PyEgressChunk::step_bytes)
      .def_prop_ro("data", [](PyEgressChunk& self) { return self.data; },
                   nb::rv_policy::reference,
                   "The bytes: a read-only memoryview valid during the consumer call only.");

  nb::class_<EgressTicket>(m, "EgressTicket")
      .def_ro("step", &EgressTicket::step)
      .def_ro("output_read", &EgressTicket::output_read,
              "The download has read the output: it may be overwritten from here on.");

  nb::class_<PyEgress>(m, "EgressPipeline",
                       "Device results to Python consumers on worker threads, without idling "
                       "the GPU: pinned downloads overlapped with compute and host work.")
      .def(
          "__init__",
          [](PyEgress* self, PyDevice& device, nb::handle consumer, std::uint32_t workers,
             std::uint32_t max_pending_steps, std::string_view order, std::string_view on_error,
             std::uint64_t chunk_bytes, nb::handle pool) {
            if (PyCallable_Check(consumer.ptr()) == 0) throw nb::type_error("consumer must be callable");
            EgressOptions options;
            options.workers = workers;
            options.max_pending_steps = max_pending_steps;
            static constexpr EnumName<EgressOrder> kOrders[] = {
                {"in_order", EgressOrder::in_order}, {"as_completed", EgressOrder::as_completed}};
            static constexpr EnumName<ConsumerErrorPolicy> kPolicies[] = {
                {"stop", ConsumerErrorPolicy::stop}, {"keep_going", ConsumerErrorPolicy::keep_going}};
            options.order = enum_from(order, kOrders, "order");
            options.on_error = enum_from(on_error, kPolicies, "on_error");
            options.chunk_bytes = chunk_bytes;
            if (!pool.is_none()) options.pool = nb::cast<PyPool&>(pool).pool;
            SharedPyObject callback{nb::borrow(consumer)};
            Result<EgressPipeline> pipeline = [&] {
              nb::gil_scoped_release unlocked;
              return EgressPipeline::create(device.device, options,
                                            [callback](const EgressChunk& chunk) {
                                              return run_consumer(callback, chunk);
                                            });
            }();
            EgressPipeline created = take(std::move(pipeline));
            auto* made = new (self) PyEgress();
            made->pipeline = std::make_unique<EgressPipeline>(std::move(created));
            made->device = device.device;
          },
          nb::arg("device"), nb::arg("consumer"), nb::kw_only(), nb::arg("workers") = 2,
          nb::arg("max_pending_steps") = 4, nb::arg("order") = "in_order",
          nb::arg("on_error") = "stop", nb::arg("chunk_bytes") = 64ull << 20,
          nb::arg("pool").none() = nb::none(),
          "consumer(chunk: EgressChunk) runs on a worker thread; an exception is the step's "
          "error. order: 'in_order' or 'as_completed'; on_error: 'stop' or 'keep_going'.")
      .def(
          "push",
          [](PyEgress& self, nb::handle output, std::uint64_t offset,
             std::optional<std::uint64_t> size, nb::handle ready) {
            std::vector<TimelinePoint> waits;
            const BufferRef memory = memory_ref(output, &waits, "push: output");
            TimelinePoint point;
            if (!ready.is_none()) {
              point = nb::cast<TimelinePoint>(ready);
            } else if (!waits.empty()) {
              point = waits.front();
            }
            const std::uint64_t bytes = size ? *size : (offset <= memory.size ? memory.size - offset : 0);
            EgressPipeline& pipeline = self.get();
            Result<EgressTicket> ticket = [&] {
              nb::gil_scoped_release unlocked;
              return pipeline.push(memory, offset, bytes, point);
            }();
            return take(std::move(ticket));
          },
          nb::arg("output"), nb::kw_only(), nb::arg("offset") = 0, nb::arg("size") = nb::none(),
          nb::arg("ready").none() = nb::none(),
          "Hands over bytes of `output` (Buffer, Lease or Tensor), complete at `ready` (default: "
          "the tensor's ready point); blocks while the pipeline is full.")
      .def(
          "drain",
          [](PyEgress& self, std::optional<double> timeout) {
            const Timeout t = to_timeout(timeout);
            EgressPipeline& pipeline = self.get();
            nb::gil_scoped_release unlocked;
            check(pipeline.drain(t));
          },
          nb::arg("timeout") = nb::none(),
          "Waits until every step pushed so far is consumed; raises the first error seen.")
      .def(
          "close",
          [](PyEgress& self, std::string_view mode) {
            static constexpr EnumName<EgressClose> kModes[] = {{"drain", EgressClose::drain},
                                                               {"cancel", EgressClose::cancel}};
            const EgressClose how = enum_from(mode, kModes, "close mode");
            if (!self.pipeline) return;
            nb::gil_scoped_release unlocked;
            check(self.pipeline->close(how));
          },
          nb::arg("mode") = "drain",
          "Stops accepting pushes, delivers ('drain') or drops ('cancel') what is pending, joins "
          "the workers; raises what drain would.")
      .def_prop_ro("stats", [](PyEgress& self) { return egress_stats(self.get().stats()); })
      .def("__enter__", [](nb::handle self) { return self; })
      .def(
          "__exit__",
          [](PyEgress& self, nb::handle exc_type, nb::handle, nb::handle) {
            if (!self.pipeline) return;
            const EgressClose how = exc_type.is_none() ? EgressClose::drain : EgressClose::cancel;
            Status status;
            {
              nb::gil_scoped_release unlocked;
              status = self.pipeline->close(how);
            }
            if (exc_type.is_none()) check(status);  // don't mask the body's exception
          },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none());
}

}  // namespace ferry::python
