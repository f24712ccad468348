"""Independent reference implementations (numpy / exact rational arithmetic) of what ferry
computes, written from the semantics in runtime/include/ferry/ops/*.hpp and docs/, never from the
binding or the C++ implementation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

# ---------------------------------------------------------------------------------------------
# Exact float32 rounding


def _f32_neighbours(value: np.float32):
    return (np.nextafter(value, np.float32(-np.inf)), value, np.nextafter(value, np.float32(np.inf)))


def round_to_float32(exact: Fraction) -> np.float32:
    """The float32 nearest to the rational `exact`, ties to even (no double rounding: the
    candidates around the double approximation are compared exactly)."""
    guess = np.float32(float(exact))
    best = None
    best_err = None
    for cand in _f32_neighbours(guess):
        if not np.isfinite(cand):
            continue
        err = abs(Fraction(float(cand)) - exact)
        if best is None or err < best_err:
            best, best_err = cand, err
        elif err == best_err:
            # tie: the even significand (lowest bit of the encoding 0)
            if int(np.array(cand, np.float32).view(np.uint32)) & 1 == 0:
                best = cand
    return np.float32(best)


def fma_f32(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """IEEE fused multiply-add of float32 values, rounded once to float32."""
    return round_to_float32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


# ---------------------------------------------------------------------------------------------
# 16-bit float encodings


def float32_to_float16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> float16, round to nearest even (numpy's conversion is correctly rounded)."""
    return np.asarray(values, np.float32).astype(np.float16).view(np.uint16)


def float32_to_bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (finite, non-NaN inputs)."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


# ---------------------------------------------------------------------------------------------
# normalize (ferry/ops/normalize.hpp)


def normalize_factors(mean, std, channels):
    """scale[c] = float(1.0 / std[c]), bias[c] = float(-mean[c] / std[c]), computed in double."""
    scale = [np.float32(1.0 / float(std[c])) for c in range(channels)]
    bias = [np.float32(-float(mean[c]) / float(std[c])) for c in range(channels)]
    return scale, bias


def normalize_lut(mean, std, channels) -> np.ndarray:
    """[channels, 256] float32: fma(float(x), scale[c], bias[c]) for every byte x, exactly."""
    scale, bias = normalize_factors(mean, std, channels)
    lut = np.empty((channels, 256), np.float32)
    for c in range(channels):
        for x in range(256):
            lut[c, x] = fma_f32(np.float32(x), scale[c], bias[c])
    return lut


def normalize_reference(data: np.ndarray, *, batch, height, width, channels, layout="nhwc",
                        mean=(0, 0, 0, 0), std=(1, 1, 1, 1), output_type="float32",
                        output_layout="nchw", crop=None, mirror=False, row_pitch=0,
                        plane_pitch=0, image_pitch=0):
    """The expected output of ferry's normalize for the uint8 bytes `data` (starting at the op's
    src offset). Returns (array, shape); float16/bfloat16 outputs are returned as uint16 bits."""
    data = np.asarray(data, np.uint8).reshape(-1)
    planar = layout == "nchw"
    pixel = 1 if planar else channels
    row = row_pitch or width * pixel
    plane = (plane_pitch or row * height) if planar else 1
    if planar:
        image_bytes = plane * (channels - 1) + row * (height - 1) + width
    else:
        image_bytes = row * (height - 1) + width * channels
    image = image_pitch or image_bytes
    cx, cy, cw, ch = (0, 0, 0, 0) if crop is None else crop
    out_w = cw or width - cx
    out_h = ch or height - cy

    n = np.arange(batch).reshape(-1, 1, 1, 1)
    c = np.arange(channels).reshape(1, -1, 1, 1)
    y = np.arange(out_h).reshape(1, 1, -1, 1)
    x = np.arange(out_w).reshape(1, 1, 1, -1)
    sx = (out_w - 1 - x) if mirror else x
    index = n * image + c * plane + (cy + y) * row + (cx + sx) * pixel  # [n, c, y, x]
    pixels = data[index]
    lut = normalize_lut(mean, std, channels)
    values = lut[c, pixels]  # float32 [n, c, h, w]
    if output_layout == "nhwc":
        values = values.transpose(0, 2, 3, 1)
    values = np.ascontiguousarray(values)
    if output_type == "float32":
        return values
    if output_type == "float16":
        return float32_to_float16_bits(values)
    if output_type == "bfloat16":
        return float32_to_bfloat16_bits(values)
    raise ValueError(output_type)


def image_span_bytes(*, batch, height, width, channels, layout="nhwc", row_pitch=0,
                     plane_pitch=0, image_pitch=0):
    """ImageBatchLayout::span_bytes: from the first to one past the last byte of the batch."""
    planar = layout == "nchw"
    pixel = 1 if planar else channels
    row = row_pitch or width * pixel
    plane = (plane_pitch or row * height) if planar else 1
    if planar:
        image_bytes = plane * (channels - 1) + row * (height - 1) + width
    else:
        image_bytes = row * (height - 1) + width * channels
    image = image_pitch or image_bytes
    return (batch - 1) * image + image_bytes


# ---------------------------------------------------------------------------------------------
# fill (ferry/ops/fill.hpp)


def fill_reference(buffer: np.ndarray, offset: int, size: int, pattern: int) -> np.ndarray:
    """Byte offset + i gets byte (i % 4) of the little-endian 32-bit pattern."""
    out = np.array(buffer, np.uint8, copy=True)
    pattern_bytes = np.frombuffer(int(pattern).to_bytes(4, "little"), np.uint8)
    out[offset:offset + size] = pattern_bytes[np.arange(size) % 4]
    return out


# ---------------------------------------------------------------------------------------------
# binary codes and Hamming search (binary_quantize.hpp, hamming_topk.hpp, binary_index.hpp)


def binary_codes(vectors: np.ndarray, thresholds=None) -> np.ndarray:
    """[rows, 8 * ceil(dims / 64)] uint8 codes: bit j = x[j] > t[j] (float32 comparison), bit j
    of a row is bit j % 8 (LSB first) of byte j / 8; padding bits 0."""
    vectors = np.asarray(vectors, np.float32)
    rows, dims = vectors.shape
    t = np.zeros(dims, np.float32) if thresholds is None else np.asarray(thresholds, np.float32)
    bits = vectors > t  # NaN compares false
    padded_bits = (dims + 63) // 64 * 64
    full = np.zeros((rows, padded_bits), np.bool_)
    full[:, :dims] = bits
    return np.packbits(full, axis=1, bitorder="little")


def hamming_distances(query_codes: np.ndarray, db_codes: np.ndarray) -> np.ndarray:
    """[q, n] int64: popcount(a XOR b)."""
    x = np.bitwise_xor(query_codes[:, None, :], db_codes[None, :, :])
    return np.unpackbits(x, axis=2).sum(axis=2).astype(np.int64)


def topk_by(keys: np.ndarray, k: int):
    """Per row, the indices of the k smallest keys, ties by ascending index (a stable sort)."""
    order = np.argsort(keys, axis=1, kind="stable")
    return order[:, :k]


def hamming_topk_reference(query_codes, db_codes, k):
    """(ids [q, k] int64, distances [q, k] int64), padded with -1 / -1 past the rows."""
    d = hamming_distances(query_codes, db_codes)
    q, n = d.shape
    kk = min(k, n)
    ids = np.full((q, k), -1, np.int64)
    dist = np.full((q, k), -1, np.int64)
    order = topk_by(d, kk)
    ids[:, :kk] = order
    dist[:, :kk] = np.take_along_axis(d, order, axis=1)
    return ids, dist
