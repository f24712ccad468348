"""Buffers: sizes, kinds, host views, tensors over them, release."""

from __future__ import annotations

import numpy as np
import pytest

import ferry

KINDS = ("device", "host_upload", "host_readback")


@pytest.mark.parametrize("size", [1, 3, 4, 257, 4099, 1 << 20])
@pytest.mark.parametrize("kind", KINDS)
def test_create_buffer_sizes_and_kinds(device, size, kind):
    buf = device.create_buffer(size, kind)
    assert buf.size == size
    assert str(buf.kind) == kind
    assert buf.valid
    if kind == "device":
        buf2 = device.create_buffer(size)
        assert str(buf2.kind) == "device", "kind defaults to device"


def test_create_buffer_size_zero(device):
    with pytest.raises(ferry.InvalidArgumentError) as error:
        device.create_buffer(0)
    assert error.value.code == "invalid_argument"
    assert "size" in error.value.message


def test_create_buffer_negative_size(device):
    with pytest.raises((ValueError, TypeError, OverflowError)):
        device.create_buffer(-1)


@pytest.mark.parametrize("kind", ["dev", "Device", "", "host"])
def test_create_buffer_bad_kind(device, kind):
    with pytest.raises(ferry.InvalidArgumentError) as error:
        device.create_buffer(16, kind)
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize("kind", ["host_upload", "host_readback"])
@pytest.mark.parametrize("size", [1, 3, 257, 4099])
def test_host_view(device, kind, size, rng):
    buf = device.create_buffer(size, kind)
    view = buf.host_view()
    assert isinstance(view, memoryview)
    assert view.nbytes == size
    assert not view.readonly
    data = rng.integers(0, 256, size, dtype=np.uint8)
    view_np = np.frombuffer(view, np.uint8)
    view_np[:] = data
    # a second view sees the same bytes (the same memory)
    assert bytes(buf.host_view()) == data.tobytes()
    # host buffers are copy sources: download through ferry sees the bytes
    np.testing.assert_array_equal(device.download(buf), data)


def test_host_view_of_device_memory(device):
    buf = device.create_buffer(64, "device")
    with pytest.raises(ferry.InvalidArgumentError) as error:
        buf.host_view()
    assert "host" in error.value.message


def test_release_then_use(device):
    buf = device.create_buffer(64, "host_upload")
    buf.release()
    assert not buf.valid
    buf.release()  # idempotent
    with pytest.raises(ferry.ReleasedError) as error:
        buf.host_view()
    assert error.value.code == "released"
    with pytest.raises(ferry.ReleasedError):
        device.download(buf)
    dst = device.create_buffer(64)
    commands = ferry.CommandList()
    with pytest.raises(ferry.ReleasedError):
        commands.copy(buf, dst)
    assert len(commands) == 0
    with pytest.raises(ferry.ReleasedError):
        buf.as_tensor()
    with pytest.raises(ferry.ReleasedError):
        device.upload(np.zeros(4, np.uint8), buf)


def test_release_device_buffer_then_use(device):
    buf = device.create_buffer(32)
    buf.release()
    with pytest.raises(ferry.ReleasedError):
        device.download(buf)
    with pytest.raises(ferry.ReleasedError):
        ferry.CommandList().fill(buf, 0x01020304)


@pytest.mark.parametrize("dtype,shape", [("uint8", None), ("float32", (3, 5)), ("int16", (30,)),
                                         ("float64", (2, 3)), ("uint32", (15,))])
def test_as_tensor(device, dtype, shape, rng):
    buf = device.create_buffer(60, "host_upload")
    tensor = buf.as_tensor(dtype, shape)
    itemsize = np.dtype(dtype).itemsize
    expected_shape = shape if shape is not None else (60 // itemsize,)
    assert tuple(tensor.shape) == expected_shape
    assert np.dtype(str(tensor.dtype)) == np.dtype(dtype)
    assert tensor.nbytes == itemsize * int(np.prod(expected_shape))
    assert str(tensor.memory_kind) == "host_upload"
    data = rng.integers(0, 256, 60, dtype=np.uint8)
    np.frombuffer(buf.host_view(), np.uint8)[:] = data
    out = device.download(tensor)
    assert out.dtype == np.dtype(dtype)
    assert out.shape == expected_shape
    assert out.tobytes() == data[:tensor.nbytes].tobytes()


def test_as_tensor_offset(device, rng):
    data = rng.integers(0, 256, 100, dtype=np.uint8)
    buf = device.create_buffer(100, "host_upload")
    np.frombuffer(buf.host_view(), np.uint8)[:] = data
    tensor = buf.as_tensor("uint16", (3, 4), offset=10)
    out = device.download(tensor)
    np.testing.assert_array_equal(out, data[10:34].view(np.uint16).reshape(3, 4))


def test_as_tensor_bad(device):
    buf = device.create_buffer(60)
    with pytest.raises(ferry.Error) as error:
        buf.as_tensor("float32", (4, 4))  # 64 bytes of 60
    assert isinstance(error.value, (ferry.OutOfRangeError, ferry.InvalidArgumentError))
    with pytest.raises(ferry.Error):
        buf.as_tensor("uint8", (10,), offset=55)
    with pytest.raises((ferry.InvalidArgumentError, TypeError, ValueError)):
        buf.as_tensor("float31")


def test_empty(device):
    tensor = device.empty((3, 7), "float32")
    assert tuple(tensor.shape) == (3, 7)
    assert np.dtype(str(tensor.dtype)) == np.float32
    assert tensor.nbytes == 84
    assert str(tensor.memory_kind) == "device"
    host = device.empty((5,), "uint8", kind="host_readback")
    assert str(host.memory_kind) == "host_readback"
    with pytest.raises(ferry.InvalidArgumentError):
        device.empty((2,), "float32", kind="dev")
