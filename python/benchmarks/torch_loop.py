#!/usr/bin/env python3
"""Does ferry help a real PyTorch loop? Ingress and egress, each against the usual ways, one run.

Ingress: uint8 image batches held in host memory (a pool of pre-generated numpy batches, cycled)
feed a torchvision model in eval mode. Three (four) ways, the same batches and the same model:
  usual        CPU ToTensor + Normalize (torch ops on the CPU), pin_memory, .to(cuda, non_blocking)
  uint8-first  pin the uint8 batch, copy it non_blocking, convert + normalize with torch on the GPU
  ferry        ferry.IngressPipeline (upload on ferry's upload queue, normalize on the GPU),
               torch.from_dlpack(batch.tensor) (zero copy, stream handshake), release(after=stream)
  ferry pinned the same with the batch pool in ferry host_upload buffers (DMA, no staging copy)
Reported: batches/s and "GPU idle %": the share of the wall time the GPU spends outside the
model's forward (forward GPU time from CUDA events around each forward on the current stream).

Egress: a model step writes a float32 output (352 MB by default: a matmul, then + step) on the GPU;
a host consumer reads every step (a strided reduction). Three ways:
  .cpu()       out.cpu() every step (pageable, synchronous)
  pinned       two preallocated pinned host buffers and two outputs, the copy on a side stream after
               an event, the host consuming step i-1 while step i computes and copies
  ferry        ferry.EgressPipeline; each output wrapped by ferry.from_dlpack (zero copy, its ready
               point from the stream handshake), pushed; the next overwrite of that output ordered
               after ticket.output_read on torch's stream (no host wait); two outputs alternate
Reported: steps/s against the bound 1 / max(compute time, transfer time), where the transfer time
is bytes / the peak pinned D2H bandwidth measured here, and the compute time is a run without any
download. Every way's consumer is checked to have received every byte of every step, and one
step's content (every 4093rd element) against a copy taken on the GPU.

    python python/benchmarks/torch_loop.py --json out.json        (--quick for a short run)
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import platform
import sys
import threading
import time
import traceback

import numpy as np

try:
    import torch
    import torch.nn as nn
except ImportError:  # pragma: no cover
    sys.exit("torch_loop.py needs PyTorch with CUDA")

import ferry

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
MiB = 1 << 20
SAMPLE_STRIDE = 4093  # elements between the egress samples checked (prime: no alignment luck)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="few batches and steps (a smoke run)")
    p.add_argument("--json", metavar="PATH", help="write the results here as JSON")
    p.add_argument("--skip-ingress", action="store_true")
    p.add_argument("--skip-egress", action="store_true")
    p.add_argument("--model", default="resnet18",
                   help="a torchvision.models constructor name (resnet18, mobilenet_v3_small, "
                        "resnet50, ...) or 'small' (a hand-made CNN, also the fallback)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224, help="image height and width")
    p.add_argument("--batches", type=int, default=100, help="timed batches per way")
    p.add_argument("--warmup", type=int, default=10, help="untimed batches per way first")
    p.add_argument("--pool", type=int, default=8, help="pre-generated host batches, cycled")
    p.add_argument("--depth", type=int, default=3, help="ferry ingress depth")
    p.add_argument("--channels-last", action="store_true",
                   help="model and inputs channels_last (ferry then writes NHWC: a zero-copy "
                        "permute gives the channels_last NCHW view)")
    p.add_argument("--no-ferry-pinned", action="store_true",
                   help="skip the ferry way whose batch pool lives in pinned ferry buffers")
    p.add_argument("--egress-mb", type=float, default=352.0, help="output MB (1e6 bytes) per step")
    p.add_argument("--egress-k", type=int, default=2048,
                   help="inner dimension of the egress matmul (sets the compute per step)")
    p.add_argument("--steps", type=int, default=20, help="timed egress steps per way")
    p.add_argument("--egress-warmup", type=int, default=3)
    p.add_argument("--chunk-mb", type=int, default=64, help="ferry egress chunk (MiB)")
    p.add_argument("--max-pending", type=int, default=3, help="ferry egress max_pending_steps")
    p.add_argument("--workers", type=int, default=2, help="ferry egress workers")
    args = p.parse_args(argv)
    if args.quick:
        args.batches, args.warmup = min(args.batches, 20), min(args.warmup, 3)
        args.steps, args.egress_warmup = min(args.steps, 5), min(args.egress_warmup, 2)
    return args


# ---------------------------------------------------------------------------------------------
# Common

def sync():
    torch.cuda.synchronize()


class SmallCNN(nn.Sequential):
    """Stand-in when torchvision is missing: a few conv blocks, about resnet18's input stem cost."""

    def __init__(self, classes=1000):
        layers, cin = [], 3
        for cout in (32, 64, 128, 256, 512):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False),
                       nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                       nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                       nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
        super().__init__(*layers)


def build_model(name, channels_last):
    label = None
    model = None
    if name != "small":
        try:
            import torchvision

            ctor = getattr(torchvision.models, name)
            try:
                model = ctor(weights=None)  # random weights: nothing to download
            except TypeError:  # torchvision < 0.13
                model = ctor(pretrained=False)
            label = f"torchvision.models.{name} (torchvision {torchvision.__version__})"
        except (ImportError, AttributeError) as e:
            label = f"small CNN (torchvision model {name!r} unavailable: {e})"
    if model is None:
        model = SmallCNN()
        label = label or "small CNN"
    model = model.cuda().eval()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model, label


class ForwardTimer:
    """CUDA events around each timed forward, on the current stream: the model's GPU busy time."""

    def __init__(self, count):
        self.events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(count)]
        self.used = 0
        self.enabled = False

    def forward(self, model, x):
        if not self.enabled:
            return model(x)
        start, end = self.events[self.used]
        self.used += 1
        start.record()
        y = model(x)
        end.record()
        return y

    def busy_ms(self):
        return sum(s.elapsed_time(e) for s, e in self.events[:self.used])


class Clock:
    """Starts timing at batch/step `warmup` (after a device sync), stops after a final sync."""

    def __init__(self, warmup, timer=None):
        self.warmup, self.timer = warmup, timer
        self.t0 = self.t1 = None

    def tick(self, i):
        if i == self.warmup:
            sync()
            self.t0 = time.perf_counter()
            if self.timer:
                self.timer.enabled = True

    def stop(self):
        sync()
        self.t1 = time.perf_counter()
        return self.t1 - self.t0


def close_pipeline(pipe, ok):
    """Closes an egress pipeline: drains after success; after a failure cancels, and never lets
    a second error from close() hide the first."""
    if ok:
        pipe.close()
        return
    try:
        pipe.close(mode="cancel")
    except Exception as e:  # noqa: BLE001
        print(f"  (closing the pipeline after the failure: {type(e).__name__}: {e})")


def run_guarded(name, fn, results):
    """Runs one way; a failure is reported and recorded, the other ways still run."""
    print(f"  running {name} ...", flush=True)
    try:
        row = fn()
        row["method"] = name
    except Exception as e:  # noqa: BLE001 (one way failing must not lose the others' numbers)
        traceback.print_exc()
        row = {"method": name, "error": f"{type(e).__name__}: {e}"}
    results.append(row)
    return row


# ---------------------------------------------------------------------------------------------
# Ingress

def normalize_params(args, nhwc_output):
    # ferry's mean/std apply to the uint8 values: ImageNet's (for [0, 1] inputs) times 255.
    return ferry.NormalizeParams(
        args.batch, args.size, args.size, 3, layout="nhwc",
        mean=tuple(m * 255.0 for m in IMAGENET_MEAN) + (0.0,),
        std=tuple(s * 255.0 for s in IMAGENET_STD) + (1.0,),
        output_type="float32", output_layout="nhwc" if nhwc_output else "nchw")


def ferry_view(x, nhwc_output):
    # NHWC storage permuted to NCHW is exactly a channels_last tensor: no copy.
    return x.permute(0, 3, 1, 2) if nhwc_output else x


def ingress_usual(model, pool, args):
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    timer = ForwardTimer(args.batches)
    clock = Clock(args.warmup, timer)
    with torch.no_grad():
        for i in range(args.warmup + args.batches):
            clock.tick(i)
            b = torch.from_numpy(pool[i % len(pool)])
            # torchvision ToTensor (HWC uint8 -> CHW float / 255) then Normalize, on the CPU.
            x = b.permute(0, 3, 1, 2).contiguous(memory_format=fmt).float().div_(255)
            x = x.sub_(mean).div_(std)
            x = x.pin_memory().to("cuda", non_blocking=True)
            timer.forward(model, x)
    return ingress_row(clock.stop(), timer, args)


def ingress_uint8_torch(model, pool, args):
    mean = torch.tensor([m * 255.0 for m in IMAGENET_MEAN], device="cuda").view(1, 3, 1, 1)
    std = torch.tensor([s * 255.0 for s in IMAGENET_STD], device="cuda").view(1, 3, 1, 1)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    shape = (args.batch, 3, args.size, args.size)
    timer = ForwardTimer(args.batches)
    clock = Clock(args.warmup, timer)
    with torch.no_grad():
        for i in range(args.warmup + args.batches):
            clock.tick(i)
            u8 = torch.from_numpy(pool[i % len(pool)]).pin_memory().to("cuda", non_blocking=True)
            x = torch.empty(shape, device="cuda", memory_format=fmt)
            x.copy_(u8.permute(0, 3, 1, 2))  # uint8 NHWC -> float32 NCHW in one kernel
            x.sub_(mean).div_(std)
            timer.forward(model, x)
    return ingress_row(clock.stop(), timer, args)


def torch_reference(u8_batch):
    """The same normalize with torch on the GPU, torchvision's way ((x/255 - mean) / std) and
    ferry's exact one (fma(x, float(1/std'), float(-mean'/std')), emulated in float64)."""
    x = torch.from_numpy(u8_batch).cuda().permute(0, 3, 1, 2).float()
    mean = torch.tensor(IMAGENET_MEAN, device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device="cuda").view(1, 3, 1, 1)
    usual = (x / 255 - mean) / std
    scale = [float(np.float32(1.0 / (s * 255.0))) for s in IMAGENET_STD]
    bias = [float(np.float32(-(m * 255.0) / (s * 255.0))) for m, s in zip(IMAGENET_MEAN, IMAGENET_STD)]
    scale = torch.tensor(scale, dtype=torch.float64, device="cuda").view(1, 3, 1, 1)
    bias = torch.tensor(bias, dtype=torch.float64, device="cuda").view(1, 3, 1, 1)
    exact = (x.double() * scale + bias).float()
    return usual, exact


def check_ingress(x, u8_batch):
    usual, exact = torch_reference(u8_batch)
    x = x.float()
    return {
        "max_abs_diff_vs_torch": (x - usual).abs().max().item(),
        "max_abs_diff_vs_fma_emulation": (x - exact).abs().max().item(),
        "ok": bool(torch.allclose(x, usual, rtol=1e-5, atol=1e-5)),
    }


def ingress_ferry(device, model, pool, args, pinned):
    nhwc = args.channels_last
    params = normalize_params(args, nhwc)
    if params.input_bytes != pool[0].nbytes:
        raise RuntimeError(f"NormalizeParams.input_bytes {params.input_bytes} != batch bytes "
                           f"{pool[0].nbytes}")
    items = pinned_pool(device, pool) if pinned else pool
    total = args.warmup + args.batches

    def source():
        # Runs on the pipeline's thread; a pageable item is read before the next is asked for.
        for i in range(total):
            yield items[i % len(items)]

    timer = ForwardTimer(args.batches)
    clock = Clock(args.warmup, timer)
    check = None
    stream = torch.cuda.current_stream()
    pipe = ferry.IngressPipeline(device, source(), normalize=params, depth=args.depth)
    try:
        with torch.no_grad():
            for i in range(total):
                clock.tick(i)
                batch = pipe.next(timeout=120)
                if batch is None:
                    raise RuntimeError(f"the ingress pipeline ended after {i} of {total} batches")
                try:
                    # Zero copy; torch's current stream waits for the batch on the device.
                    x = ferry_view(torch.from_dlpack(batch.tensor), nhwc)
                    if i == 0:
                        check = check_ingress(x, pool[0])
                    timer.forward(model, x)
                    x = None
                finally:
                    # The slot is reused only once the stream's work so far (the model) is done.
                    batch.release(after=stream)
        wall = clock.stop()
    finally:
        pipe.close()  # stops the producer; batches already taken were released above
    row = ingress_row(wall, timer, args)
    row["correctness"] = check
    return row


def pinned_pool(device, pool):
    """The batch pool copied into ferry host_upload (pinned) buffers: the pipeline DMAs them."""
    bufs = []
    for arr in pool:
        buf = device.create_buffer(arr.nbytes, kind="host_upload")
        view = writable_host_array(buf)
        view[:] = arr.reshape(-1)
        bufs.append(buf)
    return bufs


def writable_host_array(buf):
    try:
        view = np.frombuffer(buf.host_view(), dtype=np.uint8)
        if view.flags.writeable:
            return view
    except (AttributeError, TypeError, ValueError, BufferError):
        pass
    view = np.from_dlpack(buf)  # writable only through a versioned (DLPack 1.x) capsule
    if not view.flags.writeable:
        raise RuntimeError("no writable host view of a host_upload Buffer (host_view() and "
                           "np.from_dlpack both read-only)")
    return view.reshape(-1)


def ingress_row(wall, timer, args):
    busy = timer.busy_ms() / 1e3
    return {
        "batches": args.batches,
        "wall_s": wall,
        "batches_per_s": args.batches / wall,
        "images_per_s": args.batches * args.batch / wall,
        "ms_per_batch": wall / args.batches * 1e3,
        "model_gpu_ms_per_batch": busy / args.batches * 1e3,
        "gpu_idle_pct": max(0.0, 100.0 * (1.0 - busy / wall)),
    }


def bench_ingress(device, args):
    print(f"\n== Ingress: {args.batch}x{args.size}x{args.size}x3 uint8 batches, "
          f"{args.batches} timed after {args.warmup} warm-up, pool of {args.pool}")
    rng = np.random.default_rng(0)
    pool = [rng.integers(0, 256, size=(args.batch, args.size, args.size, 3), dtype=np.uint8)
            for _ in range(args.pool)]
    model, label = build_model(args.model, args.channels_last)
    print(f"  model: {label}{', channels_last' if args.channels_last else ''}")
    # Model warm-up (cudnn.benchmark picks its algorithms here, not in the first way's loop).
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    with torch.no_grad():
        x = torch.randn(args.batch, 3, args.size, args.size, device="cuda").contiguous(memory_format=fmt)
        for _ in range(5):
            model(x)
        sync()
        t = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t[0].record()
        for _ in range(10):
            model(x)
        t[1].record()
        sync()
    model_ms = t[0].elapsed_time(t[1]) / 10
    print(f"  model alone (resident input): {model_ms:.2f} ms/batch = {1e3 / model_ms:.1f} batches/s")
    del x

    rows = []
    run_guarded("usual (CPU normalize, pinned float32 copy)",
                lambda: ingress_usual(model, pool, args), rows)
    run_guarded("uint8-first (torch: pinned uint8 copy, GPU normalize)",
                lambda: ingress_uint8_torch(model, pool, args), rows)
    run_guarded("ferry IngressPipeline (pageable pool)",
                lambda: ingress_ferry(device, model, pool, args, pinned=False), rows)
    if not args.no_ferry_pinned:
        run_guarded("ferry IngressPipeline (pinned pool)",
                    lambda: ingress_ferry(device, model, pool, args, pinned=True), rows)

    print()
    print(f"  {'way':<56}{'batches/s':>10}{'ms/batch':>10}{'model ms':>10}{'GPU idle':>10}")
    for r in rows:
        if "error" in r:
            print(f"  {r['method']:<56}  FAILED: {r['error']}")
            continue
        print(f"  {r['method']:<56}{r['batches_per_s']:>10.1f}{r['ms_per_batch']:>10.2f}"
              f"{r['model_gpu_ms_per_batch']:>10.2f}{r['gpu_idle_pct']:>9.1f}%")
    for r in rows:
        c = r.get("correctness")
        if c:
            print(f"  check ({r['method']}): max |ferry - torch (x/255-mean)/std| = "
                  f"{c['max_abs_diff_vs_torch']:.3g}, vs fma emulation "
                  f"{c['max_abs_diff_vs_fma_emulation']:.3g} -> {'OK' if c['ok'] else 'MISMATCH'}")
    print("  GPU idle = share of the wall time the GPU spends outside the model's forward "
          "(forward time from CUDA events).")
    return {"model": label, "channels_last": args.channels_last, "batch": args.batch,
            "size": args.size, "pool": args.pool, "warmup": args.warmup,
            "model_only_ms_per_batch": model_ms, "methods": rows}


# ---------------------------------------------------------------------------------------------
# Egress

class EgressWork:
    """The model step: a matmul writing the (rows x 8000) float32 output, then + step (so that
    every step's content differs)."""

    COLS = 8000

    def __init__(self, args):
        elements = int(round(args.egress_mb * 1e6 / 4 / self.COLS)) * self.COLS
        self.rows = elements // self.COLS
        self.elements = elements
        self.nbytes = elements * 4
        g = torch.Generator(device="cuda")
        g.manual_seed(0)
        k = args.egress_k
        self.a = torch.randn(self.rows, k, device="cuda", generator=g) / math.sqrt(k)
        self.b = torch.randn(k, self.COLS, device="cuda", generator=g)

    def new_output(self):
        return torch.empty(self.rows, self.COLS, device="cuda")

    def compute(self, out, step):
        torch.mm(self.a, self.b, out=out)
        out.add_(float(step))


class HostConsumer:
    """The host's work on every step: a strided float64 sum (cheap, touches every chunk). Counts
    the bytes each step delivered, and keeps the samples of one step to check against the GPU."""

    def __init__(self, work, verify_step):
        self.nbytes = work.nbytes
        self.lock = threading.Lock()
        self.bytes_by_step = collections.defaultdict(int)
        self.checksum = 0.0
        self.verify_step = verify_step
        self.samples = np.full(-(-work.elements // SAMPLE_STRIDE), np.nan, dtype=np.float32)
        self.expected = None  # the verify step's samples, copied on the GPU when it was computed

    def expect(self, step, out):
        if step == self.verify_step:
            self.expected = out.view(-1)[::SAMPLE_STRIDE].clone()  # ordered on torch's stream

    def consume(self, step, elem_offset, arr):
        first = (-elem_offset) % SAMPLE_STRIDE
        vals = arr[first::SAMPLE_STRIDE]
        total = float(vals.sum(dtype=np.float64))
        if step == self.verify_step:
            g0 = (elem_offset + first) // SAMPLE_STRIDE
            self.samples[g0:g0 + len(vals)] = vals
        with self.lock:
            self.bytes_by_step[step] += arr.nbytes
            self.checksum += total

    def ferry_chunk(self, chunk):
        if chunk.offset % 4:
            raise ValueError(f"chunk offset {chunk.offset} is not a float32 boundary")
        if chunk.step_bytes != self.nbytes:
            raise ValueError(f"step_bytes {chunk.step_bytes} != {self.nbytes}")
        self.consume(chunk.step, chunk.offset // 4, np.frombuffer(chunk.data, dtype=np.float32))

    def verdict(self, steps):
        short = {s: self.bytes_by_step.get(s, 0) for s in range(steps)
                 if self.bytes_by_step.get(s, 0) != self.nbytes}
        content_ok = (self.expected is not None and
                      np.array_equal(self.samples, self.expected.cpu().numpy()))
        return {"all_bytes_received": not short,
                "steps_with_wrong_byte_count": {str(k): v for k, v in list(short.items())[:5]},
                "content_ok": bool(content_ok), "verified_step": self.verify_step}


def egress_cpu(work, args):
    total = args.egress_warmup + args.steps
    consumer = HostConsumer(work, args.egress_warmup + args.steps // 2)
    out = work.new_output()
    clock = Clock(args.egress_warmup)
    for i in range(total):
        clock.tick(i)
        work.compute(out, i)
        consumer.expect(i, out)
        host = out.cpu()  # pageable, synchronous
        consumer.consume(i, 0, host.view(-1).numpy())
    return egress_row(clock.stop(), work, args, consumer.verdict(total))


def egress_pinned(work, args):
    total = args.egress_warmup + args.steps
    consumer = HostConsumer(work, args.egress_warmup + args.steps // 2)
    outs = [work.new_output(), work.new_output()]
    host = [torch.empty(work.elements, dtype=torch.float32, pin_memory=True) for _ in range(2)]
    side = torch.cuda.Stream()
    copied = [None, None]  # the event after the last copy out of outs[slot] into host[slot]
    cur = torch.cuda.current_stream()

    def consume(step, slot):
        copied[slot].synchronize()
        consumer.consume(step, 0, host[slot].numpy())

    def run(first, count):
        pending = None
        for i in range(first, first + count):
            slot = i % 2
            if copied[slot] is not None:
                cur.wait_event(copied[slot])  # the copy of step i-2 has read outs[slot]
            work.compute(outs[slot], i)
            consumer.expect(i, outs[slot])
            computed = torch.cuda.Event()
            computed.record(cur)
            side.wait_event(computed)
            with torch.cuda.stream(side):
                host[slot].copy_(outs[slot].view(-1), non_blocking=True)
            done = torch.cuda.Event()
            done.record(side)
            copied[slot] = done
            # host[slot] was consumed (step i-2) in the previous iteration: safe to refill.
            if pending is not None:
                consume(*pending)  # step i-1, while step i computes and copies
            pending = (i, slot)
        if pending is not None:
            consume(*pending)

    run(0, args.egress_warmup)
    sync()
    t0 = time.perf_counter()
    run(args.egress_warmup, args.steps)
    sync()
    wall = time.perf_counter() - t0
    return egress_row(wall, work, args, consumer.verdict(total))


def egress_ferry(device, work, args):
    total = args.egress_warmup + args.steps
    consumer = HostConsumer(work, args.egress_warmup + args.steps // 2)
    outs = [work.new_output(), work.new_output()]
    chunk_bytes = args.chunk_mb * MiB
    chunks_per_step = -(-work.nbytes // chunk_bytes)
    # A pool that holds max_pending_steps whole steps (+1 chunk): push() then never waits for a
    # lease while the GPU could be computing. (The device's default pool is 4 x 64 MiB.)
    pool = device.create_staging_pool(kind="host_readback", slab_bytes=chunk_bytes,
                                      max_slabs=chunks_per_step * args.max_pending + 1)
    tickets = [None, None]
    cur = torch.cuda.current_stream()
    pipe = ferry.EgressPipeline(device, consumer.ferry_chunk, workers=args.workers,
                                max_pending_steps=args.max_pending, chunk_bytes=chunk_bytes,
                                pool=pool)

    def run(first, count):
        for i in range(first, first + count):
            slot = i % 2
            if tickets[slot] is not None:
                # Device-side: torch's stream waits until ferry's download has read outs[slot].
                tickets[slot].output_read.wait_on_stream(cur)
            work.compute(outs[slot], i)
            consumer.expect(i, outs[slot])
            t = ferry.from_dlpack(outs[slot], device)  # ready = torch's work so far
            tickets[slot] = pipe.push(t)
            if tickets[slot].step != i:
                raise RuntimeError(f"ticket step {tickets[slot].step}, expected {i}")
        pipe.drain(timeout=300)

    ok = False
    try:
        run(0, args.egress_warmup)
        sync()
        t0 = time.perf_counter()
        run(args.egress_warmup, args.steps)
        sync()
        wall = time.perf_counter() - t0
        stats = dict(pipe.stats)
        ok = True
    finally:
        close_pipeline(pipe, ok)
    row = egress_row(wall, work, args, consumer.verdict(total))
    row["pipeline_stats"] = {k: v for k, v in stats.items()
                             if isinstance(v, (int, float, str, bool))}
    row["staging_pool_bytes"] = chunk_bytes * (chunks_per_step * args.max_pending + 1)
    return row


def egress_row(wall, work, args, verdict):
    return {"steps": args.steps, "wall_s": wall, "steps_per_s": args.steps / wall,
            "ms_per_step": wall / args.steps * 1e3,
            "d2h_gb_per_s": work.nbytes * args.steps / wall / 1e9, "verify": verdict}


def measure_d2h(work, reps=5):
    """Peak pinned D2H bandwidth for one output (torch, a side stream, CUDA events; the best)."""
    out = work.new_output()
    out.fill_(1.0)
    host = torch.empty(work.elements, dtype=torch.float32, pin_memory=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    best = float("inf")
    with torch.cuda.stream(side):
        for _ in range(reps + 1):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            host.copy_(out.view(-1), non_blocking=True)
            e1.record()
            e1.synchronize()
            best = min(best, e0.elapsed_time(e1) / 1e3)
    return work.nbytes / best, best


def measure_compute(work, args):
    out = work.new_output()
    for i in range(args.egress_warmup):
        work.compute(out, i)
    sync()
    t0 = time.perf_counter()
    for i in range(args.steps):
        work.compute(out, i)
    sync()
    return (time.perf_counter() - t0) / args.steps


def bench_egress(device, args):
    work = EgressWork(args)
    print(f"\n== Egress: {work.nbytes / 1e6:.1f} MB float32 output per step "
          f"({work.rows}x{work.COLS}, matmul K={args.egress_k} + add), "
          f"{args.steps} timed steps after {args.egress_warmup} warm-up")
    bw, t_copy = measure_d2h(work)
    t_compute = measure_compute(work, args)
    bound_time = max(t_compute, t_copy)
    bound = 1.0 / bound_time
    print(f"  compute only: {t_compute * 1e3:.2f} ms/step ({1 / t_compute:.1f} steps/s); "
          f"pinned D2H peak {bw / 1e9:.2f} GB/s -> {t_copy * 1e3:.2f} ms/step; "
          f"bound {bound:.1f} steps/s ({'transfer' if t_copy >= t_compute else 'compute'}-bound)")

    rows = []
    run_guarded(".cpu() (pageable, synchronous)", lambda: egress_cpu(work, args), rows)
    run_guarded("pinned non_blocking + side stream (2 buffers)",
                lambda: egress_pinned(work, args), rows)
    run_guarded("ferry EgressPipeline (from_dlpack outputs)",
                lambda: egress_ferry(device, work, args), rows)
    for r in rows:
        if "error" not in r:
            r["fraction_of_bound"] = r["steps_per_s"] / bound

    print()
    print(f"  {'way':<50}{'steps/s':>9}{'ms/step':>9}{'GB/s':>8}{'of bound':>10}  verified")
    for r in rows:
        if "error" in r:
            print(f"  {r['method']:<50}  FAILED: {r['error']}")
            continue
        v = r["verify"]
        ok = "OK" if v["all_bytes_received"] and v["content_ok"] else (
            f"BYTES {'ok' if v['all_bytes_received'] else 'MISSING'}, "
            f"CONTENT {'ok' if v['content_ok'] else 'MISMATCH'}")
        print(f"  {r['method']:<50}{r['steps_per_s']:>9.2f}{r['ms_per_step']:>9.2f}"
              f"{r['d2h_gb_per_s']:>8.2f}{100 * r['fraction_of_bound']:>9.1f}%  {ok}")
    print(f"  bound: {bound:.2f} steps/s = 1 / max(compute {t_compute * 1e3:.2f} ms, "
          f"transfer {t_copy * 1e3:.2f} ms)")
    return {"bytes_per_step": work.nbytes, "matmul_k": args.egress_k,
            "compute_ms_per_step": t_compute * 1e3, "d2h_peak_gb_per_s": bw / 1e9,
            "transfer_ms_per_step": t_copy * 1e3, "bound_steps_per_s": bound,
            "warmup": args.egress_warmup, "methods": rows}


# ---------------------------------------------------------------------------------------------

def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("torch_loop.py needs a CUDA GPU (torch.cuda.is_available() is False)")
    torch.backends.cudnn.benchmark = True
    now = datetime.datetime.now().astimezone()
    result = {
        "date": now.isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(0),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_threads": torch.get_num_threads(),
        "ferry": getattr(ferry, "__version__", "unknown"),
        "args": vars(args),
    }
    print(f"ferry torch_loop benchmark, {result['date']}")
    print(f"GPU: {result['gpu']}; torch {torch.__version__} (CUDA {torch.version.cuda}, "
          f"{torch.get_num_threads()} CPU threads); ferry {result['ferry']}; "
          f"Python {result['python']}")
    device = ferry.Device.open("cuda")
    try:
        result["ferry_device"] = device.name
        print(f"ferry device: {device.name}")
        for part, skip, bench in (("ingress", args.skip_ingress, bench_ingress),
                                  ("egress", args.skip_egress, bench_egress)):
            if skip:
                continue
            try:
                result[part] = bench(device, args)
            except Exception as e:  # noqa: BLE001 (keep the other part's numbers)
                traceback.print_exc()
                result[part] = {"error": f"{type(e).__name__}: {e}", "methods": []}
            torch.cuda.empty_cache()
    finally:
        sync()
        device.close()
    problems = []
    for part in ("ingress", "egress"):
        if "error" in result.get(part, {}):
            problems.append(f"{part}: {result[part]['error']}")
        for m in result.get(part, {}).get("methods", []):
            if "error" in m:
                problems.append(f"{part} / {m['method']}: failed")
            c = m.get("correctness")
            if c and not c["ok"]:
                problems.append(f"{part} / {m['method']}: normalized tensor differs from torch's")
            v = m.get("verify")
            if v and not (v["all_bytes_received"] and v["content_ok"]):
                problems.append(f"{part} / {m['method']}: consumer data check failed")
    result["problems"] = problems
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, default=str)
        print(f"\nJSON: {args.json}")
    print("\n" + ("all checks OK" if not problems else "PROBLEMS:\n  " + "\n  ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
