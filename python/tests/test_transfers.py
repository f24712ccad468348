"""Round trips (upload / download), CommandList.copy with offsets, fill at odd offsets."""

from __future__ import annotations

import numpy as np
import pytest

import ferry
from helpers import put
from truth import fill_reference

ROUND_TRIPS = [
    ("uint8", (1,)),
    ("uint8", (3,)),
    ("uint8", (257,)),
    ("uint8", (4099,)),
    ("int8", (7, 13)),
    ("uint16", (5, 3)),
    ("int16", (1,)),
    ("float16", (3, 3, 3)),
    ("float32", (257,)),
    ("int32", (2, 1, 3)),
    ("uint32", (1025,)),
    ("float64", (3, 17)),
    ("int64", (5,)),
    ("uint64", (1,)),
    ("bool", (11,)),
    ("uint8", (3 << 20,)),  # several staging chunks with a small pool below
]


def random_array(rng, dtype, shape):
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = rng.integers(0, 256, size, dtype=np.uint8)
    if dtype == np.bool_:
        raw = raw & 1
    array = raw.view(dtype).reshape(shape)
    if dtype.kind == "f":
        array = np.nan_to_num(array)  # NaN payloads compare unequal; bytes still compared below
    return np.ascontiguousarray(array)


@pytest.mark.parametrize("dtype,shape", ROUND_TRIPS, ids=lambda v: str(v))
def test_round_trip(device, rng, dtype, shape):
    array = random_array(rng, dtype, shape)
    tensor = device.upload(array)
    assert tuple(tensor.shape) == shape
    assert np.dtype(str(tensor.dtype)) == np.dtype(dtype)
    assert tensor.nbytes == array.nbytes
    out = device.download(tensor)
    assert isinstance(out, np.ndarray)
    assert out.dtype == array.dtype
    assert out.shape == array.shape
    assert out.tobytes() == array.tobytes()


def test_upload_returns_once_array_reusable(device, rng):
    array = rng.integers(0, 256, 4099, dtype=np.uint8)
    expected = array.copy()
    tensor = device.upload(array)
    array[:] = 0  # "Returns once the array may be reused"
    np.testing.assert_array_equal(device.download(tensor), expected)


@pytest.mark.parametrize("kind", ["device", "host_upload", "host_readback"])
def test_upload_into_buffer_at_offset(device, rng, kind):
    dst = device.create_buffer(4099, kind)
    base = rng.integers(0, 256, 4099, dtype=np.uint8)
    put(device, base, dst)
    part = rng.integers(0, 256, 257, dtype=np.uint8).view(np.uint8)
    tensor = put(device, part, dst, dst_offset=1001)
    assert tuple(tensor.shape) == (257,)
    np.testing.assert_array_equal(device.download(tensor), part)
    expected = base.copy()
    expected[1001:1258] = part
    out = device.download(dst)
    assert out.dtype == np.uint8 and out.shape == (4099,)
    np.testing.assert_array_equal(out, expected)


def test_upload_out_of_range(device):
    dst = device.create_buffer(100)
    with pytest.raises(ferry.OutOfRangeError):
        device.upload(np.zeros(60, np.uint8), dst, dst_offset=41)
    with pytest.raises(ferry.Error):
        device.upload(np.zeros(101, np.uint8), dst)


def test_upload_non_contiguous(device):
    array = np.arange(64, dtype=np.uint8).reshape(8, 8)[:, ::2]
    with pytest.raises((ferry.InvalidArgumentError, BufferError, ValueError)):
        device.upload(array)


def test_upload_bytes_like(device):
    tensor = device.upload(b"ferry bytes")
    assert bytes(device.download(tensor)) == b"ferry bytes"
    tensor = device.upload(bytearray(b"\x00\x01\x02"))
    assert bytes(device.download(tensor)) == b"\x00\x01\x02"


def test_upload_with_small_pool(device, rng):
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=2,
                                      reserved_slabs=1)
    array = rng.integers(0, 256, 50_001, dtype=np.uint8)
    tensor = device.upload(array, pool=pool)
    np.testing.assert_array_equal(device.download(tensor), array)


def test_download_into_out(device, rng):
    array = rng.standard_normal((7, 9)).astype(np.float32)
    tensor = device.upload(array)
    out = np.empty(7 * 9 * 4, np.uint8)
    result = device.download(tensor, out)
    assert result is out
    assert out.tobytes() == array.tobytes()
    out2 = np.empty((9, 7), np.float32)
    device.download(tensor, out=out2)
    assert out2.tobytes() == array.tobytes()
    with pytest.raises(ferry.Error):
        device.download(tensor, np.empty(7 * 9 * 4 - 1, np.uint8))
    with pytest.raises((ferry.InvalidArgumentError, BufferError, ValueError, TypeError)):
        device.download(tensor, np.empty(7 * 9 * 4, np.uint8)[::-1])


def test_download_into_readonly_out(device):
    tensor = device.upload(np.arange(8, dtype=np.uint8))
    out = np.empty(8, np.uint8)
    out.flags.writeable = False
    with pytest.raises((ferry.InvalidArgumentError, BufferError, ValueError, TypeError)):
        device.download(tensor, out)


def test_download_lease(device, rng):
    pool = device.create_staging_pool("host_readback", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(300)
    data = rng.integers(0, 256, 300, dtype=np.uint8)
    lease.numpy()[:] = data
    out = device.download(lease)
    assert out.dtype == np.uint8 and out.shape == (300,)
    np.testing.assert_array_equal(out, data)


@pytest.mark.parametrize("size,src_off,dst_off,length", [
    (1, 0, 0, 1), (3, 1, 0, 2), (257, 3, 5, 250), (4099, 1, 4098, 1), (4099, 17, 1, 4081)])
@pytest.mark.parametrize("src_kind,dst_kind", [("device", "device"), ("host_upload", "device"),
                                               ("device", "host_readback")])
def test_copy_offsets(device, rng, size, src_off, dst_off, length, src_kind, dst_kind):
    src_data = rng.integers(0, 256, size, dtype=np.uint8)
    dst_data = rng.integers(0, 256, size, dtype=np.uint8)
    src = device.create_buffer(size, src_kind)
    dst = device.create_buffer(size, dst_kind)
    put(device, src_data, src)
    put(device, dst_data, dst)
    commands = ferry.CommandList()
    commands.copy(src, dst, length, src_offset=src_off, dst_offset=dst_off)
    assert len(commands) == 1
    point = device.queue("compute").submit(commands)
    point.wait(timeout=30)
    assert point.reached
    expected = dst_data.copy()
    expected[dst_off:dst_off + length] = src_data[src_off:src_off + length]
    np.testing.assert_array_equal(device.download(dst), expected)


def test_copy_default_size_is_rest_of_src(device, rng):
    src_data = rng.integers(0, 256, 257, dtype=np.uint8)
    src = device.upload(src_data)
    dst = device.create_buffer(300)
    put(device, np.zeros(300, np.uint8), dst)
    commands = ferry.CommandList()
    commands.copy(src, dst, src_offset=7, dst_offset=3)
    device.queue("upload").submit(commands).wait()
    expected = np.zeros(300, np.uint8)
    expected[3:253] = src_data[7:]
    np.testing.assert_array_equal(device.download(dst), expected)


def test_copy_tensor_offsets_are_relative(device, rng):
    data = rng.integers(0, 256, 64, dtype=np.uint8)
    buf = device.create_buffer(64, "host_upload")
    np.frombuffer(buf.host_view(), np.uint8)[:] = data
    view = buf.as_tensor("uint8", (32,), offset=16)  # bytes [16, 48)
    dst = device.create_buffer(8)
    commands = ferry.CommandList()
    commands.copy(view, dst, 8, src_offset=4)
    device.queue("download").submit(commands).wait()
    np.testing.assert_array_equal(device.download(dst), data[20:28])


def test_copy_errors(device):
    a = device.create_buffer(16)
    b = device.create_buffer(16)
    commands = ferry.CommandList()
    with pytest.raises(ferry.OutOfRangeError):
        commands.copy(a, b, 8, src_offset=9)
    with pytest.raises(ferry.OutOfRangeError):
        commands.copy(a, b, 8, dst_offset=9)
    with pytest.raises(ferry.InvalidArgumentError):
        commands.copy(a, b, 0)
    with pytest.raises(ferry.InvalidArgumentError):
        commands.copy(a, a, 8, src_offset=0, dst_offset=4)  # overlap within one buffer
    with pytest.raises((TypeError, ferry.InvalidArgumentError)):
        commands.copy(np.zeros(16, np.uint8), b)
    assert len(commands) == 0


def test_copy_across_devices_refused(device, open_device):
    other = open_device()
    a = device.create_buffer(16)
    b = other.create_buffer(16)
    commands = ferry.CommandList()
    with pytest.raises(ferry.InvalidArgumentError) as error:
        commands.copy(a, b)
    assert "device" in error.value.message


@pytest.mark.parametrize("size,offset,length", [
    (1, 0, 1), (3, 1, 2), (7, 3, 3), (257, 1, 255), (4099, 5, 4093), (4099, 4098, 1),
    (4099, 0, 4099)])
@pytest.mark.parametrize("kind", ["device", "host_readback"])
def test_fill(device, rng, size, offset, length, kind):
    pattern = int(rng.integers(0, 1 << 32, dtype=np.uint64))
    before = rng.integers(0, 256, size, dtype=np.uint8)
    buf = device.create_buffer(size, kind)
    put(device, before, buf)
    commands = ferry.CommandList()
    commands.fill(buf, pattern, offset=offset, size=length)
    device.queue("compute").submit(commands).wait(timeout=30)
    np.testing.assert_array_equal(device.download(buf), fill_reference(before, offset, length,
                                                                        pattern))


def test_fill_default_size_and_edges(device, rng):
    buf = device.create_buffer(11)
    put(device, rng.integers(0, 256, 11, dtype=np.uint8), buf)
    commands = ferry.CommandList()
    commands.fill(buf, 0xFFFFFFFF)
    commands.fill(buf, 0x00000000, offset=10)
    commands.fill(buf, 0xA1B2C3D4, offset=2, size=5)
    device.queue("compute").submit(commands).wait()
    expected = np.full(11, 0xFF, np.uint8)
    expected[10] = 0
    expected = fill_reference(expected, 2, 5, 0xA1B2C3D4)
    np.testing.assert_array_equal(device.download(buf), expected)


def test_fill_errors(device):
    buf = device.create_buffer(8)
    commands = ferry.CommandList()
    with pytest.raises(ferry.InvalidArgumentError):
        commands.fill(buf, 1, offset=0, size=0)
    with pytest.raises(ferry.OutOfRangeError):
        commands.fill(buf, 1, offset=4, size=5)
    with pytest.raises((OverflowError, ValueError, TypeError)):
        commands.fill(buf, 1 << 32)
    with pytest.raises((OverflowError, ValueError, TypeError)):
        commands.fill(buf, -1)
    assert len(commands) == 0


def test_fill_on_non_compute_queue_refused(device):
    buf = device.create_buffer(8)
    commands = ferry.CommandList()
    commands.fill(buf, 7)
    with pytest.raises(ferry.InvalidArgumentError):
        device.queue("upload").submit(commands)


def test_many_commands_in_order(device, rng):
    # Commands of one submission run in order, each seeing the results of the ones before it.
    size = 257
    buf = device.create_buffer(size)
    other = device.create_buffer(size)
    commands = ferry.CommandList()
    commands.fill(buf, 0x11111111)
    commands.fill(buf, 0x22222222, offset=10, size=100)
    commands.copy(buf, other)
    commands.fill(buf, 0x33333333, offset=5, size=10)
    commands.copy(buf, other, 3, src_offset=5, dst_offset=200)
    assert len(commands) == 5
    device.queue("compute").submit(commands).wait()
    expected_buf = np.full(size, 0x11, np.uint8)
    expected_buf[10:110] = 0x22
    expected_other = expected_buf.copy()
    expected_buf[5:15] = 0x33
    expected_other[200:203] = 0x33
    np.testing.assert_array_equal(device.download(buf), expected_buf)
    np.testing.assert_array_equal(device.download(other), expected_other)
