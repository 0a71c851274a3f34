"""Transformers' cache classes (cache_utils.py there) over the core's KV cache: Cache, DynamicCache, StaticCache.

A cache is bound at its first use to one model and one batch size (model.create_cache binds it at once): the
core's Context (csrc/ha.h ha_llama_context) holds every layer's keys and values, per row, for the row's real
tokens only; the Python side keeps which columns of input_ids were real (_mask) and the tokens themselves
(_tokens, -1 where unknown), so that get_seq_length() and crop() count columns as Transformers does and
generate(past_key_values=) can check that the cache holds the prompt's beginning.

    DynamicCache()                 grows as it is extended (a copy into twice the room, exact: keys and values
                                   move bit for bit), up to the model's max_cache_len
    StaticCache(max_cache_len=N)   N positions per row (default: the model's max_cache_len); CacheCapacityError
                                   past them
    to_legacy_cache()              per layer (key, value), each (batch, n_kv_heads, columns, head_dim) float32, as
                                   attention reads them (after q/k norm and rotary); zeros at padded columns and at
                                   positions a sliding window's ring no longer holds
    layers                         the same per layer as CacheLayer(keys, values), Transformers 5's layer.keys
    DynamicCache.from_legacy_cache(past)   the reverse: every column real, bound at the first forward
    copy.deepcopy(cache)           an independent cache of the same model holding the same keys and values
                                   (Transformers' prompt-reuse recipe: fill a prompt's cache once, extend a deep copy
                                   per request); copy.copy(cache) is, as in Transformers, another handle on the same
                                   cache (what one extends the other holds). A cache does not pickle (its keys and
                                   values live in the core, bound to the model): to_legacy_cache() gives arrays that do.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections import namedtuple
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from . import _core
from .errors import InvalidInputError, UnsupportedModelError
from .integrations import external
from .utils.tensors import convert_output, to_numpy
from .utils.types import Tensor

if TYPE_CHECKING:
    from .modeling_utils import PreTrainedCausalLM

_FIRST_ROOM = 64  # a DynamicCache's first capacity, at least

# One layer of Cache.layers: keys and values (batch, n_kv_heads, columns, head_dim), as Transformers 5's layers.
CacheLayer = namedtuple("CacheLayer", "keys values")


class Cache:
    """A KV cache with Transformers' contract: pass it as past_key_values= to the model (or to generate()), which
    extends it; get_seq_length() and crop() count columns of input_ids (padding included), as Transformers does.
    A cache holds one model's keys and values: another model refuses it."""

    _grows = False

    def __init__(self, max_cache_len: Optional[int] = None) -> None:
        if max_cache_len is not None and (
            not isinstance(max_cache_len, (int, np.integer)) or isinstance(max_cache_len, bool) or max_cache_len < 1
        ):
            raise InvalidInputError(f"max_cache_len={max_cache_len!r} must be a positive integer")
        self.max_cache_len = None if max_cache_len is None else int(max_cache_len)
        self.batch_size: Optional[int] = None
        self._ctx: Optional[_core.Context] = None  # the core's cache, once bound
        self._owner: Optional[_core.Model] = None  # the core model it belongs to
        self._mask = np.zeros((0, 0), dtype=bool)  # (batch, columns seen): real tokens
        self._tokens = np.zeros((0, 0), dtype=np.int64)  # (batch, columns seen): their ids, -1 if unknown
        # from_legacy_cache's per-layer arrays, written when bound
        self._legacy: Optional[tuple[tuple[np.ndarray, np.ndarray], ...]] = None
        self._kind = "numpy"  # what to_legacy_cache returns: the kind of the inputs that filled it
        self._lock = threading.Lock()  # the core cache and _mask change together, by one thread at a time

    # ---- binding and room ----------------------------------------------------------------------------------

    @property
    def is_bound(self) -> bool:
        return self._ctx is not None

    def _bind(self, model: PreTrainedCausalLM, batch_size: int, room: int = 0) -> None:
        """Binds an unbound cache to model and batch_size with room for `room` positions per row; refuses another
        model's cache or another batch size."""
        if self._ctx is not None:
            if self._owner is not model._core:
                raise InvalidInputError(
                    "past_key_values was filled by another model (a cache holds one model's keys "
                    "and values); pass a new DynamicCache(), or none"
                )
            if self.batch_size != batch_size:
                raise InvalidInputError(
                    f"past_key_values holds {self.batch_size} rows but input_ids has {batch_size}; "
                    "pass a cache for the same batch (model.create_cache(batch_size=...))"
                )
            return
        legacy = self._legacy
        held = 0 if legacy is None else legacy[0][0].shape[2]
        if legacy is not None and legacy[0][0].shape[0] != batch_size:
            raise InvalidInputError(
                f"past_key_values holds {legacy[0][0].shape[0]} rows but input_ids has "
                f"{batch_size}; pass a cache for the same batch"
            )
        capacity = self._capacity(model, held + room)
        ctx = _core.Context(model._core, int(batch_size), int(capacity), model.blas_prefill)
        if legacy is not None:
            _write_legacy(ctx, model, legacy)
            self._mask = np.ones((batch_size, held), dtype=bool)
            self._tokens = np.full((batch_size, held), -1, dtype=np.int64)
            self._legacy = None
        else:
            self._mask = np.zeros((batch_size, 0), dtype=bool)
            self._tokens = np.zeros((batch_size, 0), dtype=np.int64)
        self._ctx, self._owner, self.batch_size = ctx, model._core, int(batch_size)
        self._model_max, self._blas, self._layout = model.max_cache_len, model.blas_prefill, model_layout(model)

    def _capacity(self, model: PreTrainedCausalLM, needed: int) -> int:
        limit = self.max_cache_len or model.max_cache_len
        if not self._grows:
            return limit
        return min(max(needed, _FIRST_ROOM), max(limit, needed))

    def _make_room(self, needed: int) -> None:
        """A DynamicCache grows (by copying into at least twice the room) so that each row can hold `needed`
        positions; a StaticCache leaves the core to refuse what does not fit."""
        ctx = self._ctx
        assert ctx is not None and self._owner is not None and self.batch_size is not None, "runs on a bound cache"
        if not self._grows or needed <= ctx.capacity:
            return
        capacity = max(needed, min(2 * ctx.capacity, max(self._model_max, needed)))
        bigger = _core.Context(self._owner, self.batch_size, int(capacity), self._blas)
        bigger.copy_from(ctx)
        self._ctx = bigger

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        if not self._lock.acquire(blocking=False):
            raise InvalidInputError("this cache is in use by another thread; give each thread its own")
        try:
            yield
        finally:
            self._lock.release()

    # ---- copies ---------------------------------------------------------------------------------------------

    def __deepcopy__(self, memo: dict[int, Any]) -> Cache:
        """copy.deepcopy: an independent cache of the same model (bound to it, or not yet bound, as this one is)
        holding the same keys and values bit for bit (the core's copy of every held position into a cache of the
        same capacity: a clone, ha.h ha_llama_context_copy), the same columns and tokens. Extending either leaves
        the other as it was."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        with self._exclusive():
            for name, value in self.__dict__.items():
                if name not in ("_ctx", "_owner", "_lock"):
                    new.__dict__[name] = copy.deepcopy(value, memo)
            new._owner, new._lock, new._ctx = self._owner, threading.Lock(), None
            if self._ctx is not None:
                assert self._owner is not None and self.batch_size is not None, "a bound cache knows both"
                ctx = _core.Context(self._owner, self.batch_size, self._ctx.capacity, self._blas)
                ctx.copy_from(self._ctx)
                new._ctx = ctx
        return new

    def __copy__(self) -> Cache:
        """copy.copy: as in Transformers (whose shallow copy shares the cache's layers), another handle on this
        same cache: what a forward or generate() adds through one, the other holds. copy.deepcopy for an
        independent cache."""
        new = type(self).__new__(type(self))
        new.__dict__ = self.__dict__  # one state, two handles
        return new

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise InvalidInputError(
            f"a {type(self).__name__} cannot be pickled: its keys and values live in the core, "
            "bound to its model; pickle cache.to_legacy_cache() (arrays) and rebuild it with "
            "DynamicCache.from_legacy_cache(...), or copy.deepcopy(cache) for a copy in this "
            "process"
        )

    # ---- Transformers' methods -----------------------------------------------------------------------------

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Columns of input_ids the cache has seen (padding included)."""
        if self._legacy is not None:
            return int(self._legacy[0][0].shape[2])
        return int(self._mask.shape[1])

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        """Positions a row can hold: a StaticCache's max_cache_len; -1 for a DynamicCache (it grows)."""
        if self._grows:
            return -1
        return (
            self.max_cache_len
            if self.max_cache_len is not None
            else (self._ctx.capacity if self._ctx is not None else -1)
        )

    def crop(self, max_length: int) -> None:
        """A negative value drops that many columns from the end, and 0 drops none (Transformers 5's crop(-n)); a
        positive value keeps the first max_length columns (Transformers 4's crop(n), which Transformers 5 refuses).
        reset() empties the cache."""
        if not isinstance(max_length, (int, np.integer)) or isinstance(max_length, bool):
            raise InvalidInputError(f"crop({max_length!r}): max_length must be an integer number of columns")
        if max_length == 0:
            return
        if self._ctx is None:
            if self._legacy is not None:
                raise InvalidInputError("crop: this cache is not bound to a model yet; run a forward with it first")
            raise InvalidInputError(f"crop({max_length}) is impossible on an empty cache")
        self._cut(int(max_length), f"crop({max_length})")

    def _cut(self, max_length: int, what: str) -> None:
        """Keeps the first max_length columns (max_length < 0: drops -max_length from the end); what: the call,
        for the messages."""
        with self._exclusive():
            n = self._mask.shape[1]
            keep = n + max_length if max_length < 0 else max_length
            if not 0 <= keep <= n:
                raise InvalidInputError(f"{what} is impossible on a cache holding {n} columns")
            ctx = self._ctx
            assert ctx is not None, "_cut runs on a bound cache"
            mask = self._mask[:, :keep]
            lengths = [int(length) for length in mask.sum(axis=1)]
            if not all(ctx.can_crop(b, length) for b, length in enumerate(lengths)):
                raise UnsupportedModelError(
                    f"{what}: this model's sliding-window layers keep {ctx.max_rollback} positions "
                    "beyond their window, not enough to go back that far; crop fewer columns at a time after each "
                    "forward, or reset() and run the tokens again"
                )
            for b, length in enumerate(lengths):
                ctx.crop(b, length)
            self._mask, self._tokens = mask, self._tokens[:, :keep]

    def reset(self) -> None:
        """Empties the cache (it stays bound to its model)."""
        if self._ctx is None:
            self._legacy = None
            return
        self._cut(0, "reset()")

    def to_legacy_cache(self) -> tuple[tuple[Tensor, Tensor], ...]:
        """-> per layer (key, value), each (batch, n_kv_heads, columns, head_dim) float32 (torch tensors where the
        cache was filled from torch inputs): keys as attention reads them; zeros at padded columns and at
        positions a sliding window's ring no longer holds."""
        ctx = self._ctx
        if ctx is None:
            if self._legacy is not None:
                return self._legacy
            return ()
        n_layers, heads, hd = self._layout
        B, cols = self._mask.shape
        out = []
        with self._exclusive():
            for layer in range(n_layers):
                k = np.zeros((B, heads, cols, hd), dtype=np.float32)
                v = np.zeros_like(k)
                for b in range(B):
                    real = np.flatnonzero(self._mask[b])  # column of each position
                    first = ctx.kv_first(layer, b)
                    n = real.size - first
                    if n <= 0:
                        continue
                    kb = np.empty((heads, n, hd), dtype=np.float32)
                    vb = np.empty_like(kb)
                    ctx.read_kv(layer, b, first, n, kb, vb)
                    k[b][:, real[first:]] = kb
                    v[b][:, real[first:]] = vb
                out.append((k, v))
        result: tuple[tuple[Tensor, Tensor], ...] = convert_output(tuple(out), self._kind)
        return result

    @property
    def layers(self) -> tuple[CacheLayer, ...]:
        """Per layer a CacheLayer (keys, values), as Transformers 5's cache shows its layers (layer.keys,
        layer.values): to_legacy_cache()'s arrays, copies to read (writing into them changes nothing)."""
        return tuple(CacheLayer(k, v) for k, v in self.to_legacy_cache())

    @classmethod
    def from_legacy_cache(cls, past_key_values: Optional[Sequence[tuple[Tensor, Tensor]]]) -> DynamicCache:
        """A DynamicCache holding past_key_values (per layer (key, value), each (batch, n_kv_heads, columns,
        head_dim), numpy or torch), every column a real token; written into the core at the first forward, which
        checks the shapes against its model."""
        if past_key_values is None:
            return DynamicCache()
        layers: list[tuple[np.ndarray, np.ndarray]] = []
        kind = "numpy"
        try:
            for k, v in past_key_values:
                (k, kind), (v, _) = to_numpy(k, "a legacy cache's key"), to_numpy(v, "a legacy cache's value")
                layers.append((np.ascontiguousarray(k, dtype=np.float32), np.ascontiguousarray(v, dtype=np.float32)))
        except (TypeError, ValueError) as e:
            raise InvalidInputError(
                f"from_legacy_cache: expected per layer a (key, value) pair of arrays ({e})"
            ) from None
        shape = layers[0][0].shape if layers else ()
        if not layers or len(shape) != 4 or any(k.shape != shape or v.shape != shape for k, v in layers):
            raise InvalidInputError(
                "from_legacy_cache: every layer's key and value must be (batch, n_kv_heads, "
                "columns, head_dim) arrays of one shape"
            )
        cache = DynamicCache()
        cache._legacy, cache._kind = tuple(layers), kind
        return cache


class DynamicCache(Cache):
    """Transformers' DynamicCache: grows as it is extended (DynamicCache() takes no size; config= and other
    Transformers arguments that change nothing here are accepted)."""

    _grows = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _accept_transformers_arguments("DynamicCache", args, kwargs, ())
        super().__init__()


class StaticCache(Cache):
    """Transformers' StaticCache: max_cache_len positions per row (default: the model's max_cache_len), refused
    past them (CacheCapacityError). Transformers' config=, max_batch_size=, device=, dtype= are accepted (the
    batch and the model are fixed at the first forward)."""

    def __init__(self, *args: Any, max_cache_len: Optional[int] = None, **kwargs: Any) -> None:
        _accept_transformers_arguments("StaticCache", args, kwargs, ("max_batch_size", "batch_size"))
        super().__init__(max_cache_len)


def _accept_transformers_arguments(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], counts: tuple[str, ...]
) -> None:
    """Transformers' cache constructors take config (positional first), device, dtype, layer_device_map,
    offloading...: none changes this cache; anything but those refused."""
    if len(args) > 1:
        raise InvalidInputError(f"{name}() takes its arguments by keyword (config=..., max_cache_len=...)")
    allowed = {
        "config",
        "device",
        "dtype",
        "layer_device_map",
        "offloading",
        "offload_only_non_sliding",
        "tp_size",
        *counts,
    }
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise InvalidInputError(f"{name}(): {', '.join(unknown)} is not an argument of it here")
    device = kwargs.get("device")
    if device is not None and str(device) not in ("cpu", "auto"):
        raise InvalidInputError(f"{name}(device={device!r}): the cache lives on the CPU here; pass device='cpu'")
    if kwargs.get("offloading"):
        raise InvalidInputError(f"{name}(offloading=True): the cache lives in the CPU's memory already; leave it unset")


def _write_legacy(
    ctx: _core.Context, model: PreTrainedCausalLM, legacy: tuple[tuple[np.ndarray, np.ndarray], ...]
) -> None:
    """from_legacy_cache's arrays into a fresh core cache, checked against the model's layout."""
    n_layers, heads, hd = model_layout(model)
    if len(legacy) != n_layers or legacy[0][0].shape[1] != heads or legacy[0][0].shape[3] != hd:
        raise InvalidInputError(
            f"past_key_values has {len(legacy)} layers of shape {legacy[0][0].shape[1:]}; this "
            f"model has {n_layers} layers of (n_kv_heads={heads}, columns, head_dim={hd})"
        )
    B, _, cols, _ = legacy[0][0].shape
    for layer, (k, v) in enumerate(legacy):
        for b in range(B):
            ctx.write_kv(layer, b, 0, cols, np.ascontiguousarray(k[b]), np.ascontiguousarray(v[b]))
    for b in range(B):
        ctx.set_length(b, cols)


def model_layout(model: PreTrainedCausalLM) -> tuple[int, int, int]:
    """(n_layers, n_kv_heads, head_dim) of a native model's cache (the core's own config)."""
    cfg = model._parts[0]
    return cfg["n_layers"], cfg["n_kv_heads"], cfg["head_dim"]


# ---- generate(past_key_values=...) and the cache it returns ---------------------------------------------------


def check_generate_cache(model: PreTrainedCausalLM, cache: Any, ids: np.ndarray, real: np.ndarray) -> Cache:
    """generate()'s past_key_values: a Cache (or legacy tuples) for this model and batch, holding a beginning of
    each row of ids (batch, S) (real: each row's real tokens, left-padded), with at least one column left ->
    the Cache. generate() computes the prompt from its tokens in any case (the same bits the cache holds, which
    is why this can check instead of trust: a cache of other tokens is refused)."""
    if external.is_external(model):
        raise InvalidInputError(
            "past_key_values is for this package's own models; a wrapped model keeps its "
            "cache inside its own forward: leave past_key_values unset"
        )
    if not isinstance(cache, Cache):
        if not isinstance(cache, (tuple, list)):
            raise InvalidInputError(
                f"past_key_values must be a Cache (DynamicCache(), StaticCache(...)) or legacy "
                f"(key, value) tuples, not {type(cache).__name__}"
            )
        cache = Cache.from_legacy_cache(cache)
    B, S = ids.shape
    if cache._legacy is not None:
        cache._bind(model, B, S)
    if not cache.is_bound:
        return cache
    cache._bind(model, B)  # checks the model and the batch
    cols = cache.get_seq_length()
    if cols >= S:
        raise InvalidInputError(
            f"past_key_values holds {cols} columns and input_ids has {S}: pass input_ids with "
            "the cached columns and at least one new token"
        )
    mask = np.arange(S)[None, :] >= (S - real)[:, None]
    known = cache._tokens >= 0
    if not (cache._mask == mask[:, :cols]).all() or not (cache._tokens[known] == ids[:, :cols][known]).all():
        raise InvalidInputError(
            f"past_key_values does not hold the first {cols} columns of input_ids (other tokens "
            "or padding); pass the cache of this prompt's beginning, or none"
        )
    return cache


def cache_after_generate(
    model: PreTrainedCausalLM,
    ctx: _core.Context,
    cache: Optional[Cache],
    ids: np.ndarray,
    real: np.ndarray,
    out: np.ndarray,
    steps: int,
) -> Cache:
    """The cache generate() returns (or fills): what its core context ctx holds, as Transformers leaves it:
    every column of the sequences (ids (batch, S), then out[:, :steps]) but the last, except the padding (the
    prompt's, and after a row's end). ctx holds each row's real tokens through its end but the last one it
    decided; a row that ended before the last column also gets its end token (one append). cache: the one
    passed (filled in place: a DynamicCache takes ctx, a StaticCache copies it into its own room), or None (a
    new DynamicCache)."""
    B, S = ids.shape
    held = np.array([ctx.length(b) for b in range(B)], dtype=np.int64) - real  # generated tokens held per row
    ended = held + 1 < steps  # these rows decided their end before the last column
    if ended.any():
        rows = np.flatnonzero(ended).astype(np.int32)
        ctx.append(
            rows, np.ascontiguousarray(out[rows, held[rows]], dtype=np.int32), np.zeros(rows.size, np.uint8), None
        )  # no logits wanted
        held[rows] += 1
    prompt_mask = np.arange(S)[None, :] >= (S - real)[:, None]
    gen_mask = np.arange(max(steps - 1, 0))[None, :] < held[:, None]
    mask = np.concatenate([prompt_mask, gen_mask], axis=1)
    tokens = np.where(mask, np.concatenate([ids, out[:, : gen_mask.shape[1]]], axis=1), -1).astype(np.int64)
    cache = DynamicCache() if cache is None else cache
    if not cache.is_bound:
        cache._bind(model, B)
    with cache._exclusive():
        if cache._grows:
            cache._ctx = ctx
        else:
            assert cache._ctx is not None, "bound above"
            cache._ctx.copy_from(ctx)
        cache._mask, cache._tokens = mask, tokens
    return cache
