"""Stopping criteria, as in Transformers: generate(..., stopping_criteria=[...]) takes a list of callables
f(input_ids, scores) -> bool or bool array (batch,), True ending that row after its last token.

input_ids is (batch, seq) integer, scores (batch, vocab) float: numpy arrays or torch tensors, whichever
generate() hands over. The criteria here read them through numpy and return numpy bool arrays (batch,).

StopStringCriteria follows Transformers' StopStringCriteria (src/transformers/generation/stopping_criteria.py):
a stop string S counts when the text of the last tokens holds S and that occurrence of S takes at least one
character of the final token; an occurrence that ended before the final token (e.g. one in the prompt) does
not count. Only the last max(len(S)) tokens are read. The text of a token is what it yields after other text
(tokenizer.decode(ids("abcdef") + [token]) with "abcdef" cut off), so a sentencepiece "▁the" is " the". For a
vocabulary with byte-fallback pieces ("<0x0A>"), strings and tokens are compared as UTF-8 bytes (a piece
"<0xE2>" is the byte 0xE2), as Transformers does for ByteFallback tokenizers since its PR 46530 (issue 46519),
so that a character spelt in byte pieces still matches; lengths are then counted in bytes.
"""

from __future__ import annotations

import collections
import inspect
import re
import threading
import time
import warnings
from typing import Any, Callable, Optional, Union

import numpy as np

from ..errors import InvalidInputError
from ..tokenization.tokenizer_json import _encodable
from ..utils.types import Tensor, TokenIds

__all__ = [
    "StoppingCriteria",
    "StoppingCriteriaList",
    "MaxLengthCriteria",
    "MaxTimeCriteria",
    "EosTokenCriteria",
    "StopStringCriteria",
]


def _batch_size(input_ids: TokenIds) -> int:
    shape = np.shape(input_ids)  # reads .shape where there is one (numpy, torch): no copy
    if len(shape) != 2:
        raise InvalidInputError(f"input_ids has shape {tuple(shape)}; a stopping criterion takes (batch, seq) ids")
    return int(shape[0])


def _ids_2d(input_ids: TokenIds, who: str) -> np.ndarray:
    """input_ids (numpy, torch on the CPU, or lists) -> numpy integer array (batch, seq)."""
    ids = np.asarray(input_ids)
    if ids.ndim != 2 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
        raise InvalidInputError(
            f"{who}: input_ids has shape {ids.shape} and dtype {ids.dtype}; expected integer "
            "token ids of shape (batch, seq)"
        )
    return ids


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidInputError(f"{name}={value!r}; expected an integer >= {minimum}")
    return int(value)


class StoppingCriteria:
    """Base class of a stopping criterion: subclasses implement __call__(input_ids, scores, **kwargs) -> bool
    or bool array (batch,)."""

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs: Any) -> Union[bool, Tensor]:
        raise NotImplementedError(
            f"{type(self).__name__} must implement __call__(input_ids, scores, **kwargs) -> "
            "bool array (batch,) (StoppingCriteria is a base class)"
        )


class StoppingCriteriaList(list[Callable[..., Any]]):
    """A list of criteria, itself a criterion: a row is done when any criterion says so (OR over the list).

    Each criterion may return a bool, or a bool (or 0/1 integer) numpy array or torch tensor of batch or one
    elements; __call__ returns a numpy bool array (batch,)."""

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs: Any) -> np.ndarray:
        batch = _batch_size(input_ids)
        done = np.zeros(batch, dtype=bool)
        for criterion in self:
            done |= _as_done(criterion(input_ids, scores, **kwargs), batch, criterion)
        return done

    @property
    def max_length(self) -> Optional[int]:
        """The max_length of the first MaxLengthCriteria in the list, else None."""
        for criterion in self:
            if isinstance(criterion, MaxLengthCriteria):
                return criterion.max_length
        return None


def _as_done(result: Any, batch: int, criterion: Callable[..., Any]) -> np.ndarray:
    """A criterion's answer -> numpy bool array (batch,)."""
    name = getattr(criterion, "__name__", type(criterion).__name__)
    try:
        value = np.asarray(result)
    except (TypeError, RuntimeError, ValueError) as e:  # e.g. a torch tensor on another device
        raise InvalidInputError(
            f"stopping criterion {name} returned {type(result).__name__}, which numpy cannot "
            f"read ({e}); return a bool or a bool array of shape ({batch},)"
        ) from None
    if value.dtype != bool and not np.issubdtype(value.dtype, np.integer):
        raise InvalidInputError(
            f"stopping criterion {name} returned {result!r:.80} (dtype {value.dtype}); return a "
            f"bool or a bool array of shape ({batch},)"
        )
    if value.size == 1:
        return np.full(batch, bool(value.reshape(())), dtype=bool)
    if value.size != batch:
        raise InvalidInputError(
            f"stopping criterion {name} returned an array of shape {value.shape} for a batch of "
            f"{batch}; return a bool or a bool array of shape ({batch},)"
        )
    return value.reshape(batch).astype(bool)


class MaxLengthCriteria(StoppingCriteria):
    """Done once the sequence (prompt included) holds max_length tokens."""

    def __init__(self, max_length: int, max_position_embeddings: Optional[int] = None) -> None:
        self.max_length = _check_int("max_length", max_length, 0)
        self.max_position_embeddings = (
            None
            if max_position_embeddings is None
            else _check_int("max_position_embeddings", max_position_embeddings, 1)
        )
        self._warned = False

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs: Any) -> np.ndarray:
        length = np.shape(input_ids)[-1]
        done = length >= self.max_length
        if (
            not done
            and not self._warned
            and self.max_position_embeddings is not None
            and length >= self.max_position_embeddings
        ):
            self._warned = True
            warnings.warn(
                f"the generation has reached {length} tokens, the model's max_position_embeddings "
                f"({self.max_position_embeddings}); past it the model may degrade",
                stacklevel=2,
            )
        return np.full(_batch_size(input_ids), done, dtype=bool)


class MaxTimeCriteria(StoppingCriteria):
    """Done once more than max_time seconds have passed since initial_timestamp (time.time(); default: now)."""

    def __init__(self, max_time: float, initial_timestamp: Optional[float] = None) -> None:
        if (
            isinstance(max_time, bool)
            or not isinstance(max_time, (int, float, np.integer, np.floating))
            or not max_time >= 0
        ):
            raise InvalidInputError(f"max_time={max_time!r}; expected a number of seconds >= 0")
        self.max_time = float(max_time)
        self.initial_timestamp = time.time() if initial_timestamp is None else float(initial_timestamp)

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs: Any) -> np.ndarray:
        return np.full(_batch_size(input_ids), time.time() - self.initial_timestamp > self.max_time, dtype=bool)


class EosTokenCriteria(StoppingCriteria):
    """Done for the rows whose last token is eos_token_id (an int, or a list of them)."""

    def __init__(self, eos_token_id: Union[int, list[int]]) -> None:
        ids = (
            np.asarray(eos_token_id).reshape(-1)
            if not isinstance(eos_token_id, (int, np.integer))
            else np.asarray([eos_token_id])
        )
        if isinstance(eos_token_id, bool) or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0:
            raise InvalidInputError(
                f"eos_token_id={eos_token_id!r}; expected a token id (int >= 0) or a non-empty list of them"
            )
        self.eos_token_id = ids.astype(np.int64)

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs: Any) -> np.ndarray:
        ids = _ids_2d(input_ids, "EosTokenCriteria")
        if ids.shape[1] == 0:
            return np.zeros(ids.shape[0], dtype=bool)
        return np.isin(ids[:, -1], self.eos_token_id)


# ---- stop strings -------------------------------------------------------------------------------------------

# A token's text or a stop string: str, or bytes in byte mode (both of one kind in a table, which the checker
# cannot tell apart: a union would forbid `stop in t`).
_Text = Any
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>\Z")
_STATIC_PREFIX = "abcdef"
_CACHE_SIZE = 8  # tokenizers kept (Transformers keeps 8 tables); each keeps up to 8 sets of stop strings
# id(tokenizer) -> _Vocabulary (it holds the tokenizer, so the id stays its own)
_cache: collections.OrderedDict[int, _Vocabulary] = collections.OrderedDict()
_cache_lock = threading.Lock()


class _Vocabulary:
    """What a token yields, for every id of one tokenizer: values[i] is a str, or bytes in byte mode."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.size = len(tokenizer)
        pieces = None
        if callable(getattr(tokenizer, "convert_ids_to_tokens", None)):
            pieces = tokenizer.convert_ids_to_tokens(list(range(self.size)))
        byte_of: dict[int, int] = {}
        if pieces is not None:
            for i, piece in enumerate(pieces):
                m = _BYTE_PIECE.match(piece) if isinstance(piece, str) else None
                if m:
                    byte_of[i] = int(m.group(1), 16)
        self.byte_mode = bool(byte_of)
        prefix = list(tokenizer.encode(_STATIC_PREFIX, add_special_tokens=False))
        # each token's own text: without the clean-up of " ." into "." that a config may turn on for decode()
        try:
            plain = "clean_up_tokenization_spaces" in inspect.signature(tokenizer.decode).parameters
        except (TypeError, ValueError):  # a decode() without a signature (a builtin)
            plain = False
        options = {"clean_up_tokenization_spaces": False} if plain else {}
        values: list[_Text] = []
        for i in range(self.size):
            if i in byte_of:
                values.append(bytes([byte_of[i]]))
                continue
            text = tokenizer.decode(prefix + [i], **options)
            at = text.find(_STATIC_PREFIX)
            if at < 0:
                raise InvalidInputError(
                    f"StopStringCriteria: the tokenizer does not give {_STATIC_PREFIX!r} back "
                    f"from decode(encode({_STATIC_PREFIX!r}) + [{i}]) (it gave {text!r}), so "
                    "the text of each token cannot be found; stop strings need a tokenizer "
                    "that round-trips plain ASCII"
                )
            text = text[at + len(_STATIC_PREFIX) :]
            values.append(text.encode("utf-8", "surrogatepass") if self.byte_mode else text)
        self.values = values
        self.lengths = np.zeros(self.size + 1, dtype=np.int64)  # the extra last row stands for any id out of range
        self.lengths[: self.size] = [len(v) for v in values]
        self.tables: collections.OrderedDict[tuple[_Text, ...], list[_StopTable]] = (
            collections.OrderedDict()
        )  # stop strings (tuple) -> [_StopTable]


def _vocabulary(tokenizer: Any) -> _Vocabulary:
    with _cache_lock:
        entry = _cache.get(id(tokenizer))
        if entry is not None and entry.tokenizer is tokenizer and entry.size == len(tokenizer):
            _cache.move_to_end(id(tokenizer))
            return entry
    entry = _Vocabulary(tokenizer)
    with _cache_lock:
        _cache[id(tokenizer)] = entry
        _cache.move_to_end(id(tokenizer))
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return entry


class _StopTable:
    """For one stop string S (length L) and every token t (ids, plus one row for ids out of range):

    ends[t, e-1]  t can be the final token of a match holding the last e characters of S, e in 1..L: t starts
                  with S[L-e:] (e < L), or t contains S (e = L).
    fits[t, i]    t can come right before i already matched characters, i in 1..L-1: t is S[:L-i]'s tail,
                  or t ends with the whole S[:L-i] (running off the start of S). An empty t fits everywhere.

    Both are stored as a row index per token into a small table of distinct rows (row 0: all False), since
    few tokens can take part in a given S."""

    def __init__(self, stop: _Text, vocab: _Vocabulary) -> None:
        L = len(stop)
        self.length = L
        chars = set(stop)
        end_rows, fit_rows = [np.zeros(L, dtype=bool)], [np.zeros(L, dtype=bool)]
        self.end_row = np.zeros(vocab.size + 1, dtype=np.int32)
        self.fit_row = np.zeros(vocab.size + 1, dtype=np.int32)
        for tid, t in enumerate(vocab.values):
            n = len(t)
            contains = stop in t
            if contains or (n and t[0] in chars):  # else t cannot start with a part of S
                ends = np.zeros(L, dtype=bool)
                for e in range(1, min(n, L - 1) + 1):
                    ends[e - 1] = t[:e] == stop[L - e :]
                ends[L - 1] = contains
                if ends.any():
                    self.end_row[tid] = len(end_rows)
                    end_rows.append(ends)
            if n == 0 or t[-1] in chars:
                fits = np.zeros(L, dtype=bool)
                if n == 0:
                    fits[1:] = True
                else:
                    for m in range(1, min(n - 1, L - 1) + 1):  # t runs off the start of S by n - m characters
                        fits[L - m] = t.endswith(stop[:m])
                    at = stop.find(t)
                    while 0 <= at and at + n <= L - 1:  # t lies inside S, before its last character
                        fits[L - (at + n)] = True
                        at = stop.find(t, at + 1)
                if fits.any():
                    self.fit_row[tid] = len(fit_rows)
                    fit_rows.append(fits)
        self.ends = np.array(end_rows)  # (rows, L) bool
        self.fits = np.array(fit_rows)  # (rows, L) bool

    def match(self, flipped: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """flipped (batch, w) ids, last token first, out-of-range ids replaced by the extra row -> (batch,) bool."""
        L = self.length
        alive = self.ends[self.end_row[flipped[:, 0]]]  # (batch, L): a match whose final token holds e = 1..L chars
        pos = np.broadcast_to(np.arange(1, L + 1), alive.shape)
        done = alive[:, L - 1].copy()
        alive = alive.copy()
        alive[:, L - 1] = False
        for j in range(1, flipped.shape[1]):
            if not alive.any():
                break
            tok = flipped[:, j]
            fits = self.fits[self.fit_row[tok]]  # (batch, L)
            alive &= np.take_along_axis(fits, np.minimum(pos, L - 1), axis=1)
            pos = pos + lengths[tok][:, None]
            reached = alive & (pos >= L)
            done |= reached.any(axis=1)
            alive &= ~reached
        return done


def _check_stop_strings(stop_strings: Union[str, list[str], tuple[str, ...]]) -> tuple[str, ...]:
    if isinstance(stop_strings, str):
        stop_strings = [stop_strings]
    if not isinstance(stop_strings, (list, tuple)) or not stop_strings:
        raise InvalidInputError(
            f"stop_strings={stop_strings!r:.200}; expected a str or a non-empty list of str, "
            "e.g. stop_strings=['\\n\\n']"
        )
    for s in stop_strings:
        if not isinstance(s, str) or not s:
            raise InvalidInputError(
                f"stop_strings holds {s!r:.200}; every stop string must be a non-empty str, "
                "e.g. stop_strings=['\\n\\n']"
            )
    return tuple(stop_strings)


class StopStringCriteria(StoppingCriteria):
    """Done for the rows whose last token completes one of stop_strings (a str or a list of str); see the
    module's docstring for what completes. tokenizer needs encode(text, add_special_tokens=False),
    decode(ids) and len(); convert_ids_to_tokens(ids), where it has it, tells byte-fallback pieces apart.

    The text of every token is computed once per tokenizer, and the match tables once per tokenizer and set of
    stop strings (both cached, for 8 tokenizers); a call reads only the last max(len(S)) tokens."""

    def __init__(self, tokenizer: Any, stop_strings: Union[str, list[str]]) -> None:
        self.stop_strings = _check_stop_strings(stop_strings)
        if tokenizer is None or not all(callable(getattr(tokenizer, m, None)) for m in ("encode", "decode", "__len__")):
            raise InvalidInputError(
                f"StopStringCriteria needs the model's tokenizer (with encode, decode and len), "
                f"got {type(tokenizer).__name__}; pass "
                "tokenizer=AutoTokenizer.from_pretrained(path)"
            )
        vocab = _vocabulary(tokenizer)
        keys: tuple[_Text, ...] = self.stop_strings
        if vocab.byte_mode:
            bad = [s for s in keys if not _encodable(s)]
            if bad:
                raise InvalidInputError(
                    f"stop string {bad[0]!r} is not valid Unicode (a lone surrogate); "
                    "UTF-8 cannot carry it: fix the string"
                )
            keys = tuple(s.encode("utf-8") for s in keys)
        with _cache_lock:
            tables = vocab.tables.get(keys)
            if tables is not None:
                vocab.tables.move_to_end(keys)
        if tables is None:
            tables = [_StopTable(s, vocab) for s in keys]
            with _cache_lock:
                vocab.tables[keys] = tables
                while len(vocab.tables) > _CACHE_SIZE:
                    vocab.tables.popitem(last=False)
        if not any(t.ends.shape[0] > 1 for t in tables):
            raise InvalidInputError(
                f"stop_strings={list(self.stop_strings)!r:.200}: no token of this tokenizer can "
                "end any of them (they hold characters its vocabulary lacks); use strings the "
                "tokenizer can produce"
            )
        self._vocab = vocab
        self._tables = tables
        self._size = vocab.size
        self.maximum_token_len = max(t.length for t in tables)
        # ids whose token can end some stop string: most calls end after one lookup in it
        self._can_end = np.zeros(vocab.size + 1, dtype=bool)
        for t in tables:
            self._can_end |= t.end_row > 0

    def __call__(self, input_ids: Tensor, scores: Optional[Tensor] = None, **kwargs: Any) -> np.ndarray:
        ids = _ids_2d(input_ids, "StopStringCriteria")
        batch = ids.shape[0]
        if ids.shape[1] == 0:
            return np.zeros(batch, dtype=bool)
        window = ids[:, ::-1][:, : self.maximum_token_len]
        flipped = np.where((window < 0) | (window >= self._size), self._size, window).astype(np.intp)
        if not self._can_end[flipped[:, 0]].any():
            return np.zeros(batch, dtype=bool)
        done = np.zeros(batch, dtype=bool)
        for table in self._tables:
            done |= table.match(flipped, self._vocab.lengths)
        return done
