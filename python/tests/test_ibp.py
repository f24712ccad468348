"""ferry.ibp: encode / decode round trips, validation of corrupted streams, the layout, and the
device ops ibp_encode / ibp_decode against the host codec."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import ferry

ELEMENT_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def structured_data(rng, element_size, elements, row_elements):
    """Data with invariant bits per column (what IBP packs) plus noise and constant rows."""
    dtype = ELEMENT_DTYPES[element_size]
    bits = 8 * element_size
    rows = -(-elements // row_elements)
    base = rng.integers(0, 1 << min(bits, 62), row_elements, dtype=np.uint64).astype(dtype)
    noise_bits = rng.integers(0, bits, row_elements)
    noise_max = (np.uint64(1) << noise_bits.astype(np.uint64)).astype(np.uint64)
    table = np.empty((rows, row_elements), dtype)
    for r in range(rows):
        noise = (rng.integers(0, 1 << 62, row_elements, dtype=np.uint64) % noise_max).astype(dtype)
        table[r] = base ^ noise
        if r % 5 == 3:
            table[r] = base  # all matched
        if r % 7 == 6:
            table[r] = rng.integers(0, 1 << min(bits, 62), row_elements,
                                    dtype=np.uint64).astype(dtype)  # raw
    return table.reshape(-1)[:elements].copy()


@pytest.mark.parametrize("element_size", [1, 2, 4, 8])
@pytest.mark.parametrize("elements,row_elements,group_rows", [
    (1, 1, 0), (3, 2, 1), (257, 16, 0), (4099, 33, 4), (1000, 1000, 0), (5000, 7, 128)])
def test_round_trip(rng, element_size, elements, row_elements, group_rows):
    data = structured_data(rng, element_size, elements, row_elements)
    stream = ferry.ibp.encode(data, element_size=element_size, row_elements=row_elements,
                              group_rows=group_rows)
    assert isinstance(stream, bytes)
    assert stream[:8] == b"FERRYIBP"
    assert struct.unpack_from("<H", stream, 8)[0] == 1
    assert stream[10] == element_size
    ferry.ibp.validate(stream)
    decoded = ferry.ibp.decode(stream)
    assert isinstance(decoded, bytes)
    assert decoded == data.tobytes()
    layout = ferry.ibp.read_layout(stream)
    assert layout.element_size == element_size
    assert layout.row_elements == row_elements
    assert layout.elements == elements
    assert layout.rows == -(-elements // row_elements)
    assert layout.stream_bytes == len(stream)
    if group_rows:
        assert layout.group_rows == group_rows


def test_random_data_and_bytes_input(rng):
    raw = rng.integers(0, 256, 4099, dtype=np.uint8)
    stream = ferry.ibp.encode(raw.tobytes(), element_size=1, row_elements=100)
    assert ferry.ibp.decode(stream) == raw.tobytes()
    stream2 = ferry.ibp.encode(bytearray(raw.tobytes()), element_size=1, row_elements=100)
    assert stream2 == stream, "encoding is deterministic"
    assert ferry.ibp.decode(bytearray(stream)) == raw.tobytes()
    assert ferry.ibp.decode(memoryview(stream)) == raw.tobytes()


def test_float_data(rng):
    data = rng.standard_normal((33, 17)).astype(np.float32)
    stream = ferry.ibp.encode(data, element_size=4, row_elements=17)
    out = np.frombuffer(ferry.ibp.decode(stream), np.float32).reshape(33, 17)
    np.testing.assert_array_equal(out.view(np.uint32), data.view(np.uint32))


def test_compresses_invariant_data():
    data = np.full(10000, 0x12345678, np.uint32)
    stream = ferry.ibp.encode(data, element_size=4, row_elements=100)
    assert len(stream) < data.nbytes // 4


@pytest.mark.parametrize("where", ["header", "tables", "middle", "last"])
def test_corrupt_byte(rng, where):
    data = structured_data(rng, 4, 3000, 30)
    stream = bytearray(ferry.ibp.encode(data, element_size=4, row_elements=30))
    position = {"header": 20, "tables": 70, "middle": len(stream) // 2,
                "last": len(stream) - 1}[where]
    stream[position] ^= 0x10
    with pytest.raises(ferry.DataCorruptError) as error:
        ferry.ibp.validate(bytes(stream))
    assert error.value.code == "data_corrupt"
    with pytest.raises(ferry.DataCorruptError):
        ferry.ibp.decode(bytes(stream))


def test_truncated_and_junk(rng):
    data = structured_data(rng, 2, 500, 10)
    stream = ferry.ibp.encode(data, element_size=2, row_elements=10)
    with pytest.raises(ferry.DataCorruptError):
        ferry.ibp.decode(stream[:-1])
    with pytest.raises(ferry.DataCorruptError):
        ferry.ibp.validate(stream + b"\0")
    with pytest.raises(ferry.DataCorruptError):
        ferry.ibp.read_layout(b"NOTFERRY" + stream[8:64])
    with pytest.raises(ferry.Error):
        ferry.ibp.read_layout(stream[:10])


def test_encode_errors(rng):
    data = np.zeros(12, np.uint8)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.ibp.encode(data, element_size=3, row_elements=4)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.ibp.encode(data, element_size=1, row_elements=0)
    with pytest.raises((ferry.InvalidArgumentError, ferry.OutOfRangeError)):
        ferry.ibp.encode(np.zeros(7, np.uint8), element_size=2, row_elements=2)  # not whole
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.ibp.encode(b"", element_size=1, row_elements=1)


# ---- device ops ---------------------------------------------------------------------------------


def run_compute(device, commands):
    device.queue("compute").submit(commands).wait(timeout=60)


@pytest.mark.parametrize("element_size,elements,row_elements,group_rows", [
    (1, 257, 16, 4), (2, 1000, 33, 8), (4, 4099, 40, 16), (8, 300, 7, 128)])
def test_device_encode_matches_host(device, rng, element_size, elements, row_elements,
                                    group_rows):
    if not device.supports("ibp_encode"):
        pytest.skip("device cannot run ibp_encode")
    data = structured_data(rng, element_size, elements, row_elements)
    host_stream = ferry.ibp.encode(data, element_size=element_size, row_elements=row_elements,
                                   group_rows=group_rows)
    src = device.upload(data)
    rows = -(-elements // row_elements)
    # max_stream_bytes: every row raw (an upper bound; generous)
    capacity = len(host_stream) + rows * (row_elements * element_size + 8) + 4096
    capacity = (capacity + 7) // 8 * 8
    dst = device.create_buffer(capacity)
    commands = ferry.CommandList()
    commands.fill(dst, 0xCDCDCDCD)
    commands.ibp_encode(src, dst, element_size=element_size, row_elements=row_elements,
                        elements=elements, group_rows=group_rows)
    run_compute(device, commands)
    out = device.download(dst).tobytes()
    layout = ferry.ibp.read_layout(out[:64])
    assert layout.stream_bytes == len(host_stream)
    assert out[:len(host_stream)] == host_stream
    assert set(out[len(host_stream):]) <= {0xCD}, "wrote past the stream's end"


@pytest.mark.parametrize("element_size", [1, 4, 8])
def test_device_decode_whole_range_gather(device, rng, element_size):
    if not device.supports("ibp_decode"):
        pytest.skip("device cannot run ibp_decode")
    row_elements, elements = 13, 13 * 40 - 5  # a short last row
    data = structured_data(rng, element_size, elements, row_elements)
    stream = ferry.ibp.encode(data, element_size=element_size, row_elements=row_elements)
    layout = ferry.ibp.read_layout(stream)
    src = device.upload(np.frombuffer(stream, np.uint8).copy())
    status = device.create_buffer(4)
    row_bytes = row_elements * element_size
    padded = np.zeros(40 * row_elements, ELEMENT_DTYPES[element_size])
    padded[:elements] = data
    rows_table = padded.view(np.uint8).reshape(40, row_bytes)

    # whole
    out = device.create_buffer(data.nbytes)
    commands = ferry.CommandList()
    commands.ibp_decode(src, out, status, layout=layout)
    run_compute(device, commands)
    assert device.download(out).tobytes() == data.tobytes()
    assert device.download(status).view(np.uint32)[0] == 0

    # a range of rows, through the short last row
    first, count = 30, 10
    out = device.create_buffer(data.nbytes)
    commands = ferry.CommandList()
    commands.ibp_decode(src, out, status, layout=layout, rows="range", first_row=first,
                        row_count=count)
    run_compute(device, commands)
    expected = data.view(np.uint8)[first * row_bytes:]
    assert device.download(out)[:len(expected)].tobytes() == expected.tobytes()
    assert device.download(status).view(np.uint32)[0] == 0

    # a gather, in any order, duplicates, an index out of range
    indices = np.array([39, 0, 5, 5, 17, 1000], np.uint32)
    index_buf = device.upload(indices)
    out = device.create_buffer(len(indices) * row_bytes)
    commands = ferry.CommandList()
    commands.ibp_decode(src, out, status, layout=layout, rows="gather", row_count=len(indices),
                        indices=index_buf)
    run_compute(device, commands)
    got = device.download(out).reshape(len(indices), row_bytes)
    for slot, row in enumerate(indices[:-1]):
        np.testing.assert_array_equal(got[slot], rows_table[row], err_msg=f"slot {slot}")
    assert (got[-1] == 0).all()
    assert device.download(status).view(np.uint32)[0] == 2  # kIbpStatusIndexOutOfRange


def test_device_decode_bad_arguments(device, rng):
    data = structured_data(rng, 4, 100, 10)
    stream = ferry.ibp.encode(data, element_size=4, row_elements=10)
    layout = ferry.ibp.read_layout(stream)
    src = device.upload(np.frombuffer(stream, np.uint8).copy())
    status = device.create_buffer(4)
    out = device.create_buffer(data.nbytes)
    commands = ferry.CommandList()
    with pytest.raises(ferry.InvalidArgumentError):
        commands.ibp_decode(src, out, status, layout=layout, rows="some")
    with pytest.raises(ferry.OutOfRangeError):
        small = device.create_buffer(data.nbytes - 4)
        commands.ibp_decode(src, small, status, layout=layout)
    with pytest.raises((ferry.InvalidArgumentError, ferry.OutOfRangeError)):
        commands.ibp_decode(src, out, status, layout=layout, rows="range", first_row=5,
                            row_count=6)
    assert len(commands) == 0
