"""BinaryIndex: results against a numpy brute-force Hamming search with ferry's tie rule
(ascending distance, ties by ascending id), and exact rescoring on integer-valued vectors."""

from __future__ import annotations

import numpy as np
import pytest

import ferry
from truth import binary_codes, hamming_topk_reference, topk_by

NO_ID = np.uint64(0xFFFFFFFFFFFFFFFF)
STATS_KEYS = {"rows", "device_code_rows", "device_vector_rows", "device_bytes", "host_bytes",
              "code_segments", "vector_segments"}


def needs_search_ops(device):
    for op in ("binary_quantize", "hamming_topk"):
        if not device.supports(op):
            pytest.skip(f"device cannot run {op}")


def random_vectors(rng, rows, dims, zeros=True):
    x = rng.standard_normal((rows, dims)).astype(np.float32)
    if zeros:
        mask = rng.random((rows, dims)) < 0.1
        x[mask] = 0.0
        x[rng.random((rows, dims)) < 0.02] = -0.0
    return x


def check_hamming_results(ids, scores, queries_codes, db_codes, k):
    q = queries_codes.shape[0]
    assert ids.shape == (q, k) and ids.dtype == np.uint64
    assert scores.shape == (q, k) and scores.dtype == np.float32
    want_ids, want_dist = hamming_topk_reference(queries_codes, db_codes, k)
    valid = want_ids >= 0
    np.testing.assert_array_equal(ids[valid], want_ids[valid].astype(np.uint64))
    np.testing.assert_array_equal(scores[valid], want_dist[valid].astype(np.float32))
    assert (ids[~valid] == NO_ID).all()
    assert np.isnan(scores[~valid]).all()


@pytest.mark.parametrize("dims,rows,k", [(64, 300, 10), (70, 257, 7), (1, 40, 5),
                                         (200, 129, 33), (3, 9, 4)])
def test_search_matches_bruteforce(device, rng, dims, rows, k):
    needs_search_ops(device)
    index = ferry.BinaryIndex(device, dims)
    x = random_vectors(rng, rows, dims)
    half = rows // 2
    assert index.add(x[:half]) == 0
    assert index.add(x[half:]) == half
    assert len(index) == rows
    queries = random_vectors(rng, 7, dims)
    queries[0] = x[3]  # an exact match: distance 0 first (ties by id)
    ids, scores = index.search(queries, k)
    check_hamming_results(ids, scores, binary_codes(queries), binary_codes(x), k)
    assert ids[0, 0] <= 3 and scores[0, 0] == 0


def test_k_above_rows_is_padded(device, rng):
    needs_search_ops(device)
    index = ferry.BinaryIndex(device, 64)
    x = random_vectors(rng, 5, 64)
    index.add(x)
    ids, scores = index.search(x[:2], k=8)
    check_hamming_results(ids, scores, binary_codes(x[:2]), binary_codes(x), 8)
    assert (ids[:, 5:] == NO_ID).all()
    assert np.isnan(scores[:, 5:]).all()


def test_given_thresholds(device, rng):
    needs_search_ops(device)
    dims = 96
    thresholds = rng.standard_normal(dims).astype(np.float32)
    index = ferry.BinaryIndex(device, dims, threshold="given", thresholds=thresholds)
    x = random_vectors(rng, 100, dims)
    x[5, :10] = thresholds[:10]  # x == t gives 0
    index.add(x)
    queries = random_vectors(rng, 4, dims)
    ids, scores = index.search(queries, k=12)
    check_hamming_results(ids, scores, binary_codes(queries, thresholds),
                          binary_codes(x, thresholds), 12)


def test_many_ties(device, rng):
    """Few dimensions, many rows: long runs of equal distances ordered by id."""
    needs_search_ops(device)
    dims = 4
    index = ferry.BinaryIndex(device, dims)
    x = rng.choice(np.array([-1.0, 1.0], np.float32), (200, dims))
    index.add(x)
    queries = rng.choice(np.array([-1.0, 1.0], np.float32), (5, dims))
    ids, scores = index.search(queries, k=50)
    check_hamming_results(ids, scores, binary_codes(queries), binary_codes(x), 50)


def test_add_codes_and_search_codes(device, rng):
    needs_search_ops(device)
    dims = 130
    db = binary_codes(random_vectors(rng, 77, dims))
    queries = binary_codes(random_vectors(rng, 6, dims))
    assert db.shape == (77, 24) and db.dtype == np.uint8
    index = ferry.BinaryIndex(device, dims)
    assert index.add_codes(db[:40]) == 0
    assert index.add_codes(db[40:]) == 40
    assert len(index) == 77
    ids, scores = index.search_codes(queries, k=9)
    check_hamming_results(ids, scores, queries, db, 9)


def integer_vectors(rng, rows, dims):
    return rng.integers(-3, 4, (rows, dims)).astype(np.float32)


@pytest.mark.parametrize("metric", ["inner_product", "l2"])
def test_rescore_exact(device, rng, metric):
    """Integer-valued vectors make every score exact in float32, so the expected ranking is
    exact: Hamming candidates (k * oversample), then exact scores, ties by id."""
    needs_search_ops(device)
    if not device.supports("rescore"):
        pytest.skip("device cannot run rescore")
    dims, rows, k, oversample = 40, 150, 5, 4
    x = integer_vectors(rng, rows, dims)
    queries = integer_vectors(rng, 6, dims)
    index = ferry.BinaryIndex(device, dims, metric=metric, keep="float32")
    index.add(x)
    ids, scores = index.search(queries, k=k, oversample=oversample, rescore=True)
    assert ids.shape == (6, k) and ids.dtype == np.uint64
    assert scores.dtype == np.float32
    candidates, _ = hamming_topk_reference(binary_codes(queries), binary_codes(x),
                                           k * oversample)
    xi = x.astype(np.int64)
    qi = queries.astype(np.int64)
    for qn in range(queries.shape[0]):
        cand = candidates[qn]
        if metric == "inner_product":
            exact = xi[cand] @ qi[qn]
            key = -exact
        else:
            exact = ((xi[cand] - qi[qn]) ** 2).sum(axis=1)
            key = exact
        order = np.lexsort((cand, key))[:k]  # by key, then by id
        np.testing.assert_array_equal(ids[qn], cand[order].astype(np.uint64),
                                      err_msg=f"query {qn}")
        np.testing.assert_array_equal(scores[qn], exact[order].astype(np.float32))


def test_rescore_needs_kept_vectors(device, rng):
    needs_search_ops(device)
    index = ferry.BinaryIndex(device, 64)
    index.add(random_vectors(rng, 10, 64))
    with pytest.raises(ferry.Error) as error:
        index.search(random_vectors(rng, 1, 64), k=3, rescore=True)
    assert isinstance(error.value, (ferry.InvalidArgumentError, ferry.FailedPreconditionError))


def test_cosine_hamming_equals_sign_codes(device, rng):
    needs_search_ops(device)
    dims = 64
    x = random_vectors(rng, 50, dims, zeros=False) * 10
    index = ferry.BinaryIndex(device, dims, metric="cosine")
    index.add(x)
    queries = random_vectors(rng, 3, dims, zeros=False)
    ids, scores = index.search(queries, k=6)
    check_hamming_results(ids, scores, binary_codes(queries), binary_codes(x), 6)


def test_save_load(device, rng, tmp_path):
    needs_search_ops(device)
    dims = 72
    x = random_vectors(rng, 64, dims)
    index = ferry.BinaryIndex(device, dims)
    index.add(x)
    path = tmp_path / "index.ferry"
    index.save(str(path))
    assert path.exists() and path.stat().st_size > 0
    loaded = ferry.BinaryIndex.load(device, str(path))
    assert len(loaded) == 64
    queries = random_vectors(rng, 3, dims)
    a_ids, a_scores = index.search(queries, k=7)
    b_ids, b_scores = loaded.search(queries, k=7)
    np.testing.assert_array_equal(a_ids, b_ids)
    np.testing.assert_array_equal(a_scores, b_scores)
    # pathlib paths as well
    loaded2 = ferry.BinaryIndex.load(device, path)
    assert len(loaded2) == 64


def test_load_corrupt(device, rng, tmp_path):
    needs_search_ops(device)
    index = ferry.BinaryIndex(device, 64)
    index.add(random_vectors(rng, 20, 64))
    path = tmp_path / "index.ferry"
    index.save(str(path))
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    bad = tmp_path / "bad.ferry"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ferry.DataCorruptError) as error:
        ferry.BinaryIndex.load(device, str(bad))
    assert "bad.ferry" in error.value.message
    with pytest.raises(FileNotFoundError) as missing:
        ferry.BinaryIndex.load(device, str(tmp_path / "missing.ferry"))
    assert isinstance(missing.value, ferry.NotFoundError)
    assert "missing.ferry" in missing.value.message
    (tmp_path / "junk").write_bytes(b"not an index at all")
    with pytest.raises(ferry.DataCorruptError):
        ferry.BinaryIndex.load(device, str(tmp_path / "junk"))
    with pytest.raises(ferry.InvalidArgumentError, match="is a directory"):
        ferry.BinaryIndex.load(device, str(tmp_path))


def test_stats(device, rng):
    needs_search_ops(device)
    index = ferry.BinaryIndex(device, 64)
    assert len(index) == 0
    index.add(random_vectors(rng, 33, 64))
    stats = index.stats
    assert isinstance(stats, dict) and STATS_KEYS <= set(stats)
    assert stats["rows"] == 33
    assert stats["device_code_rows"] == 33


def test_errors(device, rng):
    needs_search_ops(device)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.BinaryIndex(device, 0)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.BinaryIndex(device, 5000)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.BinaryIndex(device, 64, metric="cos")
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.BinaryIndex(device, 64, threshold="given")  # no thresholds
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.BinaryIndex(device, 64, keep="float64")
    index = ferry.BinaryIndex(device, 64)
    with pytest.raises((ferry.InvalidArgumentError, ValueError)):
        index.add(random_vectors(rng, 4, 63))
    with pytest.raises((ferry.InvalidArgumentError, ValueError)):
        index.add(np.zeros((2, 2, 64), np.float32))  # not 2-D
    with pytest.raises((ferry.InvalidArgumentError, ValueError)):
        index.add(np.zeros((4, 64), np.float64))  # not the index's input type
    with pytest.raises((ferry.InvalidArgumentError, ValueError, TypeError)):
        index.add(np.ones((4, 64), np.int32))  # same size as float32, another type
    assert len(index) == 0, "a failed add leaves the index as it was"
    index.add(random_vectors(rng, 4, 64))
    with pytest.raises(ferry.InvalidArgumentError):
        index.search(random_vectors(rng, 1, 64), k=0)
    with pytest.raises(ferry.InvalidArgumentError):
        index.search(random_vectors(rng, 1, 64), k=2000)
    with pytest.raises((ferry.InvalidArgumentError, ValueError)):
        index.add_codes(np.zeros((2, 7), np.uint8))  # 8 bytes per 64-dim code


def test_topk_helper_tie_rule():
    """The reference's tie rule: ascending key, ties by ascending index."""
    keys = np.array([[3, 1, 1, 0, 3, 1]])
    np.testing.assert_array_equal(topk_by(keys, 4), [[3, 1, 2, 5]])
