"""Sloppy and hostile inputs from Python: every one is a clear ferry error (or the builtin it
subclasses), raised where it belongs; nothing is silently dropped, cut to size or reinterpreted,
nothing hangs, and the work around it goes on (docs/RELIABILITY.md, "Files and bytes from
outside")."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

import ferry
from helpers import run_within

# ---- IngressPipeline sources: every item exact ------------------------------------------------

SHAPE = dict(batch=2, height=5, width=7, channels=3)  # 210 bytes a batch, NHWC


def normalize_params(**shape):
    s = {**SHAPE, **shape}
    return ferry.NormalizeParams(s["batch"], s["height"], s["width"], s["channels"],
                                 mean=(10.0, 20.0, 30.0, 40.0), std=(2.0, 3.0, 4.0, 5.0))


def drain(pipe, count):
    """next() `count` times: (index, tensor bytes) for batches, the exception for errors."""
    outcomes = []
    for _ in range(count):
        try:
            batch = pipe.next(timeout=60)
        except ferry.Error as error:
            outcomes.append(error)
            continue
        assert batch is not None, "the stream ended early"
        outcomes.append(batch.index)
        batch.release()
    assert pipe.next(timeout=60) is None, "the stream goes on past the iterator's end"
    return outcomes


def bad_item_cases(params, rng):
    """(item, words its error names): one of each kind of wrong item."""
    n = params.input_bytes
    return [
        (None, ["None"]),
        (rng.integers(0, 256, n // 8).astype(np.float64), ["float64"]),   # right bytes, wrong dtype
        (rng.integers(0, 256, n).astype(np.float32), ["float32"]),
        (np.zeros(n + 1, np.uint8), [f"{n + 1} bytes"]),                   # never cut to size
        (np.zeros(n - 1, np.uint8), [f"{n - 1} bytes"]),
        (np.zeros((2, 7, 5, 3), np.uint8), ["shape (2, 7, 5, 3)"]),        # right bytes, wrong shape
        (np.zeros((2, 5, 7, 3, 2), np.uint8)[..., 0], ["contiguous"]),     # a strided view
        (np.zeros(n, np.int8), ["int8"]),
        (42, ["int"]),
        ("x" * n, ["str"]),
        (b"", ["0 bytes"]),
    ]


def test_ingress_bad_items_are_errors_at_their_index(device, rng):
    params = normalize_params()
    n = params.input_bytes
    good = [rng.integers(0, 256, n, dtype=np.uint8) for _ in range(3)]
    cases = bad_item_cases(params, rng)
    # good, bad, good, bad, ..., good: every bad item raises at its index and the stream goes on
    items = [good[0]]
    for item, _ in cases:
        items += [item, good[len(items) % 3]]
    with ferry.IngressPipeline(device, iter(items), normalize=params, depth=2) as pipe:
        outcomes = run_within(120, drain, pipe, len(items))
    for index, outcome in enumerate(outcomes):
        if index % 2 == 0:
            assert outcome == index, f"item {index} is good: {outcome!r}"
            continue
        item, words = cases[index // 2]
        assert isinstance(outcome, ferry.InvalidArgumentError), (index, outcome)
        assert f"item {index}" in outcome.message
        for word in words:
            assert word in outcome.message, (word, outcome.message)


def test_ingress_accepted_shapes(device, rng):
    """Flat, the images' shape, bytes-like objects: one batch each, the same values."""
    params = normalize_params()
    images = rng.integers(0, 256, (2, 5, 7, 3), dtype=np.uint8)
    items = [images, images.reshape(-1), images.tobytes(), bytearray(images.tobytes()),
             memoryview(images.tobytes())]
    expected = None
    with ferry.IngressPipeline(device, items, normalize=params, depth=2) as pipe:
        for index, batch in enumerate(pipe):
            got = device.download(batch.tensor)
            if expected is None:
                expected = got
            np.testing.assert_array_equal(got, expected, err_msg=f"item {index}")
            batch.release()
    assert index == len(items) - 1
    # A batch of one image may drop its leading 1; NCHW input takes (N, C, H, W).
    one = normalize_params(batch=1)
    with ferry.IngressPipeline(device, [images[0]], normalize=one) as pipe:
        assert len(list(pipe)) == 1
    nchw = ferry.NormalizeParams(2, 5, 7, 3, layout="nchw")
    with ferry.IngressPipeline(device, [np.zeros((2, 3, 5, 7), np.uint8),
                                        np.zeros((2, 5, 7, 3), np.uint8)],
                               normalize=nchw, depth=3) as pipe:
        assert pipe.next(timeout=60).index == 0
        with pytest.raises(ferry.InvalidArgumentError, match="shape"):
            pipe.next(timeout=60)
        assert pipe.next(timeout=60) is None


def test_ingress_pinned_items_of_the_wrong_size(device, rng):
    params = normalize_params()
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=4)
    items = [pool.acquire(params.input_bytes + 8), device.create_buffer(100, "host_upload"),
             pool.acquire(params.input_bytes)]
    items[2].numpy()[:] = 7
    with ferry.IngressPipeline(device, items, normalize=params, depth=2) as pipe:
        for size in (params.input_bytes + 8, 100):
            with pytest.raises(ferry.InvalidArgumentError, match=f"of {size} bytes"):
                pipe.next(timeout=60)
        batch = pipe.next(timeout=60)
        assert batch.index == 2
        batch.release()
        assert pipe.next(timeout=60) is None


def test_ingress_none_items_do_not_end_the_stream(device, rng):
    """None used to end the stream; now only the iterator's end does."""
    params = normalize_params()
    image = rng.integers(0, 256, params.input_bytes, dtype=np.uint8)
    with ferry.IngressPipeline(device, [None, None, image], normalize=params) as pipe:
        outcomes = run_within(60, drain, pipe, 3)
    assert [type(o) for o in outcomes[:2]] == [ferry.InvalidArgumentError] * 2
    assert outcomes[2] == 2


# ---- EgressPipeline consumers whose work would never run -----------------------------------------


def egress_pool(device):
    return device.create_staging_pool("host_readback", slab_bytes=1 << 16, max_slabs=2)


@pytest.mark.parametrize("kind", ["async def", "generator"])
def test_egress_consumer_that_never_runs_is_an_error(device, kind):
    seen = []
    if kind == "async def":
        async def consumer(chunk):  # never awaited: its body would not run
            seen.append(chunk.step)
    else:
        def consumer(chunk):
            seen.append(chunk.step)
            yield

    pipe = ferry.EgressPipeline(device, consumer, on_error="keep_going", pool=egress_pool(device))
    pipe.push(device.upload(np.arange(64, dtype=np.uint8)))
    with pytest.raises(ferry.InvalidArgumentError) as error:
        run_within(60, pipe.drain, timeout=30)
    word = "coroutine" if kind == "async def" else "generator"
    assert word in error.value.message and "step 0" in error.value.message
    assert seen == []
    assert pipe.stats["consumer_errors"] == 1
    try:
        pipe.close()
    except ferry.Error:
        pass


def test_egress_consumer_return_values_are_otherwise_ignored(device):
    written = []
    pipe = ferry.EgressPipeline(device, lambda chunk: written.append(bytes(chunk.data)) or 17,
                                pool=egress_pool(device))
    pipe.push(device.upload(np.arange(32, dtype=np.uint8)))
    run_within(60, pipe.drain, timeout=30)
    pipe.close()
    assert written == [bytes(range(32))]


# ---- ferry.ibp: streams from outside -----------------------------------------------------------


def small_stream():
    data = np.arange(40 * 37, dtype=np.int32) % 9
    return ferry.ibp.encode(data, element_size=4, row_elements=37)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_ibp_decode_of_a_header_claiming_32_gib():
    """The 64-byte attack: a consistent header whose CRC matches, claiming a huge tensor. It is
    refused as corrupt (the stream ends after the header) before anything is allocated."""
    header = bytearray(small_stream()[:64])
    header[10] = 8                                      # element_size
    struct.pack_into("<I", header, 16, 511)             # group_rows
    struct.pack_into("<QQQQ", header, 24, 4096, 1 << 20, 4096 << 20, 0)
    struct.pack_into("<I", header, 60, crc32c(bytes(header[:60])))
    assert ferry.ibp.read_layout(bytes(header)).raw_bytes == 32 << 30
    with pytest.raises(ferry.DataCorruptError, match="truncated"):
        ferry.ibp.decode(bytes(header))


def test_ibp_decode_checks_the_tensor_against_memory(monkeypatch):
    stream = small_stream()
    monkeypatch.setenv("FERRY_HOST_MEMORY_LIMIT", "5000")
    with pytest.raises(MemoryError) as error:
        ferry.ibp.decode(stream)
    assert isinstance(error.value, ferry.OutOfMemoryError)
    assert "5920 bytes" in error.value.message
    monkeypatch.setenv("FERRY_HOST_MEMORY_LIMIT", "6000")
    assert len(ferry.ibp.decode(stream)) == 5920


@pytest.mark.parametrize("stream", [b"", b"\x00" * 63, b"FERRYIBP" + b"\xff" * 200, bytes(4096)])
def test_ibp_junk_is_data_corrupt(stream):
    for call in (ferry.ibp.decode, ferry.ibp.validate):
        with pytest.raises(ferry.DataCorruptError):
            call(stream)


@pytest.mark.parametrize("value", [None, 12, "text", [1, 2, 3], np.zeros((4, 4))[:, 1]])
def test_ibp_non_buffers_are_refused(value):
    with pytest.raises((ferry.InvalidArgumentError, TypeError)):
        ferry.ibp.decode(value)


# ---- Index files -------------------------------------------------------------------------------


def test_index_load_paths(device, tmp_path):
    with pytest.raises(FileNotFoundError) as missing:
        ferry.BinaryIndex.load(device, str(tmp_path / "missing.bix"))
    assert missing.value.code == "not_found"
    with pytest.raises(ferry.InvalidArgumentError, match="is a directory"):
        ferry.BinaryIndex.load(device, str(tmp_path))
    fifo = tmp_path / "fifo.bix"
    os.mkfifo(fifo)
    with pytest.raises(ferry.InvalidArgumentError, match="FIFO"):
        run_within(30, ferry.BinaryIndex.load, device, str(fifo))
    empty = tmp_path / "empty.bix"
    empty.write_bytes(b"")
    with pytest.raises(ferry.DataCorruptError):
        ferry.BinaryIndex.load(device, str(empty))
    # save(): the same faults, the same codes
    index = ferry.BinaryIndex(device, 64)
    with pytest.raises(ferry.InvalidArgumentError, match="is a directory"):
        index.save(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        index.save(str(tmp_path / "no_such_folder" / "x.bix"))


# ---- Use after close, released memory ------------------------------------------------------------


def test_pipelines_and_index_after_close(open_device, rng):
    dev = open_device()
    params = normalize_params()
    pipe = ferry.IngressPipeline(dev, [np.zeros(params.input_bytes, np.uint8)] * 3,
                                 normalize=params)
    pipe.close()
    with pytest.raises(ferry.FailedPreconditionError):
        pipe.next(timeout=5)
    pipe.close()  # twice is harmless
    egress = ferry.EgressPipeline(dev, lambda chunk: None, pool=egress_pool(dev))
    egress.close()
    with pytest.raises(ferry.FailedPreconditionError, match="closed"):
        egress.push(dev.upload(np.zeros(8, np.uint8)))
    dev.close()
    with pytest.raises(ferry.DeviceClosedError):
        ferry.IngressPipeline(dev, [], normalize=params)
    with pytest.raises(ferry.DeviceClosedError):
        ferry.BinaryIndex(dev, 64)


def test_dlpack_capsule_outlives_its_lease(device, rng):
    """A capsule taken, then its lease dropped: the capsule still owns the bytes."""
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    lease = pool.acquire(64)
    values = rng.integers(0, 256, 64, dtype=np.uint8)
    lease.numpy()[:] = values
    capsule = lease.__dlpack__()
    where = lease.__dlpack_device__()
    del lease

    class Holder:
        def __dlpack__(self, **kwargs):
            return capsule

        def __dlpack_device__(self):
            return where

    np.testing.assert_array_equal(np.from_dlpack(Holder()), values)


def test_from_dlpack_of_a_used_capsule(device):
    used = np.zeros(8, np.uint8).__dlpack__()
    np.from_dlpack(type("Once", (), {"__dlpack__": lambda self, **kw: used,
                                     "__dlpack_device__": lambda self: (1, 0)})())

    class Stale:
        def __dlpack__(self, **kwargs):
            return used

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(ferry.InvalidArgumentError, match="DLPack capsule"):
        ferry.from_dlpack(Stale(), device)
