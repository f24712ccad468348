"""Objects dropped in any order: memory stays alive while a submission, a tensor or an exported
DLPack capsule uses it."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import ferry
from helpers import put


def test_del_device_while_buffers_live(open_device, rng):
    dev = open_device(track=False)
    values = rng.integers(0, 256, 4099, dtype=np.uint8)
    buf = dev.create_buffer(4099)
    put(dev, values, buf)
    pool = dev.create_staging_pool("host_readback", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(4099)
    queue = dev.queue("download")
    tl = dev.create_timeline()
    assert dev.validation_message_count == 0
    del dev, pool
    gc.collect()
    # the queue, buffer, lease and timeline keep the device alive and usable
    assert buf.valid and buf.size == 4099
    commands = ferry.CommandList()
    commands.copy(buf, lease)
    queue.submit(commands, signal=[tl.point(1)])
    tl.wait(1, timeout=30)
    np.testing.assert_array_equal(lease.numpy(), values)


def test_drop_everything_but_tensor(open_device, rng):
    dev = open_device(track=False)
    values = rng.standard_normal(100).astype(np.float32)
    tensor = dev.upload(values)
    queue = dev.queue("compute")
    assert dev.validation_message_count == 0
    del dev
    gc.collect()
    dst = tensor  # the tensor alone still names its memory
    assert tuple(dst.shape) == (100,)
    commands = ferry.CommandList()
    commands.fill(tensor, 0x3F800000, offset=0, size=8)  # 1.0f twice
    queue.submit(commands).wait(timeout=30)
    gc.collect()


def test_drop_handles_right_after_submit(device, rng):
    """Everything a submission uses stays alive until it completes, even when the user drops its
    handles right after submitting."""
    gate = device.create_timeline()
    values = rng.integers(0, 256, 4099, dtype=np.uint8)
    src = device.upload(values)
    dst_pool = device.create_staging_pool("host_readback", slab_bytes=1 << 16, max_slabs=1)
    lease = dst_pool.acquire(4099)
    middle = device.create_buffer(4099)
    commands = ferry.CommandList()
    commands.copy(src, middle)
    commands.copy(middle, lease)
    done = device.create_timeline()
    device.queue("compute").submit(commands, wait=[gate.point(1)], signal=[done.point(1)])
    del src, middle, commands
    gc.collect()
    gate.signal(1)
    done.wait(1, timeout=30)
    np.testing.assert_array_equal(lease.numpy(), values)


def test_numpy_export_outlives_buffer_object(device, rng):
    if device.backend != "cpu":
        pytest.skip("device memory exported to numpy on the CPU backend only")
    values = rng.integers(0, 256, 4099, dtype=np.uint8)
    buf = device.create_buffer(4099)
    put(device, values, buf)
    array = np.from_dlpack(buf)
    ref = weakref.ref(buf) if _weakrefable(buf) else None
    del buf
    gc.collect()
    if ref is not None:
        assert ref() is None, "the numpy array should not need the Python Buffer object"
    # the memory is alive: allocate and fill other buffers that would reuse freed memory
    others = [device.create_buffer(4099) for _ in range(4)]
    for other in others:
        commands = ferry.CommandList()
        commands.fill(other, 0xFFFFFFFF)
        device.queue("compute").submit(commands).wait()
    np.testing.assert_array_equal(array, values)


def test_numpy_export_outlives_released_buffer(device, rng):
    """release() gives up the user's hold; an exported capsule keeps the memory."""
    if device.backend != "cpu":
        pytest.skip("device memory exported to numpy on the CPU backend only")
    values = rng.integers(0, 256, 257, dtype=np.uint8)
    buf = device.create_buffer(257, "host_upload")
    np.frombuffer(buf.host_view(), np.uint8)[:] = values
    array = np.from_dlpack(buf)
    buf.release()
    gc.collect()
    np.testing.assert_array_equal(array, values)


def test_numpy_export_of_lease_outlives_lease(device, rng):
    if device.backend == "cuda":
        pytest.skip("kDLCUDAHost")
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    lease = pool.acquire(4096)
    values = rng.integers(0, 256, 4096, dtype=np.uint8)
    lease.numpy()[:] = values
    array = np.from_dlpack(lease)
    lease.release()
    del lease
    gc.collect()
    # the range must not return to the pool while the array uses it
    assert pool.try_acquire(4096) is None
    np.testing.assert_array_equal(array, values)
    del array
    gc.collect()
    again = pool.acquire(4096, timeout=5)
    assert again.size == 4096


def test_numpy_export_outlives_device(open_device, rng):
    dev = open_device(track=False)
    if dev.backend == "cuda":
        pytest.skip("kDLCUDAHost")
    pool = dev.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    lease = pool.acquire(100)
    values = rng.integers(0, 256, 100, dtype=np.uint8)
    lease.numpy()[:] = values
    array = np.from_dlpack(lease)
    assert dev.validation_message_count == 0
    del lease, pool, dev
    gc.collect()
    np.testing.assert_array_equal(array, values)
    assert int(array.sum()) == int(values.sum())  # still readable memory


def test_imported_array_dropped_before_tensor(device, rng):
    if device.backend != "cpu":
        pytest.skip("CPU backend imports any host memory")
    values = rng.standard_normal((33, 3)).astype(np.float32)
    array = values.copy()
    tensor = ferry.from_dlpack(array, device)
    del array
    gc.collect()
    np.testing.assert_array_equal(device.download(tensor), values)
    commands = ferry.CommandList()
    commands.fill(tensor, 0)
    device.queue("compute").submit(commands).wait()
    assert (device.download(tensor) == 0).all()


def test_imported_array_dropped_during_submission(device, rng):
    if device.backend != "cpu":
        pytest.skip("CPU backend imports any host memory")
    values = rng.integers(0, 256, 4099, dtype=np.uint8)
    array = values.copy()
    tensor = ferry.from_dlpack(array, device)
    gate = device.create_timeline()
    dst = device.create_buffer(4099)
    commands = ferry.CommandList()
    commands.copy(tensor, dst)
    copied = device.queue("compute").submit(commands, wait=[gate.point(1)])
    del tensor, array, commands
    gc.collect()
    gate.signal(1)
    # The download queue is ordered after the copy only by its point.
    np.testing.assert_array_equal(device.download(dst, wait=[copied]), values)


def test_close_device_then_use_objects(open_device):
    dev = open_device()
    buf = dev.create_buffer(64, "host_upload")
    pool = dev.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    tl = dev.create_timeline()
    queue = dev.queue("compute")
    dev.close()
    assert not dev.is_open
    with pytest.raises(ferry.DeviceClosedError):
        buf.host_view()
    with pytest.raises(ferry.DeviceClosedError):
        pool.acquire(16, timeout=1)
    commands = ferry.CommandList()
    with pytest.raises(ferry.DeviceClosedError):
        commands.fill(buf, 0)
        queue.submit(commands)
    with pytest.raises(ferry.DeviceClosedError):
        dev.create_timeline()
    with pytest.raises(ferry.DeviceClosedError):
        dev.upload(np.zeros(4, np.uint8))
    del tl
    gc.collect()


def test_many_devices_dropped_in_any_order(backend, open_device, rng):
    """Open, use and drop devices and their objects in scrambled orders."""
    for _ in range(3):
        dev = open_device(track=False)
        values = rng.integers(0, 256, 257, dtype=np.uint8)
        tensor = dev.upload(values)
        pool = dev.create_staging_pool("host_readback", slab_bytes=4096, max_slabs=1)
        lease = pool.acquire(257)
        commands = ferry.CommandList()
        commands.copy(tensor, lease)
        point = dev.queue("download").submit(commands)
        assert dev.validation_message_count == 0
        objects = [dev, tensor, pool, commands, point]
        order = rng.permutation(len(objects))
        for index in order:
            objects[index] = None
        del dev, tensor, pool, commands
        gc.collect()
        point.wait(timeout=30)
        np.testing.assert_array_equal(lease.numpy(), values)
        del point, lease
        gc.collect()


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


def test_lease_views_keep_the_range(device, rng):
    """A memoryview from lease.data or an array from lease.numpy() keeps the lease's range out of
    the pool after the Lease is released, until the view goes."""
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    for make_view in (lambda lease: lease.data, lambda lease: lease.numpy()):
        lease = pool.acquire(4096)
        view = make_view(lease)
        values = rng.integers(0, 256, 4096, dtype=np.uint8)
        np.frombuffer(view, np.uint8)[:] = values
        lease.release()
        del lease
        gc.collect()
        assert pool.try_acquire(1) is None, "the range went back to the pool under a live view"
        assert bytes(view) == values.tobytes()
        del view
        gc.collect()
        again = pool.acquire(4096, timeout=5)
        again.release()


def test_host_view_keeps_buffer_memory(device, rng):
    values = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    buf = device.create_buffer(1 << 16, "host_upload")
    view = buf.host_view()
    np.frombuffer(view, np.uint8)[:] = values
    buf.release()
    del buf
    gc.collect()
    # new host buffers, filled by the device, must not land on the viewed memory
    others = [device.create_buffer(1 << 16, "host_readback") for _ in range(4)]
    commands = ferry.CommandList()
    for other in others:
        commands.fill(other, 0xFFFFFFFF)
    device.queue("compute").submit(commands).wait(timeout=30)
    assert bytes(view) == values.tobytes()
