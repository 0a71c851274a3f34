"""Models of other frameworks behind the core's model interface: habana_assist.wrap(model).

A wrapped model is any object that follows Transformers' causal-LM calling convention,
model(input_ids=, attention_mask=, position_ids=, past_key_values=, use_cache=True) returning `.logits`
(batch, positions, vocab) and `.past_key_values` (a cache with crop(), such as DynamicCache, or a tuple of
(key, value) tensors of shape (batch, heads, positions, head_dim)), on whatever device it lives. generate() on
it, or on a native model with it as assistant_model= (or the two the other way round, or both wrapped), runs the
core's loop: drafting, verification, the acceptance step, the statistics and every processor stay in C, which
calls back into Python only for the wrapped model's forward and crop (bindings/external.c: external_append).

What crosses per forward, for a model on an accelerator: the new token ids in (8 bytes each, int64), and out
only the positions the loop reads (the last prompt position at prefill, K + 1 per verification, 1 per draft
step), selected on the device, 4 * vocab bytes each. As the target of a greedy call that reads nothing but each
row's argmax (no sampling, no processor, no scores, logits or stopping criteria given the scores:
generation/options.py: reads_argmax_only) with a vocabulary of at least REDUCE_FROM_VOCAB, each position is reduced on
the device to its two largest logits and their ids (top_two): 32 bytes cross per position, and the core rebuilds
the row as those two and -inf elsewhere, from which the loop decides the same token and counts the same narrow
margins. `model.transfer_bytes` counts both directions over the last generate(). Logits are taken over DLPack
(`__dlpack__`): a CPU tensor's memory is read where it is (np.from_dlpack, no copy: nothing crosses) and copied
once into the loop's buffer, which the loop processes in place. float16 and bfloat16 logits are widened to
float32 (exact) on their device. wrap(model, reduce_logits=) overrides the choice: None (by the rule above),
True (wherever the call allows it, also on the host), False (never).

Drafting ahead: as the target with a native draft, on a device other than the CPU (wrap(model, overlap=) None,
or True anywhere, False never), the core's loop drafts the next round on a thread of its own while the wrapped
forward runs (the Python call and the device's work alike): it guesses the target's token after the candidates
by the draft's own choice and drafts after it; a round that accepts every candidate with the guessed token
starts from those drafts instead of drafting. The same tokens and counts either way; `model.drafted_ahead`
counts the draft passes made ahead and those a later round used, over the last generate().

Exactness: greedy (and coupled sampling) give what the wrapped model gives without a draft whenever its
forward over K + 1 positions gives the logits of K + 1 one-token forwards. Where it does not (most GPU kernels),
the first generate() measures the disagreement: the largest |difference| between the logits of a forward over
8 probe positions and of the same positions one at a time (`batch_disagreement`); each call then counts the
target's logits rows whose top two logits differ by less than that (`num_narrow_margins` in the result, also
`model.narrow_margins`): the positions where a chunked forward could have decided another token.
Rejection sampling stays exact in distribution whatever the kernels do. A batch runs row by row (_Adapter), each
row's logits as it would get them alone. A model whose config says longrope (Phi-3, Phi-4-mini: Transformers rotates a
whole forward with the long factors once it passes original_max_position_embeddings) is driven as Transformers'
Phi-3 generate() drives it (rope_switch: the row run again whole where it passes that length, and no verification
scoring positions on both sides of it), as the native models are (csrc/ha.h ha_lm.rope_switch).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .. import _core
from ..errors import InvalidInputError, UnsupportedModelError
from ..utils.tensors import cpu_device, import_torch

if TYPE_CHECKING:
    from ..generation.configuration_utils import GenerationConfig

_PROBE = 8  # positions of the batch-invariance probe
_KDLCPU = 1  # DLPack's device type of host memory
# reduce_logits=None reduces a device's rows to their top two from this vocabulary size up: below it, the
# reduction's kernel launches cost more than the whole rows' transfer (benchmarks/bench_external.py --reduce-sweep;
# docs/benchmarks.md)
REDUCE_FROM_VOCAB = 32768


def _torch():
    # wrap() needs the model's framework, which is torch for every model it takes today
    return import_torch("habana_assist.wrap", "install Debian's python3-torch (apt-get install python3-torch)")


def _cache_keyword(model):
    """`cache` where the model's forward takes it (Transformers 5.24's name, which warns of the older one), else
    `past_key_values`."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError, AttributeError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _field(out, name, index):
    """out.name, out[name] or out[index] (Transformers' ModelOutput, a dict, or a tuple)."""
    names = ("cache", name) if name == "past_key_values" else (name,)  # Transformers 5.24 calls it `cache`
    for n in names:
        if hasattr(out, n):
            return getattr(out, n)
        if isinstance(out, dict) and n in out:
            return out[n]
    if isinstance(out, (tuple, list)) and len(out) > index:
        return out[index]
    raise InvalidInputError(
        f"the wrapped model's forward returned {type(out).__name__} without `{name}`; it must "
        "return an object with .logits and .past_key_values (Transformers' CausalLMOutputWithPast)"
    )


def crop_cache(cache, length):
    """cache kept to its first `length` positions: a Transformers cache (DynamicCache) by cache.crop(-n), the n
    positions past `length` (Transformers 5 takes only that count; Transformers 4 took it too, beside an absolute
    length), a cache without get_seq_length() by cache.crop(length), a tuple of (key, value) tensors (batch, heads,
    positions, head_dim) sliced; UnsupportedModelError for anything else."""
    if cache is None:
        return None
    if callable(getattr(cache, "crop", None)):
        held = cache.get_seq_length() if callable(getattr(cache, "get_seq_length", None)) else None
        if held is None:
            cache.crop(length)
        elif int(held) > length:
            cache.crop(length - int(held))
        return cache
    if isinstance(cache, (tuple, list)) and all(
        isinstance(layer, (tuple, list)) and len(layer) >= 2 for layer in cache
    ):
        return tuple(tuple(t[..., :length, :] for t in layer) for layer in cache)
    raise UnsupportedModelError(
        f"the wrapped model's cache ({type(cache).__name__}) cannot be cropped: assisted "
        "generation takes back rejected drafts; use a cache with crop(n) (Transformers' "
        "DynamicCache) or the tuple of (key, value) tensors"
    )


def rope_switch(config):
    """The length past which the model's forward rotates every token with other factors:
    original_max_position_embeddings where its config's rope type is longrope (the config attribute, else
    rope_parameters' / rope_scaling's, else max_position_embeddings, as Transformers' longrope_frequency_update reads
    it); 0 otherwise."""
    for key in ("rope_parameters", "rope_scaling"):
        params = getattr(config, key, None)
        if isinstance(params, dict) and params.get("rope_type", params.get("type")) == "longrope":
            for value in (
                getattr(config, "original_max_position_embeddings", None),
                params.get("original_max_position_embeddings"),
                getattr(config, "max_position_embeddings", None),
            ):
                if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
                    return int(value)
    return 0


def top_two(rows):
    """rows (m, vocab), a torch tensor on any device (or numpy) -> host float64 (m, 4): for each row the largest
    logit and its index (the first of equals, as the core's argmax), then the largest of the others and its index
    (vocab 1: the same again), reduced on the rows' device so that only these cross. The core (bindings/external.c:
    external_top_two) rebuilds each row as those two and -inf elsewhere: the same argmax and top-two margin."""
    torch = _torch()
    rows = _widened(torch.from_numpy(rows) if isinstance(rows, np.ndarray) else rows)
    if rows.dtype != torch.float32:
        raise _not_float32(rows.dtype)
    first, at = rows.max(dim=1, keepdim=True)  # torch: the first index of the maximum; NaN wins (the core reports it)
    if rows.shape[1] > 1:
        second, at2 = rows.scatter(1, at, float("-inf")).max(dim=1, keepdim=True)
    else:
        second, at2 = first, at
    return torch.cat([first.double(), at.double(), second.double(), at2.double()], dim=1).cpu().numpy()


def _widened(logits):
    """A torch float16 or bfloat16 tensor widened to float32 on its device (exactly); anything else as it is."""
    if hasattr(logits, "float") and str(getattr(logits, "dtype", "")) in ("torch.float16", "torch.bfloat16"):
        return logits.float()
    return logits


def _not_float32(dtype):
    return InvalidInputError(
        f"the wrapped model's logits are {dtype}; return float32 logits (float16 and bfloat16 are "
        "widened here; others: logits.float() in the forward)"
    )


def host_rows(logits):
    """logits (n, vocab), any DLPack tensor (or numpy array) -> numpy float32 (n, vocab), C-contiguous; read in
    place where it is host memory in float32 already."""
    logits = _widened(logits)
    if not isinstance(logits, np.ndarray):
        if not hasattr(logits, "__dlpack__") or not hasattr(logits, "__dlpack_device__"):
            raise InvalidInputError(
                f"the wrapped model's logits ({type(logits).__name__}) export no DLPack "
                "(__dlpack__); return a torch tensor or a numpy array"
            )
        if logits.__dlpack_device__()[0] != _KDLCPU:
            if not callable(getattr(logits, "cpu", None)):
                raise InvalidInputError(
                    "the wrapped model's logits are on a device this package cannot copy from "
                    "(no .cpu()); return them on the host or as a torch tensor"
                )
            logits = logits.cpu()
        try:
            logits = np.from_dlpack(logits)
        except (BufferError, TypeError, RuntimeError) as e:
            raise InvalidInputError(f"the wrapped model's logits cannot be read over DLPack: {e}") from e
    if logits.dtype != np.float32:
        raise _not_float32(logits.dtype)
    return np.ascontiguousarray(logits)


class _Adapter:
    """One generate() call's link from the core (bindings/external.c) to the wrapped model: each batch row's cache
    and length. append(seq, tokens, want) and crop(seq, length) are called by the core's loop, with the GIL. The
    rows of a batch run as one forward each (batch 1, their own cache): rows of different lengths need no padding,
    and each row's logits are those it would get alone."""

    def __init__(self, owner, n_seq, count_margins, argmax_only=False):
        self.owner, self.count_margins = owner, count_margins
        self.argmax_only = argmax_only  # this call's loop reads only each row's argmax (reads_argmax_only)
        self.cache, self.length = [None] * n_seq, [0] * n_seq

    def append(self, seq, tokens, want):
        rows = np.frombuffer(seq, dtype=np.int32)
        ids = np.frombuffer(tokens, dtype=np.int32).astype(np.int64)
        wanted = np.ones(len(ids), dtype=bool) if want is None else np.frombuffer(want, dtype=np.uint8) != 0
        order = list(dict.fromkeys(rows.tolist()))  # the rows in order of their first token here
        before = [self.length[b] for b in order]
        positions, parts = [], []  # per row: the wanted positions of this append, their logits (or top two)
        try:  # any failure leaves nothing appended to any row, as the core's own append on an error
            for b in order:
                at = np.flatnonzero(rows == b)
                positions.append(at[wanted[at]])
                parts.append(self._forward(b, ids[at], wanted[at]))
        except BaseException:
            for b, n in zip(order, before):
                self.cache[b], self.length[b] = crop_cache(self.cache[b], n), n
            raise
        host = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(parts) > 1 and not (np.diff(np.concatenate(positions)) > 0).all():
            host = host[np.argsort(np.concatenate(positions), kind="stable")]  # the core's order: by position
        if self.count_margins and len(host):
            if host.dtype == np.float64:  # top two (top_two)
                margin = host[:, 0] - host[:, 2]
            else:
                top2 = np.partition(host, -2, axis=1)[:, -2:] if host.shape[1] > 1 else np.zeros((len(host), 2))
                margin = top2[:, 1] - top2[:, 0]
            self.owner.narrow_margins += int(np.count_nonzero(margin < self.owner.batch_disagreement))
        return host

    def _forward(self, b, ids, wanted):
        """Row b's forward over ids (n,) int64 from its cache; its wanted rows (wanted (n,) bool) on the host."""
        torch, model, device = _torch(), self.owner.model, self.owner.device
        n, before = len(ids), self.length[b]
        if str(device) != "cpu":
            self.owner.transfer_bytes["to_device"] += ids.nbytes
        with torch.no_grad():
            out = model(
                input_ids=torch.from_numpy(ids)[None].to(device),
                attention_mask=torch.ones((1, before + n), dtype=torch.long, device=device),
                position_ids=torch.arange(before, before + n, device=device)[None],
                use_cache=True,
                **{_cache_keyword(model): self.cache[b]},
            )
        logits, self.cache[b] = _field(out, "logits", 0), _field(out, "past_key_values", 1)
        if self.cache[b] is not None and any(c is self.cache[b] for i, c in enumerate(self.cache) if i != b):
            raise UnsupportedModelError(
                "the wrapped model returned one cache object for two rows of the batch "
                "(a cache it keeps itself?); each row needs its own: return a new cache when "
                "past_key_values is None, or generate() per prompt"
            )
        host = self._wanted_rows(logits, n, wanted)
        self.length[b] = before + n
        return host

    def _wanted_rows(self, logits, n, wanted):
        """The rows of logits (1, n, vocab) that wanted (n,) bool marks, on the host: float32 (n_wanted, vocab), or
        float64 (n_wanted, 4) from top_two where this call reduces them."""
        torch, shape = _torch(), tuple(getattr(logits, "shape", ()))
        if len(shape) != 3 or shape[0] != 1 or shape[1] != n or shape[2] != self.owner.vocab_size:
            raise InvalidInputError(
                f"the wrapped model returned logits of shape {shape} for 1 row of {n} positions; "
                f"expected (1, {n}, {self.owner.vocab_size}) (vocab_size from its config)"
            )
        rows = logits[0]
        idx = np.flatnonzero(wanted)
        if len(idx) < n:  # a slice where the wanted rows are one run (a view), else those rows gathered
            rows = (
                rows[int(idx[0]) : int(idx[-1]) + 1]
                if len(idx) and idx[-1] - idx[0] + 1 == len(idx)
                else rows[torch.from_numpy(idx).to(rows.device) if hasattr(rows, "device") else idx]
            )
        on_host = (
            isinstance(rows, np.ndarray)
            or not hasattr(rows, "__dlpack_device__")
            or rows.__dlpack_device__()[0] == _KDLCPU
        )
        wish = self.owner.reduce_logits
        reduce = (
            self.argmax_only
            and isinstance(rows, (np.ndarray, torch.Tensor))
            and (wish or (wish is None and not on_host and self.owner.vocab_size >= REDUCE_FROM_VOCAB))
        )
        if not on_host:  # what crosses: 4 numbers per position (top_two), else the rows whole
            self.owner.transfer_bytes["to_host"] += (32 if reduce else 4 * self.owner.vocab_size) * int(rows.shape[0])
        return top_two(rows) if reduce else host_rows(rows)

    def crop(self, b, length):
        self.cache[b], self.length[b] = crop_cache(self.cache[b], length), length


class ExternalModel:
    """A model of another framework (see the module's docstring), with generate() as a native model's. Build it
    with habana_assist.wrap(model)."""

    def __init__(
        self,
        model: Any,
        vocab_size: Optional[int] = None,
        max_cache_len: Optional[int] = None,
        generation_config: Optional[GenerationConfig] = None,
        reduce_logits: Optional[bool] = None,
        overlap: Optional[bool] = None,
    ) -> None:
        _torch()
        if not callable(model):
            raise InvalidInputError(
                f"wrap() takes a model to call as model(input_ids=..., past_key_values=..., "
                f"use_cache=True); got {type(model).__name__}, which is not callable"
            )
        config = getattr(model, "config", None)
        vocab = vocab_size if vocab_size is not None else getattr(config, "vocab_size", None)
        if isinstance(vocab, bool) or not isinstance(vocab, (int, np.integer)) or vocab < 1:
            raise InvalidInputError(
                f"wrap(): the model's vocab_size is unknown ({vocab!r}); pass wrap(model, "
                "vocab_size=...) or give the model a config with vocab_size"
            )
        self.model, self.config = model, config
        self._vocab = int(vocab)
        cap = max_cache_len if max_cache_len is not None else getattr(config, "max_position_embeddings", None) or 4096
        self.max_cache_len = int(cap)
        params = getattr(model, "parameters", None)
        first = next(iter(params()), None) if callable(params) else None
        self._device = first.device if first is not None else cpu_device()
        # None: WrappedModel.__init__ makes one from the config's special tokens right after this
        self.generation_config: GenerationConfig = generation_config  # type: ignore[assignment]  # None until then
        self.blas_prefill = False
        # measured at the first generate() as target (measure_disagreement)
        self.batch_disagreement: Optional[float] = None
        self.narrow_margins = 0  # of the last generate() as target
        if reduce_logits not in (None, True, False):
            raise InvalidInputError(
                f"wrap(reduce_logits=) takes None (reduce on an accelerator), True or False; got {reduce_logits!r}"
            )
        self.reduce_logits = reduce_logits
        if overlap not in (None, True, False):
            raise InvalidInputError(
                "wrap(overlap=) takes None (draft ahead when the model is not on the CPU), "
                f"True or False; got {overlap!r}"
            )
        self.overlap = overlap
        self.transfer_bytes = {"to_device": 0, "to_host": 0}  # over the last generate(): see the module's docstring
        self.drafted_ahead = {"passes": 0, "used": 0}  # over the last generate() as target: see draft_ahead

    @property
    def vocab_size(self) -> int:
        return self._vocab

    @property
    def device(self) -> Any:
        """The device of the wrapped model's first parameter (torch.device), else the CPU."""
        return self._device

    @property
    def dtype(self) -> Any:
        """The wrapped model's dtype (Transformers' model.dtype), else its first floating-point parameter's, else
        None."""
        dtype = getattr(self.model, "dtype", None)
        if dtype is not None:
            return dtype
        params = getattr(self.model, "parameters", None)
        floating: Iterator[Any] = (p for p in params() if p.is_floating_point()) if callable(params) else iter(())
        return next((p.dtype for p in floating), None)

    def __repr__(self) -> str:
        return f"ExternalModel({type(self.model).__name__}, vocab_size={self._vocab}, device={self.device})"

    def measure_disagreement(self) -> float:
        """The largest |difference| between the logits of one forward over _PROBE positions and of the same
        positions one at a time (0.0: this model's forward is batch-invariant here, and assisted greedy output is
        its plain greedy output)."""
        tokens = (np.arange(_PROBE, dtype=np.int32) * 7919 + 11) % self._vocab
        want = bytes([1] * _PROBE)
        row0 = bytes(4 * _PROBE)  # sequence 0 for each token
        chunked = _Adapter(self, 1, False).append(row0, tokens.tobytes(), want).copy()
        one = _Adapter(self, 1, False)
        single = np.concatenate(
            [one.append(row0[:4], tokens[i : i + 1].tobytes(), b"\x01").copy() for i in range(_PROBE)]
        )
        if not (np.isfinite(chunked).all() and np.isfinite(single).all()):
            raise InvalidInputError(
                "the wrapped model gives NaN or infinite logits on a probe of ordinary tokens: its "
                "forward overflowed or is broken; check it in float32 outside generate()"
            )
        disagreement = float(np.max(np.abs(chunked - single)))
        self.batch_disagreement = disagreement
        return disagreement

    def _context(self, batch_size, capacity, draft=False, argmax_only=False):
        """A core context over this model for one generate() call; as the target, margins are counted, and with
        argmax_only (the call reads nothing else of the target's rows) the rows may be reduced on the device."""
        if not draft and self.batch_disagreement is None:
            self.measure_disagreement()
        if not draft:
            self.narrow_margins = 0
        self.transfer_bytes = {"to_device": 0, "to_host": 0}
        adapter = _Adapter(self, batch_size, not draft and self.batch_disagreement > 0, argmax_only and not draft)
        return _core.external_context(adapter, self._vocab, capacity, batch_size, rope_switch(self.config))


def draft_ahead(target, draft):
    """Whether a generate() call of target with the native draft `draft` drafts ahead beside the target's forward
    (the core's overlap, csrc/generation/assist_ahead.c): target wrapped, with overlap=True, or overlap=None and
    not on the CPU (a forward on the host's cores would share them with the draft's thread)."""
    if not isinstance(target, ExternalModel) or draft is None or isinstance(draft, ExternalModel):
        return False
    return target.overlap if target.overlap is not None else str(target.device) != "cpu"


def is_external(model):
    return isinstance(model, ExternalModel)


# habana_assist.wrap (integrations/wrap.py): its WrappedModel is also a PreTrainedCausalLM, a layer above generate(),
# which wraps another framework's assistant_model with it. wrap.py registers it here as it loads (the package's
# __init__ imports it), so that generate() reaches it without importing a layer above its own.
_wrap = None


def register_wrap(wrap):
    global _wrap
    _wrap = wrap


def wrap_foreign(model):
    """model, another framework's model passed where a native one goes, wrapped by habana_assist.wrap."""
    return _wrap(model)


def follows_convention(obj):
    """Whether obj looks like a model of another framework that wrap() takes (callable, with a config or
    parameters), rather than a mistake to refuse."""
    return callable(obj) and (hasattr(obj, "config") or callable(getattr(obj, "parameters", None)))


def check_call(gc, universal):
    """Refuses what an external model cannot do in this generate() call."""
    if universal:
        raise InvalidInputError(
            "a wrapped model drafts or verifies in the target's own token ids; a draft with "
            "another tokenizer (universal assisted decoding) is for native models"
        )
    if gc.assistant_early_exit is not None:
        raise InvalidInputError(
            "assistant_early_exit drafts with a native model's own first layers; a wrapped model "
            "has none here: pass assistant_model= instead"
        )
    if gc.num_assistant_tokens_schedule == "cost":
        raise InvalidInputError(
            "num_assistant_tokens_schedule='cost' measures native models' costs; with a wrapped "
            "model pass 'heuristic' or 'constant'"
        )
    if gc.use_cache is False:
        raise InvalidInputError("a wrapped model generates through its cache: use_cache=False is not supported")
