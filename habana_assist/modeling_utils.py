"""The native causal LM of every supported family on the C core: the base class (from_pretrained, forward,
save_pretrained), its KV cache objects and outputs. generate() comes from generation/utils.py's GenerationMixin;
each architecture's class from models/.

Batches follow Transformers' conventions: attention_mask marks real tokens, positions count from each row's first
real token, so a padded row computes exactly what it computes alone.
"""

import contextlib
import os
import threading
import types
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _core
from .checkpoints.loading import expected_weights
from .errors import InvalidInputError, UnsupportedModelError
from .generation import assisted_costs as _assisted_costs
from .generation.configuration_utils import GenerationConfig
from .utils.generic import ModelOutput
from .generation.utils import GenerationMixin
from .utils.inputs import check_fits, checked_attention_mask, numpy_inputs
from .utils.tensors import convert_output


def set_num_threads(n):
    """Threads used by every core call, the calling thread included."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise InvalidInputError(f"num_threads={n!r} must be a positive integer")
    _core.set_num_threads(int(n))


def get_num_threads():
    return _core.get_num_threads()


@dataclass
class CausalLMOutput(ModelOutput):
    """logits: float32 (batch, seq, vocab); 0 at padded positions. past_key_values: the cache used, if any."""

    logits: np.ndarray
    past_key_values: Optional["Cache"] = None


class Cache:
    """A KV cache for batch_size rows of up to max_cache_len positions each (Transformers' StaticCache).

    Pass it as past_key_values= to the model to extend it; get_seq_length() and crop() count columns of
    input_ids (padding included), as Transformers does."""

    def __init__(self, model, batch_size, max_cache_len):
        for name, v in (("batch_size", batch_size), ("max_cache_len", max_cache_len)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise InvalidInputError(f"{name}={v!r} must be a positive integer")
        self._ctx = _core.Context(model._core, int(batch_size), int(max_cache_len), model.blas_prefill)
        self._owner = model._core  # a cache holds one model's keys and values
        self.batch_size, self.max_cache_len = int(batch_size), int(max_cache_len)
        self._mask = np.zeros((self.batch_size, 0), dtype=bool)  # (batch, columns seen): real tokens
        self._lock = threading.Lock()  # the core cache and _mask change together, by one thread at a time

    @contextlib.contextmanager
    def _exclusive(self):
        if not self._lock.acquire(blocking=False):
            raise InvalidInputError("this cache is in use by another thread; give each thread its own")
        try:
            yield
        finally:
            self._lock.release()

    def get_seq_length(self, layer_idx=0):
        return self._mask.shape[1]

    def crop(self, max_length):
        """Keeps the first max_length columns (a negative value drops that many from the end)."""
        if not isinstance(max_length, (int, np.integer)) or isinstance(max_length, bool):
            raise InvalidInputError(f"crop({max_length!r}): max_length must be an integer number of columns")
        with self._exclusive():
            n = self._mask.shape[1]
            keep = n + int(max_length) if max_length < 0 else int(max_length)
            if not 0 <= keep <= n:
                raise InvalidInputError(f"crop({max_length}) is impossible on a cache holding {n} columns")
            mask = self._mask[:, :keep]
            lengths = [int(length) for length in mask.sum(axis=1)]
            if not all(self._ctx.can_crop(b, length) for b, length in enumerate(lengths)):
                raise UnsupportedModelError(
                    f"crop({max_length}): this model's sliding-window layers keep {self._ctx.max_rollback} positions "
                    "beyond their window, not enough to go back that far; crop fewer columns at a time after each "
                    "forward, or crop(0) and run the tokens again")
            for b, length in enumerate(lengths):
                self._ctx.crop(b, length)
            self._mask = mask


class PreTrainedCausalLM(GenerationMixin):
    """The neutral base of every native causal LM: a decoder of any supported family on the C core. Each
    architecture (LlamaForCausalLM, GPT2LMHeadModel, ...: models/) is a sibling subclass of it, and
    type(model).__name__ is the checkpoint's architecture. Build one with AutoModelForCausalLM.from_pretrained;
    generate() and its helpers come from GenerationMixin (generation/utils.py)."""

    def __init__(self, checkpoint, max_cache_len=None, blas_prefill=False):
        cfg, w = checkpoint.config, checkpoint.weights
        self.config = cfg
        self.name_or_path = checkpoint.path
        self.device = "cpu"
        specs = expected_weights(cfg)
        layer_matrices = [spec.name for spec in specs if spec.is_matrix and spec.layer is not None]
        self.dtype = w[layer_matrices[0] if layer_matrices else specs[0].name].dtype  # the layers', else the embedding's
        self.blas_prefill = bool(blas_prefill)  # None: False
        self.repacked = any(weight.panels for weight in w.values())  # float matrices in panels (repack=True)
        self.max_cache_len = int(max_cache_len or cfg.max_position_embeddings)
        gc_path = os.path.join(checkpoint.path, "generation_config.json")
        self.generation_config = (GenerationConfig.from_pretrained(checkpoint.path) if os.path.exists(gc_path)
                                  else GenerationConfig.from_model_config(cfg))

        def mat(name):
            weight = w[name]
            if weight.panels:
                return (weight.array, weight.dtype + "-panels", weight.cols, weight.rows)
            return (weight.array, weight.dtype, weight.cols)

        # The core's fields (csrc/ha.h): the config's switches and per-layer settings, then each tensor under
        # the role the loader gives it.
        core_cfg = cfg.core_config(checkpoint.float_dtype)
        parts = {}
        layers = [dict(settings) for settings in cfg.layer_settings()]
        for spec in specs:
            value = mat(spec.name) if spec.is_matrix else w[spec.name].array
            (parts if spec.layer is None else layers[spec.layer])[spec.role] = value
        if "lm_head" not in parts:  # tied: the embedding's own buffer
            parts["lm_head"] = parts["embed"]
        self._core = _core.Model(core_cfg, parts, layers)
        self._weights = w  # name -> loading.Weight, for save_pretrained and num_parameters
        # what an early-exit draft (assistant_early_exit=N) is built from: the same buffers, N layers
        self._parts = (core_cfg, parts, layers)
        self._early_exit = {}  # N -> _core.Model over the first N layers
        self._costs = _assisted_costs.CostTable()  # drafter -> AssistedCosts (the cost schedule's)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs):
        """As AutoModelForCausalLM.from_pretrained (Transformers' LlamaForCausalLM.from_pretrained)."""
        from .models.auto import AutoModelForCausalLM
        return AutoModelForCausalLM.from_pretrained(pretrained_model_name_or_path, **kwargs)

    def _early_exit_core(self, n_layers):
        """A core model of this model's first n_layers layers, its final norm and its head, over the same weight
        buffers (no copy): Transformers' assistant_early_exit draft (LayerSkip's self-speculation)."""
        if n_layers not in self._early_exit:
            core_cfg, parts, layers = self._parts
            self._early_exit[n_layers] = _core.Model(dict(core_cfg, n_layers=n_layers), parts, layers[:n_layers])
        return self._early_exit[n_layers]

    def assisted_costs(self, assistant_model=None, remeasure=False, assistant_early_exit=None):
        """The costs num_assistant_tokens_schedule="cost" chooses K from: an AssistedCosts of one draft step of
        assistant_model (or of this model's first assistant_early_exit layers; 0.0 for prompt lookup, when both are
        None; also for 2..8 rows drafting together) and one append of T = 1..64 tokens to this model (timed
        for T = 1..16, 24, 32, 48, 64; straight lines between), in seconds. Measured on first use (its time grows
        with the model's size: docs/generation.md) and kept on this model for the thread count it was measured
        with; remeasure=True measures again. Beside measured costs the schedule keeps the
        acceptance it counted, which its next calls with this drafter go on from (not with rejection sampling)."""
        drafter = self._drafter(assistant_model, assistant_early_exit)
        costs = None if remeasure else self._costs.get(drafter)
        if costs is None:
            draft_core = None if drafter is None else (
                self._early_exit_core(drafter) if isinstance(drafter, int) else drafter._core)
            costs = _assisted_costs.measure(self, draft_core, self.max_cache_len if isinstance(drafter, int) or drafter is None
                                            else drafter.max_cache_len)
            self._costs.put(drafter, costs, measured=True)
        return costs

    def set_assisted_costs(self, costs, assistant_model=None, assistant_early_exit=None):
        """Pins the costs of this model with assistant_model (or its early exit, or prompt lookup) that
        num_assistant_tokens_schedule="cost" uses: an AssistedCosts (e.g. one assisted_costs() returned and saved),
        so K choices no longer depend on a measurement, nor on earlier calls (each call counts acceptance anew)."""
        if not isinstance(costs, _assisted_costs.AssistedCosts):
            raise InvalidInputError(f"costs must be an AssistedCosts (ha.AssistedCosts(draft_step=..., target=(...))), "
                                    f"got {type(costs).__name__}")
        self._costs.put(self._drafter(assistant_model, assistant_early_exit), costs, measured=False)

    def _drafter(self, assistant_model, assistant_early_exit):
        """The cost table's key: the draft model, the early-exit depth, or None for prompt lookup."""
        if assistant_early_exit is not None:
            if isinstance(assistant_early_exit, bool) or not isinstance(assistant_early_exit, (int, np.integer)) or \
                    not 1 <= assistant_early_exit <= self.config.num_hidden_layers:
                raise InvalidInputError(f"assistant_early_exit={assistant_early_exit!r} must be 1.."
                                        f"{self.config.num_hidden_layers}")
            return int(assistant_early_exit)
        if assistant_model is not None and not isinstance(assistant_model, PreTrainedCausalLM):
            raise InvalidInputError(f"assistant_model must be a model from AutoModelForCausalLM.from_pretrained or "
                                    f"habana_assist.wrap(model), got {type(assistant_model).__name__}")
        return assistant_model

    def __repr__(self):
        return (f"{type(self).__name__}({self.name_or_path!r}, architecture={self.config.architectures}, "
                f"dtype={self.dtype}, layers={self.config.num_hidden_layers})")

    @property
    def vocab_size(self):
        return self.config.vocab_size

    # ---- the rest of the model surface scripts written for Transformers touch ----------------------------

    def eval(self):
        """Inference is all this model does (no dropout, no gradients): returns self, as torch's eval()."""
        return self

    def train(self, mode=True):
        if mode:
            raise InvalidInputError("this model only runs inference; training is not supported (use model.eval())")
        return self

    def to(self, *args, **kwargs):
        """model.to("cpu") (or torch.device("cpu")) returns self; another device or a dtype is refused: load with
        from_pretrained(path, dtype=...) to change the dtype."""
        for value in list(args) + list(kwargs.values()):
            name = str(value)
            if name.split(":")[0] != "cpu":
                raise InvalidInputError(f"model.to({value!r}): this model runs on the CPU only, with dtypes chosen at "
                                        "load time; use model.to('cpu'), or from_pretrained(path, dtype=...) for a "
                                        "dtype")
        return self

    def cpu(self):
        return self

    def num_parameters(self, only_trainable=False, exclude_embeddings=False):
        """Parameters as Transformers counts them: each tensor of the checkpoint once (a tied head not again);
        exclude_embeddings leaves out the embeddings (the token embedding, and GPT-2's learned positions), as
        Transformers' count does: nn.Embedding modules only, so an untied head stays."""
        embeddings = {id(self._weights[spec.name].array) for spec in expected_weights(self.config)
                      if spec.role in ("embed", "pos_embed")}
        total, seen = 0, set()
        for weight in self._weights.values():
            if id(weight.array) in seen or (exclude_embeddings and id(weight.array) in embeddings):
                continue  # a tied head is the embedding's own tensor
            seen.add(id(weight.array))
            if weight.array.ndim == 1:
                total += weight.array.size
            else:
                total += (weight.rows if weight.rows is not None else weight.array.shape[0]) * weight.cols
        return int(total)

    def can_generate(self):
        return True

    def resize_token_embeddings(self, new_num_tokens=None, pad_to_multiple_of=None, mean_resizing=True):
        """Transformers' resize_token_embeddings, for what fixed weights allow: a size the embedding already has
        room for (e.g. len(tokenizer) after adding tokens that fit in its spare rows, as Qwen's have) changes
        nothing, and every row stays (Transformers would cut the embedding down to that size; here logits keep
        vocab_size columns); a larger one raises InvalidInputError, as the weights cannot grow. new_num_tokens
        None keeps the size; pad_to_multiple_of rounds it up first, as in Transformers. -> an object with
        nn.Embedding's num_embeddings and embedding_dim (there is no torch module to return)."""
        size = self.vocab_size if new_num_tokens is None else new_num_tokens
        for name, value in (("new_num_tokens", size), ("pad_to_multiple_of", pad_to_multiple_of)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or
                                      value < 1):
                raise InvalidInputError(f"resize_token_embeddings: {name}={value!r} must be a positive integer")
        if pad_to_multiple_of:
            size = -(-int(size) // int(pad_to_multiple_of)) * int(pad_to_multiple_of)
        if size > self.vocab_size:
            raise InvalidInputError(
                f"resize_token_embeddings({size}): this model's token embedding has {self.vocab_size} rows and its "
                "weights are fixed (read from the checkpoint, no training here), so it cannot grow to give new tokens "
                "rows; generate() refuses ids >= vocab_size. Use tokens the vocabulary has (e.g. "
                "tokenizer.pad_token = tokenizer.eos_token), or add rows and train them with Transformers, then load "
                "that checkpoint")
        return types.SimpleNamespace(num_embeddings=self.vocab_size, embedding_dim=self.config.hidden_size)

    def save_pretrained(self, save_directory, **kwargs):
        """Writes config.json, generation_config.json and model.safetensors (shards and an index above
        max_shard_size) that from_pretrained loads back to bitwise-equal logits; see saving.save_model."""
        from .checkpoints.saving import save_model
        return save_model(self, save_directory, **kwargs)

    @property
    def weight_bytes(self):
        """Bytes of weights one decode step reads."""
        return self._core.weight_bytes

    def create_cache(self, batch_size=1, max_cache_len=None):
        """A Cache for batch_size rows of up to max_cache_len positions (default: the model's max_cache_len)."""
        return Cache(self, batch_size, self.max_cache_len if max_cache_len is None else max_cache_len)

    def __call__(self, input_ids, attention_mask=None, past_key_values=None, **kwargs):
        return self.forward(input_ids, attention_mask=attention_mask, past_key_values=past_key_values, **kwargs)

    def forward(self, input_ids, attention_mask=None, past_key_values=None, use_cache=None):
        """-> CausalLMOutput with logits float32 (batch, seq, vocab).

        Without past_key_values the sequence runs through a fresh cache; with one, the tokens are appended
        to it (use_cache is accepted for Transformers compatibility; a passed cache is always extended)."""
        ids, attention_mask, kind = numpy_inputs(input_ids, attention_mask, self.vocab_size)
        B, S = ids.shape
        cache = past_key_values
        past = cache._mask if isinstance(cache, Cache) and cache.batch_size == B else None
        if past is not None and attention_mask is not None and np.shape(attention_mask) == (B, past.shape[1] + S):
            # Transformers' convention with a cache: the mask covers the past columns and the new ones.
            full = checked_attention_mask(attention_mask, (B, past.shape[1] + S))
            if not (full[:, :past.shape[1]] == past).all():
                raise InvalidInputError("attention_mask disagrees with the mask of the tokens already in the cache")
            attention_mask = full[:, past.shape[1]:]
        mask = checked_attention_mask(attention_mask, ids.shape)
        rows, cols = np.nonzero(mask)  # row-major: each row's tokens in order
        check_fits(f"the logits of {B} rows x {S} tokens x vocab {self.vocab_size} (and the core's copy of them)",
                    4 * (B * S + rows.size) * self.vocab_size, "pass fewer tokens at a time")
        if cache is None:
            ctx = _core.Context(self._core, B, S, self.blas_prefill)
        elif isinstance(cache, Cache):
            if cache._owner is not self._core:
                raise InvalidInputError("past_key_values was created by another model; create a cache with this "
                                        "model's create_cache()")
            if cache.batch_size != B:
                raise InvalidInputError(f"past_key_values holds {cache.batch_size} rows but input_ids has {B}; "
                                        "create the cache with batch_size equal to the batch")
            ctx = cache._ctx
        else:
            raise InvalidInputError("past_key_values must be a Cache from model.create_cache(...)")
        logits = np.zeros((B, S, self.vocab_size), dtype=np.float32)
        out = np.empty((rows.size, self.vocab_size), dtype=np.float32)
        with cache._exclusive() if cache is not None else contextlib.nullcontext():
            if rows.size:
                try:
                    ctx.append(rows.astype(np.int32), np.ascontiguousarray(ids[rows, cols]), None, out)
                except KeyboardInterrupt:
                    if cache is not None and any(ctx.length(b) != n for b, n in enumerate(cache._mask.sum(axis=1))):
                        # a stopped append that had overwritten a row's sliding-window ring empties that row
                        # (csrc/ha.h, ha_lm.append): this cache starts over, empty, rather than hold rows apart
                        for b in range(B):
                            ctx.crop(b, 0)
                        cache._mask = np.zeros((B, 0), dtype=bool)
                    raise
            if cache is not None:
                cache._mask = np.concatenate([cache._mask, mask], axis=1)
        logits[rows, cols] = out
        return convert_output(CausalLMOutput(logits=logits, past_key_values=cache), kind)

    def _context(self, batch_size, capacity, draft=False, argmax_only=False):
        """The core's model interface and cache for one generate() call, as target or draft (external.py's
        models give their own; argmax_only is for theirs)."""
        return _core.Context(self._core, batch_size, capacity, self.blas_prefill)
