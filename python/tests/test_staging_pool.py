"""StagingPool and Lease: acquire, backpressure, timeouts, host views, stats, trim."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import ferry

SLAB = 1 << 16
STATS_KEYS = {"bytes_reserved", "bytes_in_use", "high_water_bytes", "capacity_bytes", "acquires",
              "waits", "slabs"}


@pytest.fixture(params=["host_upload", "host_readback"])
def pool(request, device):
    return device.create_staging_pool(request.param, slab_bytes=SLAB, max_slabs=2,
                                      reserved_slabs=1)


def test_pool_properties(pool):
    assert str(pool.kind) in ("host_upload", "host_readback")
    assert pool.slab_bytes == SLAB
    assert pool.max_slabs == 2
    stats = pool.stats
    assert isinstance(stats, dict)
    assert STATS_KEYS <= set(stats), f"missing {STATS_KEYS - set(stats)}"
    assert stats["capacity_bytes"] == 2 * SLAB
    assert stats["slabs"] == 1, "reserved_slabs=1 is allocated up front"
    assert stats["bytes_in_use"] == 0
    assert stats["acquires"] == 0


def test_default_pool_kind(device):
    pool = device.create_staging_pool(slab_bytes=SLAB, max_slabs=1)
    assert str(pool.kind) == "host_upload"


@pytest.mark.parametrize("size", [1, 3, 257, 4099, SLAB])
def test_lease_data_and_numpy(pool, rng, size):
    lease = pool.acquire(size)
    assert lease.valid
    assert lease.size == size
    data = lease.data
    assert isinstance(data, memoryview)
    assert data.nbytes == size
    assert not data.readonly
    values = rng.integers(0, 256, size, dtype=np.uint8)
    data[:] = values.tobytes()
    view = lease.numpy()
    assert view.dtype == np.uint8 and view.shape == (size,)
    np.testing.assert_array_equal(view, values)
    # zero copy both ways: a write through the numpy view shows in data and vice versa
    view[0] ^= 0xFF
    assert lease.data[0] == values[0] ^ 0xFF
    lease.data[size - 1] = 42
    assert view[size - 1] == 42
    lease.release()
    assert not lease.valid


def test_lease_numpy_dtype_shape(pool, rng):
    lease = pool.acquire(48)
    values = rng.standard_normal(12).astype(np.float32)
    lease.data[:] = values.tobytes()
    as_float = lease.numpy("float32", (3, 4))
    assert as_float.dtype == np.float32 and as_float.shape == (3, 4)
    np.testing.assert_array_equal(as_float.reshape(-1), values)
    flat = lease.numpy("float32")
    assert flat.shape == (12,)
    with pytest.raises(ferry.Error):
        lease.numpy("float32", (4, 4))  # 64 bytes of 48
    with pytest.raises((ferry.InvalidArgumentError, ValueError)):
        lease.numpy("float64", (7,))


def test_lease_as_tensor(device, pool, rng):
    lease = pool.acquire(40)
    values = rng.integers(-1000, 1000, 10).astype(np.int32)
    lease.numpy()[:] = values.view(np.uint8)
    tensor = lease.as_tensor("int32", (2, 4), offset=8)
    assert tuple(tensor.shape) == (2, 4)
    np.testing.assert_array_equal(device.download(tensor), values[2:].reshape(2, 4))


def test_lease_context_manager(pool):
    with pool.acquire(100) as lease:
        assert lease.valid
        assert pool.stats["bytes_in_use"] > 0
    assert not lease.valid
    assert pool.stats["bytes_in_use"] == 0
    with pytest.raises(ferry.ReleasedError):
        lease.data  # noqa: B018
    with pytest.raises(ferry.ReleasedError):
        lease.numpy()


def test_acquire_timeout(pool):
    a = pool.acquire(SLAB)
    b = pool.acquire(SLAB)
    start = time.monotonic()
    with pytest.raises(ferry.TimeoutError) as error:
        pool.acquire(1, timeout=0.05)
    elapsed = time.monotonic() - start
    assert error.value.code == "timeout"
    assert isinstance(error.value, TimeoutError)  # the builtin
    assert 0.04 <= elapsed < 5, elapsed
    assert pool.try_acquire(1) is None
    with pytest.raises(ferry.TimeoutError):
        pool.acquire(1, timeout=0)
    a.release()
    c = pool.try_acquire(SLAB)
    assert c is not None and c.size == SLAB
    b.release()
    c.release()


def test_acquire_too_large(pool):
    with pytest.raises(ferry.ResourceExhaustedError) as error:
        pool.acquire(SLAB + 1)
    assert error.value.code == "resource_exhausted"
    with pytest.raises(ferry.ResourceExhaustedError):
        pool.try_acquire(SLAB + 1)
    with pytest.raises(ferry.ResourceExhaustedError):
        pool.acquire(SLAB + 1, timeout=10)  # at once, not after the timeout


def test_acquire_zero_and_negative(pool):
    with pytest.raises(ferry.InvalidArgumentError):
        pool.acquire(0)
    with pytest.raises(ValueError):
        pool.acquire(1, timeout=-0.5)


def test_acquire_waits_for_release(pool):
    held = [pool.acquire(SLAB), pool.acquire(SLAB)]

    def release_later():
        time.sleep(0.1)
        held.pop().release()

    thread = threading.Thread(target=release_later)
    thread.start()
    start = time.monotonic()
    lease = pool.acquire(SLAB, timeout=20)  # releases the GIL while waiting
    elapsed = time.monotonic() - start
    thread.join()
    assert lease.size == SLAB
    assert elapsed >= 0.05
    assert pool.stats["waits"] >= 1


def test_dropping_lease_returns_it(pool):
    lease = pool.acquire(SLAB)
    lease2 = pool.acquire(SLAB)
    del lease
    gc.collect()
    assert pool.try_acquire(SLAB) is not None
    del lease2


def test_stats_and_trim(pool):
    a = pool.acquire(SLAB)
    b = pool.acquire(SLAB)
    stats = pool.stats
    assert stats["slabs"] == 2
    assert stats["bytes_in_use"] >= 2 * SLAB
    assert stats["high_water_bytes"] >= 2 * SLAB
    assert stats["acquires"] == 2
    assert stats["bytes_reserved"] >= 2 * SLAB
    a.release()
    b.release()
    assert pool.stats["bytes_in_use"] == 0
    freed = pool.trim()
    assert isinstance(freed, int)
    assert freed == SLAB
    assert pool.stats["slabs"] == 1
    assert pool.trim() == 0
    assert pool.stats["high_water_bytes"] >= 2 * SLAB


def test_many_small_leases_are_distinct(pool, rng):
    leases = [pool.acquire(int(n)) for n in rng.integers(1, 700, 40)]
    for i, lease in enumerate(leases):
        lease.numpy()[:] = i
    for i, lease in enumerate(leases):
        assert (lease.numpy() == i).all(), f"lease {i} overlaps another"


def test_bad_pool_options(device):
    with pytest.raises(ferry.InvalidArgumentError):
        device.create_staging_pool("dev")
    with pytest.raises(ferry.InvalidArgumentError):
        device.create_staging_pool("device", slab_bytes=SLAB)
    with pytest.raises(ferry.InvalidArgumentError):
        device.create_staging_pool("host_upload", slab_bytes=0)
    with pytest.raises(ferry.InvalidArgumentError):
        device.create_staging_pool("host_upload", slab_bytes=SLAB, max_slabs=0)
    with pytest.raises(ferry.InvalidArgumentError):
        device.create_staging_pool("host_upload", slab_bytes=SLAB, max_slabs=1,
                                   reserved_slabs=2)


def test_lease_outlives_pool_object(device, rng):
    pool = device.create_staging_pool("host_upload", slab_bytes=SLAB, max_slabs=1)
    lease = pool.acquire(1000)
    del pool
    gc.collect()
    values = rng.integers(0, 256, 1000, dtype=np.uint8)
    lease.numpy()[:] = values
    np.testing.assert_array_equal(device.download(lease), values)
