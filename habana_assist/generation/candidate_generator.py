"""Choosing the drafter of a generate() call, as Transformers' _get_candidate_generator does: the model's own first
layers (assistant_early_exit), else n-gram lookup in the sequence (prompt_lookup_num_tokens), else the assistant
model, through its text where its tokenizer differs (universal.py). The drafting itself runs in the core's loop
(csrc/generation/), which this module gives the draft's model interface (draft_context)."""

import warnings
from collections import namedtuple

from .. import _core
from ..errors import CacheCapacityError, InvalidInputError
from ..integrations import external as _external
from . import universal as _universal

# model: the draft model (None for early exit and prompt lookup); early_exit: the number of the target's own layers
# that draft (None otherwise); prompt_lookup: n-gram lookup drafts; universal: model has another tokenizer.
Drafter = namedtuple("Drafter", "model early_exit prompt_lookup universal")
NO_DRAFTER = Drafter(None, None, False, False)


def is_assisted(drafter):
    return drafter.model is not None or drafter.prompt_lookup or drafter.early_exit is not None


def as_assistant(assistant_model, native):
    """assistant_model as the loop takes it: another framework's model, passed directly, wrapped (wrap())."""
    if (
        assistant_model is not None
        and not isinstance(assistant_model, native)
        and _external.follows_convention(assistant_model)
    ):
        return _external.wrap_foreign(assistant_model)
    return assistant_model


def choose(target, gc, assistant_model, tokenizer, assistant_tokenizer, need):
    """-> the Drafter of this call (NO_DRAFTER for plain generation), after checking that it can draft for target
    in a call of need cache positions. Warns, as Transformers does, when an argument is left unused."""
    early_exit = gc.assistant_early_exit
    if early_exit is not None or gc.prompt_lookup_num_tokens is not None:
        unused = [
            name
            for name, on in (
                ("assistant_model", assistant_model is not None),
                ("prompt_lookup_num_tokens", early_exit is not None and gc.prompt_lookup_num_tokens is not None),
            )
            if on
        ]
        if unused:
            warnings.warn(
                f"{' and '.join(unused)} not used: "
                f"{'assistant_early_exit' if early_exit is not None else 'prompt_lookup_num_tokens'} "
                "drafts instead, as in Transformers",
                UserWarning,
                stacklevel=4,
            )
        assistant_model = None
    # universal assisted decoding: a draft with another tokenizer drafts through text (universal.py)
    universal = assistant_model is not None and _universal.different_tokenizers(
        target, assistant_model, tokenizer, assistant_tokenizer
    )
    if _external.is_external(target) or _external.is_external(assistant_model):
        _external.check_call(gc, universal)
    if assistant_model is not None and not universal:
        check_assistant(target, assistant_model, need)
    if early_exit is not None and early_exit > target.config.num_hidden_layers:
        raise InvalidInputError(
            f"`assistant_early_exit` (={early_exit}) is more than this model's "
            f"{target.config.num_hidden_layers} layers; pass 1..{target.config.num_hidden_layers}"
        )
    if gc.num_assistant_tokens_schedule == "cost" and universal:
        raise InvalidInputError(
            "num_assistant_tokens_schedule='cost' is not implemented for a draft with another "
            "tokenizer (universal assisted decoding); pass 'heuristic' or 'constant'"
        )
    return Drafter(
        assistant_model, early_exit, early_exit is None and gc.prompt_lookup_num_tokens is not None, bool(universal)
    )


def check_assistant(target, assistant, need):
    """Raises InvalidInputError unless assistant can draft for target in this call."""
    if assistant.vocab_size != target.vocab_size:
        raise InvalidInputError(
            f"the assistant's vocab_size ({assistant.vocab_size}) differs from this model's "
            f"({target.vocab_size}); the draft must share the target's tokenizer"
        )
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        mine, theirs = getattr(target.config, key, None), getattr(assistant.config, key, None)
        if mine is not None and theirs is not None and mine != theirs:
            raise InvalidInputError(
                f"the assistant's {key} ({theirs}) differs from this model's ({mine}); the draft "
                "must share the target's tokenizer and special tokens"
            )
    if need > assistant.max_cache_len:
        raise CacheCapacityError(
            f"this generation needs {need} cache positions, more than the assistant's "
            f"max_cache_len={assistant.max_cache_len}; load it with a larger max_cache_len"
        )


def draft_context(target, drafter, batch_size, capacity):
    """The draft's model interface and cache for the core's loop: the target's first layers (early exit), the
    draft model's, or None (prompt lookup drafts from the sequence)."""
    if drafter.early_exit is not None:
        return _core.Context(target._early_exit_core(drafter.early_exit), batch_size, capacity, target.blas_prefill)
    if drafter.model is not None:
        return drafter.model._context(batch_size, capacity, draft=True)
    return None


def carry_heuristic_k(target, drafter, gc, k_final):
    """With the heuristic schedule, the call's final K carried to the next call, as Transformers does: on the
    drafting model's generation_config (the target's own for early exit, the draft model's; none for prompt
    lookup)."""
    model = target if drafter.early_exit is not None else drafter.model
    if model is not None and gc.num_assistant_tokens_schedule == "heuristic":
        model.generation_config.num_assistant_tokens = k_final
