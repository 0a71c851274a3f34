"""Reading and writing the Hugging Face safetensors format with numpy alone.

File layout (little-endian throughout):

    u64 N                        header length in bytes
    N bytes of UTF-8 JSON        {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
                                  "__metadata__": {str: str}}  (metadata optional)
    data section                 tensor bytes; offsets are relative to its start

A file is accepted only if it passes the reference implementation's checks (header size, JSON shape, dtype,
offsets inside the data section and consistent with dtype and shape, no overlaps and no holes). Tensors come
back as read-only views of one memory map of the file, so loading costs no copy and no time. BF16 has no
numpy dtype: it travels as np.uint16 raw bits, next to the dtype name.

A sharded checkpoint is a directory with model.safetensors.index.json ({"weight_map": {name: shard_file}})
and the shards it names; read_checkpoint_tensors() reads either layout.
"""

import json
import os

import numpy as np

from .errors import CheckpointError, CheckpointNotFoundError, InvalidInputError

__all__ = [
    "DTYPES",
    "SINGLE_FILE_NAME",
    "INDEX_FILE_NAME",
    "read_safetensors",
    "read_metadata",
    "save_file",
    "read_checkpoint_tensors",
    "checkpoint_files",
    "to_bfloat16_bits",
    "bfloat16_bits_to_float32",
]

# safetensors dtype name -> numpy dtype of the stored bytes (BF16: its raw bits).
DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
# numpy dtype -> safetensors name, for plain arrays given to save_file (uint16 means U16, never BF16).
_NAME_OF_NUMPY = {dt: name for name, dt in DTYPES.items() if name != "BF16"}

SINGLE_FILE_NAME = "model.safetensors"
INDEX_FILE_NAME = "model.safetensors.index.json"

MAX_HEADER_BYTES = 100_000_000  # the reference implementation's limit
_CHUNK = 1 << 20  # elements per step of to_bfloat16_bits
_REDOWNLOAD = "the file is truncated or corrupt — re-download or re-save it"


def _fail(path, problem, fix=_REDOWNLOAD):
    return CheckpointError(f"{os.path.basename(path)}: {problem}; {fix}")


def _no_duplicate_keys(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _read_header(path):
    """-> (header dict, data section start, data section size). Checks only the framing and the JSON."""
    if not os.path.isfile(path):
        raise CheckpointNotFoundError(
            f"{path}: no such file; check the path, or download the checkpoint's weights into that directory")
    file_size = os.path.getsize(path)
    if file_size < 8:
        raise _fail(path, f"the file is {file_size} bytes, shorter than the 8-byte header length that starts "
                          "every safetensors file")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        if n > MAX_HEADER_BYTES:
            raise _fail(path, f"the header length field says {n} bytes, more than the {MAX_HEADER_BYTES}-byte "
                              "limit; this is not a safetensors file or it is corrupt",
                        "check that the file really is .safetensors, then re-download or re-save it")
        if 8 + n > file_size:
            raise _fail(path, f"the header length field says {n} bytes, past the end of the file "
                              f"(only {file_size - 8} bytes follow it)")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, ValueError) as e:
        raise _fail(path, f"the {n}-byte header is not valid UTF-8 JSON ({e})") from None
    if not isinstance(header, dict):
        raise _fail(path, f"the header is a JSON {type(header).__name__}, not a JSON object")
    return header, 8 + n, file_size - 8 - n


def _check_header(path, header, data_size):
    """Validate every entry; -> (metadata or None, {name: (dtype name, shape tuple, begin, end)})."""
    metadata = header.get("__metadata__")
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        raise _fail(path, "'__metadata__' is not an object mapping strings to strings")
    entries = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        where = f"tensor {name!r}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise _fail(path, f"{where} has header entry {keys}, expected exactly the keys "
                              "['data_offsets', 'dtype', 'shape']")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES:
            raise _fail(path, f"{where} has dtype {dtype!r}, which this reader does not support "
                              f"(supported: {', '.join(DTYPES)})",
                        "re-save the checkpoint with one of the supported dtypes")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise _fail(path, f"{where} has shape {shape!r}, not a list of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            raise _fail(path, f"{where} has data_offsets {offsets!r}, not a pair of integers [begin, end]")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise _fail(path, f"{where} has data_offsets {offsets} with begin > end or begin < 0")
        if end > data_size:
            raise _fail(path, f"{where} has data_offsets {offsets} past the end of the data section "
                              f"({data_size} bytes)")
        nbytes = int(np.prod(shape, dtype=object)) * DTYPES[dtype].itemsize
        if end - begin != nbytes:
            raise _fail(path, f"{where} has data_offsets {offsets} spanning {end - begin} bytes, but dtype "
                              f"{dtype} and shape {shape} need {nbytes} bytes")
        entries[name] = (dtype, tuple(shape), begin, end)

    # The data section must be tiled exactly: sorted by (begin, end), each tensor starts where the last ended.
    position, previous = 0, None
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if begin < position:
            raise _fail(path, f"tensor {name!r} (bytes {begin}..{end}) overlaps tensor {previous!r} "
                              f"(which ends at byte {position})")
        if begin > position:
            raise _fail(path, f"bytes {position}..{begin} of the data section belong to no tensor "
                              f"(a hole before tensor {name!r})")
        position, previous = end, name
    if position != data_size:
        raise _fail(path, f"bytes {position}..{data_size} at the end of the data section belong to no tensor")
    return metadata, entries


def read_safetensors(path):
    """Read a .safetensors file -> {name: (array, dtype name)}.

    Each array is a read-only, C-contiguous view of one np.memmap of the file (zero copy), shaped as stored;
    a tensor whose bytes are not aligned to its itemsize comes back as an aligned read-only copy instead.
    BF16 tensors are np.uint16 raw bits. Raises CheckpointNotFoundError or CheckpointError.
    """
    header, data_start, data_size = _read_header(path)
    _, entries = _check_header(path, header, data_size)
    mm = np.memmap(path, mode="r")
    tensors = {}
    for name, (dtype, shape, begin, end) in entries.items():
        np_dtype = DTYPES[dtype]
        array = np.ndarray(shape, dtype=np_dtype, buffer=mm, offset=data_start + begin)
        if (data_start + begin) % np_dtype.itemsize:
            array = array.copy()  # the C core reads weights as float*/uint16_t*: needs natural alignment
            array.flags.writeable = False
        tensors[name] = (array, dtype)
    return tensors


def read_metadata(path):
    """The header's "__metadata__" dict of strings ({} if absent), after validating the whole header."""
    header, _, data_size = _read_header(path)
    metadata, _ = _check_header(path, header, data_size)
    return dict(metadata or {})


def _as_stored(name, value):
    """A save_file value -> (C-contiguous little-endian array, dtype name)."""
    if isinstance(value, tuple):
        if len(value) != 2 or value[1] not in DTYPES:
            raise InvalidInputError(f"save_file: tensor {name!r} is a tuple {value[1:]!r}; a tuple must be "
                                    f"(array, dtype name) with a dtype name among {', '.join(DTYPES)}")
        array, dtype = np.asarray(value[0]), value[1]
        if array.dtype.newbyteorder("<") != DTYPES[dtype]:
            raise InvalidInputError(f"save_file: tensor {name!r} is stored as {dtype} but its array has dtype "
                                    f"{array.dtype}; pass an array of {DTYPES[dtype]} (BF16: np.uint16 bits, "
                                    "see to_bfloat16_bits)")
    else:
        array = np.asarray(value)
        dtype = _NAME_OF_NUMPY.get(array.dtype.newbyteorder("<"))
        if dtype is None:
            raise InvalidInputError(f"save_file: tensor {name!r} has numpy dtype {array.dtype}, which "
                                    "safetensors cannot store; convert it (bfloat16: pass (to_bfloat16_bits(a), "
                                    "'BF16'))")
    return np.asarray(array, dtype=DTYPES[dtype], order="C"), dtype


def save_file(tensors, path, metadata=None):
    """Write tensors ({name: np.ndarray or (array, dtype name)}) to path as a valid .safetensors file.

    Tensors are laid out contiguously in sorted-name order; the header JSON is padded with spaces to a
    multiple of 8 bytes, as the reference writer does. The file is written beside path and renamed into
    place, so a failure never leaves a half-written file and a live memory map of the old file stays valid.
    """
    if metadata is not None and not (isinstance(metadata, dict) and
                                     all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise InvalidInputError(f"save_file: metadata must be a dict of str to str, got {metadata!r}")
    stored, header, offset = [], {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        if not isinstance(name, str) or name == "__metadata__":
            raise InvalidInputError(f"save_file: tensor name {name!r} is not allowed; use a str other than "
                                    "'__metadata__'")
        array, dtype = _as_stored(name, tensors[name])
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
        stored.append(array)
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)

    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(len(blob).to_bytes(8, "little"))
            f.write(blob)
            for array in stored:
                f.write(array.reshape(-1).view(np.uint8).data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def to_bfloat16_bits(a):
    """float32 values -> np.uint16 bfloat16 bits, rounded to nearest even; NaN stays NaN (quiet), inf stays inf.

    Input is converted to float32 first (a float64 input is thus rounded twice). Works in chunks, so
    converting a large matrix needs little memory beyond the result.
    """
    values = np.asarray(a, dtype=np.float32, order="C")
    out = np.empty(values.shape, dtype=np.uint16)
    flat_bits, flat_out = values.reshape(-1).view(np.uint32), out.reshape(-1)
    for start in range(0, flat_bits.size, _CHUNK):
        bits = flat_bits[start:start + _CHUNK]
        rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16  # wraps only for NaN, replaced below
        quiet_nan = (bits >> 16) | np.uint32(0x0040)
        flat_out[start:start + _CHUNK] = np.where(np.isnan(bits.view(np.float32)), quiet_nan, rounded)
    return out


def bfloat16_bits_to_float32(bits):
    """np.uint16 bfloat16 bits -> np.float32 array of the same shape (exact)."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        raise InvalidInputError(f"bfloat16_bits_to_float32: expected np.uint16 bits, got dtype {bits.dtype}")
    wide = bits.astype(np.uint32)
    wide <<= np.uint32(16)
    return wide.view(np.float32)


def _read_index(directory, index_path):
    """-> {tensor name: shard file name} from model.safetensors.index.json, validated."""
    try:
        with open(index_path, "rb") as f:
            index = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _fail(index_path, f"not valid UTF-8 JSON ({e})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not (isinstance(weight_map, dict) and
            all(isinstance(v, str) and v for v in weight_map.values())):
        raise _fail(index_path, "has no \"weight_map\" object mapping tensor names to shard file names")
    for name, shard in weight_map.items():
        if os.path.isabs(shard) or ".." in shard.replace("\\", "/").split("/"):
            raise _fail(index_path, f"tensor {name!r} is mapped to shard {shard!r}, a path outside {directory}",
                        "fix the weight_map to name files inside the checkpoint directory")
    return weight_map


def checkpoint_files(directory):
    """Read the weights of a checkpoint directory -> (tensors {name: (array, dtype)}, {name: file name}).

    Single file: model.safetensors. Otherwise model.safetensors.index.json and every shard it names; a shard's
    tensors absent from the weight_map are kept (as Transformers loads whole shards).
    """
    if not os.path.isdir(directory):
        raise CheckpointNotFoundError(f"{directory}: no such checkpoint directory; check the path")
    single = os.path.join(directory, SINGLE_FILE_NAME)
    index_path = os.path.join(directory, INDEX_FILE_NAME)
    if os.path.isfile(single):
        tensors = read_safetensors(single)
        return tensors, dict.fromkeys(tensors, SINGLE_FILE_NAME)
    if not os.path.isfile(index_path):
        raise CheckpointNotFoundError(
            f"{directory}: has neither {SINGLE_FILE_NAME} nor {INDEX_FILE_NAME}; download the checkpoint's "
            "safetensors weights into it (.bin/PyTorch weights are not supported: convert them to safetensors)")
    weight_map = _read_index(directory, index_path)
    tensors, origin = {}, {}
    for shard in sorted(set(weight_map.values())):
        shard_path = os.path.join(directory, shard)
        if not os.path.isfile(shard_path):
            users = sorted(n for n, s in weight_map.items() if s == shard)
            raise CheckpointNotFoundError(
                f"{INDEX_FILE_NAME}: shard {shard!r} (holding {len(users)} tensor(s), e.g. {users[0]!r}) is "
                f"missing from {directory}; download every shard the index names")
        for name, value in read_safetensors(shard_path).items():
            if name in tensors:
                raise _fail(shard_path, f"tensor {name!r} is also stored in shard {origin[name]!r}",
                            "a tensor must live in exactly one shard — re-save the checkpoint")
            tensors[name], origin[name] = value, shard
    for name, shard in weight_map.items():
        if origin.get(name) != shard:
            found = f"it is in {origin[name]!r}" if name in origin else "no shard holds it"
            raise _fail(index_path, f"weight_map says tensor {name!r} is in {shard!r} but {found}",
                        "the index does not match the shards — re-download the checkpoint")
    return tensors, origin


def read_checkpoint_tensors(directory):
    """All tensors of a checkpoint directory (single file or sharded) -> {name: (array, dtype name)}."""
    return checkpoint_files(directory)[0]
