"""Checks of a call's inputs shared by the forward and generate(): token ids, attention masks, and room in memory
for the arrays a call would allocate."""

import numpy as np

from .. import _core
from ..errors import InvalidInputError, OutOfMemoryError
from .tensors import to_numpy


def numpy_inputs(input_ids, attention_mask, vocab_size):
    """-> (ids int32 (batch, seq) checked, attention_mask as numpy or None, the type input_ids came in: numpy,
    list or torch), for a forward or a generate() call."""
    if input_ids is None:
        raise InvalidInputError("input_ids is required: pass token ids as an integer array of shape (batch, seq)")
    input_ids, kind = to_numpy(input_ids, "input_ids")
    if attention_mask is not None:
        attention_mask, _ = to_numpy(attention_mask, "attention_mask")
    return checked_input_ids(input_ids, vocab_size), attention_mask, kind


def check_fits(what, nbytes, fix):
    """Raises OutOfMemoryError before an array of nbytes is allocated that the machine could not hold (numpy
    would get it from the kernel's overcommit and the process be killed when the pages are written). Each
    allocation is checked on its own against what is left now (as the core checks a KV cache)."""
    room = _core.available_memory()
    if room >= 0 and nbytes > room:
        raise OutOfMemoryError(
            f"{what} need {nbytes / 1e6:.0f} MB, more than the {room / 1e6:.0f} MB of memory available; {fix}"
        )


def checked_input_ids(input_ids, vocab_size, name="input_ids"):
    """-> int32 (batch, seq) checked: integers, 1-D or 2-D, non-empty, every id in [0, vocab_size)."""
    if input_ids is None:
        raise InvalidInputError(f"{name} is required: pass token ids as an integer array of shape (batch, seq)")
    a = np.asarray(input_ids)
    if a.dtype == object or not np.issubdtype(a.dtype, np.integer):
        raise InvalidInputError(
            f"{name} must hold integers, got dtype {a.dtype}; tokenize the text first (tok(text, return_tensors='np'))"
        )
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise InvalidInputError(f"{name} must have shape (batch, seq) with batch, seq >= 1, got {np.shape(input_ids)}")
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise InvalidInputError(
            f"{name} holds token id {bad}, outside [0, {vocab_size}) for this model's vocab_size; "
            "use the tokenizer that belongs to the checkpoint (a token added with add_tokens or "
            "add_special_tokens past the model's embedding has no row there, and the embedding "
            "cannot grow: resize_token_embeddings refuses)"
        )
    return np.ascontiguousarray(a, dtype=np.int32)


def checked_attention_mask(attention_mask, shape):
    """-> bool (batch, seq): True where a token is real."""
    if attention_mask is None:
        return np.ones(shape, dtype=bool)
    m = np.asarray(attention_mask)
    if m.shape != shape:
        raise InvalidInputError(
            f"attention_mask has shape {m.shape} but input_ids has {shape}; pass the tokenizer's mask"
        )
    if not (np.issubdtype(m.dtype, np.number) or m.dtype == bool):
        raise InvalidInputError(f"attention_mask must be numeric (0 and 1), got dtype {m.dtype}")
    if not np.isin(m, (0, 1)).all():
        raise InvalidInputError("attention_mask must hold only 0 and 1 (1 for real tokens, 0 for padding)")
    return m.astype(bool)
