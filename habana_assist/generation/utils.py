"""generate(): Transformers' decoder-only generation on the C core, as a mixin of the native model
(modeling_utils.PreTrainedCausalLM) and of wrapped models (integrations/wrap.py).

The call runs in steps: the call's GenerationConfig (_generate_config), the inputs checked and padded rows found,
the drafter chosen (candidate_generator.py), the core's loop run (plain or assisted), and the output built
(GenerateDecoderOnlyOutput of outputs.py, re-exported here with TokenSource, or the sequences alone).
"""

from __future__ import annotations

import contextlib
import random
import sys
import warnings
from collections import namedtuple
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import numpy as np

from .. import _core
from ..cache_utils import cache_after_generate, check_generate_cache
from ..errors import CacheCapacityError, InvalidInputError
from ..integrations import external as _external
from ..utils import progress as _progress
from ..utils.inputs import check_fits, checked_attention_mask, numpy_inputs
from ..utils.tensors import convert_output, optional_torch, to_numpy
from . import candidate_generator
from . import universal as _universal
from .configuration_utils import ASSISTANT_KEYS, GenerationConfig
from .options import _callables as _callables_of
from .options import logits_callback, processing_args, reads_argmax_only, sampling_options, stop_callback
from .outputs import GenerateDecoderOnlyOutput, TokenSource, timings_from
from .stopping_criteria import StopStringCriteria
from .streamers import stop_streamer
from .token_tree import token_trees_from_record

if TYPE_CHECKING:
    from ..tokenization.tokenization_utils import PreTrainedTokenizerBase
    from ..utils.types import Tensor, TokenIds

__all__ = ["GenerationMixin", "GenerateDecoderOnlyOutput", "TokenSource", "set_seed"]

_seed_source = np.random.default_rng()

# A call's inputs, checked: ids int32 (batch, seq) left-padded; kind: the type they came in (numpy, list, torch);
# real: int (batch,) each row's real tokens; B, S: batch and prompt columns; eos: the ids that end a row; pad: what
# fills a row after its end; max_new, min_new: new tokens; need: cache positions (longest prompt + max_new).
_Call = namedtuple("_Call", "ids kind real B S eos pad max_new min_new need")

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
    "custom_generate": "no generation code from the Hub or a directory is run here; call generate() without it (its "
    "own arguments cover greedy, sampling and assisted decoding)",
}
# Values of those arguments that are accepted, since they change nothing here (default: None only).
_ACCEPTED = {"synced_gpus": (None, False), "use_model_defaults": (None, True)}
# The warnings given once per process, as Transformers' logger.warning_once gives its (constant) messages
_WARNED_ONCE = set()


def set_seed(seed: int, deterministic: bool = False) -> None:
    """Seeds Python's, numpy's and, where it is importable, torch's global generators (transformers.set_seed), and
    this package's own, so that the sampled generate() calls after it that pass no seed repeat: they draw their
    seeds from torch's default generator where torch is imported (it is now), else from this package's
    (call_seed). deterministic=True also asks torch for deterministic algorithms (torch.use_deterministic_algorithms,
    as Transformers); this package's own kernels are deterministic always."""
    global _seed_source
    random.seed(seed)
    np.random.seed(seed % 2**32)
    _seed_source = np.random.default_rng(seed)
    torch = optional_torch()
    if torch is not None:
        torch.manual_seed(seed % 2**64)  # what torch itself makes of a negative seed
        if deterministic:
            torch.use_deterministic_algorithms(True)


def call_seed(gc):
    """The seed of a generate() call: gc.seed where given; else, for a sampled call, a draw from torch's default
    generator where torch is imported, torch.randint(0, 2**63 - 1, (1,)) (so that torch.manual_seed(s) before a call
    repeats it, and successive calls differ, as sampling in Transformers does), else from set_seed's generator. A
    greedy call uses no randomness: it draws nothing (0), and leaves both generators as they were."""
    if gc.seed is not None:
        return gc.seed
    if not gc.do_sample:
        return 0
    torch = sys.modules.get("torch")  # imported: whoever seeded torch's generator has imported it
    if torch is not None and hasattr(torch, "randint"):
        return int(torch.randint(0, 2**63 - 1, (1,)).item())
    return int(_seed_source.integers(0, 2**63))


def _check_tree(model, gc, drafter):
    """Refuses, naming the flag, the assisted calls that cannot verify token trees (assistant_tree_width > 1)."""
    w = gc.assistant_tree_width
    fix = "or pass assistant_tree_width=1 (chains)"
    if drafter.universal:
        raise InvalidInputError(
            f"assistant_tree_width={w}: a draft with another tokenizer proposes re-encoded text, "
            f"not distributions over this model's tokens to draw siblings from; {fix}"
        )
    if _external.is_external(model):
        raise InvalidInputError(
            f"assistant_tree_width={w}: this model is wrapped (habana_assist.wrap), and its "
            f"forward verifies chains only; trees need a habana_assist model as the target, {fix}"
        )
    if gc.assistant_tree_shape != "dynamic":
        return
    siblings = "or pass assistant_tree_shape='siblings'"
    if drafter.early_exit is None and drafter.model is None:
        raise InvalidInputError(
            "assistant_tree_shape='dynamic' grows the tree from a draft model's probabilities, and prompt lookup "
            f"has none; pass an assistant_model (or assistant_early_exit), {siblings}"
        )
    if drafter.model is not None and _external.is_external(drafter.model):
        raise InvalidInputError(
            "assistant_tree_shape='dynamic': this draft is wrapped (habana_assist.wrap), and its forward scores "
            f"chains only, not a tree's frontier in one pass; pass a habana_assist draft, {siblings}"
        )


def _metered(on_tokens, meter):
    """The token callback with a progress bar told each decided token (on_tokens may be None)."""

    def told(row, tokens):
        meter.update(len(tokens))
        if on_tokens is not None:
            on_tokens(row, tokens)

    return told


def _is_transformers_generation_config(obj):
    """Transformers' GenerationConfig (from transformers.generation), which generate() takes as its own."""
    return (
        obj is not None
        and type(obj).__name__ == "GenerationConfig"
        and type(obj).__module__.startswith("transformers.")
        and callable(getattr(obj, "to_dict", None))
    )


class GenerationMixin:
    """generate() and compute_transition_scores() for a model with the native model's surface: config,
    generation_config, vocab_size, max_cache_len, blas_prefill, _context(), _drafter(), assisted_costs(), _costs
    (the cost table) and _early_exit_core() (modeling_utils.PreTrainedCausalLM; integrations/wrap.py)."""

    if TYPE_CHECKING:  # what the model provides, as the type checker sees it
        config: Any
        generation_config: GenerationConfig

    def generate(
        self,
        input_ids: Optional[TokenIds] = None,
        attention_mask: Optional[TokenIds] = None,
        generation_config: Optional[GenerationConfig] = None,
        assistant_model: Optional[GenerationMixin] = None,
        streamer: Any = None,
        logits_processor: Optional[list[Callable[..., Tensor]]] = None,
        stopping_criteria: Optional[list[Callable[..., Any]]] = None,
        tokenizer: Optional[PreTrainedTokenizerBase] = None,
        progress: Optional[bool] = None,
        **kwargs: Any,
    ) -> Union[Tensor, GenerateDecoderOnlyOutput]:
        """Greedy or sampled generation with Transformers' arguments and semantics.

        Warnings, where Transformers warns (UserWarning): max_length passed with max_new_tokens (max_new_tokens
        wins; min_length and min_new_tokens alike), and, once per process, no attention_mask where pad_token_id
        (eos_token_id's first id when unset) is an eos id, so that padding cannot be told from the tokens.

        Args:
            input_ids: int (batch, prompt): the prompt's token ids, a numpy array, a list or a torch tensor; torch
                in, torch out (every array of the result), numpy otherwise. inputs= (Transformers' name for the
                main input) is input_ids; pass one of the two. Required (Transformers would start from bos alone).
            attention_mask: int or bool (batch, prompt), 1 for tokens to attend to, 0 for padding (batches are
                padded on the left; a right-padded mask raises). Default, as Transformers infers it: the tokens
                that are not pad_token_id where that is set and no eos id, else all ones.
            generation_config: the GenerationConfig this call starts from (default: the model's
                generation_config), as Transformers'; a Transformers GenerationConfig is read from the fields it
                sets. Keyword arguments override its fields for this call only.
            assistant_model: a draft model with the same vocabulary. It proposes up to num_assistant_tokens tokens, this
                model verifies them in one pass; greedy output (and sampled output with assisted_sampling="coupled") is
                bit for bit what generate() without it returns, and assisted_sampling="rejection" (the default) samples
                exactly from this model's distribution. num_assistant_tokens, num_assistant_tokens_schedule and
                assistant_confidence_threshold are read from assistant_model.generation_config unless passed here;
                num_assistant_tokens_schedule="cost" (ours) chooses each round's K, up to num_assistant_tokens, from
                this pair's measured costs (assisted_costs()) and the acceptance so far. A batch runs its rows together,
                round by round, each with its own K and end; each row's output is what it gives alone.
                prompt_lookup_num_tokens (with max_matching_ngram_size) drafts by n-gram lookup in the sequence instead
                of a model, and assistant_early_exit=N with this model's own first N layers (and its final norm and
                head). assistant_tree_width=w (ours; 1: chains) verifies token trees: each drafted token comes with up
                to w - 1 siblings, the draft's next most probable tokens at its position (no extra draft passes), all
                scored in one pass of this model (each node bitwise as decoding its path token by token); a sibling that
                is this model's own token is accepted, so greedy and coupled output stay bit for bit the plain output
                (rejection sampling: the siblings are the draft's next draws without replacement, tested after a
                rejection by recursive rejection sampling without replacement: still exactly this model's
                distribution). With prompt lookup the siblings are where the n-gram's later matches branch off the
                chain. assistant_tree_shape (ours) "siblings" (the default) is that tree; "dynamic" grows the tree as
                EAGLE-2 does: at each depth the draft expands (in one pass, with tree attention) the w nodes of highest
                cumulative probability, each into its chosen token and the w - 1 next (rejection sampling: w tokens
                drawn without replacement, ranked by their places), and this model verifies the
                num_assistant_tokens most probable nodes (a chain's candidates, at any depth up to that many); the
                output stays exact as for siblings (rejection sampling: recursive rejection sampling without
                replacement over each node's children; a model draft only). Trees need a native model here (not
                habana_assist.wrap's) and a draft of this model's tokenizer.
                A draft with another tokenizer (Transformers' universal assisted decoding) needs tokenizer= (this
                model's) and assistant_tokenizer= (the draft's): it drafts in its own tokens, its text is re-encoded
                into candidates, and the output is still exactly this model's (see universal.py); a pair whose
                tokenizers have the identical vocabulary takes the same-tokenizer path.
            streamer: an object with put(ids) and end() (TextStreamer, TextIteratorStreamer): put(prompt) first,
                then put(new ids) as soon as each token (or accepted chunk of a draft) is decided; batch size 1
                only. If generate() raises, or Ctrl-C stops it, after the streamer was accepted, the streamer is
                told (stop_streamer: its stop(error), or end()) so that nobody waits on it forever.
            logits_processor: callables f(input_ids, scores) -> scores applied after the built-in processors and
                before the sampling warpers, once per row and position: input_ids int64 (1, n) that row's tokens
                (its prompt without padding, then what it generated), scores float32 (1, vocab); torch tensors if
                input_ids came as one. Transformers calls them once per step on the whole batch. In assisted
                generation they process the draft's scores too, so exactness holds for processors that depend
                only on their arguments.
            stopping_criteria: callables f(input_ids, scores) -> bool (or a bool array of shape (1,)) asked after
                every decided token (input_ids including it), in order also in assisted generation; True ends that
                row.
            tokenizer: this model's tokenizer, as Transformers takes it: needed by stop_strings (which stop a row
                right after the token that completes one: Transformers' StopStringCriteria) and by a draft with
                another tokenizer (assistant_tokenizer=).
            progress: (ours) a tqdm bar over the new tokens (utils/progress.py): None (the default) shows one for
                a call of 1024 or more (batch x max_new_tokens) without a streamer (HA_PROGRESS=0 in the
                environment turns that off), True always, False never.
            **kwargs: GenerationConfig fields for this call (max_new_tokens, do_sample, temperature, top_k, top_p,
                num_beams=1 only, num_return_sequences, eos_token_id, pad_token_id, stop_strings, seed (ours),
                assisted_sampling (ours), assistant_tree_width (ours), assistant_tree_shape (ours),
                return_dict_in_generate, output_scores, output_logits...), and Transformers' other arguments: inputs
                (input_ids), assistant_tokenizer, past_key_values (or cache) to continue from. synced_gpus
                (None/False) and use_model_defaults (None/True) are accepted with the values that change nothing here;
                prefix_allowed_tokens_fn, negative_prompt_ids and negative_prompt_attention_mask are refused unless
                None (not implemented), custom_generate unless None
                (no code from the Hub is run); any other name raises.

        Returns:
            np.int64 (batch * num_return_sequences, prompt + new): the prompt as given, then the new tokens; rows
            that stopped early are padded with pad_token_id. With return_dict_in_generate=True, a
            GenerateDecoderOnlyOutput (sequences; scores and logits where asked for; assisted generation's
            counts; generation/outputs.py).

        Raises:
            InvalidInputError: an argument that is malformed, out of range, unknown or not supported here; the
                message names it and the fix.
            CacheCapacityError: the prompt plus max_new_tokens needs more positions than the model's (or the
                assistant's) max_cache_len (from_pretrained's).
        """
        if streamer is not None and not (
            callable(getattr(streamer, "put", None)) and callable(getattr(streamer, "end", None))
        ):
            raise InvalidInputError("streamer must have put(ids) and end() methods, like ha.TextStreamer")
        try:
            result = self._generate(
                input_ids,
                attention_mask,
                generation_config,
                assistant_model,
                streamer,
                logits_processor,
                stopping_criteria,
                tokenizer,
                progress,
                kwargs,
            )
            if streamer is not None:  # inside the try: a Ctrl-C that lands in end() must still release the consumer
                streamer.end()
        except BaseException as error:
            if streamer is not None:
                stop_streamer(streamer, error)
            raise
        return result

    def _generate_config(self, generation_config, assistant_model, kwargs):
        """The call's GenerationConfig: the model's (or the one passed), the assistant's keys, then kwargs."""
        if _is_transformers_generation_config(generation_config):
            # Transformers' own GenerationConfig: the fields it sets (5.x leaves the rest None until generate() fills
            # them), with this package's meaning for each, as if its generation_config.json had been loaded here
            fields = {
                k: v
                for k, v in generation_config.to_dict().items()
                if v is not None and not k.startswith("_") and k != "transformers_version"
            }
            generation_config = GenerationConfig.from_dict(fields)
        if generation_config is not None and not isinstance(generation_config, GenerationConfig):
            raise InvalidInputError(
                "generation_config must be a GenerationConfig, got "
                f"{type(generation_config).__name__}; pass GenerationConfig(**your_dict) or the "
                "arguments themselves"
            )
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
            raise InvalidInputError(
                f"The following generation arguments are not used: {sorted(unused)}; check their "
                "spelling against GenerationConfig"
            )
        gc.validate()
        gc.check_supported()
        # Transformers' _prepare_generated_length: max_length (min_length) passed to this call with max_new_tokens
        # (min_new_tokens) set, here or in the config: the new tokens' count wins (see _prepare_inputs)
        for new, total in (("max_new_tokens", "max_length"), ("min_new_tokens", "min_length")):
            if kwargs.get(total) is not None and getattr(gc, new) is not None:
                warnings.warn(
                    f"Both `{new}` (={getattr(gc, new)}) and `{total}` (={getattr(gc, total)}) seem to have "
                    f"been set. `{new}` will take precedence; pass only one of them",
                    UserWarning,
                    stacklevel=4,
                )
        return gc

    def _generate(
        self,
        input_ids,
        attention_mask,
        generation_config,
        assistant_model,
        streamer,
        logits_processor,
        stopping_criteria,
        tokenizer,
        progress,
        kwargs,
    ):
        """generate() up to the streamer's end (or stop): the call's config, its inputs, its drafter, the core's
        loop, the output."""
        kwargs = dict(kwargs)
        cache, renamed = kwargs.pop("past_key_values", None), kwargs.pop("cache", None)
        if cache is not None and renamed is not None:
            raise InvalidInputError(
                "cache and past_key_values are one argument (Transformers 5.24 renamed "
                "past_key_values to cache): pass one of them"
            )
        cache = renamed if cache is None else cache
        if "inputs" in kwargs:  # Transformers' generate(inputs=None, ...): its main input, input_ids here
            inputs = kwargs.pop("inputs")
            if inputs is not None and input_ids is not None:
                raise InvalidInputError(
                    "`inputs` and `input_ids` were both passed: they are the same argument "
                    "(Transformers' name and this model's); pass the prompt once, as "
                    "generate(ids), generate(inputs=ids) or generate(input_ids=ids)"
                )
            if inputs is not None:
                input_ids = inputs
        assistant_model = candidate_generator.as_assistant(assistant_model, GenerationMixin)
        assistant_tokenizer = kwargs.pop("assistant_tokenizer", None)
        if assistant_tokenizer is not None and assistant_model is None:
            raise InvalidInputError(
                "`assistant_tokenizer` is the tokenizer of assistant_model: pass assistant_model= "
                "too, or leave assistant_tokenizer unset"
            )
        gc = self._generate_config(generation_config, assistant_model, kwargs)
        call = self._prepare_inputs(input_ids, attention_mask, gc)
        drafter = candidate_generator.choose(self, gc, assistant_model, tokenizer, assistant_tokenizer, call.need)
        assisted = candidate_generator.is_assisted(drafter)
        if assisted and gc.assistant_tree_width > 1:
            _check_tree(self, gc, drafter)
        if cache is not None:
            if drafter.universal:
                raise InvalidInputError(
                    "past_key_values with a draft of another tokenizer is not supported: leave past_key_values unset"
                )
            cache = check_generate_cache(self, cache, call.ids, call.real)
        # the cache returned (Transformers: with return_dict_in_generate and use_cache) or filled
        keep_cache = (
            (cache is not None or gc.return_dict_in_generate)
            and gc.use_cache is not False
            and not (drafter.universal or _external.is_external(self))
        )
        if gc.use_cache is False:
            if assisted:
                raise InvalidInputError(
                    "assisted generation requires `use_cache=True`: the drafts are verified against the KV cache"
                )
            if self.blas_prefill:
                raise InvalidInputError(
                    "`use_cache=False` recomputes each sequence through the batch-invariant "
                    "kernels, but this model was loaded with blas_prefill=True (prompt blocks "
                    "through OpenBLAS, not bitwise the same); load it without blas_prefill"
                )
        B, S, max_new = call.B, call.S, call.max_new
        if streamer is not None and B != 1:
            raise InvalidInputError(f"streamer works with one prompt at a time; got a batch of {B}")
        stops = _callables_of(stopping_criteria, "stopping_criteria")
        stop_strings = gc.stop_strings
        if stop_strings is not None:
            if tokenizer is None:
                raise InvalidInputError(
                    "`stop_strings` needs the model's tokenizer to find the strings in the tokens: "
                    "pass tokenizer=tokenizer to generate()"
                )
            stops.append(StopStringCriteria(tokenizer, stop_strings))
        for flag, on in (("output_scores", gc.output_scores), ("output_logits", gc.effective("output_logits"))):
            if on:
                check_fits(
                    f"{flag} for {B} rows x {max_new} new tokens x vocab {self.vocab_size}",
                    4 * B * max_new * self.vocab_size,
                    f"lower max_new_tokens or leave {flag} off",
                )
        seed = call_seed(gc)
        # max_time 0 ends after the first step, as in Transformers; the core reads 0 as no limit
        max_time = 0.0 if gc.max_time is None else max(float(gc.max_time), 1e-300)
        if streamer is not None:  # what Transformers puts: the prompt (1, n), then each step's (1,) tokens, or
            # each assisted round's (1, n); torch tensors where the inputs were torch
            streamer.put(convert_output(call.ids[:1, S - int(call.real[0]) :].astype(np.int64), call.kind))
        put_shape = (1, -1) if assisted else (-1,)
        on_tokens = (
            (
                lambda row, tokens: streamer.put(
                    convert_output(np.array(tokens, dtype=np.int64).reshape(put_shape), call.kind)
                )
            )
            if streamer
            else None
        )
        # a bar for long calls: by size, never time (streamed text is its own progress)
        meter = _progress.bar(
            progress, 0 if streamer is not None else B * max_new, _progress.MIN_TOKENS, B * max_new, "generating", "tok"
        )
        if meter is not None:
            on_tokens = _metered(on_tokens, meter)
        with meter if meter is not None else contextlib.nullcontext():  # the bar closes however the call ends
            out = np.empty((B, max_new), dtype=np.int32)
            scores = np.empty((max_new, B, self.vocab_size), dtype=np.float32) if gc.output_scores else None
            logits = (
                np.empty((max_new, B, self.vocab_size), dtype=np.float32) if gc.effective("output_logits") else None
            )
            sources = np.zeros((B, max_new), dtype=np.uint8) if gc.return_dict_in_generate else None  # TokenSource
            # where the call's time went, for result.timings: the core's ha_seconds (prefill, target, draft, all)
            seconds = np.zeros(4, dtype=np.float64) if gc.return_dict_in_generate else None
            procs = processing_args(
                gc,
                S,
                max_new,
                call.eos,
                logits_callback(logits_processor, call.kind),
                stop_callback(stops, call.kind),
                logits,
            )
            if drafter.universal:
                out[:], steps, extra, k_final = _universal.generate(
                    self,
                    drafter.model,
                    tokenizer,
                    assistant_tokenizer,
                    gc,
                    procs,
                    call.ids,
                    call.real,
                    max_new,
                    call.min_new,
                    call.eos,
                    call.pad,
                    seed,
                    max_time,
                    on_tokens,
                    scores,
                    logits,
                    sources,
                )
                candidate_generator.carry_heuristic_k(self, drafter, gc, k_final)
            else:
                # a tree's nodes take cache positions past the row's tokens: room for a whole tree (64 nodes) where
                # the model allows it, else the core narrows the tree near the end
                trees = assisted and gc.assistant_tree_width > 1
                room = min(call.need + 64, self.max_cache_len) if trees else call.need
                ctx = self._context(B, room, argmax_only=reads_argmax_only(gc, procs, call.min_new))
                common = dict(
                    procs,
                    **sampling_options(gc, call.min_new, call.eos, seed),
                    prompt=call.ids,
                    start=(S - call.real).astype(np.int64),
                    max_new_tokens=max_new,
                    pad_token_id=call.pad,
                    max_time=max_time,
                    out=out,
                    scores=scores,
                    sources=sources,
                    on_tokens=on_tokens,
                    seconds=seconds,
                )
                if not assisted:
                    steps, extra = _core.generate(ctx, common), {}
                else:
                    steps, extra = self._run_assisted(ctx, drafter, gc, call, common)
                if seconds is not None:  # an attribute of the output, not a field (_build_output)
                    extra["timings"] = timings_from(seconds)
                if keep_cache:
                    cache = cache_after_generate(self, ctx, cache, call.ids, call.real, out, steps)
                    extra["cache"] = cache.to_legacy_cache() if gc.return_legacy_cache else cache
            self._score_rows_after_their_end(gc, call, procs, seed, out, steps, scores, logits)
            return self._build_output(gc, call, out, steps, scores, logits, sources, extra, tokenizer)

    def _score_rows_after_their_end(self, gc, call, procs, seed, out, steps, scores, logits):
        """Transformers runs a row that ended (eos, a stopping criterion) on to the batch's last step, fed the pad
        id, and reports its real logits and scores there (processed over its tokens, pads included); the core stops
        computing the row and leaves -inf. Where scores or logits were asked for, this computes those steps as
        Transformers does: one forward of each such row over its sequence (the prompt's real tokens, its own, then
        the pads: the logits of each step after its end), the processors over the same history; so
        compute_transition_scores sums no -inf (no NaN) and equals Transformers' for such rows too."""
        held = scores if scores is not None else logits
        if held is None or steps < 2:
            return
        ended = np.isneginf(held[:steps]).all(axis=2)  # (steps, B): the core's mark of a row that had stopped
        rows = np.flatnonzero(ended.any(axis=0))
        if rows.size == 0:
            return
        first = ended[:, rows].argmax(axis=0)  # each row's first step after its end
        S, V = call.S, self.vocab_size
        histories = [
            np.concatenate([call.ids[b, S - int(call.real[b]) :], out[b, : steps - 1]]).astype(np.int32) for b in rows
        ]
        seq = np.concatenate([np.full(h.size, k, dtype=np.int32) for k, h in enumerate(histories)])
        tokens = np.concatenate(histories)
        # the logits of position p predict step p - real + 1: wanted from each row's first step after its end
        want = np.concatenate(
            [(np.arange(h.size) >= call.real[b] + j - 1).astype(np.uint8) for h, b, j in zip(histories, rows, first)]
        )
        raw = np.empty((int(want.sum()), V), dtype=np.float32)
        ctx = self._context(int(rows.size), int(max(h.size for h in histories)))
        ctx.append(seq, tokens, want, raw)
        sampler = (
            _core.Sampler(V, dict(procs, **sampling_options(gc, call.min_new, call.eos, seed)))
            if scores is not None
            else None
        )
        k = 0
        for h, b, j in zip(histories, rows, first):
            for step in range(int(j), steps):
                if logits is not None:
                    logits[step, b] = raw[k]
                if sampler is not None:
                    sampler.process(raw[k], int(b), h[: int(call.real[b]) + step], step)
                    scores[step, b] = raw[k]
                k += 1

    def _prepare_inputs(self, input_ids, attention_mask, gc):
        """The call's inputs checked (ids in the vocabulary, left padding, room in the cache), each prompt repeated
        num_return_sequences times, and the lengths the loop needs, as a _Call."""
        ids, attention_mask, kind = numpy_inputs(input_ids, attention_mask, self.vocab_size)
        n_return = gc.num_return_sequences or 1
        if n_return > 1:  # Transformers' _expand_inputs_for_generation: each prompt's copies next to each other
            ids = np.repeat(ids, n_return, axis=0)
            if attention_mask is not None:
                attention_mask = np.repeat(np.asarray(attention_mask).reshape(-1, ids.shape[1]), n_return, axis=0)
        B, S = ids.shape
        eos = gc.eos_token_ids()
        pad = gc.pad_token_id if gc.pad_token_id is not None else (eos[0] if eos else 0)
        if any(v >= self.vocab_size for v in eos):  # processors index the scores at eos ids (min_new_tokens...)
            raise InvalidInputError(
                f"`eos_token_id` (={eos}) is outside the vocabulary "
                f"(vocab_size={self.vocab_size}); pass ids from the model's tokenizer"
            )
        if not -(2**31) <= pad < 2**31:  # only written into the output (rows that stopped early), as Transformers
            raise InvalidInputError(f"`pad_token_id` (={pad}) must fit in 32 bits")
        if attention_mask is None and pad in eos:  # Transformers' _prepare_special_tokens (pad unset: eos[0])
            if "mask not inferred" not in _WARNED_ONCE:
                _WARNED_ONCE.add("mask not inferred")
                warnings.warn(
                    "The attention mask is not set and cannot be inferred from input because pad token is "
                    f"same as eos token (pad_token_id={pad}, eos_token_id={eos}). As a consequence, you may "
                    "observe unexpected behavior. Please pass your input's `attention_mask` to obtain "
                    "reliable results.",
                    UserWarning,
                    stacklevel=4,
                )
        if (
            attention_mask is None
            and gc.pad_token_id is not None
            and gc.pad_token_id not in eos
            and (ids == gc.pad_token_id).any()
        ):
            attention_mask = ids != gc.pad_token_id  # what Transformers infers from the pad token
        mask = checked_attention_mask(attention_mask, ids.shape)
        real = mask.sum(axis=1)
        if (real == 0).any():
            raise InvalidInputError(
                f"row {int(np.argmin(real))} of attention_mask has no real token; every prompt needs at least one"
            )
        if not (mask == (np.arange(S)[None, :] >= (S - real)[:, None])).all():
            raise InvalidInputError(
                "attention_mask is not left-padded: generation continues each row after its last "
                "column, so pad on the left (tokenizer.padding_side = 'left')"
            )
        max_new = gc.max_new_tokens if gc.max_new_tokens is not None else gc.max_length - S
        if max_new < 1:
            raise InvalidInputError(
                f"`max_length` (={gc.max_length}) leaves no room after the prompt of {S} tokens; "
                "pass max_new_tokens instead"
            )
        # min_new_tokens wins over min_length, as max_new_tokens over max_length (Transformers sets min_length to
        # min_new_tokens + the prompt's width)
        min_new = gc.min_new_tokens if gc.min_new_tokens is not None else max(gc.min_length - S, 0)
        need = int(real.max()) + max_new
        if need > self.max_cache_len:
            raise CacheCapacityError(
                f"the prompt ({int(real.max())} tokens) plus max_new_tokens ({max_new}) needs "
                f"{need} cache positions, more than max_cache_len={self.max_cache_len}; "
                "shorten the prompt, lower max_new_tokens, or load with a larger max_cache_len"
            )
        return _Call(ids, kind, real, B, S, eos, pad, max_new, min_new, need)

    def _run_assisted(self, ctx, drafter, gc, call, common):
        """The core's assisted loop over ctx (this model) and the drafter's context -> (steps, the result's
        statistics). Acceptance counts of the cost schedule carry from call to call (assisted_costs.py), except
        where the K choices decide the tokens (rejection sampling) or the costs were pinned; the call counts into
        a copy, put back whole after it, so that calls from two threads never leave a mix of both."""
        # a dynamic tree's frontier takes draft cache positions past the row's tokens, as the target's tree does
        dynamic = gc.assistant_tree_width > 1 and gc.assistant_tree_shape == "dynamic"
        draft_model = self if drafter.early_exit is not None else drafter.model
        room = call.need
        if dynamic and draft_model is not None:
            room = max(call.need, min(call.need + 64, draft_model.max_cache_len))
        draft_ctx = candidate_generator.draft_context(self, drafter, call.B, room)
        cost = gc.num_assistant_tokens_schedule == "cost"
        costs = (
            self.assisted_costs(drafter.model, assistant_early_exit=drafter.early_exit, batch_size=call.B).as_core()
            if cost
            else (None, None, None)
        )
        learned = (
            self._costs.learned(self._drafter(drafter.model, drafter.early_exit))
            if cost and not (gc.do_sample and gc.assisted_sampling == "rejection")
            else None
        )
        counts = None if learned is None else learned.copy()
        proposed, accepted = np.zeros(call.max_new, dtype=np.int64), np.zeros(call.max_new, dtype=np.int64)
        overlap = _external.draft_ahead(self, drafter.model)  # None with early exit (no draft model)
        # token trees with return_dict_in_generate: the record of each round's tree (result.token_trees), the core
        # writing a few integers per round and node; its buffers take 12 bytes per round and node of room
        # (B x max_new rounds of ctx.max_tree nodes), of which only the pages of the rounds run are ever touched
        record = gc.return_dict_in_generate and gc.assistant_tree_width > 1
        tree_counts = np.zeros(call.B, dtype=np.int64) if record else None
        tree_rounds = np.empty((call.B, call.max_new, len(_core.TREE_FIELDS)), dtype=np.int64) if record else None
        tree_nodes = np.empty((call.B, call.max_new, 3, ctx.max_tree), dtype=np.int32) if record else None
        stats = _core.generate_assisted(
            ctx,
            draft_ctx,
            dict(
                common,
                num_assistant_tokens=int(gc.num_assistant_tokens),
                schedule=gc.num_assistant_tokens_schedule,
                confidence_threshold=float(gc.assistant_confidence_threshold or 0.0),
                acceptance=gc.assisted_sampling,
                prompt_lookup_num_tokens=int(gc.prompt_lookup_num_tokens or 1),
                max_matching_ngram_size=int(gc.max_matching_ngram_size or 2),
                draft_costs=costs[0],
                target_costs=costs[1],
                draft_first_costs=costs[2],
                proposed_at=proposed,
                accepted_at=accepted,
                overlap=overlap,
                cost_state=counts,
                tree_width=int(gc.assistant_tree_width),
                tree_shape=gc.assistant_tree_shape,
                tree_counts=tree_counts,
                tree_rounds=tree_rounds,
                tree_nodes=tree_nodes,
            ),
        )
        if learned is not None:
            learned[:] = counts
        if _external.is_external(self):
            self.drafted_ahead = {"passes": stats.num_ahead_passes, "used": stats.num_ahead_used}
        candidate_generator.carry_heuristic_k(self, drafter, gc, stats.num_assistant_tokens)
        used = int(np.max(np.nonzero(proposed)[0], initial=-1)) + 1
        result = dict(
            num_draft_tokens=stats.num_draft_tokens,
            num_accepted_tokens=stats.num_accepted_tokens,
            num_target_passes=stats.num_target_passes,
            num_draft_passes=stats.num_draft_passes,
            num_rounds=stats.num_rounds,
            proposed_per_position=proposed[:used],
            accepted_per_position=accepted[:used],
        )
        if gc.assistant_tree_width > 1:
            result.update(num_sibling_tokens=stats.num_sibling_tokens, num_sibling_accepted=stats.num_sibling_accepted)
        if record:  # an attribute of the output, not a field (_build_output)
            result["token_trees"] = token_trees_from_record(tree_counts, tree_rounds, tree_nodes, _core.TREE_FIELDS)
        return stats.steps, result

    def _build_output(self, gc, call, out, steps, scores, logits, sources, extra, tokenizer):
        """The prompt and the steps decided, as the sequences alone or a GenerateDecoderOnlyOutput, in the type the
        inputs came in."""
        if _external.is_external(self):
            extra["num_narrow_margins"] = self.narrow_margins
        sequences = np.concatenate([call.ids.astype(np.int64), out[:, :steps].astype(np.int64)], axis=1)
        if not gc.return_dict_in_generate:
            return convert_output(sequences, call.kind)
        if logits is not None:
            extra["logits"] = tuple(logits[:steps])
        token_trees = extra.pop("token_trees", None)
        timings = extra.pop("timings", None)
        result = GenerateDecoderOnlyOutput(
            sequences=sequences, scores=tuple(scores[:steps]) if scores is not None else None, **extra
        )
        result.token_sources = np.ascontiguousarray(sources[:, :steps])
        result.token_trees = token_trees
        result.timings = timings
        # for its HTML view: the tokenizer passed, else the checkpoint's, read when the view is asked for
        result._tokenizer = tokenizer if tokenizer is not None else getattr(self, "name_or_path", None)
        return convert_output(result, call.kind)

    def compute_transition_scores(
        self,
        sequences: Tensor,
        scores: Union[tuple[Tensor, ...], list[Tensor]],
        beam_indices: Optional[Tensor] = None,
        normalize_logits: bool = False,
    ) -> Tensor:
        """Transformers' compute_transition_scores without beams: the score of each generated token at its step,
        (batch, steps) float32, from generate(..., output_scores=True, return_dict_in_generate=True)'s sequences
        and scores (or logits); normalize_logits=True takes log_softmax over the vocabulary first. A row that ended
        before the last step scores its pad tokens there, as in Transformers (generate() reports that row's real
        scores after its end). Torch in, torch out."""
        if beam_indices is not None:
            raise InvalidInputError(
                "beam_indices is for beam search, which is not implemented here; pass "
                "compute_transition_scores(sequences, scores)"
            )
        seq, kind = to_numpy(sequences, "sequences")
        if not isinstance(scores, (tuple, list)) or not scores:
            raise InvalidInputError(
                "scores must be the tuple of per-step (batch, vocab) arrays that generate(..., "
                "output_scores=True, return_dict_in_generate=True) returns"
            )
        steps = np.stack([to_numpy(step, "scores")[0] for step in scores]).astype(np.float32)  # (steps, batch, vocab)
        if seq.ndim != 2 or steps.ndim != 3 or steps.shape[1] != seq.shape[0] or steps.shape[0] > seq.shape[1]:
            raise InvalidInputError(
                f"sequences {seq.shape} and scores ({len(scores)} steps of "
                f"{steps.shape[1:]}) do not belong together; pass both from one generate() result"
            )
        if normalize_logits:
            m = steps.max(axis=2, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)
            with np.errstate(divide="ignore"):
                steps = steps - m - np.log(np.exp(steps - m).sum(axis=2, keepdims=True))
        tokens = seq[:, seq.shape[1] - steps.shape[0] :]  # (batch, steps): the token chosen at each step
        if tokens.size and (tokens.min() < 0 or tokens.max() >= steps.shape[2]):
            raise InvalidInputError("sequences hold token ids outside the scores' vocabulary")
        result = np.take_along_axis(steps.transpose(1, 0, 2), tokens[:, :, None].astype(np.int64), axis=2)[:, :, 0]
        return convert_output(np.ascontiguousarray(result), kind)
