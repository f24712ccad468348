"""EgressPipeline: device outputs to a Python consumer on worker threads, chunked, bounded."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest

import ferry
from helpers import put, run_within

STATS_KEYS = {"steps_pushed", "steps_consumed", "chunks_consumed", "consumer_errors",
              "chunks_dropped"}


class Collector:
    """A consumer that records every chunk (copying its bytes: data is valid during the call)."""

    def __init__(self, fail=None, delay=0.0):
        self.chunks = []
        self.lock = threading.Lock()
        self.fail = fail or {}
        self.delay = delay
        self.threads = set()

    def __call__(self, chunk):
        if self.delay:
            time.sleep(self.delay)
        data = chunk.data
        record = dict(step=chunk.step, index=chunk.index, count=chunk.count, offset=chunk.offset,
                      step_bytes=chunk.step_bytes, data=bytes(data), readonly=data.readonly,
                      thread=threading.get_ident())
        with self.lock:
            self.chunks.append(record)
        error = self.fail.get((chunk.step, chunk.index))
        if error is not None:
            raise error

    def steps(self):
        """step -> bytes, from the chunks by offset; checks that the chunks tile the step."""
        by_step = {}
        for record in self.chunks:
            by_step.setdefault(record["step"], []).append(record)
        out = {}
        for step, records in by_step.items():
            records.sort(key=lambda r: r["index"])
            count = records[0]["count"]
            assert [r["index"] for r in records] == list(range(count)), f"step {step} chunks"
            joined = b""
            for r in records:
                assert r["offset"] == len(joined), f"step {step} chunk {r['index']} offset"
                joined += r["data"]
            assert len(joined) == records[0]["step_bytes"]
            out[step] = joined
        return out


def close_quietly(pipe, mode="drain"):
    """Closes a pipeline whose consumer failed: close() returns what drain() would (the error),
    within a bounded time."""
    try:
        run_within(30, pipe.close, mode)
    except ferry.Error:
        pass


def small_pool(device, slab=1 << 14, slabs=4):
    return device.create_staging_pool("host_readback", slab_bytes=slab, max_slabs=slabs,
                                      reserved_slabs=1)


def device_buffer_with(device, data):
    buf = device.create_buffer(len(data))
    put(device, data, buf)
    return buf


SIZES = [1, 3, 257, 1000, 1001, 4099, 12345]


def test_in_order_chunks(device, rng):
    chunk = 1000
    collector = Collector()
    datas = [rng.integers(0, 256, n, dtype=np.uint8) for n in SIZES]
    with ferry.EgressPipeline(device, collector, chunk_bytes=chunk, pool=small_pool(device),
                              max_pending_steps=3) as pipe:
        for step, data in enumerate(datas):
            ticket = pipe.push(device_buffer_with(device, data))
            assert ticket.step == step
            assert isinstance(ticket.output_read, ferry.TimelinePoint)
        pipe.drain(timeout=60)
        stats = pipe.stats
    assert isinstance(stats, dict) and STATS_KEYS <= set(stats)
    total_chunks = sum(math.ceil(n / chunk) for n in SIZES)
    assert stats["steps_pushed"] == len(SIZES)
    assert stats["steps_consumed"] == len(SIZES)
    assert stats["chunks_consumed"] == total_chunks
    assert stats["consumer_errors"] == 0
    assert stats["chunks_dropped"] == 0
    # in_order: calls in step and chunk order
    order = [(r["step"], r["index"]) for r in collector.chunks]
    assert order == sorted(order)
    assert len(order) == total_chunks
    for r in collector.chunks:
        assert r["readonly"], "chunk.data should be read-only"
        assert r["count"] == math.ceil(r["step_bytes"] / chunk)
        assert r["offset"] == r["index"] * chunk
        assert len(r["data"]) == min(chunk, r["step_bytes"] - r["offset"])
    steps = collector.steps()
    for step, data in enumerate(datas):
        assert steps[step] == data.tobytes(), f"step {step}"


def test_as_completed(device, rng):
    collector = Collector(delay=0.002)
    datas = [rng.integers(0, 256, n, dtype=np.uint8) for n in SIZES]
    with ferry.EgressPipeline(device, collector, workers=3, order="as_completed",
                              chunk_bytes=777, pool=small_pool(device)) as pipe:
        for data in datas:
            pipe.push(device_buffer_with(device, data))
        pipe.drain(timeout=60)
    steps = collector.steps()
    assert sorted(steps) == list(range(len(SIZES)))
    for step, data in enumerate(datas):
        assert steps[step] == data.tobytes()


def test_push_range_lease_tensor_and_host_buffer(device, rng):
    collector = Collector()
    data = rng.integers(0, 256, 4099, dtype=np.uint8)
    pool = device.create_staging_pool("host_upload", slab_bytes=1 << 13, max_slabs=1)
    lease = pool.acquire(4099)
    lease.numpy()[:] = data
    host_buf = device.create_buffer(300, "host_upload")
    np.frombuffer(host_buf.host_view(), np.uint8)[:] = data[:300]
    floats = rng.standard_normal((3, 5)).astype(np.float32)
    tensor = device.upload(floats)
    with ferry.EgressPipeline(device, collector, chunk_bytes=512,
                              pool=small_pool(device)) as pipe:
        pipe.push(device_buffer_with(device, data), offset=7, size=1000)
        pipe.push(lease, offset=4098)
        pipe.push(host_buf)
        pipe.push(tensor)
        pipe.push(lease)
        pipe.drain()
    steps = collector.steps()
    assert steps[0] == data[7:1007].tobytes()
    assert steps[1] == data[4098:].tobytes()
    assert steps[2] == data[:300].tobytes()
    assert steps[3] == floats.tobytes()
    assert steps[4] == data.tobytes()


def test_output_read_allows_overwrite(device, rng):
    """After push, the application overwrites the output behind ticket.output_read (on the
    device): the consumer still sees what was pushed."""
    collector = Collector()
    size = 4099
    data = rng.integers(0, 256, size, dtype=np.uint8)
    buf = device_buffer_with(device, data)
    gate = device.create_timeline()
    compute = device.queue("compute")
    with ferry.EgressPipeline(device, collector, chunk_bytes=1024,
                              pool=small_pool(device)) as pipe:
        # the output is complete only once the gate opens
        ticket = pipe.push(buf, ready=gate.point(1))
        fill = ferry.CommandList()
        fill.fill(buf, 0xEEEEEEEE)
        done = compute.submit(fill, wait=[ticket.output_read])
        time.sleep(0.02)
        assert not collector.chunks, "consumer ran before the output's ready point"
        gate.signal(1)
        pipe.drain(timeout=60)
        done.wait(timeout=30)
    assert collector.steps()[0] == data.tobytes()
    assert (device.download(buf) == 0xEE).all()


def test_tensor_ready_is_default(device, rng):
    collector = Collector()
    data = rng.integers(0, 256, 257, dtype=np.uint8)
    gate = device.create_timeline()
    tensor = device.upload(data, wait=[gate.point(1)])
    with ferry.EgressPipeline(device, collector, pool=small_pool(device)) as pipe:
        pipe.push(tensor)
        time.sleep(0.02)
        assert not collector.chunks
        gate.signal(1)
        pipe.drain(timeout=60)
    assert collector.steps()[0] == data.tobytes()


def test_consumer_error_stop(device, rng):
    collector = Collector(fail={(1, 0): ValueError("consumer failed at step one")})
    datas = [rng.integers(0, 256, 100, dtype=np.uint8) for _ in range(3)]
    pipe = ferry.EgressPipeline(device, collector, on_error="stop", pool=small_pool(device))
    pipe.push(device_buffer_with(device, datas[0]))
    pipe.push(device_buffer_with(device, datas[1]))
    with pytest.raises(ferry.Error) as error:
        pipe.drain(timeout=60)
    message = error.value.message
    assert "consumer failed at step one" in message
    assert "ValueError" in message
    assert "step 1" in message
    assert error.value.code == "internal"
    with pytest.raises(ferry.Error) as error:
        pipe.push(device_buffer_with(device, datas[2]))  # stopped: push fails
    assert "consumer failed at step one" in error.value.message
    assert pipe.stats["consumer_errors"] == 1
    close_quietly(pipe)


def test_consumer_error_keep_going(device, rng):
    collector = Collector(fail={(1, 0): RuntimeError("first failure"),
                                (3, 1): ferry.DataCorruptError("second failure", "")})
    datas = [rng.integers(0, 256, 300, dtype=np.uint8) for _ in range(5)]
    pipe = ferry.EgressPipeline(device, collector, on_error="keep_going", chunk_bytes=200,
                                pool=small_pool(device))
    for data in datas:
        pipe.push(device_buffer_with(device, data))
    with pytest.raises(ferry.Error) as error:
        pipe.drain(timeout=60)
    assert "first failure" in error.value.message
    steps = collector.steps()
    for step, data in enumerate(datas):
        assert steps[step] == data.tobytes(), f"step {step} still delivered"
    stats = pipe.stats
    assert stats["consumer_errors"] == 2
    assert stats["steps_consumed"] == 5
    close_quietly(pipe)


def test_consumer_ferry_error_keeps_code(device):
    def consumer(chunk):
        raise ferry.InvalidArgumentError("consumer says no", "")

    pipe = ferry.EgressPipeline(device, consumer, pool=small_pool(device))
    pipe.push(device.upload(np.zeros(8, np.uint8)))
    with pytest.raises(ferry.InvalidArgumentError) as error:
        pipe.drain(timeout=60)
    assert "consumer says no" in error.value.message
    close_quietly(pipe)


def test_close_cancel_mid_stream(device, rng):
    collector = Collector(delay=0.02)
    data = rng.integers(0, 256, 5000, dtype=np.uint8)
    buf = device_buffer_with(device, data)
    pipe = ferry.EgressPipeline(device, collector, chunk_bytes=100, max_pending_steps=4,
                                pool=small_pool(device))
    for _ in range(3):
        pipe.push(buf)  # 50 chunks each, ~1 s of consumer work each
    run_within(20, pipe.close, "cancel")
    stats = pipe.stats
    assert stats["chunks_dropped"] > 0
    assert stats["chunks_consumed"] + stats["chunks_dropped"] == 150
    assert stats["chunks_consumed"] == len(collector.chunks)
    # what was delivered is right
    for record in collector.chunks:
        assert record["data"] == data[record["offset"]:record["offset"] + 100].tobytes()
    with pytest.raises(ferry.Error):
        pipe.push(buf)
    run_within(20, pipe.close)  # idempotent


def test_close_drain_delivers_everything(device, rng):
    collector = Collector(delay=0.001)
    datas = [rng.integers(0, 256, 999, dtype=np.uint8) for _ in range(4)]
    pipe = ferry.EgressPipeline(device, collector, chunk_bytes=333, pool=small_pool(device))
    for data in datas:
        pipe.push(device_buffer_with(device, data))
    run_within(30, pipe.close)
    steps = collector.steps()
    assert [steps[i] for i in range(4)] == [d.tobytes() for d in datas]


def test_close_from_consumer(device):
    pipe = None
    calls = []

    def consumer(chunk):
        calls.append(chunk.step)
        pipe.close("cancel")  # deferred: cannot wait for itself

    pipe = ferry.EgressPipeline(device, consumer, pool=small_pool(device), chunk_bytes=64)
    buf = device.upload(np.zeros(640, np.uint8))
    pipe.push(buf)
    deadline = time.monotonic() + 20
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls
    run_within(20, pipe.close)


def test_backpressure_max_pending(device):
    gate = threading.Event()

    def consumer(chunk):
        gate.wait(20)

    buf = device.upload(np.zeros(64, np.uint8))
    pipe = ferry.EgressPipeline(device, consumer, max_pending_steps=1, pool=small_pool(device))
    pipe.push(buf)
    pushed = threading.Event()

    def second_push():
        pipe.push(buf)
        pushed.set()

    thread = threading.Thread(target=second_push, daemon=True)
    thread.start()
    time.sleep(0.15)
    assert not pushed.is_set(), "push did not wait for room (max_pending_steps=1)"
    gate.set()
    thread.join(20)
    assert pushed.is_set()
    run_within(20, pipe.close)
    assert pipe.stats["steps_consumed"] == 2


def test_drain_timeout(device):
    gate = threading.Event()

    def consumer(chunk):
        gate.wait(20)

    pipe = ferry.EgressPipeline(device, consumer, pool=small_pool(device))
    pipe.push(device.upload(np.zeros(16, np.uint8)))
    with pytest.raises(ferry.TimeoutError):
        pipe.drain(timeout=0.05)
    with pytest.raises(ValueError):
        pipe.drain(timeout=-1)
    gate.set()
    pipe.drain(timeout=20)
    pipe.close()


def test_construction_errors(device):
    def consumer(chunk):
        pass

    with pytest.raises(TypeError):
        ferry.EgressPipeline(device, 42)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.EgressPipeline(device, consumer, order="random")
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.EgressPipeline(device, consumer, on_error="ignore")
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.EgressPipeline(device, consumer, workers=0)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.EgressPipeline(device, consumer, max_pending_steps=0)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.EgressPipeline(device, consumer, chunk_bytes=0)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.EgressPipeline(device, consumer,
                             pool=device.create_staging_pool("host_upload", slab_bytes=4096,
                                                             max_slabs=1))
    with ferry.EgressPipeline(device, consumer, pool=small_pool(device)) as pipe:
        buf = device.create_buffer(16)
        with pytest.raises(ferry.OutOfRangeError):
            pipe.push(buf, offset=10, size=7)
        with pytest.raises((ferry.InvalidArgumentError, ferry.OutOfRangeError)):
            pipe.push(buf, offset=16)
        with pytest.raises(ferry.InvalidArgumentError):
            pipe.close("later")
        released = device.create_buffer(16)
        released.release()
        with pytest.raises(ferry.ReleasedError):
            pipe.push(released)
