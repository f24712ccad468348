"""Timelines and queue ordering: host signal / wait, timeouts, waits and signals across queues."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import ferry
from helpers import put, run_within
from truth import fill_reference


def test_signal_wait_value(device):
    tl = device.create_timeline()
    assert tl.value == 0
    assert tl.submitted_value == 0
    assert tl.failure is None
    tl.signal(3)
    assert tl.value == 3
    assert tl.submitted_value >= 3
    tl.wait(2)
    tl.wait(3, timeout=0)
    tl.wait(1, timeout=None)
    start = time.monotonic()
    with pytest.raises(ferry.TimeoutError) as error:
        tl.wait(4, timeout=0.05)
    assert time.monotonic() - start >= 0.04
    assert isinstance(error.value, TimeoutError)
    with pytest.raises(ValueError):
        tl.wait(4, timeout=-1)


def test_initial_value(device):
    tl = device.create_timeline(41)
    assert tl.value == 41
    tl.wait(41, timeout=0)
    point = tl.point(40)
    assert point.reached
    assert point.value == 40
    assert point.timeline.value == 41


def test_signal_must_increase(device):
    tl = device.create_timeline(5)
    with pytest.raises(ferry.Error) as error:
        tl.signal(5)
    assert isinstance(error.value, (ferry.InvalidArgumentError, ferry.FailedPreconditionError))
    with pytest.raises(ferry.Error):
        tl.signal(2)
    assert tl.value == 5


def test_host_signal_below_submitted_value(device):
    """Signal values must increase in submission order: once a submission promises 2, the host
    may not signal 1."""
    tl = device.create_timeline()
    buf = device.create_buffer(8)
    commands = ferry.CommandList()
    commands.fill(buf, 1)
    device.queue("compute").submit(commands, signal=[tl.point(2)]).wait(timeout=30)
    assert tl.submitted_value == 2
    with pytest.raises(ferry.InvalidArgumentError):
        tl.signal(1)
    tl.signal(3)
    assert tl.value == 3


def test_point_wait(device):
    tl = device.create_timeline()
    point = tl.point(2)
    assert not point.reached
    with pytest.raises(ferry.TimeoutError):
        point.wait(timeout=0.02)
    tl.signal(2)
    assert point.reached
    point.wait(timeout=0)
    point.wait()


def test_wait_from_another_thread_releases_gil(device):
    tl = device.create_timeline()
    done = threading.Event()

    def waiter():
        tl.wait(7, timeout=20)
        done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.05)
    # this thread runs while the other waits in C++: the wait released the GIL
    assert not done.is_set()
    tl.signal(7)
    thread.join(20)
    assert done.is_set()


def test_submit_returns_progress_point(device):
    queue = device.queue("compute")
    buf = device.create_buffer(16)
    commands = ferry.CommandList()
    commands.fill(buf, 1)
    point = queue.submit(commands)
    assert isinstance(point, ferry.TimelinePoint)
    point.wait(timeout=30)
    assert point.reached
    assert queue.progress.value >= point.value
    queue.wait_idle(timeout=30)


def test_cross_queue_order_by_data(device, rng):
    """The compute fill is submitted first, waiting for a value the upload queue signals later
    (ferry holds it back): the data shows the copy happened before the fill."""
    size = 4099
    data = rng.integers(0, 256, size, dtype=np.uint8)
    pool = device.create_staging_pool("host_upload", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(size)
    lease.numpy()[:] = data
    dst = device.create_buffer(size)
    uploaded = device.create_timeline()
    filled = device.create_timeline()

    fill = ferry.CommandList()
    fill.fill(dst, 0xDEADBEEF, offset=1, size=1000)
    fill_done = device.queue("compute").submit(fill, wait=[uploaded.point(1)],
                                               signal=[filled.point(1)])
    time.sleep(0.02)
    assert not fill_done.reached, "the fill ran before the value it waits for was signalled"
    assert filled.value == 0

    upload = ferry.CommandList()
    upload.copy(lease, dst)
    device.queue("upload").submit(upload, signal=[uploaded.point(1)])
    filled.wait(1, timeout=30)
    assert uploaded.value == 1
    fill_done.wait(timeout=30)
    np.testing.assert_array_equal(device.download(dst),
                                  fill_reference(data, 1, 1000, 0xDEADBEEF))


def test_upload_signal_then_compute_wait(device, rng):
    size = 257
    data = rng.integers(0, 256, size, dtype=np.uint8)
    tl = device.create_timeline(10)
    dst = device.create_buffer(size)
    tensor = device.upload(data, dst, signal=[tl.point(11)])
    commands = ferry.CommandList()
    commands.fill(dst, 0x04030201, offset=3, size=4)
    device.queue("compute").submit(commands, wait=[tl.point(11)]).wait(timeout=30)
    assert tl.value >= 11
    np.testing.assert_array_equal(device.download(dst), fill_reference(data, 3, 4, 0x04030201))
    assert tuple(tensor.shape) == (size,)


def test_upload_waits_for_host_signal(device, rng):
    """upload(wait=...) starts its copy after the point: a fill submitted before it but ordered
    after by a host-signalled value shows the upload's data overwritten only where filled."""
    size = 300
    data = rng.integers(0, 256, size, dtype=np.uint8)
    dst = device.create_buffer(size)
    gate = device.create_timeline()
    order = device.create_timeline()
    fill = ferry.CommandList()
    fill.fill(dst, 0x55555555)
    device.queue("compute").submit(fill, signal=[order.point(1)])
    tensor = run_within(30, device.upload, data, dst, wait=[order.point(1), gate.point(1)])
    gate.signal(1)
    out = device.download(tensor)  # waits for the tensor's ready point
    np.testing.assert_array_equal(out, data)


def test_download_wait(device, rng):
    size = 64
    buf = device.create_buffer(size)
    put(device, np.zeros(size, np.uint8), buf)
    gate = device.create_timeline()
    filled = device.create_timeline()
    fill = ferry.CommandList()
    fill.fill(buf, 0x01010101)
    device.queue("compute").submit(fill, wait=[gate.point(1)], signal=[filled.point(1)])

    def release():
        time.sleep(0.05)
        gate.signal(1)

    thread = threading.Thread(target=release)
    thread.start()
    out = run_within(30, device.download, buf, wait=[filled.point(1)])
    thread.join()
    np.testing.assert_array_equal(out, np.full(size, 1, np.uint8))


def test_tensor_ready_is_waited_for(device, rng):
    """Commands using a tensor wait for its ready point automatically (upload, then a copy on
    another queue with no explicit wait)."""
    data = rng.integers(0, 256, 4099, dtype=np.uint8)
    gate = device.create_timeline()
    tensor = device.upload(data, wait=[gate.point(1)])
    assert isinstance(tensor.ready, ferry.TimelinePoint)
    assert not tensor.ready.reached
    dst = device.create_buffer(4099)
    commands = ferry.CommandList()
    commands.copy(tensor, dst)
    point = device.queue("download").submit(commands)
    time.sleep(0.02)
    assert not point.reached
    gate.signal(1)
    point.wait(timeout=30)
    np.testing.assert_array_equal(device.download(dst), data)


def test_submit_wait_timeout_then_failure_on_close(open_device):
    dev = open_device()
    tl = dev.create_timeline()
    buf = dev.create_buffer(8)
    commands = ferry.CommandList()
    commands.fill(buf, 1)
    signalled = dev.create_timeline()
    point = dev.queue("compute").submit(commands, wait=[tl.point(5)],
                                        signal=[signalled.point(1)])
    with pytest.raises(ferry.TimeoutError):
        point.wait(timeout=0.02)
    with pytest.raises(ferry.TimeoutError):
        dev.queue("compute").wait_idle(timeout=0.02)
    assert signalled.failure is None
    # closing fails the held-back submission instead of waiting for it forever; a value the
    # close failed reports device_closed, whenever the wait starts
    run_within(30, dev.close, timeout=20)
    with pytest.raises(ferry.DeviceClosedError):
        point.wait(timeout=5)
    with pytest.raises(ferry.DeviceClosedError):
        signalled.wait(1, timeout=5)
    failure = signalled.failure
    assert isinstance(failure, ferry.Error), failure
    assert failure.code == "device_closed"


def test_submit_errors(device, open_device):
    other = open_device()
    buf = device.create_buffer(8)
    other_tl = other.create_timeline()
    commands = ferry.CommandList()
    commands.fill(buf, 1)
    with pytest.raises(ferry.InvalidArgumentError):
        device.queue("compute").submit(commands, wait=[other_tl.point(1)])
    with pytest.raises((TypeError, ferry.InvalidArgumentError)):
        device.queue("compute").submit(commands, wait=[3])



def test_wait_on_stream_without_streams_waits_on_host(device):
    """Backends without CUDA streams order any stream by a host wait for the point."""
    if device.backend == "cuda":
        pytest.skip("CUDA orders the stream on the device")
    tl = device.create_timeline()
    point = tl.point(1)
    timer = threading.Timer(0.05, tl.signal, args=(1,))
    timer.start()
    start = time.monotonic()
    run_within(30, point.wait_on_stream, 1)
    timer.join()
    assert point.reached
    assert time.monotonic() - start >= 0.04
    tl.point(0).wait_on_stream(2)  # reached already: returns at once


def test_point_after_stream_unavailable_without_cuda(device):
    if device.backend == "cuda":
        pytest.skip("CUDA has streams")
    with pytest.raises(ferry.UnavailableError):
        device.queue("compute").point_after_stream(1)
