// Search and compression: BinaryIndex, and ferry.ibp's host codec.
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "convert.hpp"

namespace ferry::python {
namespace {

struct PyIndex {
  std::unique_ptr<BinaryIndex> index;
  Device device;

  BinaryIndex& get() {
    if (!index) throw StatusError{Status(ErrorCode::released, "BinaryIndex: none")};
    return *index;
  }
};

// Rows of a 2-D (or 1-D: one row) C-contiguous host array.
std::uint64_t rows_of(nb::handle array, const char* what) {
  if (!nb::hasattr(array, "shape")) return 1;
  nb::tuple shape = nb::cast<nb::tuple>(array.attr("shape"));
  if (shape.size() == 1) return 1;
  if (shape.size() != 2) {
    throw StatusError{Status(ErrorCode::invalid_argument,
                             std::string(what) + " must be 1-D or 2-D [rows, dims]")};
  }
  return nb::cast<std::uint64_t>(shape[0]);
}

// An array with a dtype must have the one the call reads (the bytes of int32 rows would pass
// for float32 ones by size alone).
void check_dtype(nb::handle array, std::string_view expected, const char* what) {
  if (!nb::hasattr(array, "dtype")) return;
  std::string name = text_of(array.attr("dtype"));
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name != expected) {
    throw StatusError{Status(ErrorCode::invalid_argument, std::string(what) + " are " + name +
                                                              ", the index takes " +
                                                              std::string(expected))};
  }
}

nb::tuple results_to_numpy(SearchResults results) {
  nb::object numpy = nb::module_::import_("numpy");
  nb::object ids = numpy.attr("empty")(nb::make_tuple(results.queries, results.k), "uint64");
  nb::object scores = numpy.attr("empty")(nb::make_tuple(results.queries, results.k), "float32");
  HostBytes id_bytes(ids, true, "ids");
  HostBytes score_bytes(scores, true, "scores");
  std::memcpy(id_bytes.bytes().data(), results.ids.data(), id_bytes.bytes().size());
  std::memcpy(score_bytes.bytes().data(), results.scores.data(), score_bytes.bytes().size());
  return nb::make_tuple(ids, scores);
}

nb::dict index_stats(const BinaryIndexStats& s) {
  nb::dict d;
  d["rows"] = s.rows;
  d["device_code_rows"] = s.device_code_rows;
  d["device_vector_rows"] = s.device_vector_rows;
  d["device_bytes"] = s.device_bytes;
  d["host_bytes"] = s.host_bytes;
  d["code_segments"] = s.code_segments;
  d["vector_segments"] = s.vector_segments;
  return d;
}

nb::bytes to_bytes(const std::vector<std::byte>& data) {
  return nb::bytes(reinterpret_cast<const char*>(data.data()), data.size());
}

}  // namespace

void bind_search(nb::module_& m) {
  static constexpr EnumName<IndexMetric> kMetrics[] = {
      {"inner_product", IndexMetric::inner_product}, {"l2", IndexMetric::l2},
      {"cosine", IndexMetric::cosine}};
  static constexpr EnumName<IndexThreshold> kThresholds[] = {
      {"zero", IndexThreshold::zero}, {"given", IndexThreshold::given},
      {"first_add_mean", IndexThreshold::first_add_mean}};
  static constexpr EnumName<KeptVectors> kKept[] = {
      {"none", KeptVectors::none}, {"float32", KeptVectors::float32}, {"int8", KeptVectors::int8}};

  nb::class_<PyIndex>(m, "BinaryIndex",
                      "Binary-quantized vector search on the device (docs/SEARCH.md): rows are "
                      "quantized to 1 bit per dimension, searched by Hamming distance and "
                      "optionally rescored against kept vectors.")
      .def(
          "__init__",
          [](PyIndex* self, PyDevice& device, std::uint32_t dims, std::string_view metric,
             std::string_view input_type, std::string_view threshold,
             std::optional<std::vector<float>> thresholds, std::string_view keep,
             float int8_scale) {
            BinaryIndexOptions options;
            options.dims = dims;
            options.metric = enum_from(metric, kMetrics, "metric");
            options.input_type = element_type_from(input_type);
            options.threshold = enum_from(threshold, kThresholds, "threshold");
            if (thresholds) options.thresholds = *thresholds;
            options.keep = enum_from(keep, kKept, "keep");
            options.int8_scale = int8_scale;
            Result<BinaryIndex> index = [&] {
              nb::gil_scoped_release unlocked;
              return BinaryIndex::create(device.device, options);
            }();
            new (self) PyIndex{std::make_unique<BinaryIndex>(take(std::move(index))), device.device};
          },
          nb::arg("device"), nb::arg("dims"), nb::kw_only(), nb::arg("metric") = "inner_product",
          nb::arg("input_type") = "float32", nb::arg("threshold") = "zero",
          nb::arg("thresholds").none() = nb::none(), nb::arg("keep") = "none",
          nb::arg("int8_scale") = 0.0f)
      .def_static(
          "load",
          [](PyDevice& device, const std::filesystem::path& path) {
            Result<BinaryIndex> index = [&] {
              nb::gil_scoped_release unlocked;
              return BinaryIndex::load(device.device, path);
            }();
            return new PyIndex{std::make_unique<BinaryIndex>(take(std::move(index))), device.device};
          },
          nb::arg("device"), nb::arg("path"), nb::rv_policy::take_ownership,
          "Reads an index written by save(); a corrupted or foreign file raises with the reason.")
      .def(
          "add",
          [](PyIndex& self, nb::handle vectors) {
            check_dtype(vectors, to_string(self.get().options().input_type), "add: vectors");
            HostBytes bytes(vectors, false, "add: vectors");
            const std::uint64_t rows = rows_of(vectors, "add: vectors");
            BinaryIndex& index = self.get();
            nb::gil_scoped_release unlocked;
            return take(index.add(bytes.bytes(), rows));
          },
          nb::arg("vectors"),
          "Adds rows (a [rows, dims] C-contiguous array of the index's input type); returns the "
          "first row's id. On an error the index is unchanged.")
      .def(
          "add_codes",
          [](PyIndex& self, nb::handle codes) {
            check_dtype(codes, "uint8", "add_codes: codes");
            HostBytes bytes(codes, false, "add_codes: codes");
            const std::uint64_t rows = rows_of(codes, "add_codes: codes");
            BinaryIndex& index = self.get();
            nb::gil_scoped_release unlocked;
            return take(index.add_codes(bytes.bytes(), rows));
          },
          nb::arg("codes"), "Adds packed binary codes ([rows, code bytes] uint8) as they are.")
      .def(
          "search",
          [](PyIndex& self, nb::handle queries, std::uint32_t k, std::uint32_t oversample,
             bool rescore) {
            check_dtype(queries, to_string(self.get().options().input_type), "search: queries");
            HostBytes bytes(queries, false, "search: queries");
            const auto count = static_cast<std::uint32_t>(rows_of(queries, "search: queries"));
            BinaryIndex& index = self.get();
            Result<SearchResults> results = [&] {
              nb::gil_scoped_release unlocked;
              return index.search(bytes.bytes(), count, SearchParams{k, oversample, rescore});
            }();
            return results_to_numpy(take(std::move(results)));
          },
          nb::arg("queries"), nb::arg("k") = 10, nb::kw_only(), nb::arg("oversample") = 1,
          nb::arg("rescore") = false,
          "Returns (ids [queries, k] uint64, scores [queries, k] float32), best first; padding "
          "ids are 2**64 - 1 with NaN scores.")
      .def(
          "search_codes",
          [](PyIndex& self, nb::handle codes, std::uint32_t k) {
            check_dtype(codes, "uint8", "search_codes: codes");
            HostBytes bytes(codes, false, "search_codes: codes");
            const auto count = static_cast<std::uint32_t>(rows_of(codes, "search_codes: codes"));
            BinaryIndex& index = self.get();
            Result<SearchResults> results = [&] {
              nb::gil_scoped_release unlocked;
              return index.search_codes(bytes.bytes(), count, SearchParams{k, 1, false});
            }();
            return results_to_numpy(take(std::move(results)));
          },
          nb::arg("codes"), nb::arg("k") = 10)
      .def(
          "save",
          [](PyIndex& self, const std::filesystem::path& path) {
            BinaryIndex& index = self.get();
            nb::gil_scoped_release unlocked;
            check(index.save(path));
          },
          nb::arg("path"))
      .def("__len__", [](PyIndex& self) { return self.get().size(); })
      .def_prop_ro("dims", [](PyIndex& self) { return self.get().options().dims; })
      .def_prop_ro("stats", [](PyIndex& self) { return index_stats(self.get().stats()); });

  nb::module_ ibp_module = m.def_submodule("ibp", "Invariant Bit Packing on the host (docs/IBP_FORMAT.md).");
  ibp_module.def(
      "encode",
      [](nb::handle data, std::uint8_t element_size, std::uint64_t row_elements,
         std::uint32_t group_rows) {
        HostBytes bytes(data, false, "ibp.encode: data");
        if (element_size == 0 || bytes.bytes().size() % element_size != 0) {
          throw StatusError{Status(ErrorCode::invalid_argument,
                                   "ibp.encode: the data's " + std::to_string(bytes.bytes().size()) +
                                       " bytes are not whole elements of " +
                                       std::to_string(element_size) + " bytes")};
        }
        ibp::EncodeParams params;
        params.element_size = element_size;
        params.row_elements = row_elements;
        params.elements = bytes.bytes().size() / element_size;
        params.group_rows = group_rows;
        Result<std::vector<std::byte>> stream = [&] {
          nb::gil_scoped_release unlocked;
          return ibp::encode(bytes.bytes(), params);
        }();
        return to_bytes(take(std::move(stream)));
      },
      nb::arg("data"), nb::kw_only(), nb::arg("element_size"), nb::arg("row_elements"),
      nb::arg("group_rows") = 0, "The IBP stream of `data` (a C-contiguous host array).");
  ibp_module.def(
      "read_layout",
      [](nb::handle stream) {
        HostBytes bytes(stream, false, "ibp.read_layout: stream");
        return take(ibp::read_layout(bytes.bytes()));
      },
      nb::arg("stream"), "The stream's checked header.");
  ibp_module.def(
      "validate",
      [](nb::handle stream) {
        HostBytes bytes(stream, false, "ibp.validate: stream");
        nb::gil_scoped_release unlocked;
        check(ibp::validate(bytes.bytes()));
      },
      nb::arg("stream"), "Checks a whole stream; DataCorruptError names what is wrong.");
  ibp_module.def(
      "decode",
      [](nb::handle stream) {
        HostBytes bytes(stream, false, "ibp.decode: stream");
        // The whole stream is checked, and its tensor against this machine's memory, before
        // anything is allocated: a 64-byte stream can claim any size.
        Result<ibp::Layout> checked = [&] {
          nb::gil_scoped_release unlocked;
          return ibp::validate_for_decode(bytes.bytes());
        }();
        const ibp::Layout layout = take(std::move(checked));
        const std::uint64_t size = layout.raw_bytes();
        // Decoded straight into the bytes object, uninitialized: the decoder writes every byte.
        nb::object out = nb::steal(PyBytes_FromStringAndSize(
            nullptr, static_cast<Py_ssize_t>(std::min<std::uint64_t>(size, PY_SSIZE_T_MAX))));
        if (!out.is_valid() || static_cast<std::uint64_t>(PyBytes_GET_SIZE(out.ptr())) != size) {
          PyErr_Clear();
          throw StatusError{Status(ErrorCode::out_of_memory,
                                   "ibp.decode: cannot allocate the " + std::to_string(size) +
                                       " bytes of the stream's tensor")};
        }
        const std::span<std::byte> target(reinterpret_cast<std::byte*>(PyBytes_AS_STRING(out.ptr())),
                                          size);
        {
          nb::gil_scoped_release unlocked;
          check(ibp::decode(bytes.bytes(), target, true));
        }
        return out;
      },
      nb::arg("stream"),
      "The tensor's bytes. The stream is validated first (DataCorruptError), and its tensor's "
      "size against this machine's memory (OutOfMemoryError), before anything is allocated.");
}

}  // namespace ferry::python
