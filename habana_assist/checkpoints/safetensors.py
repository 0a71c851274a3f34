"""Reading and writing the Hugging Face safetensors format with numpy alone.

File layout (little-endian throughout):

    u64 N                        header length in bytes
    N bytes of UTF-8 JSON        {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
                                  "__metadata__": {str: str}}  (metadata optional)
    data section                 tensor bytes; offsets are relative to its start

A file is accepted only if it passes the reference implementation's checks (header size, JSON shape, dtype,
offsets inside the data section and consistent with dtype and shape, no overlaps and no holes). BF16 has no
numpy dtype: it travels as np.uint16 raw bits, next to the dtype name.

SafetensorsFile opens a file once and reads its header and its data through that one descriptor (pread), so
header and data always come from one file, even if the path is renamed over meanwhile, and a file truncated
by another process gives a short read and a CheckpointError naming it. Its view() (and read_safetensors)
hands out read-only views of a memory map of the file instead: no copy, pages shared between processes, but
a page of the map read after the file was truncated in place raises SIGBUS, which kills the process. So the
loader reads with pread every byte it converts, packs, quantizes or copies, and maps only what it keeps as
stored (repack=False); a file replaced by rename is always safe, since the map holds the old inode.

A sharded checkpoint is a directory with model.safetensors.index.json ({"weight_map": {name: shard_file}})
and the shards it names; read_checkpoint_tensors() reads either layout.
"""

import json
import os

import numpy as np

from ..errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from ..utils.files import write_atomic

__all__ = [
    "DTYPES",
    "SINGLE_FILE_NAME",
    "INDEX_FILE_NAME",
    "read_safetensors",
    "read_metadata",
    "save_file",
    "read_checkpoint_tensors",
    "checkpoint_files",
    "open_checkpoint",
    "SafetensorsFile",
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
_MAX_DIMS = 32  # numpy's limit on an array's dimensions
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


def _open(path):
    """-> a file descriptor of path, open for reading (CheckpointNotFoundError if it is not a file)."""
    try:
        if os.path.isfile(path):
            return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        pass
    raise CheckpointNotFoundError(
        f"{path}: no such file; check the path, or download the checkpoint's weights into that directory"
    )


def _changed(path, problem):
    return CheckpointError(
        f"{path}: the file changed while loading ({problem}); re-run once it is fully "
        "written (saved or copied) and nothing else writes it"
    )


def _pread(path, fd, n, offset):
    """n bytes of fd from offset; a file that ends sooner (it shrank since fstat) -> CheckpointError."""
    data = os.pread(fd, n, offset)
    while len(data) < n:
        more = os.pread(fd, n - len(data), offset + len(data))
        if not more:
            raise _changed(path, f"it ends at byte {offset + len(data)}, before the {n} bytes read at {offset}")
        data += more
    return data


def _read_header(path, fd=None):
    """-> (header dict, data section start, data section size). Checks only the framing and the JSON.

    fd: the file, open for reading (its size comes from fstat, its bytes from pread); None opens path."""
    if fd is None:
        fd = _open(path)
        try:
            return _read_header(path, fd)
        finally:
            os.close(fd)
    file_size = os.fstat(fd).st_size
    if file_size < 8:
        raise _fail(
            path,
            f"the file is {file_size} bytes, shorter than the 8-byte header length that starts every safetensors file",
        )
    n = int.from_bytes(_pread(path, fd, 8, 0), "little")
    if n > MAX_HEADER_BYTES:
        raise _fail(
            path,
            f"the header length field says {n} bytes, more than the {MAX_HEADER_BYTES}-byte "
            "limit; this is not a safetensors file or it is corrupt",
            "check that the file really is .safetensors, then re-download or re-save it",
        )
    if 8 + n > file_size:
        raise _fail(
            path,
            f"the header length field says {n} bytes, past the end of the file (only {file_size - 8} bytes follow it)",
        )
    raw = _pread(path, fd, n, 8)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nesting too deep to parse
        raise _fail(path, f"the {n}-byte header is not valid UTF-8 JSON ({e})") from None
    if not isinstance(header, dict):
        raise _fail(path, f"the header is a JSON {type(header).__name__}, not a JSON object")
    return header, 8 + n, file_size - 8 - n


def _overflows(shape, itemsize):
    """Whether a numpy array of this shape cannot exist: its byte count, or that of its nonzero dimensions
    (numpy multiplies those even when another is 0), reaches 2**63."""
    nonzero = 1
    for d in shape:
        nonzero *= max(d, 1)
    return nonzero * itemsize >= 2**63


def _check_header(path, header, data_size):
    """Validate every entry; -> (metadata or None, {name: (dtype name, shape tuple, begin, end)})."""
    metadata = header.get("__metadata__")
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise _fail(path, "'__metadata__' is not an object mapping strings to strings")
    entries = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        where = f"tensor {name!r}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise _fail(
                path, f"{where} has header entry {keys}, expected exactly the keys ['data_offsets', 'dtype', 'shape']"
            )
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not (isinstance(dtype, str) and dtype in DTYPES):
            raise _fail(
                path,
                f"{where} has dtype {dtype!r}, which this reader does not support (supported: {', '.join(DTYPES)})",
                "re-save the checkpoint with one of the supported dtypes",
            )
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise _fail(path, f"{where} has shape {shape!r}, not a list of non-negative integers")
        if len(shape) > _MAX_DIMS or _overflows(shape, DTYPES[dtype].itemsize):
            raise _fail(
                path,
                f"{where} has shape {shape} of more than {_MAX_DIMS} dimensions or of more than "
                "2**63 bytes (dimensions beside a 0 included), which no array can have",
            )
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            raise _fail(path, f"{where} has data_offsets {offsets!r}, not a pair of integers [begin, end]")
        begin, end = offsets
        if not 0 <= begin <= end:
            raise _fail(path, f"{where} has data_offsets {offsets} with begin > end or begin < 0")
        if end > data_size:
            raise _fail(
                path, f"{where} has data_offsets {offsets} past the end of the data section ({data_size} bytes)"
            )
        nbytes = int(np.prod(shape, dtype=object)) * DTYPES[dtype].itemsize
        if end - begin != nbytes:
            raise _fail(
                path,
                f"{where} has data_offsets {offsets} spanning {end - begin} bytes, but dtype "
                f"{dtype} and shape {shape} need {nbytes} bytes",
            )
        entries[name] = (dtype, tuple(shape), begin, end)

    # The data section must be tiled exactly: sorted by (begin, end), each tensor starts where the last ended.
    position, previous = 0, None
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if begin < position:
            raise _fail(
                path,
                f"tensor {name!r} (bytes {begin}..{end}) overlaps tensor {previous!r} (which ends at byte {position})",
            )
        if begin > position:
            raise _fail(
                path,
                f"bytes {position}..{begin} of the data section belong to no tensor (a hole before tensor {name!r})",
            )
        position, previous = end, name
    if position != data_size:
        raise _fail(path, f"bytes {position}..{data_size} at the end of the data section belong to no tensor")
    return metadata, entries


class SafetensorsFile:
    """One .safetensors file open for loading: path, metadata (or None), entries ({name: (dtype name, shape,
    begin, end)}, offsets into the data section), data_start (the data section's offset in the file).

    Header and data are read through one file descriptor, opened once: the size checked against the header is
    that descriptor's fstat, so a path renamed over meanwhile changes nothing, and read_into() reads with
    pread, so a file truncated meanwhile gives CheckpointError, never SIGBUS. view() maps the file (from the
    same descriptor) for what the caller keeps as stored. check_unchanged() compares size and modification
    time with the first fstat, catching a rewrite in place. Close it (or use it in a with block) once read;
    views outlive it.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._fd = _open(self.path)
        try:
            self._stat = os.fstat(self._fd)
            header, self.data_start, data_size = _read_header(self.path, self._fd)
            self.metadata, self.entries = _check_header(self.path, header, data_size)
        except BaseException:
            self.close()
            raise
        self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def offset(self, name):
        """The byte offset of tensor name's data in the file."""
        return self.data_start + self.entries[name][2]

    def read_into(self, out, offset, name):
        """Fill out (a writable C-contiguous array) with the file's bytes from offset by pread. A file that
        ends sooner (another process truncated it) -> CheckpointError naming the file and the tensor name."""
        buf = memoryview(out).cast("B") if out.nbytes else b""
        done = 0
        while done < len(buf):
            n = os.preadv(self._fd, [buf[done:]], offset + done)
            if n == 0:
                raise _changed(
                    self.path,
                    f"tensor {name!r} needs bytes {offset}..{offset + len(buf)} but the file "
                    f"now ends at byte {offset + done}",
                )
            done += n

    def view(self, name):
        """Tensor name as stored: a read-only C-contiguous view of a memory map of the file (zero copy), or,
        for a tensor whose bytes are not aligned to its itemsize, an aligned read-only copy."""
        dtype, shape, _, _ = self.entries[name]
        np_dtype, offset = DTYPES[dtype], self.offset(name)
        if offset % np_dtype.itemsize:  # the C core reads weights as float*/uint16_t*: needs natural alignment
            array = np.empty(shape, dtype=np_dtype)
            self.read_into(array, offset, name)
            array.flags.writeable = False
            return array
        if self._map is None:
            with open(self._fd, "rb", closefd=False) as f:
                try:
                    self._map = np.memmap(f, mode="r", shape=(self._stat.st_size,))
                except ValueError:  # numpy: "mmap length is greater than file size"
                    raise _changed(
                        self.path,
                        f"it was {self._stat.st_size} bytes when opened and is {os.fstat(self._fd).st_size} now",
                    ) from None
        return np.ndarray(shape, dtype=np_dtype, buffer=self._map, offset=offset)

    def check_unchanged(self):
        """CheckpointError if the file's size or modification time differ from when it was opened."""
        now = os.fstat(self._fd)
        if now.st_size != self._stat.st_size:
            raise _changed(self.path, f"it was {self._stat.st_size} bytes when opened and is {now.st_size} now")
        if now.st_mtime_ns != self._stat.st_mtime_ns:
            raise _changed(self.path, "it was written to after it was opened")


def read_safetensors(path):
    """Read a .safetensors file -> {name: (array, dtype name)}.

    Each array is a read-only, C-contiguous view of one np.memmap of the file (zero copy), shaped as stored;
    a tensor whose bytes are not aligned to its itemsize comes back as an aligned read-only copy instead.
    BF16 tensors are np.uint16 raw bits. Truncating the file in place while a view is alive makes reading the
    view raise SIGBUS; replacing it by rename is safe. Raises CheckpointNotFoundError or CheckpointError.
    """
    with SafetensorsFile(path) as f:
        tensors = {name: (f.view(name), dtype) for name, (dtype, _, _, _) in f.entries.items()}
        f.check_unchanged()
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
            raise InvalidInputError(
                f"save_file: tensor {name!r} is a tuple {value[1:]!r}; a tuple must be "
                f"(array, dtype name) with a dtype name among {', '.join(DTYPES)}"
            )
        array, dtype = np.asarray(value[0]), value[1]
        if array.dtype.newbyteorder("<") != DTYPES[dtype]:
            raise InvalidInputError(
                f"save_file: tensor {name!r} is stored as {dtype} but its array has dtype "
                f"{array.dtype}; pass an array of {DTYPES[dtype]} (BF16: np.uint16 bits, "
                "see to_bfloat16_bits)"
            )
    else:
        array = np.asarray(value)
        dtype = _NAME_OF_NUMPY.get(array.dtype.newbyteorder("<"))
        if dtype is None:
            raise InvalidInputError(
                f"save_file: tensor {name!r} has numpy dtype {array.dtype}, which "
                "safetensors cannot store; convert it (bfloat16: pass (to_bfloat16_bits(a), "
                "'BF16'))"
            )
    return np.asarray(array, dtype=DTYPES[dtype], order="C"), dtype


def save_file(tensors, path, metadata=None):
    """Write tensors ({name: np.ndarray or (array, dtype name)}) to path as a valid .safetensors file.

    Tensors are laid out contiguously in sorted-name order; the header JSON is padded with spaces to a
    multiple of 8 bytes, as the reference writer does. The file is written beside path and renamed into
    place, so a failure never leaves a half-written file and a live memory map of the old file stays valid.
    """
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    ):
        raise InvalidInputError(f"save_file: metadata must be a dict of str to str, got {metadata!r}")
    stored, entries = [], []
    for name in sorted(tensors):
        if not isinstance(name, str) or name == "__metadata__":
            raise InvalidInputError(
                f"save_file: tensor name {name!r} is not allowed; use a str other than '__metadata__'"
            )
        array, dtype = _as_stored(name, tensors[name])
        entries.append((name, dtype, array.shape, array.nbytes))
        stored.append(array)
    prefix = header_prefix(entries, metadata)

    def write(f):
        f.write(prefix)
        for array in stored:
            f.write(array.reshape(-1).view(np.uint8).data)

    write_atomic(path, write)


def header_prefix(entries, metadata=None):
    """The bytes before a .safetensors file's data: the header's length (u64, little-endian), then the JSON header
    (__metadata__ if given, then each (name, dtype, shape, nbytes) of entries at consecutive offsets, in the order
    given), padded with spaces to a multiple of 8 bytes as the reference writer does."""
    header, offset = ({} if metadata is None else {"__metadata__": metadata}), 0
    for name, dtype, shape, nbytes in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    return len(blob).to_bytes(8, "little") + blob


def to_bfloat16_bits(a):
    """float32 values -> np.uint16 bfloat16 bits, rounded to nearest even; NaN stays NaN (quiet), inf stays inf.

    Input is converted to float32 first (a float64 input is thus rounded twice). Works in chunks, so
    converting a large matrix needs little memory beyond the result.
    """
    values = np.asarray(a, dtype=np.float32, order="C")
    out = np.empty(values.shape, dtype=np.uint16)
    flat_bits, flat_out = values.reshape(-1).view(np.uint32), out.reshape(-1)
    for start in range(0, flat_bits.size, _CHUNK):
        bits = flat_bits[start : start + _CHUNK]
        rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & 1))) >> 16  # wraps only for NaN, replaced below
        quiet_nan = (bits >> 16) | np.uint32(0x0040)
        flat_out[start : start + _CHUNK] = np.where(np.isnan(bits.view(np.float32)), quiet_nan, rounded)
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
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nesting too deep to parse
        raise _fail(index_path, f"not valid UTF-8 JSON ({e})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not (isinstance(weight_map, dict) and all(isinstance(v, str) and v for v in weight_map.values())):
        raise _fail(index_path, 'has no "weight_map" object mapping tensor names to shard file names')
    for name, shard in weight_map.items():
        if os.path.isabs(shard) or ".." in shard.replace("\\", "/").split("/"):
            raise _fail(
                index_path,
                f"tensor {name!r} is mapped to shard {shard!r}, a path outside {directory}",
                "fix the weight_map to name files inside the checkpoint directory",
            )
    return weight_map


def open_checkpoint(directory):
    """Open the weights of a checkpoint directory -> (files {file name: SafetensorsFile}, {tensor name: file
    name}), every header checked; the caller closes the files (all of them are closed if this raises).

    Single file: model.safetensors. Otherwise model.safetensors.index.json and every shard it names; a shard's
    tensors absent from the weight_map are kept (as Transformers loads whole shards).
    """
    if not os.path.isdir(directory):
        raise CheckpointNotFoundError(f"{directory}: no such checkpoint directory; check the path")
    single = os.path.join(directory, SINGLE_FILE_NAME)
    index_path = os.path.join(directory, INDEX_FILE_NAME)
    if os.path.isfile(single):
        f = SafetensorsFile(single)
        return {SINGLE_FILE_NAME: f}, dict.fromkeys(f.entries, SINGLE_FILE_NAME)
    if not os.path.isfile(index_path):
        raise CheckpointNotFoundError(
            f"{directory}: has neither {SINGLE_FILE_NAME} nor {INDEX_FILE_NAME}; download the checkpoint's "
            "safetensors weights into it (.bin/PyTorch weights are not supported: convert them to safetensors)"
        )
    weight_map = _read_index(directory, index_path)
    files, origin = {}, {}
    try:
        for shard in sorted(set(weight_map.values())):
            shard_path = os.path.join(directory, shard)
            if not os.path.isfile(shard_path):
                users = sorted(n for n, s in weight_map.items() if s == shard)
                raise CheckpointNotFoundError(
                    f"{INDEX_FILE_NAME}: shard {shard!r} (holding {len(users)} tensor(s), e.g. {users[0]!r}) is "
                    f"missing from {directory}; download every shard the index names"
                )
            files[shard] = SafetensorsFile(shard_path)
            for name in files[shard].entries:
                if name in origin:
                    raise _fail(
                        shard_path,
                        f"tensor {name!r} is also stored in shard {origin[name]!r}",
                        "a tensor must live in exactly one shard — re-save the checkpoint",
                    )
                origin[name] = shard
        for name, shard in weight_map.items():
            if origin.get(name) != shard:
                found = f"it is in {origin[name]!r}" if name in origin else "no shard holds it"
                raise _fail(
                    index_path,
                    f"weight_map says tensor {name!r} is in {shard!r} but {found}",
                    "the index does not match the shards — re-download the checkpoint",
                )
    except BaseException:
        for f in files.values():
            f.close()
        raise
    return files, origin


def checkpoint_files(directory):
    """Read the weights of a checkpoint directory -> (tensors {name: (array, dtype)}, {name: file name}), the
    arrays views of memory maps of the files as read_safetensors gives them (see open_checkpoint)."""
    files, origin = open_checkpoint(directory)
    try:
        tensors = {name: (files[file].view(name), files[file].entries[name][0]) for name, file in origin.items()}
        for f in files.values():
            f.check_unchanged()
    finally:
        for f in files.values():
            f.close()
    return tensors, origin


def read_checkpoint_tensors(directory):
    """All tensors of a checkpoint directory (single file or sharded) -> {name: (array, dtype name)}."""
    return checkpoint_files(directory)[0]
