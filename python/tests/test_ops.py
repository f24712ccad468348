"""The search ops as commands (binary_quantize, hamming_topk, rescore) against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import ferry
from truth import binary_codes, hamming_distances, hamming_topk_reference

NO_INDEX = 0xFFFFFFFF


def needs(device, op):
    if not device.supports(op):
        pytest.skip(f"device cannot run {op}")


def run_compute(device, commands):
    device.queue("compute").submit(commands).wait(timeout=60)


def special_floats(rng, rows, dims):
    x = rng.standard_normal((rows, dims)).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
                         np.finfo(np.float32).max], np.float32)
    mask = rng.random((rows, dims)) < 0.2
    x[mask] = rng.choice(specials, mask.sum())
    return x


@pytest.mark.parametrize("input_type", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rows,dims", [(1, 1), (3, 63), (5, 64), (7, 65), (2, 200)])
def test_binary_quantize(device, rng, input_type, rows, dims):
    needs(device, "binary_quantize")
    x32 = special_floats(rng, rows, dims)
    if input_type == "float32":
        raw = x32
        exact = x32
    elif input_type == "float16":
        with np.errstate(over="ignore"):  # float32 max -> inf, on purpose
            raw = x32.astype(np.float16)
        exact = raw.astype(np.float32)  # exact, subnormals kept
    else:
        bits = x32.view(np.uint32) >> 16  # truncation: any bfloat16 value will do
        raw = bits.astype(np.uint16)
        exact = (raw.astype(np.uint32) << 16).view(np.float32)
    thresholds = rng.standard_normal(dims).astype(np.float32)
    thresholds[: min(3, dims)] = 0.0
    for with_thresholds in (False, True):
        src = device.upload(np.ascontiguousarray(raw))
        code_bytes = (dims + 63) // 64 * 8
        codes = device.create_buffer(rows * code_bytes + 8)
        commands = ferry.CommandList()
        commands.fill(codes, 0x5A5A5A5A)
        kwargs = {}
        if with_thresholds:
            kwargs["thresholds"] = device.upload(thresholds)
        commands.binary_quantize(src, codes, rows=rows, dims=dims, input_type=input_type,
                                 codes_offset=4, **kwargs)
        run_compute(device, commands)
        out = device.download(codes)
        expected = binary_codes(exact, thresholds if with_thresholds else None)
        np.testing.assert_array_equal(out[4:4 + rows * code_bytes].reshape(rows, code_bytes),
                                      expected, err_msg=f"thresholds={with_thresholds}")
        assert (out[:4] == 0x5A).all() and (out[4 + rows * code_bytes:] == 0x5A).all()


def test_binary_quantize_row_pitch(device, rng):
    needs(device, "binary_quantize")
    rows, dims, pitch = 4, 70, 75 * 4
    x = rng.standard_normal((rows, pitch // 4)).astype(np.float32)
    src = device.upload(x)
    codes = device.create_buffer(rows * 16)
    commands = ferry.CommandList()
    commands.binary_quantize(src, codes, rows=rows, dims=dims, row_pitch=pitch)
    run_compute(device, commands)
    np.testing.assert_array_equal(device.download(codes).reshape(rows, 16),
                                  binary_codes(x[:, :dims]))


def test_binary_quantize_errors(device):
    src = device.create_buffer(4 * 64)
    codes = device.create_buffer(8)
    commands = ferry.CommandList()
    with pytest.raises(ferry.InvalidArgumentError):
        commands.binary_quantize(src, codes, rows=0, dims=64)
    with pytest.raises(ferry.InvalidArgumentError):
        commands.binary_quantize(src, codes, rows=1, dims=64, input_type="float64")
    with pytest.raises(ferry.InvalidArgumentError):
        commands.binary_quantize(src, codes, rows=1, dims=64, row_pitch=3)
    with pytest.raises(ferry.OutOfRangeError):
        commands.binary_quantize(src, codes, rows=2, dims=64)
    assert len(commands) == 0


@pytest.mark.parametrize("code_bits,queries,rows,k", [(64, 1, 1, 1), (64, 3, 257, 10),
                                                      (128, 5, 100, 100), (192, 2, 7, 12),
                                                      (64, 4, 300, 1)])
def test_hamming_topk(device, rng, code_bits, queries, rows, k):
    needs(device, "hamming_topk")
    code_bytes = code_bits // 8
    # few distinct codes: many ties
    palette = rng.integers(0, 256, (6, code_bytes), dtype=np.uint8)
    db = palette[rng.integers(0, 6, rows)]
    db[::3] = rng.integers(0, 256, db[::3].shape, dtype=np.uint8)
    q = rng.integers(0, 256, (queries, code_bytes), dtype=np.uint8)
    q_buf, db_buf = device.upload(q), device.upload(db)
    distances = device.create_buffer(queries * k * 4)
    indices = device.create_buffer(queries * k * 4)
    commands = ferry.CommandList()
    commands.hamming_topk(q_buf, db_buf, distances, indices, code_bits=code_bits,
                          queries_count=queries, database_rows=rows, k=k)
    run_compute(device, commands)
    got_d = device.download(distances).view(np.uint32).reshape(queries, k)
    got_i = device.download(indices).view(np.uint32).reshape(queries, k)
    want_i, want_d = hamming_topk_reference(q, db, k)
    valid = want_i >= 0
    np.testing.assert_array_equal(got_i[valid], want_i[valid])
    np.testing.assert_array_equal(got_d[valid], want_d[valid])
    assert (got_i[~valid] == NO_INDEX).all() and (got_d[~valid] == NO_INDEX).all()


def test_hamming_topk_padding(device, rng):
    needs(device, "hamming_topk")
    q = rng.integers(0, 256, (2, 8), dtype=np.uint8)
    db = rng.integers(0, 256, (3, 8), dtype=np.uint8)
    distances = device.create_buffer(2 * 5 * 4)
    indices = device.create_buffer(2 * 5 * 4)
    commands = ferry.CommandList()
    commands.hamming_topk(device.upload(q), device.upload(db), distances, indices, code_bits=64,
                          queries_count=2, database_rows=3, k=5)
    run_compute(device, commands)
    got_i = device.download(indices).view(np.uint32).reshape(2, 5)
    got_d = device.download(distances).view(np.uint32).reshape(2, 5)
    assert (got_i[:, 3:] == NO_INDEX).all() and (got_d[:, 3:] == NO_INDEX).all()
    d = hamming_distances(q, db)
    for row in range(2):
        assert sorted(got_i[row, :3].tolist()) == [0, 1, 2]
        np.testing.assert_array_equal(got_d[row, :3], d[row, got_i[row, :3]])


def test_hamming_topk_errors(device):
    buf = device.create_buffer(64)
    out = device.create_buffer(64)
    out2 = device.create_buffer(64)
    commands = ferry.CommandList()
    with pytest.raises(ferry.InvalidArgumentError):
        commands.hamming_topk(buf, buf, out, out2, code_bits=65, queries_count=1,
                              database_rows=1, k=1)
    with pytest.raises(ferry.InvalidArgumentError):
        commands.hamming_topk(buf, buf, out, out2, code_bits=64, queries_count=1,
                              database_rows=1, k=0)
    with pytest.raises(ferry.InvalidArgumentError):
        commands.hamming_topk(buf, buf, out, out, code_bits=64, queries_count=1,
                              database_rows=1, k=1)  # outputs overlap
    with pytest.raises(ferry.OutOfRangeError):
        commands.hamming_topk(buf, buf, out, out2, code_bits=64, queries_count=1,
                              database_rows=9, k=1)
    assert len(commands) == 0


@pytest.mark.parametrize("element,metric", [("float32", "inner_product"), ("float32", "l2"),
                                            ("int8", "inner_product"), ("int8", "l2")])
def test_rescore(device, rng, element, metric):
    needs(device, "rescore")
    dims, rows, queries, candidates, k = 33, 50, 3, 12, 5
    if element == "float32":
        q = rng.integers(-4, 5, (queries, dims)).astype(np.float32)  # exact sums
        db = rng.integers(-4, 5, (rows, dims)).astype(np.float32)
    else:
        q = rng.integers(-128, 128, (queries, dims)).astype(np.int8)
        db = rng.integers(-128, 128, (rows, dims)).astype(np.int8)
    cand = np.stack([rng.permutation(rows)[:candidates] for _ in range(queries)]).astype(
        np.uint32)
    cand[0, 3] = cand[0, 1]  # a duplicate counts once
    cand[1, 0] = NO_INDEX  # skipped
    cand[2, 2] = rows + 5  # >= rows: skipped
    db[cand[2, 4]] = db[cand[2, 5]]  # equal scores: lower row first
    scores = device.create_buffer(queries * k * 4)
    indices = device.create_buffer(queries * k * 4)
    commands = ferry.CommandList()
    commands.rescore(device.upload(q), device.upload(db), device.upload(cand), scores, indices,
                     dims=dims, queries_count=queries, database_rows=rows,
                     candidates_count=candidates, k=k, element=element, metric=metric)
    run_compute(device, commands)
    got_i = device.download(indices).view(np.uint32).reshape(queries, k)
    raw_scores = device.download(scores)
    got_s = raw_scores.view(np.float32 if element == "float32" else np.int32).reshape(queries, k)
    qi, dbi = q.astype(np.int64), db.astype(np.int64)
    for row in range(queries):
        ids = sorted({int(c) for c in cand[row] if c < rows})
        ids = np.array(ids, np.int64)
        if metric == "inner_product":
            exact = dbi[ids] @ qi[row]
            key = -exact
        else:
            exact = ((dbi[ids] - qi[row]) ** 2).sum(axis=1)
            key = exact
        order = np.lexsort((ids, key))[:k]
        np.testing.assert_array_equal(got_i[row], ids[order].astype(np.uint32),
                                      err_msg=f"query {row}")
        np.testing.assert_array_equal(got_s[row], exact[order])
