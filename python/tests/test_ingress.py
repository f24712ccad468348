"""IngressPipeline: host uint8 batches to normalized device tensors, in order, bounded."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import ferry
from helpers import run_within
from truth import normalize_reference

SHAPE = dict(batch=2, height=5, width=7, channels=3)


def params_for(rng, output_type="float32", output_layout="nchw", **shape):
    shape = shape or SHAPE
    mean = tuple(float(v) for v in rng.uniform(0, 255, 4))
    std = tuple(float(v) for v in rng.uniform(1, 80, 4))
    params = ferry.NormalizeParams(shape["batch"], shape["height"], shape["width"],
                                   shape["channels"], mean=mean, std=std,
                                   output_type=output_type, output_layout=output_layout)
    return params, mean, std, shape


def expected_for(data, mean, std, shape, output_type="float32", output_layout="nchw"):
    return normalize_reference(data, mean=mean, std=std, output_type=output_type,
                               output_layout=output_layout, **shape)


def tensor_values(device, tensor, expected):
    out = np.empty(expected.shape, expected.dtype)
    device.download(tensor, out)
    return out


def check_batch(device, batch, index, images, mean, std, shape, params, **kw):
    assert batch.index == index
    tensor = batch.tensor
    assert tuple(tensor.shape) == tuple(params.output_shape)
    assert str(tensor.dtype) == str(params.output_dtype)
    assert tensor.nbytes == params.output_bytes
    expected = expected_for(images[index], mean, std, shape, **kw)
    got = tensor_values(device, tensor, expected)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8),
                                  err_msg=f"batch {index}")


def random_images(rng, params, count):
    return [rng.integers(0, 256, params.input_bytes, dtype=np.uint8) for _ in range(count)]


def test_in_order(device, rng):
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 7)
    pipe = ferry.IngressPipeline(device, iter(images), normalize=params, depth=3)
    seen = 0
    for batch in pipe:
        check_batch(device, batch, seen, images, mean, std, shape, params)
        assert isinstance(batch.ready, ferry.TimelinePoint)
        batch.release()
        seen += 1
    assert seen == 7
    assert pipe.next(timeout=5) is None, "after the end, next() returns None"
    pipe.close()


@pytest.mark.parametrize("output_type,output_layout", [("float16", "nhwc"),
                                                        ("bfloat16", "nchw")])
def test_output_types(device, rng, output_type, output_layout):
    params, mean, std, shape = params_for(rng, output_type, output_layout, batch=1, height=9,
                                          width=3, channels=4)
    images = random_images(rng, params, 3)
    with ferry.IngressPipeline(device, images, normalize=params, depth=2) as pipe:
        for index, batch in enumerate(pipe):
            with batch:
                check_batch(device, batch, index, images, mean, std, shape, params,
                            output_type=output_type, output_layout=output_layout)


def test_shaped_arrays_and_list_source(device, rng):
    """Items may be any C-contiguous array of input_bytes bytes (an image batch shaped NHWC)."""
    params, mean, std, shape = params_for(rng)
    images = [rng.integers(0, 256, (2, 5, 7, 3), dtype=np.uint8) for _ in range(3)]
    # depth 4 > 3 items: the producer takes a slot before asking the source for an item, so
    # holding `depth` batches would keep it from ever seeing the end of the stream
    with ferry.IngressPipeline(device, images, normalize=params, depth=4) as pipe:
        batches = list(pipe)
        assert [b.index for b in batches] == [0, 1, 2]
        for index, batch in enumerate(batches):
            check_batch(device, batch, index, [i.reshape(-1) for i in images], mean, std, shape,
                        params)
            batch.release()


def test_reused_source_buffer(device, rng):
    """Each item is read before the next one is asked for: a generator may reuse its array."""
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 6)
    scratch = np.empty(params.input_bytes, np.uint8)

    def source():
        for image in images:
            scratch[:] = image
            yield scratch
        scratch[:] = 0

    with ferry.IngressPipeline(device, source(), normalize=params, depth=3) as pipe:
        for index, batch in enumerate(pipe):
            check_batch(device, batch, index, images, mean, std, shape, params)
            batch.release()


def test_lease_source(device, rng):
    """Pinned items (leases) are uploaded by DMA directly."""
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 5)
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=8)

    def source():
        for image in images:
            lease = pool.acquire(params.input_bytes, timeout=30)
            lease.numpy()[:] = image
            yield lease

    with ferry.IngressPipeline(device, source(), normalize=params, depth=2) as pipe:
        count = 0
        for index, batch in enumerate(pipe):
            check_batch(device, batch, index, images, mean, std, shape, params)
            batch.release()
            count += 1
    assert count == 5


def test_host_buffer_source(device, rng):
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 3)
    buffers = []
    for image in images:
        buf = device.create_buffer(params.input_bytes, "host_upload")
        np.frombuffer(buf.host_view(), np.uint8)[:] = image
        buffers.append(buf)
    with ferry.IngressPipeline(device, buffers, normalize=params) as pipe:
        for index, batch in enumerate(pipe):
            check_batch(device, batch, index, images, mean, std, shape, params)
            batch.release()


def test_cpu_tensor_is_host_memory(device, rng):
    if device.backend != "cpu":
        pytest.skip("CPU backend: the tensor is host memory")
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 2)
    with ferry.IngressPipeline(device, images, normalize=params) as pipe:
        for index, batch in enumerate(pipe):
            view = batch.tensor.numpy()  # waits for ready
            np.testing.assert_array_equal(view, expected_for(images[index], mean, std, shape))
            from_dlpack = np.from_dlpack(batch.tensor)
            np.testing.assert_array_equal(from_dlpack, view)
            del view, from_dlpack
            batch.release()


class FlakySource:
    """An iterator (not a generator: it goes on after raising) that raises at given indices."""

    def __init__(self, images, failures):
        self.images = images
        self.failures = failures
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        index = self.index
        self.index += 1
        if index >= len(self.images):
            raise StopIteration
        if index in self.failures:
            raise self.failures[index]
        return self.images[index]


def test_source_exception_is_that_batchs_error(device, rng):
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 6)
    source = FlakySource(images, {2: RuntimeError("source broke at two"),
                                  4: ferry.InvalidArgumentError("bad item four", "")})
    with ferry.IngressPipeline(device, source, normalize=params, depth=2) as pipe:
        for index in (0, 1):
            batch = pipe.next(timeout=30)
            check_batch(device, batch, index, images, mean, std, shape, params)
            batch.release()
        with pytest.raises(ferry.Error) as error:
            pipe.next(timeout=30)
        assert "source broke at two" in error.value.message
        assert "batch 2" in error.value.message
        assert "RuntimeError" in error.value.message
        assert error.value.code == "internal"
        batch = pipe.next(timeout=30)
        check_batch(device, batch, 3, images, mean, std, shape, params)
        batch.release()
        with pytest.raises(ferry.InvalidArgumentError) as error:
            pipe.next(timeout=30)  # a ferry.Error keeps its code
        assert "bad item four" in error.value.message
        batch = pipe.next(timeout=30)
        check_batch(device, batch, 5, images, mean, std, shape, params)
        batch.release()
        assert pipe.next(timeout=30) is None


def test_source_error_in_iteration(device, rng):
    """Iterating with for: the error surfaces at its batch, and the stream can be resumed."""
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 3)
    source = FlakySource(images, {1: KeyError("missing key")})
    pipe = ferry.IngressPipeline(device, source, normalize=params, depth=2)
    got = []
    with pytest.raises(ferry.Error) as error:
        for batch in pipe:
            got.append(batch.index)
            batch.release()
    assert got == [0]
    assert "missing key" in error.value.message
    rest = [batch.index for batch in pipe]
    assert rest == [2]
    pipe.close()


def test_wrong_size_item(device, rng):
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 4)
    images[1] = images[1][:-1]  # one byte short
    with ferry.IngressPipeline(device, images, normalize=params, depth=2) as pipe:
        pipe.next(timeout=30).release()
        with pytest.raises(ferry.Error) as error:
            pipe.next(timeout=30)
        assert "batch 1" in error.value.message
        for index in (2, 3):
            batch = pipe.next(timeout=30)
            check_batch(device, batch, index, images, mean, std, shape, params)
            batch.release()


def test_non_array_item(device, rng):
    params, _, _, _ = params_for(rng)
    good = np.zeros(params.input_bytes, np.uint8)
    with ferry.IngressPipeline(device, [good, 12345, good], normalize=params, depth=2) as pipe:
        assert pipe.next(timeout=30).index == 0
        with pytest.raises(ferry.Error):
            pipe.next(timeout=30)
        assert pipe.next(timeout=30).index == 2


def test_close_mid_stream(device, rng):
    params, _, _, _ = params_for(rng)
    image = rng.integers(0, 256, params.input_bytes, dtype=np.uint8)
    calls = []

    def endless():
        while True:
            calls.append(1)
            yield image

    pipe = ferry.IngressPipeline(device, endless(), normalize=params, depth=3)
    held = []
    for batch in pipe:
        held.append(batch)
        if len(held) == 2:
            break
    run_within(20, pipe.close)
    run_within(20, pipe.close)  # idempotent
    with pytest.raises(ferry.FailedPreconditionError):
        pipe.next(timeout=1)
    # batches the application holds stay valid after close
    for batch in held:
        batch.ready.wait(timeout=30)
        device.download(batch.tensor)
        batch.release()
    n = len(calls)
    time.sleep(0.05)
    assert len(calls) == n, "the source is called after close()"


def test_close_with_blocked_source(device, rng):
    """close() while the source call is slow: waits for that call, then stops."""
    params, _, _, _ = params_for(rng)
    image = np.zeros(params.input_bytes, np.uint8)
    release = threading.Event()

    def slow():
        yield image
        release.wait(5)
        yield image

    pipe = ferry.IngressPipeline(device, slow(), normalize=params, depth=3)
    first = pipe.next(timeout=30)
    first.release()
    threading.Timer(0.1, release.set).start()
    run_within(20, pipe.close)


def test_depth_bounds_the_source(device, rng):
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 6)
    calls = []

    def source():
        for index, image in enumerate(images):
            calls.append(index)
            yield image

    with ferry.IngressPipeline(device, source(), normalize=params, depth=2) as pipe:
        first = pipe.next(timeout=30)
        second = pipe.next(timeout=30)
        time.sleep(0.2)
        # every slot held by the application: the producer may have asked the source for one
        # more item (it asks before taking a slot, so that the end of the stream is seen), no
        # more
        assert len(calls) <= 3, calls
        with pytest.raises((ferry.TimeoutError, ferry.FailedPreconditionError)):
            pipe.next(timeout=0.1)
        assert len(calls) <= 3, calls
        first.release()
        third = pipe.next(timeout=30)
        assert third.index == 2
        check_batch(device, third, 2, images, mean, std, shape, params)
        check_batch(device, second, 1, images, mean, std, shape, params)
        second.release()
        third.release()
        rest = [b.index for b in pipe]
        assert rest == [3, 4, 5]


def test_dropped_batches_are_released(device, rng):
    params, _, _, _ = params_for(rng)
    images = random_images(rng, params, 8)
    with ferry.IngressPipeline(device, images, normalize=params, depth=2) as pipe:
        indices = []
        for _ in range(8):
            batch = run_within(30, pipe.next, timeout=20)
            indices.append(batch.index)
            del batch  # dropping a batch releases it
            gc.collect()
        assert indices == list(range(8))


def test_release_after_point(device, rng):
    """release(after=point): the next batch in that slot waits for the point on the device."""
    params, mean, std, shape = params_for(rng)
    images = random_images(rng, params, 3)
    gate = device.create_timeline()
    with ferry.IngressPipeline(device, images, normalize=params, depth=2) as pipe:
        first = pipe.next(timeout=30)
        second = pipe.next(timeout=30)
        first.release(after=gate.point(1))
        third = run_within(30, pipe.next, timeout=20)
        assert third.index == 2
        time.sleep(0.05)
        assert not third.ready.reached, "the batch reused a slot before the consumer was done"
        gate.signal(1)
        third.ready.wait(timeout=30)
        check_batch(device, third, 2, images, mean, std, shape, params)
        check_batch(device, second, 1, images, mean, std, shape, params)
        second.release()
        third.release()


def test_release_twice_and_after_release(device, rng):
    params, _, _, _ = params_for(rng)
    images = random_images(rng, params, 2)
    with ferry.IngressPipeline(device, images, normalize=params, depth=2) as pipe:
        batch = pipe.next(timeout=30)
        batch.release()
        batch.release()  # releasing an empty batch does nothing
        with pytest.raises(ferry.ReleasedError):
            device.download(batch.tensor)


def test_empty_source(device, rng):
    params, _, _, _ = params_for(rng)
    with ferry.IngressPipeline(device, [], normalize=params) as pipe:
        assert pipe.next(timeout=10) is None
        assert list(pipe) == []


def test_construction_errors(device, rng):
    params, _, _, _ = params_for(rng)
    with pytest.raises(TypeError):
        ferry.IngressPipeline(device, 42, normalize=params)
    with pytest.raises(TypeError):
        ferry.IngressPipeline(device, [], normalize="not params")
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.IngressPipeline(device, [], normalize=params, depth=1)
    with pytest.raises(ValueError):
        with ferry.IngressPipeline(device, [], normalize=params) as pipe:
            pipe.next(timeout=-1)


def test_small_chunks_and_own_pool(device, rng):
    params, mean, std, shape = params_for(rng, batch=3, height=17, width=19, channels=3)
    images = random_images(rng, params, 4)
    pool = device.create_staging_pool("host_upload", slab_bytes=1024, max_slabs=3)
    with ferry.IngressPipeline(device, images, normalize=params, depth=3, pool=pool,
                               chunk_bytes=300, host_threads=2) as pipe:
        for index, batch in enumerate(pipe):
            check_batch(device, batch, index, images, mean, std, shape, params)
            batch.release()
