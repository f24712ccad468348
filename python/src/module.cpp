// ferry._ferry: the extension behind the `ferry` package (python/ferry/__init__.py re-exports it).
// Devices and the module's functions are bound here; memory, queues, DLPack, pipelines and search
// in their own files.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include "convert.hpp"

namespace ferry::python {
namespace {

void translate_status(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const StatusError& error) {
    // The exception class of the code, from the package's pure-Python part.
    nb::object errors = nb::module_::import_("ferry._errors");
    nb::object instance = errors.attr("_make")(error_code_name(error.status.code()),
                                                error.status.message(), error.status.where());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
  }
}

std::string backend_name(Backend backend) { return std::string(to_string(backend)); }

DeviceClass bind_device(nb::module_& m) {
  nb::class_<DeviceInfo>(m, "DeviceInfo", "What a device is: from list_backends() or Device.info.")
      .def_prop_ro("backend", [](const DeviceInfo& info) { return backend_name(info.backend); })
      .def_ro("index", &DeviceInfo::index)
      .def_ro("name", &DeviceInfo::name)
      .def_ro("driver", &DeviceInfo::driver)
      .def_ro("search_path", &DeviceInfo::search_path)
      .def_ro("is_cpu", &DeviceInfo::is_cpu, "A software implementation (CPU reference, lavapipe).")
      .def_ro("device_memory_bytes", &DeviceInfo::device_memory_bytes)
      .def_ro("host_visible_memory_bytes", &DeviceInfo::host_visible_memory_bytes)
      .def_ro("pci_bus_id", &DeviceInfo::pci_bus_id)
      .def_ro("numa_node", &DeviceInfo::numa_node)
      .def("__repr__", [](const DeviceInfo& info) {
        return "DeviceInfo(" + backend_name(info.backend) + ":" + std::to_string(info.index) +
               ", '" + info.name + "')";
      });

  nb::class_<BackendInfo>(m, "BackendInfo", "A backend compiled in: whether it can be used here.")
      .def_prop_ro("backend", [](const BackendInfo& info) { return backend_name(info.backend); })
      .def_ro("available", &BackendInfo::available)
      .def_ro("reason", &BackendInfo::reason, "Why it is unavailable; empty when available.")
      .def_ro("devices", &BackendInfo::devices)
      .def("__repr__", [](const BackendInfo& info) {
        return "BackendInfo(" + backend_name(info.backend) + ", available=" +
               (info.available ? "True" : "False") + ", devices=" +
               std::to_string(info.devices.size()) + ")";
      });

  m.def("list_backends", &list_backends, nb::call_guard<nb::gil_scoped_release>(),
        "Every backend compiled in, whether it can be used here, and its devices.");
  m.def(
      "list_ops",
      [] {
        std::vector<std::string> names;
        for (const std::string_view name : list_ops()) names.emplace_back(name);
        return names;
      },
      "The names of the ops every backend implements.");

  return nb::class_<PyDevice>(m, "Device",
                       "An open device: a backend's GPU or the CPU reference. Use Device.open().")
      .def_static(
          "open",
          [](std::string_view backend, int index, bool validation, std::string trace_path) {
            DeviceOptions options;
            options.validation = validation;
            options.trace_path = std::move(trace_path);
            Result<Device> device = [&] {
              nb::gil_scoped_release unlocked;
              return Device::open(backend, index, options);
            }();
            auto* opened = new PyDevice();
            opened->device = take(std::move(device));
            return opened;
          },
          nb::arg("backend") = "auto", nb::arg("index") = 0, nb::kw_only(),
          nb::arg("validation") = false, nb::arg("trace_path") = "",
          nb::rv_policy::take_ownership,
          "Opens device `index` of `backend`: 'auto' (a GPU if there is one: cuda, then vulkan; "
          "else the CPU reference), 'cpu', 'vulkan' or 'cuda'. validation: the Vulkan "
          "validation layer (also FERRY_VALIDATION=1). trace_path: a Chrome trace of the "
          "device's work (also FERRY_TRACE).")
      .def_prop_ro("info", [](PyDevice& self) { return self.device.info(); })
      .def_prop_ro("backend", [](PyDevice& self) { return backend_name(self.device.backend()); })
      .def_prop_ro("name", [](PyDevice& self) { return self.device.info().name; })
      .def_prop_ro("is_open", [](PyDevice& self) { return self.device.is_open(); })
      .def_prop_ro("validation_message_count",
                   [](PyDevice& self) { return self.device.validation_message_count(); },
                   "Validation messages of warning or error severity seen so far.")
      .def(
          "supports",
          [](PyDevice& self, std::string_view op) {
            const Status status = self.device.supports(op);
            if (status.code() == ErrorCode::unavailable) return false;
            check(status);
            return true;
          },
          nb::arg("op"),
          "Whether the device runs the op (list_ops()); InvalidArgumentError for a name that is "
          "no op.")
      .def(
          "why_unsupported",
          [](PyDevice& self, std::string_view op) -> std::string {
            return self.device.supports(op).message();
          },
          nb::arg("op"), "Why the device cannot run the op; empty when it can.")
      .def(
          "wait_idle",
          [](PyDevice& self, std::optional<double> timeout) {
            const Timeout t = to_timeout(timeout);
            nb::gil_scoped_release unlocked;
            check(self.device.wait_idle(t));
          },
          nb::arg("timeout") = nb::none(),
          "Waits until every submission so far on every queue has completed or failed.")
      .def(
          "close",
          [](PyDevice& self, std::optional<double> timeout) {
            const Timeout t = to_timeout(timeout);
            nb::gil_scoped_release unlocked;
            check(self.device.close(t));
          },
          nb::arg("timeout") = nb::none(),
          "Refuses new work, waits for the work in flight, then closes the device: later calls "
          "on it or its objects raise DeviceClosedError.")
      .def("__enter__", [](nb::handle self) { return self; })
      .def(
          "__exit__",
          [](PyDevice& self, nb::handle, nb::handle, nb::handle) {
            nb::gil_scoped_release unlocked;
            check(self.device.close());
          },
          nb::arg("exc_type").none(), nb::arg("exc").none(), nb::arg("tb").none())
      .def("__repr__", [](PyDevice& self) {
        if (!self.device) return std::string("Device(none)");
        return "Device(" + backend_name(self.device.backend()) + ":" +
               std::to_string(self.device.info().index) + ", '" + self.device.info().name + "')";
      });
}

}  // namespace

PyDevice::~PyDevice() {
  // The last handle drains the device's queues: without the GIL, so that ferry threads running
  // Python callbacks can finish.
  nb::gil_scoped_release unlocked;
  upload_pool.reset();
  readback_pool.reset();
  device = Device();
}

}  // namespace ferry::python

NB_MODULE(_ferry, m) {
  using namespace ferry::python;
  m.doc() = "ferry's extension module; use the `ferry` package.";
  // Objects still referenced at exit (a script's globals) are not leaks worth a report.
  nb::set_leak_warnings(false);
  nb::register_exception_translator(translate_status);
  DeviceClass device = bind_device(m);
  bind_memory(m, device);
  bind_queue(m, device);
  bind_dlpack(m);
  bind_pipelines(m);
  bind_search(m);
  // Pipelines' threads call Python: close them while the interpreter still runs them, before
  // it finalizes (atexit handlers run first).
  nb::module_::import_("atexit").attr("register")(
      nb::cpp_function([] { close_live_pipelines(); }));
}
