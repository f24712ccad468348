"""normalize: NormalizeParams validation and results bit-exact against the semantics of
ferry/ops/normalize.hpp computed independently (exact rational fma, numpy half rounding)."""

from __future__ import annotations

import numpy as np
import pytest

import ferry
from truth import image_span_bytes, normalize_reference

IMAGENET_MEAN = (123.675, 116.28, 103.53, 0.0)
IMAGENET_STD = (58.395, 57.12, 57.375, 1.0)

CASES = [
    # batch, height, width, channels, layout, output_type, output_layout, crop, mirror, pitches
    dict(batch=1, height=1, width=1, channels=1),
    dict(batch=2, height=5, width=7, channels=3),
    dict(batch=3, height=4, width=9, channels=3, layout="nchw", output_type="float16",
         output_layout="nhwc", crop=(1, 1, 5, 2), mirror=True),
    dict(batch=1, height=17, width=13, channels=4, output_type="bfloat16", mirror=True),
    dict(batch=2, height=3, width=33, channels=2, layout="nchw", row_pitch=40, plane_pitch=130,
         image_pitch=300),
    dict(batch=1, height=31, width=29, channels=1, output_type="float16", output_layout="nhwc",
         crop=(3, 0, 0, 0)),
    dict(batch=2, height=6, width=5, channels=3, output_layout="nhwc", row_pitch=17,
         image_pitch=0),
    dict(batch=5, height=2, width=3, channels=4, layout="nchw", output_type="bfloat16",
         output_layout="nhwc", crop=(2, 1, 1, 1)),
]


def case_id(case):
    return "-".join(f"{k}={v}" for k, v in case.items())


def random_mean_std(rng, channels):
    mean = [float(v) for v in rng.uniform(-10, 260, 4)]
    std = [float(v) for v in rng.uniform(0.3, 90, 4)]
    # a negative std is allowed (finite and non-zero) and flips the sign
    if channels > 1:
        std[1] = -std[1]
    return tuple(mean), tuple(std)


def make_params(case, mean, std):
    return ferry.NormalizeParams(
        case["batch"], case["height"], case["width"], case["channels"],
        layout=case.get("layout", "nhwc"), mean=mean, std=std,
        output_type=case.get("output_type", "float32"),
        output_layout=case.get("output_layout", "nchw"), crop=case.get("crop"),
        mirror=case.get("mirror", False), row_pitch=case.get("row_pitch", 0),
        plane_pitch=case.get("plane_pitch", 0), image_pitch=case.get("image_pitch", 0))


def expected_of(case, data, mean, std):
    return normalize_reference(
        data, batch=case["batch"], height=case["height"], width=case["width"],
        channels=case["channels"], layout=case.get("layout", "nhwc"), mean=mean, std=std,
        output_type=case.get("output_type", "float32"),
        output_layout=case.get("output_layout", "nchw"), crop=case.get("crop"),
        mirror=case.get("mirror", False), row_pitch=case.get("row_pitch", 0),
        plane_pitch=case.get("plane_pitch", 0), image_pitch=case.get("image_pitch", 0))


def bits_of(array):
    array = np.ascontiguousarray(array)
    return array.view(np.uint32 if array.dtype.itemsize == 4 else np.uint16)


def span_of(case):
    keys = ("batch", "height", "width", "channels", "layout", "row_pitch", "plane_pitch",
            "image_pitch")
    return image_span_bytes(**{k: case[k] for k in keys if k in case})


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_params_shape(case):
    mean, std = IMAGENET_MEAN, IMAGENET_STD
    params = make_params(case, mean, std)
    expected = expected_of(case, np.zeros(span_of(case), np.uint8), mean, std)
    out_type = case.get("output_type", "float32")
    assert params.input_bytes == span_of(case)
    assert str(params.output_dtype) == out_type
    assert tuple(params.output_shape) == expected.shape
    assert params.output_bytes == expected.size * (4 if out_type == "float32" else 2)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_normalize_command(device, rng, case):
    if not device.supports("normalize"):
        pytest.skip("device cannot run normalize")
    mean, std = random_mean_std(rng, case["channels"])
    params = make_params(case, mean, std)
    src_offset, dst_offset = 3, 8
    span = params.input_bytes
    data = rng.integers(0, 256, span, dtype=np.uint8)
    extremes = np.array([0, 255, 1, 128], np.uint8)[:span]
    data[:len(extremes)] = extremes  # the extremes somewhere
    src_bytes = np.concatenate([rng.integers(0, 256, src_offset, dtype=np.uint8), data,
                                rng.integers(0, 256, 5, dtype=np.uint8)])
    src = device.upload(src_bytes)
    dst = device.create_buffer(dst_offset + params.output_bytes + 6)
    guard = 0xA5A5A5A5
    commands = ferry.CommandList()
    commands.fill(dst, guard)
    commands.normalize(src, dst, params, src_offset=src_offset, dst_offset=dst_offset)
    assert len(commands) == 2
    device.queue("compute").submit(commands).wait(timeout=60)
    out = device.download(dst)
    expected = expected_of(case, data, mean, std)
    got = out[dst_offset:dst_offset + params.output_bytes].view(bits_of(expected).dtype)
    np.testing.assert_array_equal(got.reshape(expected.shape), bits_of(expected),
                                  err_msg=f"mean {mean} std {std}")
    assert (out[:dst_offset] == 0xA5).all(), "normalize wrote before dst_offset"
    assert (out[dst_offset + params.output_bytes:] == 0xA5).all(), "normalize wrote past output"


@pytest.mark.parametrize("output_type", ["float32", "float16", "bfloat16"])
def test_normalize_tensors_and_lease_source(device, rng, output_type):
    """Source in a lease (host memory the device reads), destination a Tensor from empty()."""
    if not device.supports("normalize"):
        pytest.skip("device cannot run normalize")
    case = dict(batch=2, height=7, width=11, channels=3, output_type=output_type)
    mean, std = IMAGENET_MEAN, IMAGENET_STD
    params = make_params(case, mean, std)
    data = rng.integers(0, 256, params.input_bytes, dtype=np.uint8)
    pool = device.create_staging_pool("host_upload", slab_bytes=1 << 16, max_slabs=1)
    lease = pool.acquire(params.input_bytes)
    lease.numpy()[:] = data
    dst = device.empty(params.output_shape, params.output_dtype)
    commands = ferry.CommandList()
    commands.normalize(lease, dst, params)
    device.queue("compute").submit(commands).wait(timeout=60)
    expected = expected_of(case, data, mean, std)
    out = np.empty(expected.shape, expected.dtype)
    device.download(dst, out)
    np.testing.assert_array_equal(out, expected)
    if output_type != "bfloat16":
        plain = device.download(dst)
        assert plain.dtype == np.dtype(output_type)
        assert plain.shape == expected.shape
        assert plain.tobytes() == expected.tobytes()


def test_identity_and_closed_form(device):
    """mean 0, std 1: y = x exactly; mean 127.5, std 127.5: closed form x / 127.5 - 1."""
    if not device.supports("normalize"):
        pytest.skip("device cannot run normalize")
    pixels = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1)
    src = device.upload(pixels)
    for mean, std, expected in [
        ((0.0,) * 4, (1.0,) * 4, np.arange(256, dtype=np.float32)),
        ((127.5,) * 4, (127.5,) * 4, None),
    ]:
        params = ferry.NormalizeParams(1, 16, 16, 1, mean=mean, std=std)
        dst = device.empty(params.output_shape, "float32")
        commands = ferry.CommandList()
        commands.normalize(src, dst, params)
        device.queue("compute").submit(commands).wait()
        out = device.download(dst).reshape(-1)
        if expected is None:
            # scale = float(1/127.5), bias = -1.0 exactly; values within an ulp of x/127.5 - 1
            # and exactly -1 at 0, 0 at 127.5 (not a byte) -- check the ends and monotonicity
            assert out[0] == np.float32(-1.0)
            assert abs(float(out[255]) - 1.0) <= 2 ** -23
            assert (np.diff(out) > 0).all()
        else:
            np.testing.assert_array_equal(out, expected)


def test_mean_std_of_channel_length(device, rng):
    """mean / std given with one value per channel (3 for RGB), as users write them."""
    if not device.supports("normalize"):
        pytest.skip("device cannot run normalize")
    params = ferry.NormalizeParams(1, 2, 3, 3, mean=IMAGENET_MEAN[:3], std=IMAGENET_STD[:3])
    data = rng.integers(0, 256, params.input_bytes, dtype=np.uint8)
    src = device.upload(data)
    dst = device.empty(params.output_shape, "float32")
    commands = ferry.CommandList()
    commands.normalize(src, dst, params)
    device.queue("compute").submit(commands).wait()
    expected = normalize_reference(data, batch=1, height=2, width=3, channels=3,
                                   mean=IMAGENET_MEAN, std=IMAGENET_STD)
    np.testing.assert_array_equal(bits_of(device.download(dst)), bits_of(expected))


@pytest.mark.parametrize("kwargs,error", [
    (dict(std=(0.0, 1.0, 1.0, 1.0)), ferry.InvalidArgumentError),
    (dict(std=(1.0, 0.0, 1.0, 1.0)), ferry.InvalidArgumentError),
    (dict(std=(float("inf"), 1.0, 1.0, 1.0)), ferry.InvalidArgumentError),
    (dict(std=(float("nan"), 1.0, 1.0, 1.0)), ferry.InvalidArgumentError),
    (dict(mean=(float("nan"), 0.0, 0.0, 0.0)), ferry.InvalidArgumentError),
    (dict(std=(1e-300, 1.0, 1.0, 1.0)), ferry.InvalidArgumentError),  # 1/std overflows float
    (dict(output_type="float64"), ferry.InvalidArgumentError),
    (dict(output_type="int8"), ferry.InvalidArgumentError),
    (dict(layout="nchwc"), ferry.InvalidArgumentError),
    (dict(output_layout="NCHW"), ferry.InvalidArgumentError),
    (dict(crop=(8, 0, 0, 0)), ferry.OutOfRangeError),
    (dict(crop=(0, 0, 9, 0)), ferry.OutOfRangeError),
    (dict(crop=(2, 2, 7, 1)), ferry.OutOfRangeError),
    (dict(row_pitch=5), ferry.InvalidArgumentError),  # smaller than a row of 8 x 2 bytes
    (dict(plane_pitch=100), ferry.InvalidArgumentError),  # nhwc input
])
def test_params_errors(kwargs, error):
    base = dict(layout="nhwc")
    base.update(kwargs)
    with pytest.raises(error) as info:
        ferry.NormalizeParams(2, 4, 8, 2, **base)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("dims", [(0, 4, 4, 3), (1, 0, 4, 3), (1, 4, 0, 3), (1, 4, 4, 0),
                                  (1, 4, 4, 5)])
def test_params_shape_errors(dims):
    with pytest.raises(ferry.InvalidArgumentError) as info:
        ferry.NormalizeParams(*dims)
    if dims[3] in (0, 5):
        assert "channels" in info.value.message


def test_std_zero_message():
    with pytest.raises(ferry.InvalidArgumentError) as info:
        ferry.NormalizeParams(1, 2, 2, 3, std=(1.0, 1.0, 0.0, 1.0))
    assert "std" in info.value.message and "channel 2" in info.value.message


def test_std_unused_channel_ignored():
    # only the first `channels` entries are used: a zero std of channel 3 is fine with 3 channels
    params = ferry.NormalizeParams(1, 2, 2, 3, std=(1.0, 1.0, 1.0, 0.0))
    assert tuple(params.output_shape) == (1, 3, 2, 2)


def test_normalize_range_errors(device):
    params = ferry.NormalizeParams(1, 4, 4, 3)
    src = device.create_buffer(params.input_bytes)
    dst = device.create_buffer(params.output_bytes)
    commands = ferry.CommandList()
    with pytest.raises(ferry.OutOfRangeError):
        commands.normalize(src, dst, params, src_offset=1)
    with pytest.raises(ferry.OutOfRangeError):
        commands.normalize(src, dst, params, dst_offset=4)
    big = device.create_buffer(params.output_bytes + 8)
    with pytest.raises(ferry.InvalidArgumentError):
        commands.normalize(src, big, params, dst_offset=2)  # not a multiple of 4
    with pytest.raises(ferry.InvalidArgumentError):
        commands.normalize(big, big, params)  # src and dst overlap
    with pytest.raises(TypeError):
        commands.normalize(src, dst, "params")
    assert len(commands) == 0
