"""Load a Hugging Face checkpoint directory of any supported family into named, shape-checked numpy weights.

load_checkpoint() reads config.json and the safetensors weights (single file or sharded), picks out the
tensors the family's decoder needs (expected_weights: each family's own names, and the role each tensor plays
in the core), and checks each one's stored dtype and its shape against config.json before the C core ever
sees it. Float matrices are repacked into the core's panels (a copy), or with repack=False keep the stored
dtype as read-only views of the file's memory map unless a dtype is asked for; vectors (norms, biases) are
always float32, since they are small and the kernels add them in float32. GPT-2's Conv1D matrices, stored (in,
out), are held transposed in the core's (out, in) like every other matrix, so they are always copies. Unknown
extra tensors (e.g. rotary_emb.inv_freq, GPT-2's attn.bias masks) are ignored, as in Transformers.

Files that change. Every byte the load converts, packs, quantizes or copies is read with pread on one open
descriptor per file (the one its header came from), about 8 MB at a time (_read_rows), never through a memory
map: a file truncated by another process meanwhile gives CheckpointError naming it, not SIGBUS, and a file
rewritten in place meanwhile (size or modification time changed) gives CheckpointError at the end of the
load. After the load, with repack=True (the default) the model holds no part of any file, whatever the dtype:
the files may be deleted, replaced, truncated or rewritten. With repack=False the matrices kept in their
stored dtype (float matrices without a dtype, GPT-2's Conv1D ones excepted; the untied embedding table and
GPT-2's learned positions with int8 or int4) are views of the file's memory map: replacing the file by
rename (a new inode) is safe, since the map keeps the old one, but truncating it in place makes the next read
of a lost page raise SIGBUS, killing the process, and rewriting it in place changes those weights under the
model.

from_pretrained's arguments are checked here too, for PreTrainedCausalLM.from_pretrained (modeling_utils.py):
check_load_arguments, load_config, warn_if_blas_generic.
"""

import copy
import mmap
import os
import re
import sys
import warnings
from collections import namedtuple

import numpy as np

from .. import _core
from ..configuration_utils import AutoConfig, PretrainedConfig
from ..errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from ..models import FAMILIES
from ..models.family import LAYER_ROLES, layer_tensors
from ..utils import progress as _progress
from .safetensors import DTYPES, bfloat16_bits_to_float32, open_checkpoint, to_bfloat16_bits

__all__ = [
    "Weight",
    "WeightSpec",
    "Checkpoint",
    "load_checkpoint",
    "expected_weights",
    "WEIGHT_DTYPES",
    "check_load_arguments",
    "load_config",
    "warn_if_blas_generic",
]

# array: C-contiguous, read-only; dtype: "float32" | "bfloat16" | "float16" | "int8" | "w8a8" | "int4"; cols:
# elements per row. bfloat16 arrays hold np.uint16 bits; int8 and int4 arrays are np.uint8 (rows, bytes per row) of
# the core's blocks (csrc/ha.h, HA_Q8: a float32 scale and 64 int8 weights per block; HA_Q4: a float32 scale and
# 32 4-bit weights); w8a8 arrays the same integers and scales in the core's int8 panels (csrc/ha.h, HA_Q8P), np.uint8
# (rows rounded up to whole panels, int8's bytes per row), with rows the matrix's rows. panels: a float matrix
# repacked into the core's panels of PANEL_ROWS rows (csrc/ha.h, HA_BF16P...), array (rows rounded up to whole
# panels, cols) of the element type; rows: the matrix's rows.
Weight = namedtuple("Weight", "array dtype cols panels rows", defaults=(False, None))
PANEL_ROWS = 16
_ELEMENT = {"float32": np.float32, "bfloat16": np.uint16, "float16": np.float16}

WEIGHT_DTYPES = ("float32", "bfloat16", "float16", "int8", "w8a8", "int4", "bfloat16-pairs")
_INTEGER = ("int8", "w8a8", "int4")
# converted at load into the core's panels by _quantize; "bfloat16-pairs" (csrc/ha.h, HA_BF16X: each weight rounded
# to bfloat16, a bfloat16 checkpoint's bits kept, in pair panels for bf16 activations) holds its other tensors as
# "bfloat16" does
_PAIRS = "bfloat16-pairs"
_PANELS_AT_LOAD = ("w8a8", _PAIRS)
_STORED = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


class Checkpoint:
    """A loaded checkpoint: path (the directory), config (PretrainedConfig), weights ({HF tensor name: Weight},
    every matrix in the core's (out, in) orientation), float_dtype (the float dtype the model is held in: the
    requested one, or with none or an integer one the embedding's stored dtype; Transformers rounds some constants
    to the model's dtype, Gemma's embedding scale)."""

    def __init__(self, path, config, weights, float_dtype="float32"):
        self.path = os.fspath(path)
        self.config = config
        self.weights = weights
        self.float_dtype = float_dtype

    def __repr__(self):
        dtypes = sorted({w.dtype for w in self.weights.values()})
        return (
            f"Checkpoint(path={self.path!r}, model_type={self.config.model_type!r}, "
            f"tensors={len(self.weights)}, dtypes={dtypes})"
        )


# One tensor a family's checkpoint holds. name: the tensor name as Transformers saves it; is_matrix; dims:
# ((size, "config.json fields it comes from"), ...) of the STORED shape; layer: the layer index, or None for a
# model-level tensor; role: the key of the core's weights dict (layer None: "embed", "pos_embed", "final_norm",
# "final_norm_bias", "lm_head") or layer dict ("wq", "bq", "attn_norm"...: csrc/bindings/model.c, LAYER_KEYS);
# transposed: a GPT-2 Conv1D matrix stored (in, out), which the loader turns into the core's (out, in).
WeightSpec = namedtuple("WeightSpec", "name is_matrix dims layer role transposed", defaults=(None, None, False))
_LAYER_ORDER = {role: k for k, role in enumerate(LAYER_ROLES)}


def expected_weights(config):
    """-> [WeightSpec] of every tensor the checkpoint of this config must hold, in the order they are checked:
    the model-level tensors before the layers, each layer's in the order the layer applies them (LAYER_ROLES in
    models/family.py), then the model-level ones after the layers.

    Names, stored shapes, roles and the conditions that add a tensor are the family's tensors in
    models/<family>.py (Transformers' modeling_*.py names): Phi-3's fused projections, Gemma's four norms a layer
    and GPT-2's Conv1D matrices among them (load_checkpoint also reads GPT-2's without their "transformer."
    prefix). A tied head (tie_word_embeddings) has no lm_head.weight: the core's lm_head is the embedding."""
    before, layers, after = layer_tensors(FAMILIES[config.family], config)
    dims = {}  # id(Tensor) -> its stored shape's dims, the same in every layer

    def spec(name, tensor, layer):
        if id(tensor) not in dims:
            dims[id(tensor)] = tuple(dim(config) for dim in tensor.shape)
        return WeightSpec(name, tensor.is_matrix, dims[id(tensor)], layer, tensor.role, tensor.transposed)

    specs = [spec(name, tensor, None) for name, tensor in before]
    for i, layer in enumerate(layers):
        specs += [spec(name, tensor, i) for name, tensor in sorted(layer, key=lambda t: _LAYER_ORDER[t[1].role])]
    return specs + [spec(name, tensor, None) for name, tensor in after]


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
        raise InvalidInputError(
            f"load_checkpoint: dtype {dtype!r} is not supported; pass None or 'auto' (as "
            f"stored) or one of {', '.join(WEIGHT_DTYPES)}"
        )
    return name


def _read_rows(tensor, start, stop, out):
    """The loader's one reader of weight bytes: rows start..stop of tensor (a _Stored) into out, a C-contiguous
    array of the stored element type, by pread on the file's descriptor. A file that shrank meanwhile gives
    CheckpointError naming it (where reading a memory map of it would raise SIGBUS and kill the process)."""
    tensor.read(start, stop, out)


class _Rows:
    """What the converters read a matrix through: name, shape, element (numpy dtype of the stored values), rows
    (its first dimension; 1 for a scalar), row_bytes (bytes per row), read(start, stop, out)."""

    def step(self, multiple=1):
        """Rows per step: about _CHUNK_BYTES, a multiple of `multiple`."""
        return max(multiple, _CHUNK_BYTES // max(1, self.row_bytes) // multiple * multiple)

    def chunks(self, multiple=1):
        """Yield (start, rows) over the first dimension, step(multiple) rows at a time, read into one buffer
        that is reused: copy what you keep before the next step."""
        step = self.step(multiple)
        buffer = np.empty((min(step, self.rows),) + tuple(self.shape[1:]), dtype=self.element)
        for start in range(0, self.rows, step):
            rows = buffer[: min(step, self.rows - start)]
            _read_rows(self, start, start + rows.shape[0], rows)
            yield start, rows


class _Stored(_Rows):
    """A tensor in an open safetensors file; file (SafetensorsFile), offset (of its data in the file); meter(n),
    if given, is told the bytes of each read."""

    def __init__(self, file, name, meter=None):
        dtype, self.shape, _, _ = file.entries[name]
        self.meter = meter
        self.file, self.name, self.element = file, name, DTYPES[dtype]
        self.offset = file.offset(name)
        self.rows = self.shape[0] if self.shape else 1
        self.row_bytes = self.element.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))

    def read(self, start, stop, out):
        self.file.read_into(out, self.offset + start * self.row_bytes, self.name)
        if self.meter is not None:
            self.meter(out.nbytes)


class _Transposed(_Rows):
    """A GPT-2 Conv1D matrix stored (in, out) read as the core's (out, in): the stored rows are read in chunks (as
    every tensor is) into one transposed copy of the stored element type, which the converters then read. So such
    a matrix is never a zero-copy view of the file, and loading it holds one extra copy of it for a moment."""

    def __init__(self, stored, empty=np.empty):
        """empty(shape, dtype): where the copy goes (an _Arena's, for a copy the model keeps as it is)."""
        inputs, outputs = stored.shape
        self.name, self.element = stored.name, stored.element
        self.array = empty((outputs, inputs), stored.element)  # (out, in)
        for r, chunk in stored.chunks():
            self.array[:, r : r + chunk.shape[0]] = chunk.T
        self.shape, self.rows = (outputs, inputs), outputs
        self.row_bytes = self.element.itemsize * inputs

    def read(self, start, stop, out):
        out[...] = self.array[start:stop]


_CHUNK_BYTES = 8 << 20  # bytes of a tensor read, converted and packed or quantized at a time


class _Arena:
    """Where a load puts the weights it makes (packed, quantized, converted): anonymous private mappings of
    SLAB bytes from a 2 MB boundary, advised for transparent huge pages (Linux's MADV_HUGEPAGE; an array larger
    than a slab gets a mapping of its own), handed out in order at ALIGN-byte boundaries, so that a model's
    weights lie together in 2 MB pages. A decode step streams every weight once: in 4 KB pages that is a TLB
    miss every 4 KB. (numpy advises its own arrays from 4 MB up; a small model's matrices, the shipped pair's,
    are smaller; the gain is measured in docs/benchmarks.md.) Memory a load never reaches is never backed (the
    huge page holding a slab's last array may be, up to 2 MB past it). Without MADV_HUGEPAGE (not Linux), or with
    HA_HUGE_PAGES=0: np.empty. Each array keeps its mapping alive (numpy's base), which is unmapped when the last array
    on it is gone."""

    SLAB = 32 << 20
    ALIGN = 64
    HUGE = 2 << 20  # a transparent huge page (x86-64; arm64 with 4 KB pages)

    def __init__(self):
        self._huge = hasattr(mmap, "MADV_HUGEPAGE") and os.environ.get("HA_HUGE_PAGES", "1") != "0"
        self._slab, self._used = None, 0

    def _map(self, size):
        """A fresh writable uint8 array of size bytes on its own mapping, from a 2 MB boundary (huge pages back
        only whole aligned 2 MB; the mapping's HUGE bytes of slack are never written, so never backed)."""
        m = mmap.mmap(-1, size + self.HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except OSError:  # a kernel built without transparent huge pages: the mapping serves as it is
            pass
        whole = np.frombuffer(m, dtype=np.uint8)
        at = -whole.ctypes.data % self.HUGE
        return whole[at : at + size]

    def empty(self, shape, dtype):
        """An uninitialized C-contiguous writable array, as np.empty(shape, dtype)."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if not self._huge or n == 0:
            return np.empty(shape, dtype=dtype)
        if n > self.SLAB:
            return self._map(n).view(dtype).reshape(shape)
        at = -(-self._used // self.ALIGN) * self.ALIGN
        if self._slab is None or at + n > self.SLAB:
            self._slab, at = self._map(self.SLAB), 0
        self._used = at + n
        return self._slab[at : at + n].view(dtype).reshape(shape)


def _quantize(tensor, source, target, arena):
    """(rows, cols) weights holding `source` values -> Weight of `target` ("int8", "w8a8" or "int4") blocks (rows,
    or for w8a8 rows rounded up to whole panels, bytes per row), read-only, in arena's memory; read about 8 MB at a
    time, so loading holds little beyond the quantized copy."""
    rows, cols = tensor.shape
    multiple = PANEL_ROWS if target in _PANELS_AT_LOAD else 1
    # a row's share of the bytes (row_bytes gives a panel dtype's whole panel for one row)
    out = arena.empty((-(-rows // multiple) * multiple, _core.row_bytes(target, cols) // multiple), np.uint8)
    for r, chunk in tensor.chunks(multiple):
        _core.quantize(chunk, source, out[r : r + -(-chunk.shape[0] // multiple) * multiple], target)
    out.flags.writeable = False
    return Weight(out, target, cols, False, rows)


def _pack(tensor, source, target, arena):
    """(rows, cols) weights holding `source` values -> Weight of `target` ("float32", "bfloat16" or "float16")
    values in panels, read-only, in arena's memory; read, converted and packed about 8 MB at a time, so loading
    holds little beyond the packed copy."""
    rows, cols = tensor.shape
    out = arena.empty((-(-rows // PANEL_ROWS) * PANEL_ROWS, cols), _ELEMENT[target])
    for r, chunk in tensor.chunks(PANEL_ROWS):
        converted = _convert(tensor.name, chunk, source, target)
        _core.pack(converted, target, out[r : r + -(-chunk.shape[0] // PANEL_ROWS) * PANEL_ROWS])
    out.flags.writeable = False
    return Weight(out, target, cols, True, rows)


def _copy(tensor, source, target, arena):
    """The tensor holding `source` values -> a C-contiguous read-only copy holding `target` values, shaped
    as stored; read and converted about 8 MB at a time."""
    if source == target and isinstance(tensor, _Transposed):  # already a copy of its own
        out = tensor.array
    elif source == target:  # straight into the copy, in the same steps
        out = arena.empty(tensor.shape, _ELEMENT[target])
        rows = out.reshape(tensor.rows, tensor.row_bytes // tensor.element.itemsize)
        step = tensor.step()
        for r in range(0, tensor.rows, step):
            _read_rows(tensor, r, min(r + step, tensor.rows), rows[r : r + step])
    else:
        out = arena.empty(tensor.shape, _ELEMENT[target])
        rows = out.reshape((tensor.rows,) + tuple(tensor.shape[1:]))
        for r, chunk in tensor.chunks():
            rows[r : r + chunk.shape[0]] = _convert(tensor.name, chunk, source, target)
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
            raise InvalidInputError(
                f"load_checkpoint: tensor {name!r} has values beyond the float16 range "
                f"(max |x| = {np.abs(as_f32).max():g} > 65504); load it with "
                "dtype='bfloat16' or 'float32'"
            )
    return np.ascontiguousarray(result)


def load_checkpoint(directory, dtype=None, repack=True, progress=None, config=None):
    """Load config.json and the weights of a checkpoint directory of any supported family -> Checkpoint.

    config: a PretrainedConfig to load the weights for instead of the directory's config.json (from_pretrained's
    config=, or config.json with keyword overrides). Stored tensors the config has no use for (more layers than
    num_hidden_layers says...) are left unread, with a UserWarning naming them, as Transformers reports unexpected
    keys (rotary_emb.inv_freq buffers and the family's ignore_unexpected are not named; nor, in a multimodal
    checkpoint, the tensors outside its text model).

    dtype: None or "auto" keeps matrices' stored dtype (with repack=False, as zero-copy views of the file);
    "float32", "bfloat16" or "float16" (or np.float32, np.float16) converts them once; "int8", "w8a8" and "int4"
    quantize them (a float32 scale per 64 int8 or 32 int4 weights; w8a8 holds int8's in panels for int8 activations),
    except the tables read a row per token (an untied embedding, GPT-2's learned positions), which stay as stored.
    Vectors (norms, biases) are rounded to a float dtype too, then held as float32 (copies); with "int8", "w8a8" or
    "int4" they stay as stored. repack (the default) copies float matrices into the core's panels (Weight.panels), for
    the kernels that verify and prefill many tokens at once; the row-per-token tables are copied row-major, so that no
    weight maps the file. repack=False keeps matrices row-major, those in their stored dtype as views of the file's
    memory map (see the module docstring for what that means when the file changes), except GPT-2's Conv1D matrices:
    stored (in, out), they are held transposed to the core's (out, in), so they are always copies. With
    tie_word_embeddings, weights["lm_head.weight"] is the embedding's Weight object itself. Every matrix Weight is (out,
    in): cols is the input features. GPT-2 tensors are found with or without the "transformer." prefix (GPT2LMHeadModel
    saves it, the original gpt2 files do not) and kept under the prefixed names. progress: a bar over the bytes of
    weights read (progress.py: None shows one from progress.MIN_BYTES).
    Raises CheckpointNotFoundError, CheckpointError (also when a file changes while it is read),
    UnsupportedModelError or InvalidInputError.
    """
    target = _target_dtype(dtype)
    if not isinstance(repack, (bool, np.bool_)):
        raise InvalidInputError(f"load_checkpoint: repack={repack!r} must be True or False")
    if not os.path.isdir(directory):
        raise CheckpointNotFoundError(f"{directory}: no such checkpoint directory; check the path")
    if config is None:
        config = PretrainedConfig.from_pretrained(directory)
    elif not isinstance(config, PretrainedConfig):
        raise InvalidInputError(f"load_checkpoint: config must be a PretrainedConfig, got {type(config).__name__}")
    files, origin = open_checkpoint(directory)
    try:
        weights, float_dtype = _load_weights(directory, config, files, origin, target, repack, progress)
        for f in files.values():  # a file rewritten in place meanwhile (same size) could have given mixed bytes
            f.check_unchanged()
    finally:
        for f in files.values():
            f.close()
    if config.tie_word_embeddings:
        weights[_tensor_name(config, "lm_head")] = weights[_tensor_name(config, "embed")]
    return Checkpoint(directory, config, weights, float_dtype)


def _tensor_name(config, role):
    """The name of the family's model-level tensor of this role ("embed", "lm_head"...)."""
    return FAMILIES[config.family].tensor(role).name


def _file_names(directory, config, origin, searched):
    """-> f(expected name) = the name the checkpoint stores it under: some families' checkpoints exist with and
    without a prefix (GPT-2's "transformer."; lm_head.weight has none either way); a text model may sit inside a
    multimodal checkpoint (a Gemma 3 text model inside a Gemma3ForConditionalGeneration checkpoint)."""
    family = FAMILIES[config.family]
    embed = _tensor_name(config, "embed")
    if family.multimodal_prefixes and embed not in origin:
        # the multimodal model's text model: its decoder's "model.X" under prefix + "X", its other tensors under
        # head + name
        for prefix, head in family.multimodal_prefixes:

            def stored(name, prefix=prefix, head=head):
                return prefix + name[len("model.") :] if name.startswith("model.") else head + name

            if stored(embed) in origin:
                return stored
    prefix = family.optional_prefix
    if not prefix or embed in origin:
        return lambda name: name
    if embed[len(prefix) :] in origin:
        return lambda name: name[len(prefix) :] if name.startswith(prefix) else name
    raise CheckpointError(
        f"{directory}: tensor {embed!r} (or {embed[len(prefix) :]!r}, as the original "
        f"{family.title} files name it) not found in {searched}; the checkpoint is incomplete or "
        f"is not a {family.title} model — re-download it"
    )


def _load_weights(directory, config, files, origin, target, repack, progress=None):
    """-> ({HF tensor name: Weight}, the model's float dtype) for load_checkpoint, from the open files."""
    searched = ", ".join(sorted(files)) or "the checkpoint's safetensors files (no tensors)"
    if config.num_hidden_layers > len(origin):  # each layer has tensors; and expected_weights lists every one
        raise CheckpointError(
            f"{directory}: config.json says num_hidden_layers={config.num_hidden_layers} but "
            f"{searched} hold only {len(origin)} tensors; the weights and config.json do not "
            "match — use the config.json saved with these weights"
        )
    stored_name = _file_names(directory, config, origin, searched)
    specs = expected_weights(config)
    stored = [files[origin[n]].entries[n] for n in map(stored_name, (s.name for s in specs)) if n in origin]
    total = sum(end - begin for _, _, begin, end in stored)  # bytes of weights this load reads
    meter = _progress.bar(progress, total, _progress.MIN_BYTES, total, f"loading {os.path.basename(directory)}", "B")
    try:
        loaded = _load_specs(
            directory,
            config,
            files,
            origin,
            target,
            repack,
            specs,
            stored_name,
            searched,
            meter.update if meter else None,
        )
    finally:
        if meter is not None:
            meter.close()
    _warn_unused(directory, config, origin, stored_name, specs)
    return loaded


_ALWAYS_IGNORED = (r"rotary_emb\.inv_freq$",)  # rotary tables older checkpoints saved as buffers
_NAMED_AT_MOST = 20  # unused tensors a warning names one by one


def _warn_unused(directory, config, origin, stored_name, specs):
    """A UserWarning naming the stored tensors that no weight of config reads, as Transformers' load report
    names its unexpected keys (a config.json with fewer layers than the weights, another architecture's extra
    tensors). A tied head's stored copy is read by no one here and by Transformers alike, and is not named."""
    family = FAMILIES[config.family]
    used = {stored_name(spec.name) for spec in specs}
    used.add(stored_name(family.tensor("lm_head").name))
    ignored = re.compile("|".join(_ALWAYS_IGNORED + tuple(family.ignore_unexpected)))
    text = next(
        (
            prefix
            for prefix, _ in family.multimodal_prefixes
            if stored_name(family.tensor("embed").name).startswith(prefix)
        ),
        None,
    )
    unused = sorted(
        name
        for name in origin
        if name not in used and not ignored.search(name) and (text is None or name.startswith(text))
    )
    if not unused:
        return
    named = ", ".join(unused[:_NAMED_AT_MOST]) + (
        f" and {len(unused) - _NAMED_AT_MOST} more" if len(unused) > _NAMED_AT_MOST else ""
    )
    warnings.warn(
        f"Some weights of the model checkpoint at {directory} were not used when initializing "
        f"{config.architectures[0] if config.architectures else family.architecture} "
        f"(num_hidden_layers={config.num_hidden_layers}): {named}. This IS expected if the config "
        "describes a smaller or other model than these weights on purpose (e.g. num_hidden_layers lowered); "
        "it IS NOT expected if the config should match them: use the config.json saved with these "
        "weights",
        UserWarning,
        stacklevel=_user_stacklevel(),
    )


def _user_stacklevel():
    """The stacklevel of a warning raised here that points at the first frame outside this package (the user's
    from_pretrained call)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _load_specs(directory, config, files, origin, target, repack, specs, stored_name, searched, meter):
    """_load_weights' loop over the expected tensors; meter(n) is told the bytes read."""
    weights, arena = {}, _Arena()
    for spec in specs:
        name = stored_name(spec.name)
        if name not in origin:
            hint = (
                ' (or, if this model ties its output layer to the embedding, set "tie_word_embeddings": '
                "true in config.json)"
                if spec.role == "lm_head" and name == spec.name
                else ""
            )
            raise CheckpointError(
                f"{directory}: tensor {name!r} not found in {searched}; the checkpoint is "
                f"incomplete or does not match config.json — re-download it{hint}"
            )
        file = files[origin[name]]
        stored, shape = file.entries[name][:2]
        where = f"{origin[name]}: tensor {name!r}"
        if stored not in _STORED:
            raise CheckpointError(
                f"{where} has dtype {stored}; weights must be F32, BF16 or F16 — re-save the "
                "checkpoint in one of those (quantized checkpoints are not supported)"
            )
        expected = tuple(size for size, _ in spec.dims)
        if shape != expected:
            fields = ", ".join(field for _, field in spec.dims)
            raise CheckpointError(
                f"{where} has shape {list(shape)} but config.json ({fields}) expects "
                f"{list(expected)}; the weights and config.json do not match — use the "
                "config.json saved with these weights"
            )
        weights[spec.name] = _load_one(spec, _Stored(file, name, meter), file, config, target, repack, arena)
        if spec.role == "embed":
            float_dtype = (
                "bfloat16"
                if target == _PAIRS
                else target
                if target is not None and target not in _INTEGER
                else _STORED[stored]
            )
    return weights, float_dtype


def _load_one(spec, tensor, file, config, target, repack, arena):
    """One checked tensor -> its Weight (see load_checkpoint for what each dtype and repack give); matrices made
    here go in arena's memory."""
    source = _STORED[file.entries[tensor.name][0]]
    held = target or source
    # tables the core reads a row per token: int8 would save no bandwidth and cost accuracy; panels no speed
    row_read = spec.role == "pos_embed" or (spec.role == "embed" and not config.tie_word_embeddings)
    if row_read and held in _INTEGER:
        held = source
    if held == _PAIRS and (row_read or not spec.is_matrix):
        held = "bfloat16"
    if spec.is_matrix and spec.transposed:  # the core's (out, in), a copy: the Weight's own (as stored, row-major),
        kept = held == source and not repack  # else read once into panels or blocks and dropped
        tensor = _Transposed(tensor, arena.empty if kept else np.empty)
    if spec.is_matrix and (held in _INTEGER or held == _PAIRS):
        return _quantize(tensor, source, held, arena)
    if spec.is_matrix and held == source and not repack and not spec.transposed:
        # As stored, kept mapped (zero copy, pages shared between processes); never read here, so a file
        # truncated meanwhile is caught by check_unchanged() before anything reads the map.
        if tensor.meter is not None:
            tensor.meter(tensor.rows * tensor.row_bytes)
        return Weight(file.view(tensor.name), held, tensor.shape[1])
    if spec.is_matrix and repack and not row_read:
        return _pack(tensor, source, held, arena)
    if spec.is_matrix:  # converted, transposed, or a row-per-token table copied as stored (repack maps nothing)
        return Weight(_copy(tensor, source, held, arena), held, tensor.shape[1])
    # a vector: rounded to the requested float precision, as a Transformers model cast to it is, then float32
    held = source if held in _INTEGER else held
    vector = np.empty(tensor.shape, dtype=np.float32)
    for r, chunk in tensor.chunks():
        vector[r : r + chunk.shape[0]] = _convert(
            tensor.name, _convert(tensor.name, chunk, source, held), held, "float32"
        )
    vector.flags.writeable = False
    return Weight(vector, "float32", tensor.shape[-1])


# ---- from_pretrained's arguments (modeling_utils.PreTrainedCausalLM.from_pretrained) ----------------------------


def _is_cpu(device):
    return (
        device is None
        or str(device) in ("cpu", "auto")
        or (isinstance(device, dict) and all(str(v) in ("cpu", "auto") for v in device.values()))
    )


# from_pretrained arguments of Transformers that change nothing here: name -> (accepts(value), why not otherwise)
_LOAD_ARGUMENTS = {
    "device_map": (_is_cpu, "this package runs on the CPU only: pass device_map='cpu' or leave it unset"),
    "low_cpu_mem_usage": (lambda v: v in (None, True, False), "pass True or False (loading always streams here)"),
    "attn_implementation": (
        lambda v: v in (None, "eager", "sdpa"),
        "one attention implementation runs here: pass 'eager', 'sdpa' or leave it unset",
    ),
    "use_safetensors": (lambda v: v in (None, True), "only safetensors checkpoints are read here"),
    "trust_remote_code": (lambda v: v in (None, True, False), "pass True or False (no checkpoint code is ever run)"),
    "variant": (
        lambda v: v is None,
        "weight variants (model.<variant>.safetensors) are not read; pass the path of a checkpoint without one",
    ),
    "ignore_mismatched_sizes": (
        lambda v: v in (None, False),
        "a tensor whose shape differs from the config's is refused here, naming it; pass False or leave it unset",
    ),
    "weights_only": (lambda v: v in (None, True, False), "pass True or False (safetensors files hold weights only)"),
    "disable_mmap": (
        lambda v: v in (None, False),
        "weights are memory-mapped where they are used as stored; pass False or leave it unset",
    ),
    "fusion_config": (lambda v: v is None, "no module fusion is done here; leave it unset"),
    "output_loading_info": (
        lambda v: v in (None, False),
        "the loading report is not returned (unused weights warn by name instead); pass False or leave it unset",
    ),
    "quantization_config": (
        lambda v: v is None,
        "quantization here is a numerics class chosen at load: pass dtype='int8', 'w8a8' or 'int4' instead",
    ),
    "key_mapping": (
        lambda v: v is None,
        "checkpoint names are read as each family stores them; rename the tensors in the file instead",
    ),
}


def check_load_arguments(kwargs):
    """Refuses a known from_pretrained argument whose value would change the result; -> the other keyword
    arguments (the config's overrides)."""
    overrides = {}
    for name, value in kwargs.items():
        if name not in _LOAD_ARGUMENTS:
            overrides[name] = value
            continue
        accepts, why = _LOAD_ARGUMENTS[name]
        if not accepts(value):
            raise InvalidInputError(f"from_pretrained({name}={value!r}) is not supported: {why}")
    return overrides


def load_config(config, directory, overrides):
    """The config a model loads with: config= (a PretrainedConfig, copied; a Transformers config, read from its
    to_dict(); a path to a config.json or its directory), else the directory's config.json with the keyword
    overrides set (as Transformers: attributes its config has; any other keyword is refused, as Transformers' model
    constructor refuses it). With config= every keyword is refused, as Transformers passes them all to the model's
    constructor then."""
    if config is not None and overrides:
        raise InvalidInputError(
            f"from_pretrained(config=..., {', '.join(f'{k}=...' for k in sorted(overrides))}): with config= given, "
            "Transformers passes other keywords to the model's constructor, which refuses them; set them on the "
            "config instead (config.num_hidden_layers = 2) and pass only config="
        )
    if config is None:
        config, unused = AutoConfig.from_pretrained(directory, return_unused_kwargs=True, **overrides)
        overrides = {}
        if unused:
            rope = sorted(set(unused) & {"rope_theta", "partial_rotary_factor", "rope_local_base_freq"})
            hint = (
                f" ({', '.join(rope)}: Transformers 5 holds {'it' if len(rope) == 1 else 'them'} in "
                "rope_parameters; pass rope_parameters={'rope_type': 'default', 'rope_theta': ...})"
                if rope
                else ""
            )
            raise InvalidInputError(
                f"from_pretrained() got {', '.join(repr(k) for k in sorted(unused))}: neither a loading argument (see "
                f"AutoModelForCausalLM.from_pretrained's docstring) nor an attribute of this "
                f"{config.family} config, so Transformers' model constructor refuses it too{hint}"
            )
    elif isinstance(config, (str, os.PathLike)):
        config = AutoConfig.from_pretrained(config)
    elif isinstance(config, AutoConfig):
        config = copy.deepcopy(config)
    elif callable(getattr(config, "to_dict", None)) and isinstance(config.to_dict(), dict):
        config = AutoConfig.from_dict(config.to_dict())  # a Transformers config object
    else:
        raise InvalidInputError(
            f"config= must be a config (AutoConfig.from_pretrained(...)), a Transformers config "
            f"or the path of a config.json; got {type(config).__name__}"
        )
    return config


# OpenBLAS's cores with AVX2 sgemm kernels or wider. OpenBLAS picks its core once, when the process loads it (numpy
# does, before habana_assist); Debian 12's 0.3.21 falls back to "Prescott" (SSE3) on CPUs newer than itself, whose
# sgemm is several times slower (docs/benchmarks.md).
_BLAS_AVX2_CORES = {"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake", "SapphireRapids"}


def warn_if_blas_generic():
    """A RuntimeWarning naming the fix when OpenBLAS runs older kernels than this CPU has (our own variant shows
    what it has: "avx512", "avx-vnni" and "avx2" are chosen from cpuid, so the core named in the fix runs here)."""
    core, ours = _core.blas_core(), _core.kernels_name()
    if ours in ("avx2", "avx-vnni", "avx512") and core not in _BLAS_AVX2_CORES:
        want = "SkylakeX" if ours == "avx512" else "Haswell"
        warnings.warn(
            f"blas_prefill=True: OpenBLAS did not recognize this CPU and runs its {core} kernels, several "
            f"times slower than the CPU allows; start Python with OPENBLAS_CORETYPE={want} in the "
            "environment (OpenBLAS reads it once, when numpy first loads it)",
            RuntimeWarning,
            stacklevel=3,
        )
