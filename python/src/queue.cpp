// Ordering and commands: Timeline, TimelinePoint, Queue, CommandList with every op, and
// NormalizeParams.
#include <nanobind/stl/array.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "convert.hpp"

namespace ferry::python {

std::vector<TimelinePoint> points_from(nb::handle sequence, const char* argument) {
  std::vector<TimelinePoint> points;
  if (sequence.is_none()) return points;
  if (nb::isinstance<TimelinePoint>(sequence)) {
    points.push_back(nb::cast<TimelinePoint>(sequence));
    return points;
  }
  for (nb::handle item : sequence) {
    if (!nb::isinstance<TimelinePoint>(item)) {
      throw nb::type_error((std::string(argument) + " must hold TimelinePoints").c_str());
    }
    points.push_back(nb::cast<TimelinePoint>(item));
  }
  return points;
}

namespace {

struct PyCommandList {
  CommandList list;
  std::vector<TimelinePoint> waits;  // ready points of tensors the commands use
  std::vector<nb::object> written;   // tensors the commands write: ready at the submission's end

  // A memory argument the command writes: a tensor among them is ready once the commands are.
  BufferRef output(nb::handle object, const char* argument) {
    const BufferRef ref = memory_ref(object, &waits, argument);
    if (nb::isinstance<PyTensor>(object)) written.push_back(nb::borrow(object));
    return ref;
  }
};

std::uint64_t size_or_rest(std::optional<std::uint64_t> size, const BufferRef& ref,
                           std::uint64_t offset) {
  if (size) return *size;
  return offset <= ref.size ? ref.size - offset : 0;
}

ImageLayout image_layout_from(std::string_view name) {
  static constexpr EnumName<ImageLayout> kLayouts[] = {{"nhwc", ImageLayout::nhwc},
                                                       {"nchw", ImageLayout::nchw}};
  return enum_from(name, kLayouts, "image layout");
}

}  // namespace

void bind_queue(nb::module_& m, DeviceClass& device_class) {
  nb::class_<Timeline>(m, "Timeline",
                       "A 64-bit value that queues and the host signal and wait on.")
      .def_prop_ro("value", &Timeline::value, "The value reached.")
      .def_prop_ro("submitted_value", &Timeline::submitted_value)
      .def(
          "wait",
          [](const Timeline& self, std::uint64_t value, std::optional<double> timeout) {
            const Timeout t = to_timeout(timeout);
            nb::gil_scoped_release unlocked;
            check(self.wait(value, t));
          },
          nb::arg("value"), nb::arg("timeout") = nb::none(),
          "Blocks until the value is reached: TimeoutError, TimelineFailedError (never will be).")
      .def("signal", [](const Timeline& self, std::uint64_t value) { check(self.signal(value)); },
           nb::arg("value"), "Sets the value from the host (above every value submitted).")
      .def_prop_ro(
          "failure",
          [](const Timeline& self) -> nb::object {
            const Status failure = self.failure();
            if (failure.ok()) return nb::none();
            nb::object errors = nb::module_::import_("ferry._errors");
            return errors.attr("_make")(error_code_name(failure.code()), failure.message(),
                                        failure.where());
          },
          "The most recent failure recorded on this timeline (a ferry.Error), or None.")
      .def(
          "point", [](const Timeline& self, std::uint64_t value) { return TimelinePoint{self, value}; },
          nb::arg("value"));

  nb::class_<TimelinePoint>(m, "TimelinePoint", "A value on a timeline.")
      .def_ro("timeline", &TimelinePoint::timeline)
      .def_ro("value", &TimelinePoint::value)
      .def_prop_ro("reached", &TimelinePoint::reached)
      .def(
          "wait",
          [](const TimelinePoint& self, std::optional<double> timeout) {
            const Timeout t = to_timeout(timeout);
            nb::gil_scoped_release unlocked;
            check(self.wait(t));
          },
          nb::arg("timeout") = nb::none())
      .def(
          "wait_on_stream",
          [](const TimelinePoint& self, nb::handle stream, std::optional<double> timeout) {
            const std::uintptr_t handle = stream_handle(stream);
            const Timeout t = to_timeout(timeout);
            nb::gil_scoped_release unlocked;
            check(native_stream_wait(self, handle, t));
          },
          nb::arg("stream"), nb::arg("timeout") = nb::none(),
          "Orders a CUDA stream (an int, or torch's / cupy's stream object) after this point, "
          "without a host wait; on other backends waits on the host.")
      .def("__repr__", [](const TimelinePoint& self) {
        return "TimelinePoint(value=" + std::to_string(self.value) + ")";
      });

  nb::class_<Queue>(m, "Queue", "One of a device's queues: compute, upload or download.")
      .def_prop_ro("kind", [](const Queue& self) { return std::string(to_string(self.kind())); })
      .def_prop_ro("progress", &Queue::progress,
                   "The queue's progress timeline: each submission signals its next value.")
      .def(
          "submit",
          [](const Queue& self, PyCommandList& commands, nb::handle wait, nb::handle signal) {
            SubmitSync sync;
            sync.wait = points_from(wait, "submit: wait");
            sync.wait.insert(sync.wait.end(), commands.waits.begin(), commands.waits.end());
            sync.signal = points_from(signal, "submit: signal");
            Result<TimelinePoint> point = [&] {
              nb::gil_scoped_release unlocked;
              return self.submit(std::move(commands.list), sync);
            }();
            commands.list = CommandList();
            commands.waits.clear();
            std::vector<nb::object> written;
            written.swap(commands.written);
            TimelinePoint done = take(std::move(point));
            for (nb::handle tensor : written) nb::cast<PyTensor&>(tensor).ready = done;
            return done;
          },
          nb::arg("commands"), nb::arg("wait") = nb::tuple(), nb::arg("signal") = nb::tuple(),
          "Submits the commands (the list is emptied); returns the point on the queue's progress "
          "timeline at which they complete. The ready points of tensors the commands use are "
          "waited for, and tensors they write get the returned point as their ready point.")
      .def(
          "wait_idle",
          [](const Queue& self, std::optional<double> timeout) {
            const Timeout t = to_timeout(timeout);
            nb::gil_scoped_release unlocked;
            check(self.wait_idle(t));
          },
          nb::arg("timeout") = nb::none())
      .def(
          "point_after_stream",
          [](const Queue& self, nb::handle stream) {
            const std::uintptr_t handle = stream_handle(stream);
            nb::gil_scoped_release unlocked;
            return take(native_stream_point(self, handle));
          },
          nb::arg("stream"),
          "CUDA: the point on this queue at which the stream's work so far has completed (the "
          "queue waits for it on the device).");

  device_class
      .def(
          "queue", [](PyDevice& self, std::string_view kind) {
            return self.device.queue(queue_kind_from(kind));
          },
          nb::arg("kind"), "The 'compute', 'upload' or 'download' queue.")
      .def(
          "create_timeline",
          [](PyDevice& self, std::uint64_t initial) {
            return take(self.device.create_timeline(initial));
          },
          nb::arg("initial") = 0);

  nb::class_<NormalizeParams>(m, "NormalizeParams",
                              "uint8 images to normalized float tensors: the shape and math of "
                              "normalize (ferry/ops/normalize.hpp has the exact semantics).")
      .def(
          "__init__",
          [](NormalizeParams* self, std::uint32_t batch, std::uint32_t height, std::uint32_t width,
             std::uint32_t channels, std::string_view layout, std::vector<double> mean,
             std::vector<double> std, std::string_view output_type,
             std::string_view output_layout,
             std::optional<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t>>
                 crop,
             bool mirror, std::uint64_t row_pitch, std::uint64_t plane_pitch,
             std::uint64_t image_pitch) {
            NormalizeParams params;
            params.input.batch = batch;
            params.input.height = height;
            params.input.width = width;
            params.input.channels = channels;
            params.input.layout = image_layout_from(layout);
            params.input.row_pitch = row_pitch;
            params.input.plane_pitch = plane_pitch;
            params.input.image_pitch = image_pitch;
            if (mean.size() > kMaxNormalizeChannels || std.size() > kMaxNormalizeChannels) {
              throw StatusError{Status(ErrorCode::invalid_argument,
                                       "NormalizeParams: mean and std take at most 4 values")};
            }
            for (std::size_t c = 0; c < mean.size(); ++c) params.mean[c] = mean[c];
            for (std::size_t c = 0; c < std.size(); ++c) params.std[c] = std[c];
            params.output_type = element_type_from(output_type);
            params.output_layout = image_layout_from(output_layout);
            if (crop) {
              params.crop = {std::get<0>(*crop), std::get<1>(*crop), std::get<2>(*crop),
                             std::get<3>(*crop)};
            }
            params.mirror = mirror;
            take(resolve_normalize(params));
            take(normalize_factors(params));
            new (self) NormalizeParams(params);
          },
          nb::arg("batch"), nb::arg("height"), nb::arg("width"), nb::arg("channels"),
          nb::kw_only(), nb::arg("layout") = "nhwc",
          nb::arg("mean") = std::vector<double>{0, 0, 0, 0},
          nb::arg("std") = std::vector<double>{1, 1, 1, 1}, nb::arg("output_type") = "float32",
          nb::arg("output_layout") = "nchw", nb::arg("crop").none() = nb::none(),
          nb::arg("mirror") = false, nb::arg("row_pitch") = 0, nb::arg("plane_pitch") = 0,
          nb::arg("image_pitch") = 0,
          "crop: (x, y, width, height); width or height 0 takes the whole image. Invalid "
          "parameters raise InvalidArgumentError naming the field.")
      .def_prop_ro("input_bytes",
                   [](const NormalizeParams& p) { return take(resolve_normalize(p)).input_bytes; })
      .def_prop_ro("output_bytes",
                   [](const NormalizeParams& p) { return take(resolve_normalize(p)).output_bytes; })
      .def_prop_ro("output_shape",
                   [](const NormalizeParams& p) {
                     const NormalizeShape s = take(resolve_normalize(p));
                     if (p.output_layout == ImageLayout::nchw) {
                       return std::make_tuple(s.batch, s.channels, s.height, s.width);
                     }
                     return std::make_tuple(s.batch, s.height, s.width, s.channels);
                   })
      .def_prop_ro("output_dtype",
                   [](const NormalizeParams& p) { return std::string(to_string(p.output_type)); });

  nb::class_<ibp::Layout>(m, "IbpLayout", "An IBP stream's header (docs/IBP_FORMAT.md).")
      .def_ro("element_size", &ibp::Layout::element_size)
      .def_ro("group_rows", &ibp::Layout::group_rows)
      .def_ro("rows", &ibp::Layout::rows)
      .def_ro("row_elements", &ibp::Layout::row_elements)
      .def_ro("elements", &ibp::Layout::elements)
      .def_ro("stream_bytes", &ibp::Layout::stream_bytes)
      .def_prop_ro("raw_bytes", &ibp::Layout::raw_bytes);

  nb::class_<PyCommandList>(m, "CommandList",
                            "Commands recorded to run as one submission, in order. Memory "
                            "arguments are Buffers, Leases or Tensors; offsets are relative to "
                            "them. An invalid command raises and records nothing.")
      .def(nb::init<>())
      .def("__len__", [](PyCommandList& self) { return self.list.size(); })
      .def(
          "copy",
          [](PyCommandList& self, nb::handle src, nb::handle dst, std::optional<std::uint64_t> size,
             std::uint64_t src_offset, std::uint64_t dst_offset) {
            const BufferRef from = memory_ref(src, &self.waits, "copy: src");
            const BufferRef to = self.output(dst, "copy: dst");
            check(self.list.copy(from, src_offset, to, dst_offset,
                                 size_or_rest(size, from, src_offset)));
          },
          nb::arg("src"), nb::arg("dst"), nb::arg("size") = nb::none(), nb::kw_only(),
          nb::arg("src_offset") = 0, nb::arg("dst_offset") = 0,
          "Copies `size` bytes (default: the rest of src from src_offset).")
      .def(
          "fill",
          [](PyCommandList& self, nb::handle dst, std::uint32_t pattern, std::uint64_t offset,
             std::optional<std::uint64_t> size) {
            const BufferRef to = self.output(dst, "fill: dst");
            check(ferry::fill(self.list, to, offset, size_or_rest(size, to, offset), pattern));
          },
          nb::arg("dst"), nb::arg("pattern"), nb::kw_only(), nb::arg("offset") = 0,
          nb::arg("size") = nb::none(),
          "Fills bytes with the little-endian 32-bit pattern repeated (compute queue).")
      .def(
          "normalize",
          [](PyCommandList& self, nb::handle src, nb::handle dst, const NormalizeParams& params,
             std::uint64_t src_offset, std::uint64_t dst_offset) {
            const BufferRef from = memory_ref(src, &self.waits, "normalize: src");
            const BufferRef to = self.output(dst, "normalize: dst");
            check(ferry::normalize(self.list, from, src_offset, to, dst_offset, params));
          },
          nb::arg("src"), nb::arg("dst"), nb::arg("params"), nb::kw_only(),
          nb::arg("src_offset") = 0, nb::arg("dst_offset") = 0,
          "uint8 images in src to the normalized tensor in dst (compute queue).")
      .def(
          "binary_quantize",
          [](PyCommandList& self, nb::handle input, nb::handle codes, std::uint32_t rows,
             std::uint32_t dims, std::string_view input_type, std::uint64_t row_pitch,
             nb::handle thresholds, std::uint64_t thresholds_offset, std::uint64_t input_offset,
             std::uint64_t codes_offset) {
            BinaryQuantizeParams params;
            params.rows = rows;
            params.dims = dims;
            params.input_type = element_type_from(input_type);
            params.row_pitch = row_pitch;
            BufferRef threshold_ref;
            if (!thresholds.is_none()) {
              threshold_ref = memory_ref(thresholds, &self.waits, "binary_quantize: thresholds");
              params.thresholds = {&threshold_ref, thresholds_offset};
            }
            check(ferry::binary_quantize(
                self.list, memory_ref(input, &self.waits, "binary_quantize: input"), input_offset,
                self.output(codes, "binary_quantize: codes"), codes_offset, params));
          },
          nb::arg("input"), nb::arg("codes"), nb::kw_only(), nb::arg("rows"), nb::arg("dims"),
          nb::arg("input_type") = "float32", nb::arg("row_pitch") = 0,
          nb::arg("thresholds").none() = nb::none(), nb::arg("thresholds_offset") = 0,
          nb::arg("input_offset") = 0, nb::arg("codes_offset") = 0,
          "Float rows to packed binary codes, 1 bit per dimension (FAISS's packing).")
      .def(
          "hamming_topk",
          [](PyCommandList& self, nb::handle queries, nb::handle database, nb::handle distances,
             nb::handle indices, std::uint32_t code_bits, std::uint32_t queries_count,
             std::uint64_t database_rows, std::uint32_t k) {
            HammingTopkBuffers buffers;
            buffers.queries = memory_ref(queries, &self.waits, "hamming_topk: queries");
            buffers.database = memory_ref(database, &self.waits, "hamming_topk: database");
            buffers.distances = self.output(distances, "hamming_topk: distances");
            buffers.indices = self.output(indices, "hamming_topk: indices");
            check(ferry::hamming_topk(self.list, buffers,
                                      {code_bits, queries_count, database_rows, k}));
          },
          nb::arg("queries"), nb::arg("database"), nb::arg("distances"), nb::arg("indices"),
          nb::kw_only(), nb::arg("code_bits"), nb::arg("queries_count"), nb::arg("database_rows"),
          nb::arg("k"),
          "For each query code the k nearest database codes by Hamming distance (uint32 "
          "distances and indices; ties by ascending index).")
      .def(
          "rescore",
          [](PyCommandList& self, nb::handle queries, nb::handle database, nb::handle candidates,
             nb::handle scores, nb::handle indices, std::uint32_t dims,
             std::uint32_t queries_count, std::uint64_t database_rows,
             std::uint32_t candidates_count, std::uint32_t k, std::string_view element,
             std::string_view metric) {
            RescoreBuffers buffers;
            buffers.queries = memory_ref(queries, &self.waits, "rescore: queries");
            buffers.database = memory_ref(database, &self.waits, "rescore: database");
            buffers.candidates = memory_ref(candidates, &self.waits, "rescore: candidates");
            buffers.scores = self.output(scores, "rescore: scores");
            buffers.indices = self.output(indices, "rescore: indices");
            RescoreParams params;
            static constexpr EnumName<RescoreElement> kElements[] = {
                {"float32", RescoreElement::float32}, {"int8", RescoreElement::int8}};
            static constexpr EnumName<RescoreMetric> kMetrics[] = {
                {"inner_product", RescoreMetric::inner_product}, {"l2", RescoreMetric::l2}};
            params.element = enum_from(element, kElements, "rescore element");
            params.metric = enum_from(metric, kMetrics, "rescore metric");
            params.dims = dims;
            params.queries = queries_count;
            params.database_rows = database_rows;
            params.candidates = candidates_count;
            params.k = k;
            check(ferry::rescore(self.list, buffers, params));
          },
          nb::arg("queries"), nb::arg("database"), nb::arg("candidates"), nb::arg("scores"),
          nb::arg("indices"), nb::kw_only(), nb::arg("dims"), nb::arg("queries_count"),
          nb::arg("database_rows"), nb::arg("candidates_count"), nb::arg("k"),
          nb::arg("element") = "float32", nb::arg("metric") = "inner_product",
          "Re-ranks candidate rows by the exact score and keeps the best k.")
      .def(
          "ibp_encode",
          [](PyCommandList& self, nb::handle input, nb::handle stream, std::uint8_t element_size,
             std::uint64_t row_elements, std::uint64_t elements, std::uint32_t group_rows) {
            IbpEncodeBuffers buffers;
            buffers.input = memory_ref(input, &self.waits, "ibp_encode: input");
            buffers.stream = self.output(stream, "ibp_encode: stream");
            ibp::EncodeParams params;
            params.element_size = element_size;
            params.row_elements = row_elements;
            params.elements = elements;
            params.group_rows = group_rows;
            check(ferry::ibp_encode(self.list, buffers, params));
          },
          nb::arg("input"), nb::arg("stream"), nb::kw_only(), nb::arg("element_size"),
          nb::arg("row_elements"), nb::arg("elements"), nb::arg("group_rows"),
          "A tensor to its IBP stream on the device (the bytes ferry.ibp.encode writes).")
      .def(
          "ibp_decode",
          [](PyCommandList& self, nb::handle stream, nb::handle output, nb::handle status,
             const ibp::Layout& layout, std::string_view rows, std::uint64_t first_row,
             std::uint64_t row_count, nb::handle indices) {
            IbpDecodeBuffers buffers;
            buffers.stream = memory_ref(stream, &self.waits, "ibp_decode: stream");
            buffers.output = self.output(output, "ibp_decode: output");
            buffers.status = self.output(status, "ibp_decode: status");
            if (!indices.is_none()) {
              buffers.indices = memory_ref(indices, &self.waits, "ibp_decode: indices");
            }
            IbpDecodeParams params;
            params.layout = layout;
            static constexpr EnumName<IbpDecodeRows> kRows[] = {{"whole", IbpDecodeRows::whole},
                                                                 {"range", IbpDecodeRows::range},
                                                                 {"gather", IbpDecodeRows::gather}};
            params.rows = enum_from(rows, kRows, "ibp_decode rows");
            params.first_row = first_row;
            params.row_count = row_count;
            check(ferry::ibp_decode(self.list, buffers, params));
          },
          nb::arg("stream"), nb::arg("output"), nb::arg("status"), nb::kw_only(),
          nb::arg("layout"), nb::arg("rows") = "whole", nb::arg("first_row") = 0,
          nb::arg("row_count") = 0, nb::arg("indices").none() = nb::none(),
          "An IBP stream to its tensor on the device (whole, a row range or a gather); status "
          "gets a uint32: 0, or the corrupt / index-out-of-range flags.");
}

}  // namespace ferry::python
