"""habana_assist.checkpoints.safetensors writes and reads the real safetensors format, zero-copy, with exact
bfloat16."""

import json
import struct

import numpy as np
import pytest
from checkpoints import maps_file

from habana_assist.checkpoints.safetensors import (
    DTYPES,
    bfloat16_bits_to_float32,
    read_checkpoint_tensors,
    read_metadata,
    read_safetensors,
    save_file,
    to_bfloat16_bits,
)


def test_save_file_layout_matches_the_spec(tmp_path):
    path = tmp_path / "t.safetensors"
    b = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = np.array([1, -2, 3, -4], dtype=np.int64)
    save_file({"b": b, "a": a}, path, metadata={"format": "pt"})

    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header_bytes = raw[8 : 8 + n]
    json_bytes = header_bytes.rstrip(b" ")
    assert n % 8 == 0 and n == len(json_bytes) + (-len(json_bytes) % 8), (
        f"header of {n} bytes is not the {len(json_bytes)}-byte JSON padded with spaces to a multiple of 8"
    )
    header = json.loads(header_bytes)
    assert header == {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "I64", "shape": [4], "data_offsets": [0, 32]},
        "b": {"dtype": "F32", "shape": [2, 3], "data_offsets": [32, 56]},
    }
    assert raw[8 + n :] == a.tobytes() + b.tobytes(), "data section is not the tensors in sorted-name order"


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_every_dtype_round_trips_bit_exactly(tmp_path, dtype):
    rng = np.random.default_rng(1)
    np_dtype = DTYPES[dtype]
    if np_dtype.kind == "f":
        array = rng.standard_normal((3, 5)).astype(np_dtype)
    elif np_dtype.kind == "b":
        array = rng.integers(0, 2, (3, 5)).astype(bool)
    else:
        info = np.iinfo(np_dtype)
        array = rng.integers(info.min, info.max, (3, 5), dtype=np_dtype, endpoint=True)
    value = (array, dtype) if dtype == "BF16" else array
    save_file({"x": value, "empty": np.zeros((0, 4), np.float32), "scalar": np.float64(2.5)}, tmp_path / "t")

    back = read_safetensors(tmp_path / "t")
    got, got_dtype = back["x"]
    assert got_dtype == dtype
    assert got.dtype == np_dtype and got.shape == (3, 5)
    assert got.tobytes() == array.tobytes()
    assert back["empty"][0].shape == (0, 4) and back["scalar"][0].shape == ()
    assert back["scalar"][0] == 2.5


def test_bfloat16_rounds_to_nearest_even_with_exact_values():
    one = 0x3F800000  # float32 bits of 1.0
    cases = {
        one: 0x3F80,
        one + 0x8000: 0x3F80,  # exactly halfway between 1.0 and the next bf16, odd side: down to even
        one + 0x18000: 0x3F82,  # halfway above an odd bf16: up to even
        one + 0x8001: 0x3F81,  # just above halfway: up
        one + 0x7FFF: 0x3F80,  # just below halfway: down
        0xC0000000: 0xC000,  # -2.0
        0x7F800000: 0x7F80,  # +inf
        0xFF800000: 0xFF80,  # -inf
        0x7F7FFFFF: 0x7F80,  # float32 max rounds up to inf
        0x00000001: 0x0000,  # smallest subnormal rounds to +0
        0x80000000: 0x8000,  # -0.0
    }
    bits = np.array(list(cases), dtype=np.uint32)
    got = to_bfloat16_bits(bits.view(np.float32))
    assert got.dtype == np.uint16
    for source, want, have in zip(cases, cases.values(), got):
        assert have == want, f"float32 bits {source:#010x}: expected bf16 {want:#06x}, got {int(have):#06x}"


def test_bfloat16_keeps_nan_nan_and_agrees_with_nearest_neighbour_rounding():
    nans = np.array([0x7FC00000, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32).view(np.float32)
    assert np.isnan(bfloat16_bits_to_float32(to_bfloat16_bits(nans))).all()

    x = np.random.default_rng(2).integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) < 3e38)]
    got = bfloat16_bits_to_float32(to_bfloat16_bits(x)).astype(np.float64)
    low = bfloat16_bits_to_float32((x.view(np.uint32) >> 16).astype(np.uint16)).astype(np.float64)
    high = bfloat16_bits_to_float32((x.view(np.uint32) >> 16).astype(np.uint16) + np.uint16(1)).astype(np.float64)
    xd = x.astype(np.float64)
    tie = np.abs(xd - low) == np.abs(high - xd)
    low_is_even = ((x.view(np.uint32) >> 16) & 1) == 0
    want = np.where(tie, np.where(low_is_even, low, high), np.where(np.abs(xd - low) < np.abs(high - xd), low, high))
    assert np.array_equal(got, want), f"{np.sum(got != want)} of {x.size} values rounded wrongly"


def test_bfloat16_bits_round_trip_through_float32_exactly():
    bits = np.arange(0, 2**16, dtype=np.uint32).astype(np.uint16)
    f = bfloat16_bits_to_float32(bits)
    finite = np.isfinite(f)
    assert f.dtype == np.float32
    assert np.array_equal(to_bfloat16_bits(f[finite]), bits[finite])


def test_sharded_index_round_trips(tmp_path):
    rng = np.random.default_rng(3)
    first = {"a": rng.standard_normal((2, 3)).astype(np.float32), "b": np.arange(4, dtype=np.int32)}
    second = {"c": (to_bfloat16_bits(rng.standard_normal(5)), "BF16")}
    save_file(first, tmp_path / "model-00001-of-00002.safetensors")
    save_file(second, tmp_path / "model-00002-of-00002.safetensors")
    weight_map = {
        "a": "model-00001-of-00002.safetensors",
        "b": "model-00001-of-00002.safetensors",
        "c": "model-00002-of-00002.safetensors",
    }
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 48}, "weight_map": weight_map})
    )

    back = read_checkpoint_tensors(tmp_path)
    assert sorted(back) == ["a", "b", "c"]
    assert np.array_equal(back["a"][0], first["a"]) and back["a"][1] == "F32"
    assert np.array_equal(back["b"][0], first["b"]) and back["b"][1] == "I32"
    assert np.array_equal(back["c"][0], second["c"][0]) and back["c"][1] == "BF16"


def test_read_is_a_zero_copy_read_only_view_of_the_file(tmp_path):
    path = tmp_path / "t.safetensors"
    save_file({"w": np.zeros((4, 4), np.float32)}, path, metadata={"k": "v"})
    w, _ = read_safetensors(path)["w"]
    assert not w.flags.owndata and not w.flags.writeable and w.flags.c_contiguous
    assert maps_file(w), "array is not backed by a memory map"

    # Change the last float in the file: the mapped array must see it without being read again.
    with open(path, "r+b") as f:
        f.seek(-4, 2)
        f.write(np.float32(7.5).tobytes())
    assert w[3, 3] == 7.5, "array is a copy, not a view of the file"
    assert read_metadata(path) == {"k": "v"}


def test_unaligned_offset_yields_an_aligned_correct_copy(tmp_path):
    values = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    header = {
        "pad": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
        "x": {"dtype": "F32", "shape": [3], "data_offsets": [1, 13]},
    }
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)  # data section starts 8-aligned, so x sits at an odd address
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"\x09" + values.tobytes())

    x, dtype = read_safetensors(path)["x"]
    assert dtype == "F32"
    assert x.flags.aligned and x.flags.c_contiguous and not x.flags.writeable
    assert np.array_equal(x, values)
    assert read_safetensors(path)["pad"][0][0] == 9
