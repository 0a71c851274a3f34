"""A native model's weights as Transformers shows them: parameters(), named_parameters(), state_dict(),
get_input_embeddings() and get_output_embeddings(), under Transformers' names (the state_dict keys save_pretrained
writes) and in the checkpoint's shapes; torch tensors where torch is importable, numpy arrays without it.

What a tensor is depends on how the model holds the weight (loading.Weight):
- a view of the model's own buffer, no copy: a matrix held row-major in memory the load made (a dtype converted with
  repack=False, an untied embedding table, GPT-2's learned positions), a GPT-2 Conv1D matrix held so (a transposed
  view: the checkpoint's (in, out) shape over the model's (out, in) rows, so not contiguous), and the vectors (norms,
  biases) of a float32 model;
- a copy in the checkpoint's layout, made when asked for: a float matrix in the core's panels (repack=True, the
  default), an int8 / int4 matrix (dequantized: float32 values scale * q, what the kernels multiply by), the vectors
  of a bfloat16 or float16 model (held as float32, given in the model's dtype, as Transformers holds them), and for
  torch a matrix viewed from the file's read-only memory map (repack=False, as stored): torch has no read-only
  tensors, and a write into that map would kill the process (numpy's read-only view of it serves without torch);
- without torch, bfloat16 values come as float32 (numpy has no bfloat16): copies.

torch tensors are Parameters with requires_grad=False, over memory the model keeps read-only; numpy arrays are
read-only. torch has no read-only tensors, so do not write into them: a write into a view changes the model's
weights (as a write into a Transformers model's parameters does), one into a copy changes nothing. A tensor made for
a weight is kept weakly: while the caller holds it (or any tensor over its memory, a state_dict() entry), asking
again gives the same object or memory (a tied head gives its embedding's), and once the caller drops it nothing is
kept, so a copy costs memory only while it is used.
"""

import threading
import warnings
import weakref

import numpy as np

from ..models import FAMILIES
from ..utils.tensors import optional_torch
from .loading import expected_weights
from .safetensors import bfloat16_bits_to_float32, to_bfloat16_bits
from .saving import state_dict_names, unpack_panels

__all__ = ["names", "parameter", "named_parameters", "state_dict", "embeddings", "dequantize", "Embedding", "Linear"]

# csrc/ha.h: HA_Q8 blocks of { float scale; int8_t q[64]; }, HA_Q4 blocks of { float scale; uint8_t nib[16]; }, byte i
# of nib holding element i in its low nibble and element i + 16 in its high one, each as q + 8.
_GROUP = {"int8": 64, "int4": 32}
_BLOCK_BYTES = {"int8": 4 + 64, "int4": 4 + 16}


class _Cache:
    """A model's tensors kept weakly: key -> the object last made for it, while someone holds it."""

    def __init__(self, model):
        self.lock = threading.RLock()  # one thread makes a given copy at a time (a module makes its weight inside)
        self.objects = weakref.WeakValueDictionary()
        self.transposed = {spec.name for spec in expected_weights(model.config) if spec.transposed}

    def get(self, key, make):
        with self.lock:
            obj = self.objects.get(key)
            if obj is None:
                obj = make()
                self.objects[key] = obj
            return obj


def _cache(model):
    cache = model.__dict__.get("_state_dict_cache")
    if cache is None:
        cache = model.__dict__.setdefault("_state_dict_cache", _Cache(model))
    return cache


def names(model):
    """The model's state_dict keys in Transformers' order: state_dict_names (what save_pretrained writes), then a tied
    head (lm_head.weight, the embedding's own tensor; Transformers' CausalLM registers lm_head last)."""
    listed = state_dict_names(model.config)
    known = set(listed)
    return listed + [name for name in model._weights if name not in known]


def dequantize(array, dtype, cols):
    """int8 / int4 blocks (rows, bytes per row) of uint8 (csrc/ha.h, HA_Q8 / HA_Q4) -> float32 (rows, cols): each
    element scale * q, as the core's kernels compute with it."""
    group, block = _GROUP[dtype], _BLOCK_BYTES[dtype]
    rows, count = array.shape[0], -(-cols // group)
    blocks = np.asarray(array).reshape(rows, count, block)
    scales = np.ascontiguousarray(blocks[:, :, :4]).view(np.float32)  # (rows, count, 1)
    if dtype == "int8":
        q = blocks[:, :, 4:].view(np.int8).astype(np.float32)
    else:
        nibbles = blocks[:, :, 4:]
        q = np.concatenate([(nibbles & 15), (nibbles >> 4)], axis=2).astype(np.float32) - np.float32(8)
    return np.ascontiguousarray((q * scales).reshape(rows, count * group)[:, :cols])


def dequantize_panels(array, cols, rows):
    """w8a8 panels (rows rounded up to whole panels, int8's bytes per row) of uint8 (csrc/ha.h, HA_Q8P) -> float32
    (rows, cols): each element scale * q, as the core's kernels compute with it."""
    group, panel_rows = _GROUP["int8"], 16
    count = -(-cols // group)
    blocks = np.asarray(array).reshape(-1, count, panel_rows * _BLOCK_BYTES["int8"])  # (panels, groups, block)
    panels = blocks.shape[0]
    scales = np.ascontiguousarray(blocks[:, :, : 4 * panel_rows]).view(np.float32)  # (panels, groups, 16)
    q = (blocks[:, :, 4 * panel_rows :].astype(np.int16) - 128).reshape(panels, count, group // 4, panel_rows, 4)
    q = q.transpose(0, 3, 1, 2, 4).reshape(panels, panel_rows, count, group).astype(np.float32)
    values = q * scales.transpose(0, 2, 1)[:, :, :, None]
    return np.ascontiguousarray(values.reshape(panels * panel_rows, count * group)[:rows, :cols])


def unpack_pairs(array, cols, rows):
    """bfloat16-pairs panels (rows rounded up to whole panels, 4 * ceil(cols / 2) bytes per row) of uint8 (csrc/ha.h,
    HA_BF16X) -> the bfloat16 bits (rows, cols) as np.uint16, the values the core's kernels multiply."""
    panel_rows = 16
    steps = -(-cols // 2)
    bits = np.asarray(array).view(np.uint16).reshape(-1, steps, panel_rows, 2)  # (panels, steps, row, pair)
    bits = bits.transpose(0, 2, 1, 3).reshape(-1, 2 * steps)
    return np.ascontiguousarray(bits[:rows, :cols])


def _maps_file(array):
    """Whether array views an np.memmap (a file's read-only map: repack=False as stored)."""
    base = array
    while base is not None:
        if isinstance(base, np.memmap):
            return True
        base = getattr(base, "base", None)
    return False


def _vector(values, dtype):
    """A vector held as float32 -> its values in dtype where that is exact (bfloat16: np.uint16 bits), else itself."""
    if dtype == "bfloat16":
        bits = to_bfloat16_bits(values)
        if np.array_equal(bfloat16_bits_to_float32(bits).view(np.uint32), values.view(np.uint32)):
            return bits
    elif dtype == "float16":
        with np.errstate(over="ignore"):
            halves = values.astype(np.float16)
        if np.array_equal(halves.astype(np.float32).view(np.uint32), values.view(np.uint32)):
            return halves
    return values


def _array(model, name, for_torch):
    """Weight `name` in the checkpoint's shape, a read-only numpy array: a view of the model's buffer or a copy, as
    the module's docstring says; bfloat16 as np.uint16 bits for torch (float32 values for numpy)."""
    weight = model._weights[name]
    held = weight.array
    if weight.dtype == "w8a8":
        values = dequantize_panels(held, weight.cols, weight.rows)
    elif weight.dtype == "bfloat16-pairs":
        values = unpack_pairs(held, weight.cols, weight.rows)
    elif weight.dtype in _GROUP:
        values = dequantize(held, weight.dtype, weight.cols)
    elif weight.panels:
        values = unpack_panels(held, weight.dtype, weight.rows, weight.cols)
    elif held.ndim == 2:
        values = np.array(held) if for_torch and _maps_file(held) else held
    else:
        values = _vector(held, model._float_dtype if for_torch or model._float_dtype != "bfloat16" else "float32")
    if name in _cache(model).transposed:
        values = values.T  # GPT-2's Conv1D: stored (in, out), held (out, in)
    if values.dtype == np.uint16 and not for_torch:
        values = bfloat16_bits_to_float32(values)
    if values.flags.writeable:  # a copy made here: read-only as the model's own weights are
        values.flags.writeable = False
    return values


def _as_torch(torch, values):
    """A read-only numpy array (np.uint16: bfloat16 bits) -> a torch Parameter over its memory (requires_grad=False),
    which keeps the array alive."""
    with warnings.catch_warnings():
        # torch warns that it cannot make the tensor read-only: the module's docstring says what writes do
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        if values.dtype == np.uint16:  # torch reads no np.uint16: the same bits as int16, seen as bfloat16
            tensor = torch.from_numpy(values.view(np.int16)).view(torch.bfloat16)
        else:
            tensor = torch.from_numpy(values)
    return torch.nn.Parameter(tensor, requires_grad=False)


def parameter(model, name):
    """Weight `name` as a torch Parameter (where torch is importable) or a read-only numpy array; the same object
    while the caller holds it, and the same for a tied head as for its embedding. The array under a Parameter is
    kept as long as any tensor over it lives (a state_dict() entry), so that a Parameter made again shares it."""
    weight = model._weights[name]
    cache, torch = _cache(model), optional_torch()

    def values():
        return cache.get(("array", id(weight), torch is not None), lambda: _array(model, name, torch is not None))

    if torch is None:
        return values()
    return cache.get(("param", id(weight)), lambda: _as_torch(torch, values()))


def named_parameters(model, prefix="", remove_duplicate=True):
    """(name, tensor) in state_dict order; each tensor once (a tied head left out) unless remove_duplicate=False."""
    seen = set()
    for name in names(model):
        key = id(model._weights[name])
        if remove_duplicate and key in seen:
            continue
        seen.add(key)
        yield prefix + name, parameter(model, name)


def state_dict(model, prefix="", keep_vars=False):
    """{name: tensor} of every key, a tied head included (as Transformers' state_dict); torch tensors detached from
    their Parameter (keep_vars=True: the Parameters), sharing its memory."""
    out = {}
    for name in names(model):
        value = parameter(model, name)
        out[prefix + name] = value if keep_vars or isinstance(value, np.ndarray) else value.detach()
    return out


class Embedding:
    """get_input_embeddings() where torch is not importable: weight (num_embeddings, embedding_dim), a read-only
    numpy array; calling it with token ids gives their rows (Transformers' nn.Embedding)."""

    def __init__(self, weight):
        self.weight = weight
        self.num_embeddings, self.embedding_dim = weight.shape

    def __call__(self, input_ids):
        return self.weight[np.asarray(input_ids)]

    def __repr__(self):
        return f"Embedding({self.num_embeddings}, {self.embedding_dim})"


class Linear:
    """get_output_embeddings() where torch is not importable: weight (out_features, in_features), a read-only numpy
    array, no bias; calling it with hidden states x (..., in_features) gives x @ weight.T (Transformers' nn.Linear)."""

    bias = None

    def __init__(self, weight):
        self.weight = weight
        self.out_features, self.in_features = weight.shape

    def __call__(self, x):
        return np.asarray(x, dtype=np.float32) @ self.weight.T.astype(np.float32)

    def __repr__(self):
        return f"Linear(in_features={self.in_features}, out_features={self.out_features}, bias=False)"


def embeddings(model, output):
    """The input embedding (output=False: a torch.nn.Embedding, or Embedding without torch) or the head (output=True:
    a torch.nn.Linear without bias, or Linear), its weight parameter(model, name): for a tied head the embedding's own
    object. The module is the same object while the caller holds it."""
    name = FAMILIES[model.config.family].tensor("lm_head" if output else "embed").name
    torch = optional_torch()

    def make():
        weight = parameter(model, name)
        if torch is None:
            return Linear(weight) if output else Embedding(weight)
        rows, cols = weight.shape
        # built on the meta device (nothing allocated), then given the model's weight
        module = (
            torch.nn.Linear(cols, rows, bias=False, device="meta")
            if output
            else torch.nn.Embedding(rows, cols, device="meta")
        )
        module.weight = weight
        return module.eval()

    return _cache(model).get(("module", output), make)
