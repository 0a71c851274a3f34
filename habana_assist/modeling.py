"""The causal LM of every supported family on the C core: from_pretrained, forward, KV cache objects and generate().

Batches follow Transformers' generate() conventions: attention_mask marks real tokens, positions count
from each row's first real token, so a padded row computes exactly what it computes alone.
"""

import contextlib
import os
import random
import threading
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import _core
from . import assisted_costs as _assisted_costs
from .configuration import SUPPORTED_ARCHITECTURES
from .errors import CacheCapacityError, InvalidInputError, OutOfMemoryError, UnsupportedModelError
from .generation import (ASSISTANT_KEYS, ASSISTED_SAMPLING, SCHEDULES, GenerateDecoderOnlyOutput, GenerationConfig,
                         ModelOutput)
from .generate_args import _callables as _callables_of, logits_callback, processing_args, reads_argmax_only, stop_callback
from .hub import resolve
from .loading import expected_weights, load_checkpoint
from .stopping import StopStringCriteria
from .streamers import stop_streamer
from .tensors import convert_output, to_numpy
from . import universal as _universal
from . import external as _external
from . import progress as _progress

_seed_source = np.random.default_rng()

# generate() arguments of Transformers' that this package refuses (other than GenerationConfig fields, which
# GenerationConfig.check_supported refuses): flag -> why, and what to use instead.
_REFUSED_ARGUMENTS = {
    "prefix_allowed_tokens_fn": "constrained decoding by a prefix function is not implemented; pass a "
                                "logits_processor that sets the scores of disallowed tokens to -inf",
    "negative_prompt_ids": "classifier-free guidance is not implemented; leave guidance_scale unset",
    "negative_prompt_attention_mask": "classifier-free guidance is not implemented; leave guidance_scale unset",
    "synced_gpus": "there is one CPU process here, nothing to synchronize; leave it unset",
    "use_model_defaults": "generation always starts from the model's generation_config (use_model_defaults=True); "
                          "pass generation_config=GenerationConfig() for Transformers' global defaults",
}
# Values of those arguments that are accepted, since they change nothing here (default: None only).
_ACCEPTED = {"synced_gpus": (None, False), "use_model_defaults": (None, True)}


def set_seed(seed):
    """Seeds every generate() call that passes no seed (and Python's and numpy's global generators)."""
    global _seed_source
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    _seed_source = np.random.default_rng(seed)


def set_num_threads(n):
    """Threads used by every core call, the calling thread included."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise InvalidInputError(f"num_threads={n!r} must be a positive integer")
    _core.set_num_threads(int(n))


def get_num_threads():
    return _core.get_num_threads()



def _metered(on_tokens, meter):
    """The token callback with a progress bar told each decided token (on_tokens may be None)."""
    def told(row, tokens):
        meter.update(len(tokens))
        if on_tokens is not None:
            on_tokens(row, tokens)
    return told

@dataclass
class CausalLMOutput(ModelOutput):
    """logits: float32 (batch, seq, vocab); 0 at padded positions. past_key_values: the cache used, if any."""

    logits: np.ndarray
    past_key_values: Optional["Cache"] = None


def _check_fits(what, nbytes, fix):
    """Raises OutOfMemoryError before an array of nbytes is allocated that the machine could not hold (numpy
    would get it from the kernel's overcommit and the process be killed when the pages are written). Each
    allocation is checked on its own against what is left now (as the core checks a KV cache)."""
    room = _core.available_memory()
    if room >= 0 and nbytes > room:
        raise OutOfMemoryError(f"{what} need {nbytes / 1e6:.0f} MB, more than the {room / 1e6:.0f} MB of memory "
                               f"available; {fix}")


def _input_ids(input_ids, vocab_size, name="input_ids"):
    """-> int32 (batch, seq) checked: integers, 1-D or 2-D, non-empty, every id in [0, vocab_size)."""
    if input_ids is None:
        raise InvalidInputError(f"{name} is required: pass token ids as an integer array of shape (batch, seq)")
    a = np.asarray(input_ids)
    if a.dtype == object or not np.issubdtype(a.dtype, np.integer):
        raise InvalidInputError(f"{name} must hold integers, got dtype {a.dtype}; tokenize the text first "
                                "(tok(text, return_tensors='np'))")
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise InvalidInputError(f"{name} must have shape (batch, seq) with batch, seq >= 1, got {np.shape(input_ids)}")
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise InvalidInputError(f"{name} holds token id {bad}, outside [0, {vocab_size}) for this model's vocab_size; "
                                "use the tokenizer that belongs to the checkpoint")
    return np.ascontiguousarray(a, dtype=np.int32)


def _attention_mask(attention_mask, shape):
    """-> bool (batch, seq): True where a token is real."""
    if attention_mask is None:
        return np.ones(shape, dtype=bool)
    m = np.asarray(attention_mask)
    if m.shape != shape:
        raise InvalidInputError(f"attention_mask has shape {m.shape} but input_ids has {shape}; pass the tokenizer's mask")
    if not (np.issubdtype(m.dtype, np.number) or m.dtype == bool):
        raise InvalidInputError(f"attention_mask must be numeric (0 and 1), got dtype {m.dtype}")
    if not np.isin(m, (0, 1)).all():
        raise InvalidInputError("attention_mask must hold only 0 and 1 (1 for real tokens, 0 for padding)")
    return m.astype(bool)


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


class LlamaForCausalLM:
    """A decoder of any supported family (Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 2/3, SmolLM3, GPT-2) on the C
    core; type(model).__name__ is the checkpoint's architecture. Build it with AutoModelForCausalLM.from_pretrained."""

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
        for T = 1..16, 24, 32, 48, 64; straight lines between), in seconds. Measured on first use (under a
        second for the shipped pair, tens of seconds for a 1B model) and kept on this model for the thread count
        it was measured with; remeasure=True measures again. Beside measured costs the schedule keeps the
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
        if assistant_model is not None and not isinstance(assistant_model, LlamaForCausalLM):
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

    def save_pretrained(self, save_directory, **kwargs):
        """Writes config.json, generation_config.json and model.safetensors (shards and an index above
        max_shard_size) that from_pretrained loads back to bitwise-equal logits; see saving.save_model."""
        from .saving import save_model
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
        if input_ids is None:
            raise InvalidInputError("input_ids is required: pass token ids as an integer array of shape (batch, seq)")
        input_ids, kind = to_numpy(input_ids, "input_ids")
        if attention_mask is not None:
            attention_mask, _ = to_numpy(attention_mask, "attention_mask")
        ids = _input_ids(input_ids, self.vocab_size)
        B, S = ids.shape
        cache = past_key_values
        past = cache._mask if isinstance(cache, Cache) and cache.batch_size == B else None
        if past is not None and attention_mask is not None and np.shape(attention_mask) == (B, past.shape[1] + S):
            # Transformers' convention with a cache: the mask covers the past columns and the new ones.
            full = _attention_mask(attention_mask, (B, past.shape[1] + S))
            if not (full[:, :past.shape[1]] == past).all():
                raise InvalidInputError("attention_mask disagrees with the mask of the tokens already in the cache")
            attention_mask = full[:, past.shape[1]:]
        mask = _attention_mask(attention_mask, ids.shape)
        rows, cols = np.nonzero(mask)  # row-major: each row's tokens in order
        _check_fits(f"the logits of {B} rows x {S} tokens x vocab {self.vocab_size} (and the core's copy of them)",
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

    def generate(self, input_ids=None, attention_mask=None, generation_config=None, assistant_model=None, streamer=None,
                 logits_processor=None, stopping_criteria=None, tokenizer=None, progress=None, **kwargs):
        """Greedy or sampled generation with Transformers' arguments and semantics.

        -> np.int64 (batch * num_return_sequences, prompt + new): the prompt as given, then the new tokens; rows
        that stopped early are padded with pad_token_id. With return_dict_in_generate=True, a
        GenerateDecoderOnlyOutput. input_ids and attention_mask may be numpy arrays, lists or torch tensors;
        torch in, torch out (every array of the result), numpy otherwise.

        assistant_model: a draft model with the same vocabulary. It proposes up to num_assistant_tokens
        tokens, this model verifies them in one pass; greedy output (and sampled output with
        assisted_sampling="coupled") is bit for bit what generate() without it returns, and
        assisted_sampling="rejection" (the default) samples exactly from this model's distribution.
        num_assistant_tokens, num_assistant_tokens_schedule and assistant_confidence_threshold are read
        from assistant_model.generation_config unless passed here; num_assistant_tokens_schedule="cost" (ours)
        chooses each round's K, up to num_assistant_tokens, from this pair's measured costs (assisted_costs())
        and the acceptance so far. A batch runs its rows together, round by round, each with its own K and end;
        each row's output is what it gives alone. prompt_lookup_num_tokens (with
        max_matching_ngram_size) drafts by n-gram lookup in the sequence instead of a model, and
        assistant_early_exit=N with this model's own first N layers (and its final norm and head).
        A draft with another tokenizer (Transformers' universal assisted decoding) needs tokenizer= (this
        model's) and assistant_tokenizer= (the draft's): it drafts in its own tokens, its text is re-encoded
        into candidates, and the output is still exactly this model's (see universal.py); a pair whose
        tokenizers have the identical vocabulary takes the same-tokenizer path.

        logits_processor: callables f(input_ids, scores) -> scores applied after the built-in processors and
        before the sampling warpers, once per row and position: input_ids int64 (1, n) that row's tokens (its
        prompt without padding, then what it generated), scores float32 (1, vocab); torch tensors if input_ids
        came as one. In assisted generation they process the draft's scores too, so exactness holds for
        processors that depend only on their arguments. stopping_criteria: callables f(input_ids, scores) ->
        bool (or a bool array of shape (1,)) asked after every decided token (input_ids including it), in order
        also in assisted generation; True ends that row. stop_strings (with tokenizer=) stop a row right after
        the token that completes one (Transformers' StopStringCriteria).

        streamer: an object with put(ids) and end() (TextStreamer, TextIteratorStreamer): put(prompt) first,
        then put(new ids) as soon as each token (or accepted chunk of a draft) is decided; batch size 1 only.
        If generate() raises, or Ctrl-C stops it, after the streamer was accepted, the streamer is told
        (stop_streamer: its stop(error), or end()) so that nobody waits on it forever.

        progress (ours): a tqdm bar over the new tokens (progress.py): None (the default) shows one for a call of
        1024 or more (batch x max_new_tokens) without a streamer (HA_PROGRESS=0 in the environment turns that
        off), True always, False never."""
        if streamer is not None and not (callable(getattr(streamer, "put", None)) and callable(getattr(streamer, "end", None))):
            raise InvalidInputError("streamer must have put(ids) and end() methods, like ha.TextStreamer")
        try:
            result = self._generate(input_ids, attention_mask, generation_config, assistant_model, streamer,
                                    logits_processor, stopping_criteria, tokenizer, progress, kwargs)
            if streamer is not None:  # inside the try: a Ctrl-C that lands in end() must still release the consumer
                streamer.end()
        except BaseException as error:
            if streamer is not None:
                stop_streamer(streamer, error)
            raise
        return result

    def _generate_config(self, generation_config, assistant_model, kwargs):
        """The call's GenerationConfig: the model's (or the one passed), the assistant's keys, then kwargs."""
        if generation_config is not None and not isinstance(generation_config, GenerationConfig):
            raise InvalidInputError(f"generation_config must be a GenerationConfig, got {type(generation_config).__name__}; "
                                    "pass GenerationConfig(**your_dict) or the arguments themselves")
        for flag, why in _REFUSED_ARGUMENTS.items():
            if flag in kwargs and not any(kwargs[flag] is v for v in _ACCEPTED.get(flag, (None,))):
                raise InvalidInputError(f"`{flag}` (={kwargs[flag]!r}) is not supported: {why}")
        kwargs = {k: v for k, v in kwargs.items() if k not in _REFUSED_ARGUMENTS}
        gc = GenerationConfig(**(generation_config or self.generation_config).to_dict())
        if self._drafter(assistant_model, None) is not None:  # refuses what is not a model
            for key in ASSISTANT_KEYS:  # Transformers keeps these on the assistant's generation config
                if key not in kwargs:
                    setattr(gc, key, getattr(assistant_model.generation_config, key, getattr(gc, key)))
        unused = gc.update(**kwargs)
        if unused:
            raise InvalidInputError(f"The following generation arguments are not used: {sorted(unused)}; check their "
                                    "spelling against GenerationConfig")
        gc.validate()
        gc.check_supported()
        return gc

    def _generate(self, input_ids, attention_mask, generation_config, assistant_model, streamer, logits_processor,
                  stopping_criteria, tokenizer, progress, kwargs):
        """generate() up to the streamer's end (or stop)."""
        kwargs = dict(kwargs)
        if assistant_model is not None and not isinstance(assistant_model, LlamaForCausalLM) and \
                _external.follows_convention(assistant_model):
            assistant_model = wrap(assistant_model)  # another framework's model, passed directly
        assistant_tokenizer = kwargs.pop("assistant_tokenizer", None)
        if assistant_tokenizer is not None and assistant_model is None:
            raise InvalidInputError("`assistant_tokenizer` is the tokenizer of assistant_model: pass assistant_model= "
                                    "too, or leave assistant_tokenizer unset")
        gc = self._generate_config(generation_config, assistant_model, kwargs)
        if input_ids is None:
            raise InvalidInputError("input_ids is required: pass token ids as an integer array of shape (batch, seq)")
        input_ids, kind = to_numpy(input_ids, "input_ids")
        if attention_mask is not None:
            attention_mask, _ = to_numpy(attention_mask, "attention_mask")
        ids = _input_ids(input_ids, self.vocab_size)
        n_return = gc.num_return_sequences or 1
        if n_return > 1:  # Transformers' _expand_inputs_for_generation: each prompt's copies next to each other
            ids = np.repeat(ids, n_return, axis=0)
            if attention_mask is not None:
                attention_mask = np.repeat(np.asarray(attention_mask).reshape(-1, ids.shape[1]), n_return, axis=0)
        B, S = ids.shape
        eos = gc.eos_token_ids()
        pad = gc.pad_token_id if gc.pad_token_id is not None else (eos[0] if eos else 0)
        if any(v >= self.vocab_size for v in eos):  # processors index the scores at eos ids (min_new_tokens...)
            raise InvalidInputError(f"`eos_token_id` (={eos}) is outside the vocabulary (vocab_size={self.vocab_size}); "
                                    "pass ids from the model's tokenizer")
        if not -2 ** 31 <= pad < 2 ** 31:  # only written into the output (rows that stopped early), as Transformers
            raise InvalidInputError(f"`pad_token_id` (={pad}) must fit in 32 bits")
        if attention_mask is None and gc.pad_token_id is not None and gc.pad_token_id not in eos \
                and (ids == gc.pad_token_id).any():
            attention_mask = ids != gc.pad_token_id  # what Transformers infers from the pad token
        mask = _attention_mask(attention_mask, ids.shape)
        real = mask.sum(axis=1)
        if (real == 0).any():
            raise InvalidInputError(f"row {int(np.argmin(real))} of attention_mask has no real token; every prompt "
                                    "needs at least one")
        if not (mask == (np.arange(S)[None, :] >= (S - real)[:, None])).all():
            raise InvalidInputError("attention_mask is not left-padded: generation continues each row after its last "
                                    "column, so pad on the left (tokenizer.padding_side = 'left')")
        max_new = gc.max_new_tokens if gc.max_new_tokens is not None else gc.max_length - S
        if max_new < 1:
            raise InvalidInputError(f"`max_length` (={gc.max_length}) leaves no room after the prompt of {S} tokens; "
                                    "pass max_new_tokens instead")
        min_new = max(gc.min_new_tokens or 0, gc.min_length - S, 0)
        need = int(real.max()) + max_new
        if need > self.max_cache_len:
            raise CacheCapacityError(f"the prompt ({int(real.max())} tokens) plus max_new_tokens ({max_new}) needs "
                                     f"{need} cache positions, more than max_cache_len={self.max_cache_len}; shorten the "
                                     "prompt, lower max_new_tokens, or load with a larger max_cache_len")
        early_exit = gc.assistant_early_exit
        # Transformers' _get_candidate_generator: early exit, else prompt lookup, else the assistant model
        if early_exit is not None or gc.prompt_lookup_num_tokens is not None:
            unused = [name for name, on in (("assistant_model", assistant_model is not None), (
                "prompt_lookup_num_tokens", early_exit is not None and gc.prompt_lookup_num_tokens is not None)) if on]
            if unused:
                warnings.warn(f"{' and '.join(unused)} not used: {'assistant_early_exit' if early_exit is not None else 'prompt_lookup_num_tokens'} "
                              "drafts instead, as in Transformers", UserWarning, stacklevel=4)
            assistant_model = None
        assisted = assistant_model is not None or gc.prompt_lookup_num_tokens is not None or early_exit is not None
        # universal assisted decoding: a draft with another tokenizer drafts through text (universal.py)
        universal = assistant_model is not None and _universal.different_tokenizers(
            self, assistant_model, tokenizer, assistant_tokenizer)
        if _external.is_external(self) or _external.is_external(assistant_model):
            _external.check_call(gc, universal)
        if assistant_model is not None and not universal:
            self._check_assistant(assistant_model, gc, need)
        if early_exit is not None and early_exit > self.config.num_hidden_layers:
            raise InvalidInputError(f"`assistant_early_exit` (={early_exit}) is more than this model's "
                                    f"{self.config.num_hidden_layers} layers; pass 1..{self.config.num_hidden_layers}")
        if gc.num_assistant_tokens_schedule == "cost" and universal:
            raise InvalidInputError("num_assistant_tokens_schedule='cost' is not implemented for a draft with another "
                                    "tokenizer (universal assisted decoding); pass 'heuristic' or 'constant'")
        if gc.use_cache is False:
            if assisted:
                raise InvalidInputError("assisted generation requires `use_cache=True`: the drafts are verified "
                                        "against the KV cache")
            if self.blas_prefill:
                raise InvalidInputError("`use_cache=False` recomputes each sequence through the batch-invariant "
                                        "kernels, but this model was loaded with blas_prefill=True (prompt blocks "
                                        "through OpenBLAS, not bitwise the same); load it without blas_prefill")
        if streamer is not None and B != 1:
            raise InvalidInputError(f"streamer works with one prompt at a time; got a batch of {B}")
        stops = _callables_of(stopping_criteria, "stopping_criteria")
        stop_strings = gc.stop_strings
        if stop_strings is not None:
            if tokenizer is None:
                raise InvalidInputError("`stop_strings` needs the model's tokenizer to find the strings in the tokens: "
                                        "pass tokenizer=tokenizer to generate()")
            stops.append(StopStringCriteria(tokenizer, stop_strings))
        for flag, on in (("output_scores", gc.output_scores), ("output_logits", gc.effective("output_logits"))):
            if on:
                _check_fits(f"{flag} for {B} rows x {max_new} new tokens x vocab {self.vocab_size}",
                            4 * B * max_new * self.vocab_size, f"lower max_new_tokens or leave {flag} off")
        seed = gc.seed if gc.seed is not None else int(_seed_source.integers(0, 2 ** 63))
        # max_time 0 ends after the first step, as in Transformers; the core reads 0 as no limit
        max_time = 0.0 if gc.max_time is None else max(float(gc.max_time), 1e-300)
        if streamer is not None:
            streamer.put(ids[0, S - int(real[0]):].astype(np.int64))
        on_tokens = (lambda row, tokens: streamer.put(np.asarray(tokens, dtype=np.int64))) if streamer else None
        # a bar for long calls: by size, never time (streamed text is its own progress)
        meter = _progress.bar(progress, 0 if streamer is not None else B * max_new, _progress.MIN_TOKENS, B * max_new,
                              "generating", "tok")
        if meter is not None:
            on_tokens = _metered(on_tokens, meter)
        with meter if meter is not None else contextlib.nullcontext():  # the bar closes however the call ends
            out = np.empty((B, max_new), dtype=np.int32)
            scores = np.empty((max_new, B, self.vocab_size), dtype=np.float32) if gc.output_scores else None
            logits = np.empty((max_new, B, self.vocab_size), dtype=np.float32) if gc.effective("output_logits") else None
            sources = np.zeros((B, max_new), dtype=np.uint8) if gc.return_dict_in_generate else None  # TokenSource
            procs = processing_args(gc, S, max_new, eos, logits_callback(logits_processor, kind), stop_callback(stops, kind),
                                    logits)
            ctx = None if universal else self._context(B, need, argmax_only=reads_argmax_only(gc, procs, min_new))
            common = (ids, (S - real).astype(np.int64), max_new, min_new, np.asarray(eos, dtype=np.int32), pad,
                      bool(gc.do_sample), float(gc.effective("temperature")), int(gc.effective("top_k")),
                      float(gc.effective("top_p")), float(gc.effective("repetition_penalty")), seed, max_time, procs)
            extra = {}
            if universal:
                out[:], steps, extra, k_final = _universal.generate(
                    self, assistant_model, tokenizer, assistant_tokenizer, gc, procs, ids, real, max_new, min_new, eos, pad,
                    seed, max_time, procs[21], on_tokens, scores, logits, sources)
                if gc.num_assistant_tokens_schedule == "heuristic":
                    assistant_model.generation_config.num_assistant_tokens = k_final  # carried to the next call
            elif not assisted:
                steps = _core.generate(ctx, *common, out, scores, sources, on_tokens)
            else:
                if early_exit is not None:
                    draft_ctx = _core.Context(self._early_exit_core(early_exit), B, need, self.blas_prefill)
                elif assistant_model is not None:
                    draft_ctx = assistant_model._context(B, need, draft=True)
                else:
                    draft_ctx = None
                cost = gc.num_assistant_tokens_schedule == "cost"
                costs = self.assisted_costs(assistant_model, assistant_early_exit=early_exit).as_core() if cost \
                    else (None, None)
                # acceptance counts carried from call to call (assisted_costs.py), except where the K choices decide
                # the tokens (rejection sampling) or the costs were pinned; the call counts into a copy, put back
                # whole after it, so that calls from two threads never leave a mix of both
                learned = self._costs.learned(self._drafter(assistant_model, early_exit)) if cost and not (
                    gc.do_sample and gc.assisted_sampling == "rejection") else None
                counts = None if learned is None else learned.copy()
                proposed, accepted = np.zeros(max_new, dtype=np.int64), np.zeros(max_new, dtype=np.int64)
                overlap = _external.draft_ahead(self, assistant_model)  # None with early exit (no draft model)
                steps, n_draft, n_accepted, n_target, n_draft_passes, k_final, n_rounds, n_ahead, n_ahead_used = \
                    _core.generate_assisted(
                        ctx, draft_ctx, *common, int(gc.num_assistant_tokens),
                        SCHEDULES.index(gc.num_assistant_tokens_schedule), float(gc.assistant_confidence_threshold or 0.0),
                        ASSISTED_SAMPLING.index(gc.assisted_sampling), int(gc.prompt_lookup_num_tokens or 1),
                        int(gc.max_matching_ngram_size or 2), *costs, out, scores, proposed, accepted, sources, on_tokens,
                        overlap, counts)
                if learned is not None:
                    learned[:] = counts
                if _external.is_external(self):
                    self.drafted_ahead = {"passes": n_ahead, "used": n_ahead_used}
                drafter = self if early_exit is not None else assistant_model
                if drafter is not None and gc.num_assistant_tokens_schedule == "heuristic":
                    drafter.generation_config.num_assistant_tokens = k_final  # carried to the next call
                used = int(np.max(np.nonzero(proposed)[0], initial=-1)) + 1
                extra = dict(num_draft_tokens=n_draft, num_accepted_tokens=n_accepted, num_target_passes=n_target,
                             num_draft_passes=n_draft_passes, num_rounds=n_rounds, proposed_per_position=proposed[:used],
                             accepted_per_position=accepted[:used])
            if _external.is_external(self):
                extra["num_narrow_margins"] = self.narrow_margins
            sequences = np.concatenate([ids.astype(np.int64), out[:, :steps].astype(np.int64)], axis=1)
            if not gc.return_dict_in_generate:
                return convert_output(sequences, kind)
            if logits is not None:
                extra["logits"] = tuple(logits[:steps])
            result = GenerateDecoderOnlyOutput(sequences=sequences, scores=tuple(scores[:steps]) if scores is not None
                                               else None, **extra)
            result.token_sources = np.ascontiguousarray(sources[:, :steps])
            # for its HTML view: the tokenizer passed, else the checkpoint's, read when the view is asked for
            result._tokenizer = tokenizer if tokenizer is not None else getattr(self, "name_or_path", None)
            return convert_output(result, kind)

    def _context(self, batch_size, capacity, draft=False, argmax_only=False):
        """The core's model interface and cache for one generate() call, as target or draft (external.py's
        models give their own; argmax_only is for theirs)."""
        return _core.Context(self._core, batch_size, capacity, self.blas_prefill)

    def compute_transition_scores(self, sequences, scores, beam_indices=None, normalize_logits=False):
        """Transformers' compute_transition_scores without beams: the score of each generated token at its step,
        (batch, steps) float32, from generate(..., output_scores=True, return_dict_in_generate=True)'s sequences
        and scores (or logits); normalize_logits=True takes log_softmax over the vocabulary first. Rows that had
        stopped score -inf there (their scores are -inf). Torch in, torch out."""
        if beam_indices is not None:
            raise InvalidInputError("beam_indices is for beam search, which is not implemented here; pass "
                                    "compute_transition_scores(sequences, scores)")
        seq, kind = to_numpy(sequences, "sequences")
        if not isinstance(scores, (tuple, list)) or not scores:
            raise InvalidInputError("scores must be the tuple of per-step (batch, vocab) arrays that generate(..., "
                                    "output_scores=True, return_dict_in_generate=True) returns")
        steps = np.stack([to_numpy(step, "scores")[0] for step in scores]).astype(np.float32)  # (steps, batch, vocab)
        if seq.ndim != 2 or steps.ndim != 3 or steps.shape[1] != seq.shape[0] or steps.shape[0] > seq.shape[1]:
            raise InvalidInputError(f"sequences {seq.shape} and scores ({len(scores)} steps of "
                                    f"{steps.shape[1:]}) do not belong together; pass both from one generate() result")
        if normalize_logits:
            m = steps.max(axis=2, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)
            with np.errstate(divide="ignore"):
                steps = steps - m - np.log(np.exp(steps - m).sum(axis=2, keepdims=True))
        tokens = seq[:, seq.shape[1] - steps.shape[0]:]  # (batch, steps): the token chosen at each step
        if tokens.size and (tokens.min() < 0 or tokens.max() >= steps.shape[2]):
            raise InvalidInputError("sequences hold token ids outside the scores' vocabulary")
        result = np.take_along_axis(steps.transpose(1, 0, 2), tokens[:, :, None].astype(np.int64), axis=2)[:, :, 0]
        return convert_output(np.ascontiguousarray(result), kind)

    def _check_assistant(self, assistant, gc, need):
        """Raises ValueError unless assistant can draft for this model in this call."""
        if assistant.vocab_size != self.vocab_size:
            raise InvalidInputError(f"the assistant's vocab_size ({assistant.vocab_size}) differs from this model's "
                             f"({self.vocab_size}); the draft must share the target's tokenizer")
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            mine, theirs = getattr(self.config, key, None), getattr(assistant.config, key, None)
            if mine is not None and theirs is not None and mine != theirs:
                raise InvalidInputError(f"the assistant's {key} ({theirs}) differs from this model's ({mine}); the draft "
                                 "must share the target's tokenizer and special tokens")
        if need > assistant.max_cache_len:
            raise CacheCapacityError(f"this generation needs {need} cache positions, more than the assistant's "
                                     f"max_cache_len={assistant.max_cache_len}; load it with a larger max_cache_len")


def _is_cpu(device):
    return device is None or str(device) in ("cpu", "auto") or (isinstance(device, dict) and all(
        str(v) in ("cpu", "auto") for v in device.values()))


# from_pretrained arguments of Transformers that change nothing here: name -> (accepts(value), why not otherwise)
_LOAD_ARGUMENTS = {
    "device_map": (_is_cpu, "this package runs on the CPU only: pass device_map='cpu' or leave it unset"),
    "low_cpu_mem_usage": (lambda v: v in (None, True, False), "pass True or False (loading always streams here)"),
    "attn_implementation": (lambda v: v in (None, "eager", "sdpa"),
                            "one attention implementation runs here: pass 'eager', 'sdpa' or leave it unset"),
    "use_safetensors": (lambda v: v in (None, True), "only safetensors checkpoints are read here"),
    "trust_remote_code": (lambda v: v in (None, True, False), "pass True or False (no checkpoint code is ever run)"),
    "revision": (lambda v: True, ""), "token": (lambda v: True, ""), "cache_dir": (lambda v: True, ""),
    "local_files_only": (lambda v: True, ""), "force_download": (lambda v: True, ""), "proxies": (lambda v: True, ""),
    "subfolder": (lambda v: v in (None, ""), "pass the subfolder's path itself"),
    "variant": (lambda v: v is None, "weight variants (model.<variant>.safetensors) are not read; pass the path "
                                     "of a checkpoint without one"),
}


def _check_load_arguments(kwargs):
    """Refuses an unknown from_pretrained argument, or a known one whose value would change the result."""
    for name, value in kwargs.items():
        if name not in _LOAD_ARGUMENTS:
            raise InvalidInputError(f"from_pretrained() got an unexpected argument {name!r}; see "
                                    "AutoModelForCausalLM.from_pretrained's docstring for what it takes")
        accepts, why = _LOAD_ARGUMENTS[name]
        if not accepts(value):
            raise InvalidInputError(f"from_pretrained({name}={value!r}) is not supported: {why}")


# One class per supported architecture, named as Transformers names it (Qwen3ForCausalLM, GPT2LMHeadModel...), so
# that type(model).__name__ and isinstance checks read as they do with Transformers; every one is the decoder above.
ARCHITECTURE_CLASSES = {"LlamaForCausalLM": LlamaForCausalLM}
for _name in SUPPORTED_ARCHITECTURES:
    if _name not in ARCHITECTURE_CLASSES:
        ARCHITECTURE_CLASSES[_name] = type(_name, (LlamaForCausalLM,), {
            "__module__": __name__, "__doc__": f"A {_name} checkpoint on the C core (see LlamaForCausalLM)."})


def _model_class(config):
    """The class of config's architecture: the supported one its "architectures" names, else its model_type's."""
    for name in config.architectures or ():
        if name in ARCHITECTURE_CLASSES:
            return ARCHITECTURE_CLASSES[name]
    by_type = {model_type: name for name, model_type in SUPPORTED_ARCHITECTURES.items()}
    return ARCHITECTURE_CLASSES[by_type.get(config.family, "LlamaForCausalLM")]


class AutoModelForCausalLM:
    """Transformers-style entry point: from_pretrained(directory) -> the checkpoint architecture's class."""

    def __init__(self):
        raise TypeError("use AutoModelForCausalLM.from_pretrained(path)")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, dtype=None, max_cache_len=None, torch_dtype=None,
                        load_in_8bit=False, load_in_4bit=False, blas_prefill=False, repack=True, progress=None,
                        **kwargs):
        """Loads a Hugging Face checkpoint directory (config.json, model.safetensors or sharded index).

        Transformers' loading arguments that change nothing here are accepted with those values only (see
        _LOAD_ARGUMENTS): device_map None/"auto"/"cpu" (everything runs on the CPU), low_cpu_mem_usage (loading
        always streams), attn_implementation None/"eager"/"sdpa" (one attention implementation), use_safetensors
        None/True, trust_remote_code (no checkpoint code is ever run), and hub arguments (revision, token,
        cache_dir, local_files_only, force_download...) for the local directories this package reads.

        dtype: None/"auto" keeps weights' stored dtype (memory-mapped, not copied, with repack=False);
        "float32", "bfloat16" or "float16" converts once at load; "int8" and "int4" quantize the matrices at load (a float32 scale per
        64 int8 or 32 int4 weights; each matmul rounds its input activations to int16, one scale per token).
        Compute is float32, apart from integer weights' products (exact int32 sums, scaled in float32).
        max_cache_len bounds prompt + new tokens (default: config.max_position_embeddings). torch_dtype is an
        alias of dtype, load_in_8bit=True of "int8", load_in_4bit=True of "int4".

        blas_prefill=True computes prompts through OpenBLAS in blocks of 128 tokens (those that start an
        empty cache). Greedy and coupled assisted generation still equal plain generation bit for bit, but
        those prompt rows are not bitwise the ones a token-by-token forward gives (they agree to float32
        rounding; with integer weights OpenBLAS multiplies float32 activations, not int16). False (the
        default; None means the same) keeps every row batch-invariant: on the machine this was measured on
        OpenBLAS prefilled 0.9-1.1x as fast as the kernels with float weights, 0.6-0.9x with int8 ones and
        1.0-1.5x with int4 ones. True warns (RuntimeWarning) where OpenBLAS runs older kernels than the CPU has
        (Debian 12's falls back to Prescott's on CPUs newer than itself), naming the OPENBLAS_CORETYPE fix.

        repack=True (the default) copies float matrices at load into panels of 16 rows (csrc/ha.h) for kernels
        that read each weight once for up to 6 tokens; each output is then one chain of fused multiply-adds in
        index order. On the measured machine (1.1B shape, bfloat16) decode ran 1.1-1.2x and verification of
        8 tokens 1.1-1.3x as fast as with row-major weights. repack=False keeps float weights row-major, as
        stored (views of the file's memory map: no copy at load, pages shared between processes), with
        kernels that sum 8-lane blocks; logits differ from repacked ones by float32 rounding only.

        progress: a tqdm bar over the bytes of weights read and converted (progress.py): None (the default) shows
        one for checkpoints of 512 MiB or more (HA_PROGRESS=0 in the environment turns that off), True always,
        False never."""
        _check_load_arguments(kwargs)
        if load_in_8bit and load_in_4bit:
            raise InvalidInputError("load_in_8bit=True and load_in_4bit=True disagree; pass only one")
        for flag, name in ((load_in_8bit, "int8"), (load_in_4bit, "int4")):
            if not flag:
                continue
            for arg, value in (("dtype", dtype), ("torch_dtype", torch_dtype)):
                if value not in (None, name):
                    raise InvalidInputError(f"load_in_{name[3:]}bit=True and {arg}={value!r} disagree; pass only one")
            dtype = name
        if dtype is not None and torch_dtype is not None and dtype != torch_dtype:
            raise InvalidInputError(f"dtype={dtype!r} and torch_dtype={torch_dtype!r} disagree; pass only dtype")
        if max_cache_len is not None and (not isinstance(max_cache_len, (int, np.integer))
                                          or isinstance(max_cache_len, bool) or max_cache_len < 1):
            raise InvalidInputError(f"max_cache_len={max_cache_len!r} must be a positive integer")
        if blas_prefill is not None and not isinstance(blas_prefill, (bool, np.bool_)):
            raise InvalidInputError(f"blas_prefill={blas_prefill!r} must be True or False")
        if blas_prefill:
            _warn_if_blas_generic()
        checkpoint = load_checkpoint(resolve(pretrained_model_name_or_path), dtype if dtype is not None else torch_dtype,
                                     repack, progress)
        return _model_class(checkpoint.config)(checkpoint, max_cache_len, blas_prefill)


# OpenBLAS's cores with AVX2 sgemm kernels or wider. OpenBLAS picks its core once, when the process loads it (numpy
# does, before habana_assist); Debian 12's 0.3.21 falls back to "Prescott" (SSE3) on CPUs newer than itself: on a
# 2-core Xeon of 2026 (model 207) its sgemm ran 33 GFLOP/s there against 137-225 with SkylakeX's kernels.
_BLAS_AVX2_CORES = {"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake", "SapphireRapids"}


def _warn_if_blas_generic():
    """A RuntimeWarning naming the fix when OpenBLAS runs older kernels than this CPU has (our own variant shows
    what it has: "avx512" and "avx2" are chosen from cpuid, so the core named in the fix runs here)."""
    core, ours = _core.blas_core(), _core.kernels_name()
    if ours in ("avx2", "avx512") and core not in _BLAS_AVX2_CORES:
        want = "SkylakeX" if ours == "avx512" else "Haswell"
        warnings.warn(f"blas_prefill=True: OpenBLAS did not recognize this CPU and runs its {core} kernels, several "
                      f"times slower than the CPU allows; start Python with OPENBLAS_CORETYPE={want} in the "
                      "environment (OpenBLAS reads it once, when numpy first loads it)", RuntimeWarning, stacklevel=3)


class WrappedModel(_external.ExternalModel, LlamaForCausalLM):
    """A model of another framework with this package's generate() (habana_assist.wrap; external.py)."""

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def _unsupported(self, what):
        raise InvalidInputError(f"{what} is for native models; this one is wrapped ({type(self.model).__name__}): use "
                                "its own framework for that")

    def assisted_costs(self, *args, **kwargs):
        self._unsupported("assisted_costs()")

    def set_assisted_costs(self, *args, **kwargs):
        self._unsupported("set_assisted_costs()")

    def save_pretrained(self, *args, **kwargs):
        self._unsupported("save_pretrained()")

    def create_cache(self, *args, **kwargs):
        self._unsupported("create_cache()")

    def num_parameters(self, *args, **kwargs):
        self._unsupported("num_parameters()")

    def to(self, *args, **kwargs):
        self._unsupported("to()")

    @property
    def weight_bytes(self):
        self._unsupported("weight_bytes")


def wrap(model, vocab_size=None, max_cache_len=None, generation_config=None, reduce_logits=None, overlap=None):
    """A model of another framework that follows Transformers' causal-LM calling convention, with generate() (and
    usable as assistant_model=) run by this package's loop; see habana_assist/external.py. vocab_size and
    max_cache_len default to model.config's vocab_size and max_position_embeddings; generation_config to one
    with its config's special tokens. reduce_logits: where a greedy call reads only the argmax, send each
    position's top two from the device instead of its whole row: None on an accelerator, True always, False
    never. overlap: as the target with a native draft, draft the next round ahead while its forward runs: None
    where it is not on the CPU, True always, False never (the same output either way)."""
    if isinstance(model, LlamaForCausalLM):
        raise InvalidInputError("wrap() is for models of other frameworks; this one is already a habana_assist model")
    return WrappedModel(model, vocab_size=vocab_size, max_cache_len=max_cache_len, generation_config=generation_config,
                        reduce_logits=reduce_logits, overlap=overlap)
