"""ferry's CUDA interop with PyTorch and CuPy: zero-copy DLPack exchange, stream ordering in both
directions, and the ingress / egress pipelines feeding and draining torch tensors.

Runs only where ferry's CUDA backend is available and PyTorch with CUDA or CuPy is importable
(tests needing the one that is missing are skipped). The ordering tests put a slow kernel ahead of
the write on the producer's stream and read immediately on the consumer's side, without a host
synchronization: a missing handshake shows up as stale values, and each test also checks that
the race window was really open when the consumer started.
"""
import ctypes
import gc
import os
import struct
import sys
import threading

import numpy as np
import pytest

ferry = pytest.importorskip("ferry")

try:
    import torch

    HAVE_TORCH = torch.cuda.is_available()
except ImportError:
    torch = None
    HAVE_TORCH = False

try:
    import cupy

    HAVE_CUPY = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001 (ImportError, or CuPy present without a usable CUDA)
    cupy = None
    HAVE_CUPY = False


def _ferry_cuda_available():
    return any(info.backend == "cuda" and info.available and info.devices
               for info in ferry.list_backends())


if not (HAVE_TORCH or HAVE_CUPY):
    pytest.skip("needs PyTorch with CUDA or CuPy", allow_module_level=True)
# FERRY_REQUIRE=cuda (conftest.py): then a missing CUDA backend fails (the fixture's open) instead.
if not _ferry_cuda_available() and "cuda" not in os.environ.get("FERRY_REQUIRE", ""):
    pytest.skip("ferry's CUDA backend is not available here", allow_module_level=True)

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="needs PyTorch with CUDA")
needs_cupy = pytest.mark.skipif(not HAVE_CUPY, reason="needs CuPy")

MiB = 1 << 20
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST = 1, 2, 3
BIG = 64 * MiB  # float32 elements: 256 MiB, long enough to copy that a missed wait shows
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TIMEOUT = 60.0  # seconds, for every ferry wait: a hang becomes a failure


# ---------------------------------------------------------------------------------------------
# Fixtures and helpers

@pytest.fixture(scope="module")
def dev():
    if HAVE_TORCH:
        torch.cuda.init()
    device = ferry.Device.open("cuda")
    try:
        yield device
    finally:
        # Let the tests' torch / cupy views of ferry memory go before the device does.
        gc.collect()
        if HAVE_TORCH:
            torch.cuda.synchronize()
        if HAVE_CUPY:
            cupy.cuda.runtime.deviceSynchronize()
        device.close()


@pytest.fixture(scope="module")
def gpu_sleep():
    """gpu_sleep(ms): a kernel that keeps torch's current stream busy for about ms milliseconds."""
    if not HAVE_TORCH:
        pytest.skip("needs PyTorch with CUDA")
    if hasattr(torch.cuda, "_sleep"):
        def spin(units):
            torch.cuda._sleep(int(units))
        unit_probe = 20_000_000  # cycles
    else:  # no _sleep in this torch: in-place passes over a 128 MiB tensor
        scratch = torch.ones(32 * MiB, device="cuda")

        def spin(units):
            for _ in range(int(units)):
                scratch.mul_(1.0)
        unit_probe = 50
    spin(unit_probe)  # warm-up (module load)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    spin(unit_probe)
    end.record()
    end.synchronize()
    per_ms = unit_probe / max(start.elapsed_time(end), 1e-3)
    return lambda ms: spin(max(1, ms * per_ms))


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_address(obj):
    """(address, DLPack device type) of what obj exports, read from its capsule directly: the
    native address, independent of any consumer. The capsule is not consumed (its destructor
    frees it)."""
    capsule = obj.__dlpack__()
    name = _capsule_name(capsule)
    managed = _capsule_pointer(capsule, name)
    # DLManagedTensorVersioned: version (8 bytes), manager_ctx, deleter, flags, then the DLTensor;
    # the legacy DLManagedTensor starts with the DLTensor.
    tensor = managed + (32 if name == b"dltensor_versioned" else 0)
    data = ctypes.c_void_p.from_address(tensor).value or 0
    device_type = ctypes.c_int32.from_address(tensor + 8).value
    byte_offset = ctypes.c_uint64.from_address(tensor + 40).value
    return data + byte_offset, device_type


def float_bits(value):
    """A float32's bits as the uint32 fill pattern."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def normalize_params(batch, height, width, output_layout="nchw"):
    return ferry.NormalizeParams(
        batch, height, width, 3, layout="nhwc",
        mean=tuple(m * 255.0 for m in IMAGENET_MEAN) + (0.0,),
        std=tuple(s * 255.0 for s in IMAGENET_STD) + (1.0,),
        output_type="float32", output_layout=output_layout)


def normalize_reference(u8_nhwc):
    """ferry's normalize of a uint8 NHWC batch, NCHW float32 on the GPU: fma(x, float(1/std'),
    float(-mean'/std')) emulated in float64 (at most one float32 ulp from the fma)."""
    x = torch.from_numpy(u8_nhwc).cuda().permute(0, 3, 1, 2).double()
    scale = [float(np.float32(1.0 / (s * 255.0))) for s in IMAGENET_STD]
    bias = [float(np.float32(-(m * 255.0) / (s * 255.0))) for m, s in zip(IMAGENET_MEAN, IMAGENET_STD)]
    scale = torch.tensor(scale, dtype=torch.float64, device="cuda").view(1, 3, 1, 1)
    bias = torch.tensor(bias, dtype=torch.float64, device="cuda").view(1, 3, 1, 1)
    return (x * scale + bias).float().contiguous()


def torchvision_style(u8_nhwc):
    x = torch.from_numpy(u8_nhwc).cuda().permute(0, 3, 1, 2).float() / 255
    mean = torch.tensor(IMAGENET_MEAN, device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device="cuda").view(1, 3, 1, 1)
    return (x - mean) / std


def random_batches(count, batch, height, width, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(batch, height, width, 3), dtype=np.uint8)
            for _ in range(count)]


# ---------------------------------------------------------------------------------------------
# Zero copy

@needs_torch
def test_torch_views_ferry_tensor_without_copy(dev):
    n = 1 * MiB
    t = dev.empty((n,), "float32")
    assert t.__dlpack_device__()[0] == KDL_CUDA
    native, device_type = dlpack_address(t)
    assert device_type == KDL_CUDA
    a = torch.from_dlpack(t)
    b = torch.from_dlpack(t)
    assert a.is_cuda and a.dtype == torch.float32 and tuple(a.shape) == (n,)
    assert a.data_ptr() == b.data_ptr() == native
    # A write through torch is in ferry's memory.
    a.copy_(torch.arange(n, dtype=torch.float32, device="cuda"))
    torch.cuda.synchronize()
    np.testing.assert_array_equal(dev.download(t), np.arange(n, dtype=np.float32))


@needs_torch
def test_torch_view_keeps_shape_and_dtype(dev):
    t = dev.empty((4, 256, 3), "float16")
    x = torch.from_dlpack(t)
    assert tuple(x.shape) == (4, 256, 3) and x.dtype == torch.float16 and x.is_contiguous()
    assert x.data_ptr() == dlpack_address(t)[0]


@needs_torch
def test_torch_round_trip_is_zero_copy(dev):
    n = 1 * MiB
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    f = ferry.from_dlpack(x, dev)
    assert f.memory_kind == "device"
    assert tuple(f.shape) == (n,) and getattr(f.dtype, "name", f.dtype) == "float32"
    assert torch.from_dlpack(f).data_ptr() == x.data_ptr()
    assert dlpack_address(f)[0] == x.data_ptr()
    np.testing.assert_array_equal(dev.download(f), np.arange(n, dtype=np.float32))

    # A view at an offset, and a 2-D view, keep their address and shape.
    tail = x[1000:]
    ft = ferry.from_dlpack(tail, dev)
    assert torch.from_dlpack(ft).data_ptr() == tail.data_ptr()
    np.testing.assert_array_equal(dev.download(ft), np.arange(1000, n, dtype=np.float32))
    grid = x.view(1024, -1)
    fg = ferry.from_dlpack(grid, dev)
    assert tuple(fg.shape) == (1024, n // 1024)
    assert torch.from_dlpack(fg).data_ptr() == x.data_ptr()


@needs_torch
def test_from_dlpack_refuses_non_contiguous(dev):
    x = torch.zeros(64, 32, device="cuda").t()
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.from_dlpack(x, dev)


@needs_torch
def test_pinned_torch_tensor_is_used_as_it_is(dev):
    n = 1 * MiB
    p = torch.arange(n, dtype=torch.float32).pin_memory()
    f = ferry.from_dlpack(p, dev)
    assert str(f.memory_kind).startswith("host")  # host_upload by default
    assert f.__dlpack_device__()[0] == KDL_CUDA_HOST
    assert dlpack_address(f) == (p.data_ptr(), KDL_CUDA_HOST)
    # NumPy takes kDLCUDAHost: the same memory, no copy.
    a = np.from_dlpack(f)
    assert a.ctypes.data == p.data_ptr()
    np.testing.assert_array_equal(a, np.arange(n, dtype=np.float32))
    assert f.numpy().ctypes.data == p.data_ptr()
    # The device reads it by DMA.
    d = dev.empty((n,), "float32")
    commands = ferry.CommandList()
    commands.copy(f, d)
    dev.queue("upload").submit(commands).wait(timeout=TIMEOUT)
    np.testing.assert_array_equal(dev.download(d), np.arange(n, dtype=np.float32))


def test_pageable_numpy_array_is_registered(dev):
    n = 1 * MiB
    arr = np.arange(n, dtype=np.float32)
    f = ferry.from_dlpack(arr, dev)
    assert str(f.memory_kind).startswith("host")
    assert f.__dlpack_device__()[0] == KDL_CUDA_HOST
    assert np.from_dlpack(f).ctypes.data == arr.ctypes.data
    d = dev.empty((n,), "float32")
    commands = ferry.CommandList()
    commands.copy(f, d)
    dev.queue("upload").submit(commands).wait(timeout=TIMEOUT)
    np.testing.assert_array_equal(dev.download(d), arr)
    del f, d  # unregisters the array's memory
    gc.collect()


def test_lease_exports_pinned_memory_to_numpy(dev):
    pool = dev.create_staging_pool(kind="host_readback", slab_bytes=4 * MiB, max_slabs=2)
    with pool.acquire(MiB, timeout=TIMEOUT) as lease:
        assert lease.__dlpack_device__()[0] == KDL_CUDA_HOST
        a = np.from_dlpack(lease)  # kDLCUDAHost, accepted by NumPy
        assert a.dtype == np.uint8 and a.size == lease.size
        view = lease.numpy()
        assert a.ctypes.data == view.ctypes.data == dlpack_address(lease)[0]
        # Shared memory: a write through the lease's memoryview is seen by both arrays.
        pattern = bytes(range(256)) * 4
        lease.data[: len(pattern)] = pattern
        assert bytes(a[: len(pattern)]) == pattern
        assert bytes(view[: len(pattern)]) == pattern
        del a, view


@needs_cupy
def test_cupy_views_ferry_tensor_without_copy(dev):
    n = 1 * MiB
    t = dev.empty((n,), "float32")
    c = cupy.from_dlpack(t)
    assert c.data.ptr == dlpack_address(t)[0]
    assert c.dtype == cupy.float32 and c.shape == (n,)
    c[...] = cupy.arange(n, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(dev.download(t), np.arange(n, dtype=np.float32))


@needs_cupy
def test_cupy_round_trip_is_zero_copy(dev):
    n = 1 * MiB
    x = cupy.arange(n, dtype=cupy.float32)
    f = ferry.from_dlpack(x, dev)
    assert f.memory_kind == "device"
    assert cupy.from_dlpack(f).data.ptr == x.data.ptr
    np.testing.assert_array_equal(dev.download(f), np.arange(n, dtype=np.float32))


# ---------------------------------------------------------------------------------------------
# Stream ordering

@needs_torch
@pytest.mark.parametrize("where", ["side_stream", "default_stream"])
def test_torch_writes_ferry_reads_in_order(dev, gpu_sleep, where):
    """A torch stream's late write is what ferry reads after from_dlpack: the handshake orders
    ferry behind torch's current stream, with no host synchronization in between."""
    x = torch.zeros(BIG, device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream() if where == "side_stream" else torch.cuda.current_stream()
    window_open = []
    for v in (1.0, 2.0, 3.0, 4.0):
        with torch.cuda.stream(s):
            gpu_sleep(50)
            x.fill_(v)
            f = ferry.from_dlpack(x, dev)  # must be called with the producing stream current
        window_open.append(not s.query())
        host = dev.download(f)
        assert host.min() == v and host.max() == v, (
            f"ferry read {host.min()}..{host.max()} instead of {v}: not ordered after torch")
    assert any(window_open), "torch's work was already done each time: the test proved nothing"


@needs_torch
def test_torch_stream_point_orders_ferry_queue(dev, gpu_sleep):
    """Queue.point_after_stream: ferry work waits for a torch stream, for memory wrapped once."""
    x = torch.zeros(BIG, device="cuda")
    torch.cuda.synchronize()
    f = ferry.from_dlpack(x, dev)  # wrapped once; later writes are ordered by explicit points
    dst = dev.empty((BIG,), "float32")
    compute = dev.queue("compute")
    s = torch.cuda.Stream()
    window_open = []
    for v in (5.0, 6.0, 7.0):
        with torch.cuda.stream(s):
            gpu_sleep(50)
            x.fill_(v)
        point = compute.point_after_stream(s)
        window_open.append(not point.reached)
        commands = ferry.CommandList()
        commands.copy(f, dst)
        compute.submit(commands, wait=[point]).wait(timeout=TIMEOUT)
        # dst's contents were waited for above; download it as a plain buffer copy.
        host = dev.download(dst)
        assert host.min() == v and host.max() == v
    assert any(window_open)


def _slow_fill(dev, dst, value, host_src, scratch_a, scratch_b):
    """A fill of dst behind ~10-20 ms of other work on the same (compute) queue submission."""
    commands = ferry.CommandList()
    commands.copy(host_src, scratch_a)  # 256 MiB over PCIe
    for _ in range(8):
        commands.copy(scratch_a, scratch_b)
        commands.copy(scratch_b, scratch_a)
    commands.fill(dst, float_bits(value))
    return dev.queue("compute").submit(commands)


@needs_torch
@pytest.mark.parametrize("order", ["dlpack_handshake", "explicit_point"])
def test_ferry_writes_torch_reads_in_order(dev, order):
    """ferry's late fill is what a torch stream reads right after the submit.

    dlpack_handshake: torch.from_dlpack(tensor) alone orders torch's stream after the fill; this
    assumes the submit made the fill's completion the written tensor's `ready` point.
    explicit_point: the submit's point, waited for on torch's stream with wait_on_stream."""
    dst = dev.empty((BIG,), "float32")
    scratch_a = dev.empty((BIG,), "float32")
    scratch_b = dev.empty((BIG,), "float32")
    host_src = dev.create_buffer(BIG * 4, kind="host_upload")
    # Start from known contents.
    commands = ferry.CommandList()
    commands.fill(dst, float_bits(-1.0))
    dev.queue("compute").submit(commands).wait(timeout=TIMEOUT)
    s = torch.cuda.Stream()
    window_open = []
    for v in (1.5, 2.5, 3.5, 4.5):
        point = _slow_fill(dev, dst, v, host_src, scratch_a, scratch_b)
        if order == "explicit_point":
            point.wait_on_stream(s)
        with torch.cuda.stream(s):
            y = torch.from_dlpack(dst)
            lo, hi = y.min(), y.max()  # enqueued at once, read below
        window_open.append(not point.reached)
        s.synchronize()  # lo and hi live on s: .item() copies on the current stream
        lo, hi = lo.item(), hi.item()
        assert lo == v and hi == v, (
            f"torch read {lo}..{hi} instead of {v}: not ordered after ferry's fill"
            + (" (does submit() update the written tensor's ready point?)"
               if order == "dlpack_handshake" else ""))
    assert any(window_open), "ferry's fill was already done each time: the test proved nothing"


@needs_torch
def test_uploaded_tensor_is_ready_for_torch(dev):
    """device.upload's tensor is `ready` at the copy's completion: torch reads it right away."""
    dst = dev.empty((BIG,), "float32")
    s = torch.cuda.Stream()
    for v in (1.0, 2.0, 3.0):
        t = dev.upload(np.full(BIG, v, dtype=np.float32), dst)
        with torch.cuda.stream(s):
            y = torch.from_dlpack(t)
            lo, hi = y.min(), y.max()
        s.synchronize()  # lo and hi live on s: .item() copies on the current stream
        assert lo.item() == v and hi.item() == v


@needs_cupy
def test_cupy_writes_ferry_reads_in_order(dev):
    x = cupy.zeros(BIG, dtype=cupy.float32)
    busy = cupy.ones(BIG, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    window_open = []
    for v in (1.0, 2.0, 3.0):
        with s:
            for _ in range(60):  # ~20 ms of passes over 256 MiB ahead of the write
                cupy.multiply(busy, 1.0, out=busy)
            x.fill(v)
            f = ferry.from_dlpack(x, dev)
        window_open.append(not s.done)
        host = dev.download(f)
        assert host.min() == v and host.max() == v
    assert any(window_open)


# ---------------------------------------------------------------------------------------------
# Ingress

@needs_torch
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_ingress_batches_feed_torch(dev, layout):
    batches = random_batches(6, 8, 32, 48)
    params = normalize_params(8, 32, 48, output_layout=layout)
    assert params.input_bytes == batches[0].nbytes
    expected_shape = (8, 3, 32, 48) if layout == "nchw" else (8, 32, 48, 3)
    assert tuple(params.output_shape) == expected_shape
    seen = 0
    with ferry.IngressPipeline(dev, batches, normalize=params, depth=3) as pipe:
        while True:
            batch = pipe.next(timeout=TIMEOUT)
            if batch is None:
                break
            with batch:
                assert batch.index == seen
                x = torch.from_dlpack(batch.tensor)
                assert x.is_cuda and x.dtype == torch.float32 and tuple(x.shape) == expected_shape
                if layout == "nhwc":
                    x = x.permute(0, 3, 1, 2)  # channels_last NCHW, no copy
                torch.testing.assert_close(x, normalize_reference(batches[seen]), rtol=0, atol=1e-6)
                torch.testing.assert_close(x, torchvision_style(batches[seen]), rtol=1e-5, atol=1e-5)
                del x
            seen += 1
    assert seen == len(batches)


@needs_torch
@pytest.mark.parametrize("mode", ["release_after_stream", "drop", "context_manager"])
def test_ingress_slot_not_reused_before_torch_is_done(dev, gpu_sleep, mode):
    """A slow torch consumer on a side stream: with depth 2, batch i+2 reuses batch i's tensor,
    and must not be written before the consumer's kernels (queued before the release) ran."""
    count = 8
    batches = random_batches(count, 4, 64, 64, seed=1)
    refs = [normalize_reference(b).double().sum().item() for b in batches]
    params = normalize_params(4, 64, 64)
    s = torch.cuda.Stream()
    sums = []
    window_open = []

    def consume(batch):
        with torch.cuda.stream(s):
            x = torch.from_dlpack(batch.tensor)  # exported to s
            gpu_sleep(20)
            sums.append(x.double().sum())  # reads the tensor 20 ms after the release below

    with ferry.IngressPipeline(dev, batches, normalize=params, depth=2) as pipe:
        refcounts = []
        for i in range(count):
            try:
                batch = pipe.next(timeout=TIMEOUT)
            except ferry.Error as error:
                pytest.fail(f"next() for batch {i} (refcounts before del: {refcounts}): {error}")
            # Not a plain `assert`: pytest's rewriting keeps the values an assert names, and
            # "drop" needs `del batch` below to drop the last reference.
            if batch is None or batch.index != i:
                pytest.fail(f"expected batch {i}")
            if mode == "context_manager":
                with batch:
                    consume(batch)
            else:
                consume(batch)
                if mode == "release_after_stream":
                    batch.release(after=s)
            window_open.append(not s.query())
            refcounts.append(sys.getrefcount(batch))  # 2 (the name and the call's argument)
            del batch  # "drop": the last reference goes here, releasing behind s
        assert pipe.next(timeout=TIMEOUT) is None
    torch.cuda.synchronize()
    got = [t.item() for t in sums]
    for i, (g, r) in enumerate(zip(got, refs)):
        closest = min(range(count), key=lambda j: abs(refs[j] - g))
        assert abs(g - r) <= 0.05, (
            f"batch {i}: the consumer summed {g}, expected {r} (closest: batch {closest}'s "
            f"{refs[closest]}): its tensor was overwritten while torch still used it")
    assert any(window_open)


# ---------------------------------------------------------------------------------------------
# Egress

class _Collector:
    """An egress consumer that keeps every step's bytes (checked on the main thread)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.steps = {}
        self.chunks = []

    def __call__(self, chunk):
        with self.lock:
            buf = self.steps.get(chunk.step)
            if buf is None:
                buf = self.steps[chunk.step] = np.zeros(chunk.step_bytes, dtype=np.uint8)
            self.chunks.append((chunk.step, chunk.index, chunk.count, chunk.offset, len(chunk.data)))
        buf[chunk.offset: chunk.offset + len(chunk.data)] = np.frombuffer(chunk.data, dtype=np.uint8)


@needs_torch
def test_egress_of_torch_outputs(dev, gpu_sleep):
    """Outputs written late on torch's stream, wrapped by from_dlpack: the download waits for
    the write (the handshake's ready point); two outputs alternate, each overwrite ordered after
    the previous download of it (output_read on torch's stream)."""
    n = 4 * MiB  # float32: 16 MiB, 4 chunks of 4 MiB
    steps = 6
    base = torch.arange(n, device="cuda", dtype=torch.float32).remainder_(100_000)
    outs = [torch.full((n,), -1.0, device="cuda") for _ in range(2)]
    tickets = [None, None]
    collect = _Collector()
    cur = torch.cuda.current_stream()
    with ferry.EgressPipeline(dev, collect, workers=2, max_pending_steps=2,
                              chunk_bytes=4 * MiB) as pipe:
        for step in range(steps):
            slot = step % 2
            if tickets[slot] is not None:
                tickets[slot].output_read.wait_on_stream(cur)
            gpu_sleep(10)  # the output is late: a download not waiting for it reads -1 or old data
            torch.add(base, step * 100_000.0, out=outs[slot])
            ticket = pipe.push(ferry.from_dlpack(outs[slot], dev))
            assert ticket.step == step
            tickets[slot] = ticket
        pipe.drain(timeout=TIMEOUT)
        stats = pipe.stats
    expected_base = (np.arange(n) % 100_000).astype(np.float32)
    assert sorted(collect.steps) == list(range(steps))
    for step in range(steps):
        got = collect.steps[step].view(np.float32)
        np.testing.assert_array_equal(got, expected_base + np.float32(step * 100_000),
                                      err_msg=f"step {step}")
        chunks = sorted(c for c in collect.chunks if c[0] == step)
        assert [c[1] for c in chunks] == [0, 1, 2, 3] and all(c[2] == 4 for c in chunks)
        assert [c[3] for c in chunks] == [0, 4 * MiB, 8 * MiB, 12 * MiB]
    assert stats["steps_consumed"] == steps and stats["consumer_errors"] == 0


@needs_torch
def test_egress_output_read_orders_overwrite(dev):
    """One output reused every step with no host wait: each fill is ordered (on torch's stream)
    after the download of the previous step read the output, so every step arrives whole."""
    n = 16 * MiB  # float32: 64 MiB per step, ~1-3 ms to download, the fill ~0.05 ms
    steps = 8
    out = torch.zeros(n, device="cuda")
    ranges = {}
    lock = threading.Lock()

    def consumer(chunk):
        a = np.frombuffer(chunk.data, dtype=np.float32)
        lo, hi = float(a.min()), float(a.max())
        with lock:
            old = ranges.get(chunk.step, (lo, hi))
            ranges[chunk.step] = (min(old[0], lo), max(old[1], hi))

    cur = torch.cuda.current_stream()
    ticket = None
    with ferry.EgressPipeline(dev, consumer, workers=2, max_pending_steps=4,
                              chunk_bytes=8 * MiB) as pipe:
        for step in range(steps):
            if ticket is not None:
                ticket.output_read.wait_on_stream(cur)
            out.fill_(float(step))
            ticket = pipe.push(ferry.from_dlpack(out, dev))
        pipe.drain(timeout=TIMEOUT)
    assert ranges == {step: (float(step), float(step)) for step in range(steps)}


@needs_torch
def test_egress_consumer_error_is_raised(dev):
    def consumer(chunk):
        raise RuntimeError("consumer failed on purpose")

    out = torch.ones(MiB, device="cuda")
    pipe = ferry.EgressPipeline(dev, consumer, workers=1, max_pending_steps=2)
    try:
        pipe.push(ferry.from_dlpack(out, dev))
        with pytest.raises(ferry.Error, match="consumer failed on purpose"):
            pipe.drain(timeout=TIMEOUT)
    finally:
        try:
            pipe.close(mode="cancel")
        except ferry.Error:
            pass  # close reports the same stopping error again
