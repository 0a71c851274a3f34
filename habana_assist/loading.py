"""Load a Hugging Face Llama-family checkpoint directory into named, shape-checked numpy weights.

load_checkpoint() reads config.json and the safetensors weights (single file or sharded), picks out the
tensors a Llama/Mistral/Qwen2 decoder needs, and checks each one's stored dtype and its shape against
config.json before the C core ever sees it. Float matrices are repacked into the core's panels (a copy), or
with repack=False keep the stored dtype as read-only views of the file's memory map unless a dtype is asked
for; vectors (norms, biases) are always float32, since they are small and the kernels add them in float32.
Unknown extra tensors (e.g. rotary_emb.inv_freq) are ignored, as in Transformers.
"""

import os
from collections import namedtuple

import numpy as np

from . import _core
from .configuration import LlamaConfig
from .errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from .safetensors import bfloat16_bits_to_float32, checkpoint_files, to_bfloat16_bits

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


def _file_mapped(array):
    """True when array is a view of a read-only memory map of a file (so its pages can be dropped)."""
    a = array
    while a is not None:
        if isinstance(a, np.memmap):
            return True
        a = a.base if isinstance(a, np.ndarray) else None
    return False


def _quantize(array, source, target):
    """(rows, cols) weights holding `source` values -> `target` ("int8" or "int4") blocks (rows, bytes per
    row), read-only.

    Pages of a memory-mapped source are dropped once read, so loading never holds the file and the quantized
    copy in memory at once."""
    rows, cols = array.shape
    out = np.empty((rows, _core.row_bytes(target, cols)), dtype=np.uint8)
    mapped = _file_mapped(array)
    step = max(1, (8 << 20) // max(1, array.itemsize * cols))  # about 8 MB of source at a time
    for r in range(0, rows, step):
        _core.quantize(array[r:r + step], source, out[r:r + step], mapped, target)
    out.flags.writeable = False
    return out


def _pack(name, array, source, target):
    """(rows, cols) weights holding `source` values -> Weight of `target` ("float32", "bfloat16" or "float16")
    values in panels, read-only.

    Converted and packed about 8 MB of source at a time; where the source is used as stored, pages of its
    memory map are dropped once read, so loading never holds the file and the packed copy in memory at once."""
    rows, cols = array.shape
    out = np.empty((-(-rows // PANEL_ROWS) * PANEL_ROWS, cols), dtype=_ELEMENT[target])
    mapped = source == target and _file_mapped(array)
    step = max(PANEL_ROWS, (8 << 20) // max(1, array.itemsize * cols) // PANEL_ROWS * PANEL_ROWS)
    for r in range(0, rows, step):
        chunk = _convert(name, array[r:r + step], source, target)
        _core.pack(chunk, target, out[r:r + -(-chunk.shape[0] // PANEL_ROWS) * PANEL_ROWS], mapped)
    out.flags.writeable = False
    return Weight(out, target, cols, True, rows)


def _convert(name, array, source, target):
    """array holding `source` values -> C-contiguous read-only array holding `target` values."""
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
        if np.isinf(result).any() and not np.isinf(as_f32).any():
            raise InvalidInputError(f"load_checkpoint: tensor {name!r} has values beyond the float16 range "
                                    f"(max |x| = {np.abs(as_f32).max():g} > 65504); load it with "
                                    "dtype='bfloat16' or 'float32'")
    result = np.ascontiguousarray(result)
    result.flags.writeable = False
    return result


def load_checkpoint(directory, dtype=None, repack=True):
    """Load config.json and the weights of a Llama/Mistral/Qwen2 checkpoint directory -> Checkpoint.

    dtype: None or "auto" keeps matrices' stored dtype (with repack=False, as zero-copy views of the file);
    "float32", "bfloat16" or "float16" (or np.float32, np.float16) converts them once; "int8" and "int4"
    quantize them (a float32 scale per 64 int8 or 32 int4 weights), except an untied embedding table, which
    stays as stored. Vectors
    (norms, biases) are rounded to a float dtype too, then held as float32; with "int8" or "int4" they stay
    as stored. repack (the default) copies float matrices into the core's panels (Weight.panels), for the
    kernels that verify and prefill many tokens at once; an untied embedding, read a row per token, stays
    row-major. repack=False keeps them row-major (as stored: views of the file). With tie_word_embeddings,
    weights["lm_head.weight"] is the embedding's Weight object itself.
    Raises CheckpointNotFoundError, CheckpointError, UnsupportedModelError or InvalidInputError.
    """
    target = _target_dtype(dtype)
    if not isinstance(repack, (bool, np.bool_)):
        raise InvalidInputError(f"load_checkpoint: repack={repack!r} must be True or False")
    if not os.path.isdir(directory):
        raise CheckpointNotFoundError(f"{directory}: no such checkpoint directory; check the path")
    config = LlamaConfig.from_pretrained(directory)
    tensors, origin = checkpoint_files(directory)
    searched = ", ".join(sorted(set(origin.values()))) or "the checkpoint's safetensors files (no tensors)"

    weights = {}
    for name, is_matrix, dims in expected_weights(config):
        if name not in tensors:
            hint = (" (or, if this model ties its output layer to the embedding, set \"tie_word_embeddings\": "
                    "true in config.json)" if name == "lm_head.weight" else "")
            raise CheckpointError(f"{directory}: tensor {name!r} not found in {searched}; the checkpoint is "
                                  f"incomplete or does not match config.json — re-download it{hint}")
        array, stored = tensors[name]
        where = f"{origin[name]}: tensor {name!r}"
        if stored not in _STORED:
            raise CheckpointError(f"{where} has dtype {stored}; weights must be F32, BF16 or F16 — re-save the "
                                  "checkpoint in one of those (quantized checkpoints are not supported)")
        expected = tuple(size for size, _ in dims)
        if array.shape != expected:
            fields = ", ".join(field for _, field in dims)
            raise CheckpointError(f"{where} has shape {list(array.shape)} but config.json ({fields}) expects "
                                  f"{list(expected)}; the weights and config.json do not match — use the "
                                  "config.json saved with these weights")
        source = _STORED[stored]
        held = target or source
        untied_embedding = name == "model.embed_tokens.weight" and not config.tie_word_embeddings
        if is_matrix and held in _INTEGER and untied_embedding:
            # One row is read per token, so quantizing would save no bandwidth, cost accuracy and hold the whole
            # table in memory; as stored it stays a view of the file (only the rows used become resident).
            weights[name] = Weight(array, source, array.shape[1])
        elif is_matrix and held in _INTEGER:
            weights[name] = Weight(_quantize(array, source, held), held, array.shape[1])
        elif is_matrix and repack and not untied_embedding:
            weights[name] = _pack(name, array, source, held)
        elif is_matrix:
            weights[name] = Weight(_convert(name, array, source, held), held, array.shape[1])
        else:  # rounded to the requested float precision, as a Transformers model cast to it is, then float32
            held = source if held in _INTEGER else held
            vector = _convert(name, _convert(name, array, source, held), held, "float32")
            weights[name] = Weight(vector, "float32", vector.shape[-1])
    if config.tie_word_embeddings:
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    return Checkpoint(directory, config, weights)
