"""Load a Hugging Face Llama-family checkpoint directory into named, shape-checked numpy weights.

load_checkpoint() reads config.json and the safetensors weights (single file or sharded), picks out the
tensors a Llama/Mistral/Qwen2 decoder needs, and checks each one's stored dtype and its shape against
config.json before the C core ever sees it. Float matrices are repacked into the core's panels (a copy), or
with repack=False keep the stored dtype as read-only views of the file's memory map unless a dtype is asked
for; vectors (norms, biases) are always float32, since they are small and the kernels add them in float32.
Unknown extra tensors (e.g. rotary_emb.inv_freq) are ignored, as in Transformers.

Files that change. Every byte the load converts, packs, quantizes or copies is read with pread on one open
descriptor per file (the one its header came from), about 8 MB at a time (_read_rows), never through a memory
map: a file truncated by another process meanwhile gives CheckpointError naming it, not SIGBUS, and a file
rewritten in place meanwhile (size or modification time changed) gives CheckpointError at the end of the
load. After the load, with repack=True (the default) the model holds no part of any file, whatever the dtype:
the files may be deleted, replaced, truncated or rewritten. With repack=False the matrices kept in their
stored dtype (all float matrices without a dtype; the untied embedding table with int8 or int4) are views of
the file's memory map: replacing the file by rename (a new inode) is safe, since the map keeps the old one,
but truncating it in place makes the next read of a lost page raise SIGBUS, killing the process, and
rewriting it in place changes those weights under the model.
"""

import os
from collections import namedtuple

import numpy as np

from . import _core
from .configuration import LlamaConfig
from .errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from .safetensors import DTYPES, bfloat16_bits_to_float32, open_checkpoint, to_bfloat16_bits

__all__ = ["Weight", "Checkpoint", "load_checkpoint", "expected_weights", "WEIGHT_DTYPES"]

# array: C-contiguous, read-only; dtype: "float32" | "bfloat16" | "float16" | "int8" | "int4"; cols: elements
# per row. bfloat16 arrays hold np.uint16 bits; int8 and int4 arrays are np.uint8 (rows, bytes per row) of the
# core's blocks (csrc/ha.h, HA_Q8: a float32 scale and 64 int8 weights per block; HA_Q4: a float32 scale and
# 32 4-bit weights). panels: a float matrix repacked into the core's panels of PANEL_ROWS rows (csrc/ha.h,
# HA_BF16P...), array (rows rounded up to whole panels, cols) of the element type; rows: the matrix's rows.
Weight = namedtuple("Weight", "array dtype cols panels rows", defaults=(False, None))
PANEL_ROWS = 16
_ELEMENT = {"float32": np.float32, "bfloat16": np.uint16, "float16": np.float16}

WEIGHT_DTYPES = ("float32", "bfloat16", "float16", "int8", "int4")
_INTEGER = ("int8", "int4")
_STORED = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


class Checkpoint:
    """A loaded checkpoint: path (the directory), config (LlamaConfig), weights ({HF tensor name: Weight})."""

    def __init__(self, path, config, weights):
        self.path = os.fspath(path)
        self.config = config
        self.weights = weights

    def __repr__(self):
        dtypes = sorted({w.dtype for w in self.weights.values()})
        return (f"Checkpoint(path={self.path!r}, model_type={self.config.model_type!r}, "
                f"tensors={len(self.weights)}, dtypes={dtypes})")


def expected_weights(config):
    """-> [(tensor name, is_matrix, ((size, "config.json fields it comes from"), ...))] for this config."""
    c = config
    vocab = (c.vocab_size, f"vocab_size={c.vocab_size}")
    hidden = (c.hidden_size, f"hidden_size={c.hidden_size}")
    inter = (c.intermediate_size, f"intermediate_size={c.intermediate_size}")
    q = (c.num_attention_heads * c.head_dim, f"num_attention_heads={c.num_attention_heads} * head_dim={c.head_dim}")
    kv = (c.num_key_value_heads * c.head_dim,
          f"num_key_value_heads={c.num_key_value_heads} * head_dim={c.head_dim}")
    out = {"q_proj": q, "k_proj": kv, "v_proj": kv, "o_proj": hidden,
           "gate_proj": inter, "up_proj": inter, "down_proj": hidden}
    into = {"q_proj": hidden, "k_proj": hidden, "v_proj": hidden, "o_proj": q,
            "gate_proj": hidden, "up_proj": hidden, "down_proj": inter}

    specs = [("model.embed_tokens.weight", True, (vocab, hidden))]
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        specs.append((p + "input_layernorm.weight", False, (hidden,)))
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            specs.append((f"{p}self_attn.{proj}.weight", True, (out[proj], into[proj])))
        for proj in ("q_proj", "k_proj", "v_proj"):
            if c.qkv_bias:
                specs.append((f"{p}self_attn.{proj}.bias", False, (out[proj],)))
        if c.o_bias:
            specs.append((f"{p}self_attn.o_proj.bias", False, (hidden,)))
        specs.append((p + "post_attention_layernorm.weight", False, (hidden,)))
        for proj in ("gate_proj", "up_proj", "down_proj"):
            specs.append((f"{p}mlp.{proj}.weight", True, (out[proj], into[proj])))
            if c.mlp_bias:
                specs.append((f"{p}mlp.{proj}.bias", False, (out[proj],)))
    specs.append(("model.norm.weight", False, (hidden,)))
    if not c.tie_word_embeddings:
        specs.append(("lm_head.weight", True, (vocab, hidden)))
    return specs


def _target_dtype(dtype):
    """None/"auto" -> None (as stored); else one of WEIGHT_DTYPES. Accepts np.float32, "torch.bfloat16"..."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)  # e.g. a torch.dtype
    name = name.removeprefix("torch.")
    if name == "auto":
        return None
    if name not in WEIGHT_DTYPES:
        raise InvalidInputError(f"load_checkpoint: dtype {dtype!r} is not supported; pass None or 'auto' (as "
                                f"stored) or one of {', '.join(WEIGHT_DTYPES)}")
    return name


def _read_rows(tensor, start, stop, out):
    """The loader's one reader of weight bytes: rows start..stop of tensor (a _Stored) into out, a C-contiguous
    array of the stored element type, by pread on the file's descriptor. A file that shrank meanwhile gives
    CheckpointError naming it (where reading a memory map of it would raise SIGBUS and kill the process)."""
    tensor.file.read_into(out, tensor.offset + start * tensor.row_bytes, tensor.name)


class _Stored:
    """A tensor in an open safetensors file: file (SafetensorsFile), name, shape, element (numpy dtype of the
    stored bytes), offset (of its data in the file), rows (its first dimension; 1 for a scalar), row_bytes
    (bytes per row)."""

    def __init__(self, file, name):
        dtype, self.shape, _, _ = file.entries[name]
        self.file, self.name, self.element = file, name, DTYPES[dtype]
        self.offset = file.offset(name)
        self.rows = self.shape[0] if self.shape else 1
        self.row_bytes = self.element.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))

    def step(self, multiple=1):
        """Rows per step: about _CHUNK_BYTES, a multiple of `multiple`."""
        return max(multiple, _CHUNK_BYTES // max(1, self.row_bytes) // multiple * multiple)

    def chunks(self, multiple=1):
        """Yield (start, rows) over the first dimension, step(multiple) rows at a time, read into one buffer
        that is reused: copy what you keep before the next step."""
        step = self.step(multiple)
        buffer = np.empty((min(step, self.rows),) + tuple(self.shape[1:]), dtype=self.element)
        for start in range(0, self.rows, step):
            rows = buffer[:min(step, self.rows - start)]
            _read_rows(self, start, start + rows.shape[0], rows)
            yield start, rows


_CHUNK_BYTES = 8 << 20  # bytes of a tensor read, converted and packed or quantized at a time


def _quantize(tensor, source, target):
    """(rows, cols) weights holding `source` values -> `target` ("int8" or "int4") blocks (rows, bytes per
    row), read-only; read about 8 MB at a time, so loading holds little beyond the quantized copy."""
    rows, cols = tensor.shape
    out = np.empty((rows, _core.row_bytes(target, cols)), dtype=np.uint8)
    for r, chunk in tensor.chunks():
        _core.quantize(chunk, source, out[r:r + chunk.shape[0]], target)
    out.flags.writeable = False
    return out


def _pack(tensor, source, target):
    """(rows, cols) weights holding `source` values -> Weight of `target` ("float32", "bfloat16" or "float16")
    values in panels, read-only; read, converted and packed about 8 MB at a time, so loading holds little
    beyond the packed copy."""
    rows, cols = tensor.shape
    out = np.empty((-(-rows // PANEL_ROWS) * PANEL_ROWS, cols), dtype=_ELEMENT[target])
    for r, chunk in tensor.chunks(PANEL_ROWS):
        converted = _convert(tensor.name, chunk, source, target)
        _core.pack(converted, target, out[r:r + -(-chunk.shape[0] // PANEL_ROWS) * PANEL_ROWS])
    out.flags.writeable = False
    return Weight(out, target, cols, True, rows)


def _copy(tensor, source, target):
    """The tensor holding `source` values -> a C-contiguous read-only copy holding `target` values, shaped
    as stored; read and converted about 8 MB at a time."""
    out = np.empty(tensor.shape, dtype=_ELEMENT[target])
    if source == target:  # straight into the copy, in the same steps
        rows = out.reshape(tensor.rows, tensor.row_bytes // tensor.element.itemsize)
        step = tensor.step()
        for r in range(0, tensor.rows, step):
            _read_rows(tensor, r, min(r + step, tensor.rows), rows[r:r + step])
    else:
        rows = out.reshape((tensor.rows,) + tuple(tensor.shape[1:]))
        for r, chunk in tensor.chunks():
            rows[r:r + chunk.shape[0]] = _convert(tensor.name, chunk, source, target)
    out.flags.writeable = False
    return out


def _convert(name, array, source, target):
    """array holding `source` values -> C-contiguous array holding `target` values (array itself if equal)."""
    if source == target:
        return array
    as_f32 = bfloat16_bits_to_float32(array) if source == "bfloat16" else array.astype(np.float32)
    if target == "float32":
        result = as_f32
    elif target == "bfloat16":
        result = to_bfloat16_bits(as_f32)
    else:
        with np.errstate(over="ignore"):
            result = as_f32.astype(np.float16)
        if (np.isinf(result) & np.isfinite(as_f32)).any():
            raise InvalidInputError(f"load_checkpoint: tensor {name!r} has values beyond the float16 range "
                                    f"(max |x| = {np.abs(as_f32).max():g} > 65504); load it with "
                                    "dtype='bfloat16' or 'float32'")
    return np.ascontiguousarray(result)


def load_checkpoint(directory, dtype=None, repack=True):
    """Load config.json and the weights of a Llama/Mistral/Qwen2 checkpoint directory -> Checkpoint.

    dtype: None or "auto" keeps matrices' stored dtype (with repack=False, as zero-copy views of the file);
    "float32", "bfloat16" or "float16" (or np.float32, np.float16) converts them once; "int8" and "int4"
    quantize them (a float32 scale per 64 int8 or 32 int4 weights), except an untied embedding table, which
    stays as stored. Vectors (norms, biases) are rounded to a float dtype too, then held as float32 (copies);
    with "int8" or "int4" they stay as stored. repack (the default) copies float matrices into the core's
    panels (Weight.panels), for the kernels that verify and prefill many tokens at once; an untied embedding,
    read a row per token, is copied row-major, so that no weight maps the file. repack=False keeps matrices
    row-major, those in their stored dtype as views of the file's memory map (see the module docstring for
    what that means when the file changes). With tie_word_embeddings, weights["lm_head.weight"] is the
    embedding's Weight object itself.
    Raises CheckpointNotFoundError, CheckpointError (also when a file changes while it is read),
    UnsupportedModelError or InvalidInputError.
    """
    target = _target_dtype(dtype)
    if not isinstance(repack, (bool, np.bool_)):
        raise InvalidInputError(f"load_checkpoint: repack={repack!r} must be True or False")
    if not os.path.isdir(directory):
        raise CheckpointNotFoundError(f"{directory}: no such checkpoint directory; check the path")
    config = LlamaConfig.from_pretrained(directory)
    files, origin = open_checkpoint(directory)
    try:
        weights = _load_weights(directory, config, files, origin, target, repack)
        for f in files.values():  # a file rewritten in place meanwhile (same size) could have given mixed bytes
            f.check_unchanged()
    finally:
        for f in files.values():
            f.close()
    if config.tie_word_embeddings:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    return Checkpoint(directory, config, weights)


def _load_weights(directory, config, files, origin, target, repack):
    """-> {HF tensor name: Weight} for load_checkpoint, from the open files."""
    searched = ", ".join(sorted(files)) or "the checkpoint's safetensors files (no tensors)"
    if config.num_hidden_layers > len(origin):  # each layer has tensors; and expected_weights lists every one
        raise CheckpointError(f"{directory}: config.json says num_hidden_layers={config.num_hidden_layers} but "
                              f"{searched} hold only {len(origin)} tensors; the weights and config.json do not "
                              "match — use the config.json saved with these weights")
    weights = {}
    for name, is_matrix, dims in expected_weights(config):
        if name not in origin:
            hint = (" (or, if this model ties its output layer to the embedding, set \"tie_word_embeddings\": "
                    "true in config.json)" if name == "lm_head.weight" else "")
            raise CheckpointError(f"{directory}: tensor {name!r} not found in {searched}; the checkpoint is "
                                  f"incomplete or does not match config.json — re-download it{hint}")
        file = files[origin[name]]
        stored, shape = file.entries[name][:2]
        where = f"{origin[name]}: tensor {name!r}"
        if stored not in _STORED:
            raise CheckpointError(f"{where} has dtype {stored}; weights must be F32, BF16 or F16 — re-save the "
                                  "checkpoint in one of those (quantized checkpoints are not supported)")
        expected = tuple(size for size, _ in dims)
        if shape != expected:
            fields = ", ".join(field for _, field in dims)
            raise CheckpointError(f"{where} has shape {list(shape)} but config.json ({fields}) expects "
                                  f"{list(expected)}; the weights and config.json do not match — use the "
                                  "config.json saved with these weights")
        tensor = _Stored(file, name)
        source = _STORED[stored]
        held = target or source
        untied_embedding = name == "model.embed_tokens.weight" and not config.tie_word_embeddings
        if untied_embedding and held in _INTEGER:
            held = source  # one row is read per token: int8 would save no bandwidth and cost accuracy
        if is_matrix and held in _INTEGER:
            weights[name] = Weight(_quantize(tensor, source, held), held, shape[1])
        elif is_matrix and held == source and not repack:
            # As stored, kept mapped (zero copy, pages shared between processes); never read here, so a file
            # truncated meanwhile is caught by check_unchanged() before anything reads the map.
            weights[name] = Weight(file.view(name), held, shape[1])
        elif is_matrix and repack and not untied_embedding:
            weights[name] = _pack(tensor, source, held)
        elif is_matrix:  # converted, or the untied embedding copied as stored (repack=True maps nothing)
            weights[name] = Weight(_copy(tensor, source, held), held, shape[1])
        else:  # rounded to the requested float precision, as a Transformers model cast to it is, then float32
            held = source if held in _INTEGER else held
            vector = np.empty(shape, dtype=np.float32)
            for r, chunk in tensor.chunks():
                vector[r:r + chunk.shape[0]] = _convert(name, _convert(name, chunk, source, held), held, "float32")
            vector.flags.writeable = False
            weights[name] = Weight(vector, "float32", shape[-1])
    return weights
