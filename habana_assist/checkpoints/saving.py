"""model.save_pretrained(directory): a Hugging Face checkpoint directory that Transformers and this package load.

save_model() writes config.json, generation_config.json and the weights as Transformers' save_pretrained
does: model.safetensors, or above max_shard_size the shards model-00001-of-0000N.safetensors with
model.safetensors.index.json. Tensor names are Transformers' for the model's family (lm_head.weight left out
when the embedding is tied; GPT-2's with the "transformer." prefix GPT2LMHeadModel saves), in the order of
Transformers' state_dict, and the shards are cut as huggingface_hub cuts them. GPT-2's Conv1D matrices, which
the model holds (out, in), are written back (in, out), as stored.

Weights are the model's own, bit for bit: float matrices held in the core's panels (repack=True) are unpacked
back to row-major (unpack_panels, the inverse of csrc/model/quant.c's ha_pack), matrices held row-major are written
as they are, and vectors (norms, biases), which the model holds as float32, are written in the model's dtype
when that is exact (it is whenever the model was loaded in that dtype) and as float32 otherwise. So
from_pretrained(directory) with the same repack gives bitwise-equal logits. Models quantized at load (int8,
int4) are refused: their blocks are this package's own format, which no safetensors reader understands.

Every file is written beside its final name and renamed into place, so a failure leaves no half-written file
and a model that maps the directory's old model.safetensors (repack=False) may save over it. Weight files of
an earlier save in the directory that this save did not write are removed afterwards, as Transformers does:
a stale model.safetensors would otherwise shadow new shards.
"""

import os
import re

import numpy as np

from ..configuration_utils import CONFIG_NAME, named_config_dict
from ..errors import InvalidInputError
from ..generation.configuration_utils import GENERATION_CONFIG_NAME
from ..models import FAMILIES
from ..models.family import layer_tensors
from ..utils.files import write_atomic, write_json
from .loading import PANEL_ROWS, expected_weights
from .safetensors import INDEX_FILE_NAME, SINGLE_FILE_NAME, bfloat16_bits_to_float32, header_prefix, to_bfloat16_bits

__all__ = ["save_model", "parse_shard_size", "unpack_panels", "state_dict_names", "CONFIG_NAME"]

_STORED = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}  # Weight.dtype -> safetensors dtype
_ELEMENT = {"F32": np.dtype("<f4"), "BF16": np.dtype("<u2"), "F16": np.dtype("<f2")}  # BF16: its bits
_SIZE_UNITS = {
    "TB": 10**12,
    "GB": 10**9,
    "MB": 10**6,
    "KB": 10**3,
    "TIB": 2**40,
    "GIB": 2**30,
    "MIB": 2**20,
    "KIB": 2**10,
}
_SHARD_FILE = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")
_CHUNK_BYTES = 8 << 20  # bytes of a tensor converted and written at a time


def parse_shard_size(max_shard_size):
    """max_shard_size as huggingface_hub reads it -> bytes: an int, or a str of a number and a unit, decimal
    "TB", "GB", "MB", "KB" (case-insensitive, "5GB" = 5 * 10**9, "0.5GB" allowed) or binary "GiB", "MiB"..."""
    if isinstance(max_shard_size, (int, np.integer)) and not isinstance(max_shard_size, (bool, np.bool_)):
        size = int(max_shard_size)
    elif isinstance(max_shard_size, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]+)\s*", max_shard_size)
        unit = match and match.group(2).upper()
        if unit not in _SIZE_UNITS:
            raise InvalidInputError(
                f"save_pretrained: max_shard_size={max_shard_size!r} is not a size; pass bytes "
                "as an int or a string such as '5GB', '500MB' or '10KB' (decimal units, as "
                "Transformers)"
            )
        size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    else:
        raise InvalidInputError(
            f"save_pretrained: max_shard_size={max_shard_size!r} must be an int (bytes) or a string such as '5GB'"
        )
    if size < 1:
        raise InvalidInputError(f"save_pretrained: max_shard_size={max_shard_size!r} must be at least 1 byte")
    return size


def state_dict_names(config):
    """The tensor names a Transformers model of this config's family saves, in its state_dict order: the family's
    tensors (models/<family>.py) in the order they are listed there, which is the registration order of each
    family's modeling_*.py modules, each layer's in turn; those whose condition the config does not meet left out
    (a tied lm_head, as save_pretrained leaves it out; biases the config does not have)."""
    before, layers, after = layer_tensors(FAMILIES[config.family], config)
    return [name for name, _ in before] + [name for layer in layers for name, _ in layer] + [name for name, _ in after]


def _panel_order(dtype):
    """order[i]: where row i of a panel sits within each column (csrc/kernels/formats.h, ha_panel_pos)."""
    i = np.arange(PANEL_ROWS)
    if dtype != "bfloat16":
        return i
    half = PANEL_ROWS // 2
    return np.where(i < half, 2 * i, 2 * (i - half) + 1)


def _unpack_rows(panels, dtype, cols, first, last):
    """Panels first..last-1 of a matrix in the core's panels -> their rows, row-major (a copy)."""
    # panels: (panel count * PANEL_ROWS, cols); panel p is cols columns of PANEL_ROWS elements each.
    block = panels[first * PANEL_ROWS : last * PANEL_ROWS].reshape(last - first, cols, PANEL_ROWS)
    by_row = block[:, :, _panel_order(dtype)]  # (panels, cols, row in panel)
    return np.ascontiguousarray(by_row.transpose(0, 2, 1)).reshape((last - first) * PANEL_ROWS, cols)


def unpack_panels(array, dtype, rows, cols):
    """A float matrix in the core's panels (loading.Weight with panels=True: array (rows rounded up to whole
    panels, cols) of dtype's element type) -> the (rows, cols) row-major matrix, bit for bit."""
    count = -(-rows // PANEL_ROWS)
    if array.shape != (count * PANEL_ROWS, cols):
        raise InvalidInputError(
            f"unpack_panels: a ({rows}, {cols}) matrix in panels is an array of shape "
            f"{(count * PANEL_ROWS, cols)}, got {array.shape}"
        )
    return _unpack_rows(array, dtype, cols, 0, count)[:rows]


class _Tensor:
    """One tensor to write: name, dtype (safetensors name), shape, nbytes, chunks() -> C-contiguous arrays of the
    stored element type whose bytes, one after the other, are the tensor's."""

    def __init__(self, name, dtype, shape, chunks):
        self.name, self.dtype, self.shape = name, dtype, tuple(int(d) for d in shape)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * _ELEMENT[dtype].itemsize
        self.chunks = chunks


def _matrix(name, weight, transposed=False):
    """A float matrix Weight -> _Tensor of its row-major values in its own dtype; transposed: written as its
    transpose (GPT-2's Conv1D weights, held (out, in) by the model, are stored (in, out)), one full copy made."""
    dtype = _STORED[weight.dtype]
    if transposed:
        rows = weight.rows if weight.panels else weight.array.shape[0]
        held = (
            unpack_panels(weight.array, weight.dtype, rows, weight.cols)
            if weight.panels
            else weight.array.reshape(rows, weight.cols)
        )
        return _matrix(name, weight._replace(array=np.ascontiguousarray(held.T), cols=rows, panels=False, rows=None))
    if weight.panels:
        rows, cols = weight.rows, weight.cols
        step = max(1, _CHUNK_BYTES // max(1, weight.array.itemsize * cols * PANEL_ROWS))

        def chunks():
            for first in range(0, -(-rows // PANEL_ROWS), step):
                last = min(first + step, -(-rows // PANEL_ROWS))
                yield _unpack_rows(weight.array, weight.dtype, cols, first, last)[: rows - first * PANEL_ROWS]

        return _Tensor(name, dtype, (rows, cols), chunks)

    array = weight.array  # row-major, possibly a view of the loaded file's memory map

    def chunks():
        rows = array.reshape(array.shape[0] if array.ndim else 1, -1)
        step = max(1, _CHUNK_BYTES // max(1, rows.strides[0] if rows.shape[1] else 1))
        for first in range(0, rows.shape[0], step):
            yield np.ascontiguousarray(rows[first : first + step])

    return _Tensor(name, dtype, array.shape, chunks)


def _vector(name, weight, model_dtype):
    """A vector Weight (float32 values) -> _Tensor in the model's dtype where that is exact, else float32."""
    values = np.ascontiguousarray(weight.array, dtype=np.float32)
    stored = values
    if model_dtype == "bfloat16":
        bits = to_bfloat16_bits(values)
        if np.array_equal(bfloat16_bits_to_float32(bits).view(np.uint32), values.view(np.uint32)):
            stored = bits
    elif model_dtype == "float16":
        with np.errstate(over="ignore"):
            halves = values.astype(np.float16)
        if np.array_equal(halves.astype(np.float32).view(np.uint32), values.view(np.uint32)):
            stored = halves
    dtype = {np.dtype(np.float32): "F32", np.dtype(np.uint16): "BF16", np.dtype(np.float16): "F16"}[stored.dtype]
    return _Tensor(name, dtype, values.shape, lambda: iter((stored,)))


def _model_dtype(model, weights):
    """The dtype of the model's matrices (that of its first layer's, as model.weight_dtype says)."""
    dtype = getattr(model, "weight_dtype", None)
    dtype = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")  # a torch.dtype, np.float32...
    if dtype in _STORED:
        return dtype
    specs = expected_weights(model.config)
    layer_matrices = [spec.name for spec in specs if spec.is_matrix and spec.layer is not None]
    return weights[layer_matrices[0] if layer_matrices else specs[0].name].dtype


def _plan(model):
    """-> ([_Tensor] in Transformers' state_dict order, the model's dtype); InvalidInputError for what cannot be
    saved. Nothing is converted yet."""
    weights = getattr(model, "_weights", None)
    config = getattr(model, "config", None)
    if not isinstance(weights, dict) or config is None:
        raise InvalidInputError(
            f"save_pretrained: {type(model).__name__} holds no checkpoint weights to save; pass a "
            "model from AutoModelForCausalLM.from_pretrained"
        )
    quantized = sorted({w.dtype for w in weights.values() if w.dtype not in _STORED})
    if quantized:
        raise InvalidInputError(
            f"saving {'/'.join(quantized)} weights is not supported: load the original checkpoint "
            "with dtype=None or a float dtype to save it"
        )
    model_dtype = _model_dtype(model, weights)
    transposed = {spec.name for spec in expected_weights(config) if spec.transposed}
    tensors = []
    for name in state_dict_names(config):
        weight = weights[name]
        matrix = weight.panels or np.ndim(weight.array) == 2
        tensors.append(_matrix(name, weight, name in transposed) if matrix else _vector(name, weight, model_dtype))
    return tensors, model_dtype


def _shards(tensors, max_bytes):
    """huggingface_hub's cut: in order, a tensor that would take the current shard past max_bytes starts a new
    one; a tensor larger than max_bytes gets a shard of its own. -> [[_Tensor]]."""
    shards, current, size = [], [], 0
    for t in tensors:
        if t.nbytes > max_bytes:
            shards.append([t])
            continue
        if current and size + t.nbytes > max_bytes:
            shards.append(current)
            current, size = [], 0
        current.append(t)
        size += t.nbytes
    if current:
        shards.append(current)
    return shards


def _write_safetensors(path, tensors):
    """tensors -> a .safetensors file: u64 header length, the JSON header (metadata {"format": "pt"}, padded
    with spaces to a multiple of 8 bytes), then the data, widest elements first so that every tensor starts at
    a multiple of its element size (as the reference writer orders them), names sorted within a width."""
    ordered = sorted(tensors, key=lambda t: (-_ELEMENT[t.dtype].itemsize, t.name))
    prefix = header_prefix([(t.name, t.dtype, t.shape, t.nbytes) for t in ordered], {"format": "pt"})

    def write(f):
        f.write(prefix)
        for t in ordered:
            written = 0
            for chunk in t.chunks():
                data = np.ascontiguousarray(chunk, dtype=_ELEMENT[t.dtype])
                f.write(memoryview(data).cast("B") if data.nbytes else b"")
                written += data.nbytes
            if written != t.nbytes:  # a bug here, not the caller's: never write a file the header contradicts
                raise AssertionError(f"tensor {t.name}: wrote {written} bytes, the header says {t.nbytes}")

    write_atomic(path, write)


def _config_dict(model, dtype):
    """model.config as config.json: its fields, architectures named, torch_dtype the dtype saved."""
    config = named_config_dict(model.config)
    config["torch_dtype"] = dtype
    if "dtype" in config:  # Transformers >= 5 writes "dtype"; keep the two in agreement
        config["dtype"] = dtype
    return config


def _save_generation_config(model, save_directory):
    gc = getattr(model, "generation_config", None)
    if gc is None:
        return
    if callable(getattr(gc, "save_pretrained", None)):
        gc.save_pretrained(save_directory)
    else:
        write_json(os.path.join(save_directory, GENERATION_CONFIG_NAME), gc.to_dict())


def save_model(
    model, save_directory, max_shard_size="5GB", safe_serialization=True, push_to_hub=False, variant=None, **kwargs
):
    """Writes model (a native model from from_pretrained) into save_directory (created if needed) as a Hugging
    Face checkpoint: config.json, generation_config.json, and model.safetensors, or shards of at most
    max_shard_size bytes each (a single larger tensor gets its own) with model.safetensors.index.json.
    from_pretrained(save_directory) with the same repack gives bitwise-equal logits. Returns None, as Transformers.
    Raises InvalidInputError for int8/int4 models, safe_serialization=False, push_to_hub=True, a variant or any
    other argument, before writing anything."""
    if kwargs:
        raise InvalidInputError(
            f"save_pretrained: unexpected argument(s) {', '.join(sorted(kwargs))}; it takes "
            "save_directory, max_shard_size and safe_serialization"
        )
    if safe_serialization is not True:
        raise InvalidInputError(
            f"save_pretrained: safe_serialization={safe_serialization!r} asks for "
            "pytorch_model.bin (torch.save's pickle format), which this package does not write; "
            "leave safe_serialization=True (model.safetensors, which Transformers loads too)"
        )
    if push_to_hub:
        raise InvalidInputError(
            "save_pretrained: push_to_hub=True is not supported (this package downloads from the "
            "Hub but never uploads); save locally and upload the directory with huggingface-cli "
            "upload"
        )
    if variant is not None:
        raise InvalidInputError(
            f"save_pretrained: variant={variant!r} names weight files "
            f"(model.{variant}.safetensors) that from_pretrained does not read; leave it unset"
        )
    if not isinstance(save_directory, (str, os.PathLike)):
        raise InvalidInputError(f"save_pretrained: save_directory={save_directory!r} must be a path")
    save_directory = os.fspath(save_directory)
    if os.path.isfile(save_directory):
        raise InvalidInputError(f"save_pretrained: {save_directory} is a file; pass a directory")
    max_bytes = parse_shard_size(max_shard_size)
    tensors, dtype = _plan(model)
    shards = _shards(tensors, max_bytes)

    os.makedirs(save_directory, exist_ok=True)
    write_json(os.path.join(save_directory, CONFIG_NAME), _config_dict(model, dtype))
    _save_generation_config(model, save_directory)
    if len(shards) == 1:
        written = {SINGLE_FILE_NAME}
        _write_safetensors(os.path.join(save_directory, SINGLE_FILE_NAME), shards[0])
    else:
        names = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
        for file, shard in zip(names, shards):
            _write_safetensors(os.path.join(save_directory, file), shard)
        weight_map = {t.name: file for file, shard in zip(names, shards) for t in shard}
        write_json(
            os.path.join(save_directory, INDEX_FILE_NAME),
            {"metadata": {"total_size": sum(t.nbytes for t in tensors)}, "weight_map": weight_map},
        )
        written = set(names) | {INDEX_FILE_NAME}
    for file in os.listdir(save_directory):  # an earlier save's weights: a stale model.safetensors shadows shards
        stale = file in (SINGLE_FILE_NAME, INDEX_FILE_NAME) or _SHARD_FILE.fullmatch(file)
        if stale and file not in written and os.path.isfile(os.path.join(save_directory, file)):
            os.remove(os.path.join(save_directory, file))
