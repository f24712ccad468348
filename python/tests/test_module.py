"""Module-level API: backends, ops, the exception hierarchy, Device.open and its errors."""

from __future__ import annotations

import builtins

import pytest

import ferry
from conftest import KNOWN_BACKENDS, ensure_backend

ERROR_CLASSES = {
    "invalid_argument": ("InvalidArgumentError", (ValueError,)),
    "out_of_range": ("OutOfRangeError", (ValueError,)),
    "timeout": ("TimeoutError", (builtins.TimeoutError,)),
    "unavailable": ("UnavailableError", ()),
    "out_of_memory": ("OutOfMemoryError", (MemoryError,)),
    "resource_exhausted": ("ResourceExhaustedError", ()),
    "released": ("ReleasedError", ()),
    "device_closed": ("DeviceClosedError", ()),
    "device_lost": ("DeviceLostError", ()),
    "failed_precondition": ("FailedPreconditionError", ()),
    "timeline_failed": ("TimelineFailedError", ()),
    "backend_error": ("BackendError", ()),
    "data_corrupt": ("DataCorruptError", ()),
    "not_found": ("NotFoundError", (FileNotFoundError,)),
    "internal": ("InternalError", ()),
}


def test_list_backends_shape():
    infos = ferry.list_backends()
    assert isinstance(infos, list) and infos
    names = [str(info.backend) for info in infos]
    assert len(set(names)) == len(names)
    assert "cpu" in names, "the CPU reference backend is always built"
    for info in infos:
        assert str(info.backend) in KNOWN_BACKENDS
        assert isinstance(info.available, bool)
        assert isinstance(info.reason, str)
        if info.available:
            assert info.reason == ""
        else:
            assert info.reason != "", f"{info.backend} unavailable without a reason"
        assert isinstance(info.devices, list)
        for index, dev in enumerate(info.devices):
            assert str(dev.backend) == str(info.backend)
            assert dev.index == index
            assert isinstance(dev.name, str) and dev.name
            assert isinstance(dev.driver, str)
            assert isinstance(dev.is_cpu, bool)
            assert isinstance(dev.device_memory_bytes, int) and dev.device_memory_bytes >= 0
            assert isinstance(dev.host_visible_memory_bytes, int)
            assert isinstance(dev.pci_bus_id, str)
            assert isinstance(dev.numa_node, int) and dev.numa_node >= -1
            assert isinstance(dev.search_path, str)
    cpu = next(info for info in infos if str(info.backend) == "cpu")
    assert cpu.available and cpu.devices and cpu.devices[0].is_cpu
    assert cpu.devices[0].pci_bus_id == ""
    assert cpu.devices[0].search_path.split(":")[0] in ("portable", "avx2", "avx512")


def test_list_ops():
    ops = ferry.list_ops()
    assert isinstance(ops, list)
    assert all(isinstance(op, str) for op in ops)
    for name in ("fill", "normalize", "binary_quantize", "hamming_topk", "rescore",
                 "ibp_encode", "ibp_decode"):
        assert name in ops, f"{name} missing from list_ops(): {ops}"
    assert len(set(ops)) == len(ops)


@pytest.mark.parametrize("code", sorted(ERROR_CLASSES))
def test_error_classes(code):
    name, bases = ERROR_CLASSES[code]
    cls = getattr(ferry, name)
    assert issubclass(cls, ferry.Error)
    assert issubclass(cls, Exception)
    for base in bases:
        assert issubclass(cls, base), f"ferry.{name} should also be a {base.__name__}"
    assert cls.code == code
    error = cls("the message", "file.cpp:12")
    assert error.code == code
    assert error.message == "the message"
    assert error.where == "file.cpp:12"
    assert "the message" in str(error)


def test_error_class_builtins_are_distinct():
    assert ferry.TimeoutError is not builtins.TimeoutError
    assert not issubclass(ferry.UnavailableError, ValueError)
    assert not issubclass(ferry.InvalidArgumentError, builtins.TimeoutError)
    # A ferry.TimeoutError is caught by `except TimeoutError` (the builtin).
    with pytest.raises(builtins.TimeoutError):
        raise ferry.TimeoutError("x", "")


def test_open_unknown_backend():
    with pytest.raises(ferry.InvalidArgumentError) as info:
        ferry.Device.open("dev")
    assert info.value.code == "invalid_argument"
    assert "dev" in info.value.message
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value.where, str) and info.value.where


def test_open_backend_not_built_or_unavailable():
    infos = {str(info.backend): info for info in ferry.list_backends()}
    for name in KNOWN_BACKENDS:
        info = infos.get(name)
        if info is not None and info.available:
            continue
        with pytest.raises(ferry.UnavailableError) as error:
            ferry.Device.open(name)
        assert error.value.code == "unavailable"
        assert name in error.value.message


def test_open_index_out_of_range(backend):
    info = ensure_backend(backend)
    with pytest.raises(ferry.OutOfRangeError) as error:
        ferry.Device.open(backend, len(info.devices) + 7)
    assert error.value.code == "out_of_range"
    assert isinstance(error.value, ValueError)
    with pytest.raises(ferry.OutOfRangeError):
        ferry.Device.open(backend, -1)


def test_open_defaults_and_properties(open_device, backend):
    dev = open_device()
    assert dev.is_open
    assert str(dev.backend) == backend
    assert str(dev.info.backend) == backend
    assert dev.info.index == 0
    assert dev.name == dev.info.name
    assert dev.validation_message_count == 0
    listed = next(i for i in ferry.list_backends() if str(i.backend) == backend).devices[0]
    assert dev.info.name == listed.name


def test_open_auto_gives_a_device():
    with ferry.Device.open() as dev:
        assert dev.is_open
        assert str(dev.backend) in KNOWN_BACKENDS
        if str(dev.backend) == "vulkan":
            # auto never picks a software Vulkan device (lavapipe) over the CPU reference
            assert not dev.info.is_cpu
    assert not dev.is_open


def test_context_manager_closes(open_device):
    dev = open_device()
    with dev as entered:
        assert entered is dev
        buf = dev.create_buffer(16)
    assert not dev.is_open
    with pytest.raises(ferry.DeviceClosedError) as error:
        dev.create_buffer(16)
    assert error.value.code == "device_closed"
    with pytest.raises(ferry.DeviceClosedError):
        dev.download(buf)
    dev.close()  # idempotent


def test_supports(device):
    for op in ferry.list_ops():
        assert isinstance(device.supports(op), bool)
    assert device.supports("fill") is True
    with pytest.raises(ferry.InvalidArgumentError) as error:
        device.supports("no_such_op")
    assert isinstance(error.value, ValueError)
    assert "no_such_op" in error.value.message


def test_queue_kinds(device):
    for kind in ("compute", "upload", "download"):
        queue = device.queue(kind)
        assert str(queue.kind) == kind
        progress = queue.progress
        assert isinstance(progress.value, int)
    with pytest.raises(ferry.InvalidArgumentError):
        device.queue("dev")
    with pytest.raises(ferry.InvalidArgumentError):
        device.queue("Compute")


def test_wait_idle_and_negative_timeouts(device):
    device.wait_idle()
    device.wait_idle(timeout=5)
    device.wait_idle(timeout=0)
    with pytest.raises(ValueError):
        device.wait_idle(timeout=-1)
    with pytest.raises(ValueError):
        device.wait_idle(timeout=float("nan"))


def test_ferry_require_fails_instead_of_skipping(monkeypatch):
    """The suite's own rule: a backend named in FERRY_REQUIRE that cannot be used fails."""
    missing = next((name for name in KNOWN_BACKENDS
                    if not any(str(i.backend) == name and i.available and i.devices
                               for i in ferry.list_backends())), None)
    if missing is None:
        pytest.skip("every backend is available here")
    monkeypatch.setenv("FERRY_REQUIRE", f"cpu,{missing}")
    with pytest.raises(pytest.fail.Exception):
        ensure_backend(missing)
    monkeypatch.setenv("FERRY_REQUIRE", "")
    with pytest.raises(pytest.skip.Exception):
        ensure_backend(missing)


def test_trace_file(open_device, tmp_path):
    """trace_path writes Chrome trace-event JSON once the device is closed."""
    import json

    path = tmp_path / "trace.json"
    dev = open_device(trace_path=str(path))
    dev.download(dev.upload(b"trace me"))
    dev.close()
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    assert isinstance(events, list) and events
