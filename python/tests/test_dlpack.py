"""DLPack: exports to numpy (zero copy, device type, shape, dtype) and imports from numpy."""

from __future__ import annotations

import gc
import mmap

import numpy as np
import pytest

import ferry
from helpers import put

KDLCPU = 1
KDLCUDA = 2
KDLCUDAHOST = 3


def data_pointer(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def needs_cpu_device_memory(device):
    if device.backend != "cpu":
        pytest.skip("device memory is host memory on the CPU backend only")


# ---- exports -----------------------------------------------------------------------------------


def test_lease_export(device, rng):
    """Leases are host memory on every backend but CUDA (pinned: kDLCUDAHost)."""
    pool = device.create_staging_pool("host_upload", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(257)
    expected_type = KDLCUDAHOST if device.backend == "cuda" else KDLCPU
    assert tuple(lease.__dlpack_device__()) == (expected_type, 0)
    if expected_type != KDLCPU:
        pytest.skip("numpy reads kDLCPU only")
    values = rng.integers(0, 256, 257, dtype=np.uint8)
    lease.data[:] = values.tobytes()
    array = np.from_dlpack(lease)
    assert array.dtype == np.uint8 and array.shape == (257,)
    np.testing.assert_array_equal(array, values)
    # zero copy: a write through lease.data shows in the numpy array, and back
    lease.data[100] = values[100] ^ 0x5A
    assert array[100] == values[100] ^ 0x5A
    lease.numpy()[7] = 99
    assert array[7] == 99
    assert data_pointer(array) == data_pointer(lease.numpy())
    second = np.from_dlpack(lease)
    assert data_pointer(second) == data_pointer(array)


@pytest.mark.parametrize("kind", ["host_upload", "host_readback"])
def test_host_buffer_export(device, rng, kind):
    buf = device.create_buffer(4099, kind)
    if device.backend == "cuda":
        assert tuple(buf.__dlpack_device__()) == (KDLCUDAHOST, 0)
        pytest.skip("numpy reads kDLCPU only")
    assert tuple(buf.__dlpack_device__()) == (KDLCPU, 0)
    array = np.from_dlpack(buf)
    assert array.shape == (4099,) and array.dtype == np.uint8
    values = rng.integers(0, 256, 4099, dtype=np.uint8)
    np.frombuffer(buf.host_view(), np.uint8)[:] = values
    np.testing.assert_array_equal(array, values)


def test_cpu_device_buffer_export(device, rng):
    needs_cpu_device_memory(device)
    buf = device.create_buffer(4099)
    assert tuple(buf.__dlpack_device__()) == (KDLCPU, 0)
    values = rng.integers(0, 256, 4099, dtype=np.uint8)
    put(device, values, buf)
    array = np.from_dlpack(buf)
    assert array.shape == (4099,) and array.dtype == np.uint8
    np.testing.assert_array_equal(array, values)
    # zero copy: a device-side fill shows in the array, a host write in a download
    commands = ferry.CommandList()
    commands.fill(buf, 0x03020100, offset=1, size=8)
    device.queue("compute").submit(commands).wait()
    np.testing.assert_array_equal(array[1:9], [0, 1, 2, 3, 0, 1, 2, 3])


@pytest.mark.parametrize("dtype,shape", [("float32", (3, 5)), ("int16", (7,)), ("uint8", (1,)),
                                         ("float64", (2, 2, 2)), ("float16", (9,)),
                                         ("int64", (3, 1))])
def test_cpu_tensor_export(device, rng, dtype, shape):
    needs_cpu_device_memory(device)
    values = rng.integers(-100, 100, shape).astype(dtype)
    tensor = device.upload(values)
    assert tuple(tensor.__dlpack_device__()) == (KDLCPU, 0)
    array = np.from_dlpack(tensor)
    assert array.shape == shape
    assert array.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(array, values)
    view = tensor.numpy()
    assert data_pointer(view) == data_pointer(array)


def test_numpy_export_is_writable(device, rng):
    """numpy marks arrays from unversioned ("dltensor") capsules read-only; a DLPack 1.0 export
    (numpy passes max_version) without the read-only flag gives a writable zero-copy view, which
    ferry's memory is (a lease's host bytes, the CPU backend's buffers)."""
    if device.backend == "cuda":
        pytest.skip("host export only")
    pool = device.create_staging_pool("host_upload", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(64)
    array = np.from_dlpack(lease)
    assert array.flags.writeable, "np.from_dlpack(lease) is read-only"
    array[3] = 77
    assert lease.data[3] == 77
    if device.backend == "cpu":
        buf = device.create_buffer(64)
        view = np.from_dlpack(buf)
        assert view.flags.writeable, "np.from_dlpack(cpu device buffer) is read-only"
        view[:] = 5
        assert (device.download(buf) == 5).all()


def test_from_dlpack_read_only_array(device):
    """A read-only array (which numpy will not export through an unversioned capsule) is either
    imported or refused with a ferry error that says why, not numpy's BufferError."""
    array = np.arange(4096, dtype=np.uint8)
    array.flags.writeable = False
    try:
        tensor = ferry.from_dlpack(array, device)
    except ferry.Error as error:
        assert "read" in error.message.lower()
    else:
        np.testing.assert_array_equal(device.download(tensor), array)


def test_tensor_export_waits_for_ready(device, rng):
    """A host consumer (stream None) gets the data after a host wait for the tensor's ready."""
    needs_cpu_device_memory(device)
    values = rng.integers(0, 256, 4099, dtype=np.uint8)
    gate = device.create_timeline()
    tensor = device.upload(values, wait=[gate.point(1)])
    assert not tensor.ready.reached

    import threading
    import time

    def open_gate():
        time.sleep(0.05)
        gate.signal(1)

    thread = threading.Thread(target=open_gate)
    thread.start()
    array = np.from_dlpack(tensor)  # must release the GIL while it waits
    thread.join()
    assert tensor.ready.reached
    np.testing.assert_array_equal(array, values)


def test_tensor_numpy_host_tensor(device, rng):
    pool = device.create_staging_pool("host_readback", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(64)
    values = rng.standard_normal(16).astype(np.float32)
    lease.numpy()[:] = values.view(np.uint8)
    tensor = lease.as_tensor("float32", (4, 4))
    if device.backend == "cuda":
        return
    view = tensor.numpy()
    assert view.shape == (4, 4) and view.dtype == np.float32
    np.testing.assert_array_equal(view.reshape(-1), values)
    lease.numpy("float32")[5] = 1.5
    assert view[1, 1] == 1.5  # zero copy


def test_vulkan_device_memory_not_exported(device):
    if device.backend != "vulkan":
        pytest.skip("Vulkan only")
    buf = device.create_buffer(64)
    with pytest.raises(ferry.UnavailableError) as error:
        buf.__dlpack__()
    assert error.value.code == "unavailable"
    tensor = device.upload(np.zeros(16, np.float32))
    with pytest.raises(ferry.UnavailableError):
        np.from_dlpack(tensor)
    with pytest.raises(ferry.Error):
        tensor.numpy()


def test_dlpack_device_of_device_memory(device):
    buf = device.create_buffer(16)
    if device.backend == "cpu":
        assert tuple(buf.__dlpack_device__()) == (KDLCPU, 0)
    elif device.backend == "cuda":
        assert tuple(buf.__dlpack_device__())[0] == KDLCUDA


def test_dlpack_versioned_kwargs(device):
    """Consumers following the 2023 protocol pass max_version / dl_device / copy."""
    pool = device.create_staging_pool("host_upload", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(8)
    if device.backend == "cuda":
        pytest.skip("host export only")
    capsule = lease.__dlpack__(stream=None)
    assert type(capsule).__name__ == "PyCapsule"
    try:
        versioned = lease.__dlpack__(stream=None, max_version=(1, 0))
    except TypeError:
        pytest.fail("__dlpack__ does not accept max_version (DLPack 1.0 consumers pass it)")
    assert type(versioned).__name__ == "PyCapsule"


def test_released_lease_export(device):
    pool = device.create_staging_pool("host_upload", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(8)
    lease.release()
    with pytest.raises(ferry.ReleasedError):
        lease.__dlpack__()


# ---- imports -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape", [("uint8", (4099,)), ("float32", (3, 7)),
                                         ("int32", (1,)), ("float64", (5, 1, 3)),
                                         ("uint16", (257,))])
def test_from_dlpack_cpu_zero_copy(device, rng, dtype, shape):
    needs_cpu_device_memory(device)
    array = rng.integers(0, 100, shape).astype(dtype)
    tensor = ferry.from_dlpack(array, device)
    assert isinstance(tensor, ferry.Tensor)
    assert tuple(tensor.shape) == shape
    assert np.dtype(str(tensor.dtype)) == np.dtype(dtype)
    assert tensor.nbytes == array.nbytes
    assert str(tensor.memory_kind) == "device"
    np.testing.assert_array_equal(device.download(tensor), array)
    # zero copy: change the numpy array, ferry sees it
    array.reshape(-1)[0] = 42
    assert device.download(tensor).reshape(-1)[0] == 42
    # and ferry's writes land in the numpy array
    commands = ferry.CommandList()
    commands.fill(tensor, 0, offset=0, size=tensor.nbytes)
    device.queue("compute").submit(commands).wait()
    assert (array == 0).all()


def test_from_dlpack_buffer_protocol(device):
    needs_cpu_device_memory(device)
    data = bytearray(b"abcdefgh")
    tensor = ferry.from_dlpack(data, device)
    assert tensor.nbytes == 8
    data[0:1] = b"z"
    assert bytes(device.download(tensor)) == b"zbcdefgh"


@pytest.mark.parametrize("kind", ["host_upload", "host_readback"])
def test_from_dlpack_cpu_kinds(device, kind):
    needs_cpu_device_memory(device)
    array = np.arange(10, dtype=np.int32)
    tensor = ferry.from_dlpack(array, device, kind=kind)
    assert str(tensor.memory_kind) == kind
    np.testing.assert_array_equal(device.download(tensor), array)


def test_from_dlpack_non_contiguous(device):
    array = np.arange(64, dtype=np.float32).reshape(8, 8)[:, ::2]
    with pytest.raises(ferry.InvalidArgumentError) as error:
        ferry.from_dlpack(array, device)
    assert "stride" in error.value.message.lower()
    transposed = np.arange(12, dtype=np.int16).reshape(3, 4).T
    with pytest.raises(ferry.InvalidArgumentError) as error:
        ferry.from_dlpack(transposed, device)
    assert "stride" in error.value.message.lower()


def test_from_dlpack_bad_kind(device):
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.from_dlpack(np.zeros(4096, np.uint8), device, kind="dev")


def test_from_dlpack_not_an_array(device):
    with pytest.raises((TypeError, ferry.InvalidArgumentError)):
        ferry.from_dlpack(object(), device)


def test_from_dlpack_empty(device):
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.from_dlpack(np.zeros(0, np.float32), device)


def page_aligned_array(nbytes):
    """A numpy array over page-aligned memory (an anonymous mmap: pages by construction)."""
    region = mmap.mmap(-1, nbytes)
    return np.frombuffer(region, np.uint8), region


def test_from_dlpack_vulkan_host_registration(device, rng):
    """Vulkan registers page-aligned host memory (VK_EXT_external_memory_host); other memory is
    refused with an error that says why."""
    if device.backend != "vulkan":
        pytest.skip("Vulkan only")
    array, region = page_aligned_array(mmap.PAGESIZE * 2)
    array[:] = rng.integers(0, 256, array.size, dtype=np.uint8)
    try:
        tensor = ferry.from_dlpack(array, device)
    except ferry.UnavailableError as error:
        pytest.skip(f"this Vulkan device cannot register host memory: {error}")
    assert str(tensor.memory_kind) in ("host_upload", "host_readback")
    assert tuple(tensor.__dlpack_device__()) == (KDLCPU, 0)
    np.testing.assert_array_equal(device.download(tensor), array)
    array[5] ^= 0xFF
    assert device.download(tensor)[5] == array[5]
    misaligned = np.frombuffer(region, np.uint8)[1:1 + mmap.PAGESIZE]
    with pytest.raises((ferry.InvalidArgumentError, ferry.UnavailableError)) as error:
        ferry.from_dlpack(misaligned, device)
    assert "align" in error.value.message.lower()
    del tensor
    gc.collect()
    device.wait_idle()


def test_from_dlpack_vulkan_device_kind_refused(device):
    if device.backend != "vulkan":
        pytest.skip("Vulkan only")
    array, _region = page_aligned_array(mmap.PAGESIZE)
    with pytest.raises(ferry.UnavailableError):
        ferry.from_dlpack(array, device, kind="device")


def test_round_trip_through_numpy(device, rng):
    """A ferry tensor exported to numpy, imported back (CPU backend: the same memory)."""
    needs_cpu_device_memory(device)
    values = rng.standard_normal((4, 5)).astype(np.float32)
    tensor = device.upload(values)
    array = np.from_dlpack(tensor)
    back = ferry.from_dlpack(array, device)
    assert tuple(back.shape) == (4, 5)
    np.testing.assert_array_equal(device.download(back), values)
    assert data_pointer(np.from_dlpack(back)) == data_pointer(array)
