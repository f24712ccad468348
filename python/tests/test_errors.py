"""Every string-valued argument refuses a bad name with InvalidArgumentError (a ValueError), every
timeout refuses a negative or NaN value with ValueError, and ferry errors carry code / message /
where."""

from __future__ import annotations

import numpy as np
import pytest

import ferry

BAD = "dev"


def bad_name_calls(device):
    buf = device.create_buffer(64)
    out = device.create_buffer(64)

    def consumer(chunk):
        pass

    def egress_close():
        pipe = ferry.EgressPipeline(device, consumer,
                                    pool=device.create_staging_pool("host_readback",
                                                                    slab_bytes=4096,
                                                                    max_slabs=1))
        try:
            pipe.close(BAD)
        finally:
            pipe.close()

    return {
        "create_buffer kind": lambda: device.create_buffer(8, BAD),
        "empty kind": lambda: device.empty((2,), "float32", kind=BAD),
        "empty dtype": lambda: device.empty((2,), BAD),
        "as_tensor dtype": lambda: buf.as_tensor(BAD),
        "staging pool kind": lambda: device.create_staging_pool(BAD),
        "queue kind": lambda: device.queue(BAD),
        "from_dlpack kind": lambda: ferry.from_dlpack(np.zeros(4096, np.uint8), device, kind=BAD),
        "normalize layout": lambda: ferry.NormalizeParams(1, 2, 2, 1, layout=BAD),
        "normalize output_layout": lambda: ferry.NormalizeParams(1, 2, 2, 1, output_layout=BAD),
        "normalize output_type": lambda: ferry.NormalizeParams(1, 2, 2, 1, output_type=BAD),
        "binary_quantize input_type": lambda: ferry.CommandList().binary_quantize(
            buf, out, rows=1, dims=4, input_type=BAD),
        "rescore element": lambda: ferry.CommandList().rescore(
            buf, buf, buf, out, device.create_buffer(64), dims=1, queries_count=1,
            database_rows=1, candidates_count=1, k=1, element=BAD),
        "rescore metric": lambda: ferry.CommandList().rescore(
            buf, buf, buf, out, device.create_buffer(64), dims=1, queries_count=1,
            database_rows=1, candidates_count=1, k=1, metric=BAD),
        "egress order": lambda: ferry.EgressPipeline(device, consumer, order=BAD),
        "egress on_error": lambda: ferry.EgressPipeline(device, consumer, on_error=BAD),
        "egress close mode": egress_close,
        "index metric": lambda: ferry.BinaryIndex(device, 64, metric=BAD),
        "index input_type": lambda: ferry.BinaryIndex(device, 64, input_type=BAD),
        "index threshold": lambda: ferry.BinaryIndex(device, 64, threshold=BAD),
        "index keep": lambda: ferry.BinaryIndex(device, 64, keep=BAD),
        "supports op": lambda: device.supports(BAD),
        "open backend": lambda: ferry.Device.open(BAD),
    }


BAD_NAME_CASES = ["create_buffer kind", "empty kind", "empty dtype", "as_tensor dtype",
                  "staging pool kind", "queue kind", "from_dlpack kind", "normalize layout",
                  "normalize output_layout", "normalize output_type",
                  "binary_quantize input_type", "rescore element", "rescore metric",
                  "egress order", "egress on_error", "egress close mode", "index metric",
                  "index input_type", "index threshold", "index keep", "supports op",
                  "open backend"]


@pytest.mark.parametrize("case", BAD_NAME_CASES)
def test_bad_names(device, case):
    call = bad_name_calls(device)[case]
    with pytest.raises(ferry.InvalidArgumentError) as error:
        call()
    assert isinstance(error.value, ValueError)
    assert error.value.code == "invalid_argument"
    assert BAD in error.value.message, f"the message should name the bad value: {error.value}"


def timeout_calls(device):
    tl = device.create_timeline(1)
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    params = ferry.NormalizeParams(1, 2, 2, 1)

    def consumer(chunk):
        pass

    def ingress_next(t):
        with ferry.IngressPipeline(device, [], normalize=params) as pipe:
            try:
                pipe.next(timeout=t)
            except ferry.TimeoutError:
                assert t == 0  # the producer may not have seen the end yet

    def egress_drain(t):
        pipe = ferry.EgressPipeline(device, consumer,
                                    pool=device.create_staging_pool("host_readback",
                                                                    slab_bytes=4096,
                                                                    max_slabs=1))
        try:
            pipe.drain(timeout=t)
        finally:
            pipe.close()

    return {
        "device.wait_idle": lambda t: device.wait_idle(timeout=t),
        "queue.wait_idle": lambda t: device.queue("compute").wait_idle(timeout=t),
        "timeline.wait": lambda t: tl.wait(1, timeout=t),
        "point.wait": lambda t: tl.point(1).wait(timeout=t),
        "pool.acquire": lambda t: pool.acquire(16, timeout=t),
        "ingress.next": ingress_next,
        "egress.drain": egress_drain,
    }


TIMEOUT_CASES = ["device.wait_idle", "queue.wait_idle", "timeline.wait", "point.wait",
                 "pool.acquire", "ingress.next", "egress.drain"]


@pytest.mark.parametrize("case", TIMEOUT_CASES)
@pytest.mark.parametrize("value", [-1, -0.001, float("nan")])
def test_bad_timeouts(device, case, value):
    call = timeout_calls(device)[case]
    with pytest.raises(ValueError):
        call(value)
    call(None)  # None: forever (the calls return at once here)
    call(0)
    call(2.5)


def test_device_close_negative_timeout(open_device):
    dev = open_device()
    with pytest.raises(ValueError):
        dev.close(timeout=-1)
    assert dev.is_open, "a refused close must not close"
    dev.close(timeout=10)


def test_error_fields(device):
    with pytest.raises(ferry.Error) as error:
        device.create_buffer(0)
    e = error.value
    assert type(e) is ferry.InvalidArgumentError
    assert e.code == "invalid_argument"
    assert isinstance(e.message, str) and "create_buffer" in e.message
    assert isinstance(e.where, str) and ":" in e.where  # file:line
    assert e.message in str(e)
    assert e.args and e.message in str(e.args[0])


def test_ferry_errors_are_catchable_as_builtins(device):
    with pytest.raises(ValueError):
        device.create_buffer(0)
    pool = device.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    held = pool.acquire(4096)
    with pytest.raises(TimeoutError):
        pool.acquire(1, timeout=0.01)
    held.release()


def test_wrong_types(device):
    with pytest.raises(TypeError):
        device.create_buffer("8")
    with pytest.raises((TypeError, ferry.InvalidArgumentError)):
        ferry.CommandList().copy("a", "b")
    with pytest.raises((TypeError, ferry.InvalidArgumentError)):
        device.download(np.zeros(4))
    with pytest.raises((TypeError, ferry.InvalidArgumentError)):
        device.queue("compute").submit([1, 2])
