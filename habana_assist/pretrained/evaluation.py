"""Held-out perplexity: how well a model predicts text it was not trained on, used to check that a way of
holding the weights (int8, bfloat16) keeps the model's quality.

    windows = held_out_windows(tokenizer, n_windows=24, length=256)   # (24, 256) int64
    perplexity(model, windows)                                        # exp(mean negative log-likelihood)
"""

import numpy as np

from ..errors import InvalidInputError
from .stdlib_split import stdlib_files


def held_out_windows(tokenizer, n_windows=24, length=256):
    """(n_windows, length) int64: evenly spaced windows of the shipped pair's held-out files (habana_assist/
    stdlib_split.py), tokenized file by file as the training recipe does (<s> text </s>) and concatenated."""
    if n_windows < 1 or length < 2:
        raise InvalidInputError(f"need n_windows >= 1 and length >= 2; got {n_windows} and {length}")
    parts = []
    for path in stdlib_files()[1]:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        # a whole file, cut into windows below: verbose=False, since it is no model input (no too-long warning)
        parts.append(
            [tokenizer.bos_token_id]
            + tokenizer.encode(text, add_special_tokens=False, verbose=False)
            + [tokenizer.eos_token_id]
        )
    stream = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
    if len(stream) < n_windows * length:
        raise InvalidInputError(
            f"the held-out files hold {len(stream)} tokens, fewer than {n_windows} windows of "
            f"{length}; ask for fewer or shorter windows"
        )
    starts = np.linspace(0, len(stream) - length, n_windows).astype(np.int64)
    return np.stack([stream[s : s + length] for s in starts])


def perplexity(model, windows):
    """exp of the mean negative log-likelihood of windows[:, 1:] given what precedes them, in float64.
    windows: (n, length) token ids, each window a sequence of its own."""
    windows = np.asarray(windows)
    if windows.ndim != 2 or windows.shape[1] < 2:
        raise InvalidInputError(f"windows must be (n, length >= 2) token ids; got shape {windows.shape}")
    total, count = 0.0, 0
    for w in windows:
        logits = model(w[None, :-1]).logits[0].astype(np.float64)  # (length - 1, vocab)
        logits -= logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        total -= float(logp[np.arange(len(w) - 1), w[1:]].sum())
        count += len(w) - 1
    return float(np.exp(total / count))
