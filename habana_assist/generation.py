"""Generation arguments and results, with Transformers' names, defaults and validation messages."""

import copy
import json
import math
import os
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from .errors import CheckpointError, CheckpointNotFoundError, InvalidInputError

GENERATION_CONFIG_NAME = "generation_config.json"

# Transformers' defaults for every argument this package implements.
_DEFAULTS = {
    "max_length": 20,
    "max_new_tokens": None,
    "min_length": 0,
    "min_new_tokens": None,
    "do_sample": False,
    "num_beams": 1,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.0,
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
    "output_scores": False,
    "return_dict_in_generate": False,
    "max_time": None,  # seconds: no step starts once this much time has passed since generate() began
    "seed": None,  # ours: the key of the position-keyed sampler; None draws one from set_seed's generator
    # assisted generation (read from the assistant's generation config unless passed to generate())
    "num_assistant_tokens": 20,
    "num_assistant_tokens_schedule": "constant",
    "assistant_confidence_threshold": 0.4,
    "prompt_lookup_num_tokens": None,
    "max_matching_ngram_size": None,
    "assisted_sampling": "rejection",  # ours: "rejection" (Transformers' speculative sampling) or "coupled"
}

_MAX_COUNT = 2 ** 31 - 1  # token counts and positions are 32-bit in the core

ASSISTANT_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")
SCHEDULES = ("constant", "heuristic", "heuristic_transient")
ASSISTED_SAMPLING = ("rejection", "coupled")


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_real(x):
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _finite(x):
    """math.isfinite, but False rather than OverflowError for an int too large for a float (10**400)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


class GenerationConfig:
    """Arguments of generate(); unknown keys from a generation_config.json are kept as attributes."""

    def __init__(self, **kwargs):
        for key, value in _DEFAULTS.items():
            setattr(self, key, kwargs.pop(key, value))
        for key, value in kwargs.items():
            if hasattr(type(self), key):  # data in place of validate, to_dict... would break every later call
                raise InvalidInputError(f"GenerationConfig: {key!r} names one of its methods or attributes, not a "
                                        "generation argument; remove it")
            setattr(self, key, value)

    @classmethod
    def from_pretrained(cls, directory, config_file_name=GENERATION_CONFIG_NAME):
        """Reads directory/generation_config.json (FileNotFoundError if absent)."""
        path = os.path.join(os.fspath(directory), config_file_name)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            raise CheckpointNotFoundError(f"{path} does not exist; pass the directory of a Hugging Face checkpoint")
        except (OSError, ValueError, RecursionError) as e:  # ValueError: bad UTF-8 or JSON, an int of > 4300 digits
            raise CheckpointError(f"{path} is not valid JSON ({e}); fix or delete the file") from None
        if not isinstance(data, dict):
            raise CheckpointError(f"{path} must hold a JSON object, not {type(data).__name__}; fix or delete the file")
        methods = sorted(k for k in data if k not in _DEFAULTS and hasattr(cls, k))
        if methods:
            raise CheckpointError(f"{path}: key(s) {methods} name GenerationConfig methods or attributes, not "
                                  "generation arguments; remove them from the file")
        return cls(**data)

    @classmethod
    def from_model_config(cls, config):
        """Defaults plus the special tokens of a model config (what Transformers does without the file)."""
        return cls(**{k: getattr(config, k, None) for k in ("bos_token_id", "eos_token_id", "pad_token_id")})

    def update(self, **kwargs):
        """Sets the known attributes among kwargs; returns the others, unused (a method's name among them: data
        in place of validate or to_dict would break every later call)."""
        unused = {}
        for key, value in kwargs.items():
            if key in _DEFAULTS or key in self.__dict__ and not key.startswith("_"):
                setattr(self, key, value)
            else:
                unused[key] = value
        return unused

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def __repr__(self):
        return f"GenerationConfig {json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)}"

    def __eq__(self, other):
        return isinstance(other, GenerationConfig) and self.to_dict() == other.to_dict()

    def eos_token_ids(self):
        """eos_token_id as a list (empty when unset)."""
        e = self.eos_token_id
        return [] if e is None else [int(e)] if _is_int(e) else [int(x) for x in e]

    def validate(self):
        """Raises ValueError naming the flag, its value and the fix for any impossible argument."""

        def bad(flag, problem, fix):
            raise InvalidInputError(f"`{flag}` (={getattr(self, flag)!r}) {problem}; {fix}.")

        for flag in ("max_new_tokens", "max_length", "min_new_tokens", "min_length", "top_k", "num_assistant_tokens",
                     "prompt_lookup_num_tokens", "max_matching_ngram_size"):
            v = getattr(self, flag)
            if _is_int(v) and v > _MAX_COUNT:
                bad(flag, f"is larger than this implementation's limit of {_MAX_COUNT}", "pass a smaller value")

        if self.max_new_tokens is not None and not (_is_int(self.max_new_tokens) and self.max_new_tokens >= 1):
            bad("max_new_tokens", "must be a positive integer", "pass max_new_tokens >= 1 (or None to use max_length)")
        if not (_is_int(self.max_length) and self.max_length >= 1):
            bad("max_length", "must be a positive integer", "pass max_length >= 1 or set max_new_tokens")
        if self.min_new_tokens is not None and not (_is_int(self.min_new_tokens) and self.min_new_tokens >= 0):
            bad("min_new_tokens", "must be a non-negative integer", "pass min_new_tokens >= 0 or None")
        if not (_is_int(self.min_length) and self.min_length >= 0):
            bad("min_length", "must be a non-negative integer", "pass min_length >= 0")
        if not isinstance(self.do_sample, (bool, np.bool_)):
            bad("do_sample", "must be True or False", "pass do_sample=True to sample, False for greedy")
        if self.num_beams != 1:
            bad("num_beams", "is not supported (no beam search here)", "use num_beams=1")
        t = self.temperature
        if not (_is_real(t) and _finite(t) and t >= 0):
            bad("temperature", "must be a finite non-negative float", "pass e.g. temperature=0.7, or 1.0 to leave logits as they are")
        if self.do_sample and t == 0:
            bad("temperature", "has to be a strictly positive float when sampling",
                "pass temperature > 0, or do_sample=False for greedy decoding")
        if not (_is_int(self.top_k) and self.top_k >= 0):
            bad("top_k", "must be a non-negative integer", "pass top_k >= 1, or 0 to disable it")
        p = self.top_p
        if not (_is_real(p) and 0 < p <= 1):
            bad("top_p", "must be a float in (0, 1]", "pass e.g. top_p=0.9, or 1.0 to disable it")
        r = self.repetition_penalty
        if not (_is_real(r) and _finite(r) and r > 0):
            bad("repetition_penalty", "has to be a strictly positive float", "pass e.g. 1.2, or 1.0 for no penalty")
        e = self.eos_token_id
        if e is not None and not (_is_int(e) and e >= 0) and not (
                isinstance(e, (list, tuple)) and all(_is_int(x) and x >= 0 for x in e)):
            bad("eos_token_id", "must be a non-negative int or a list of them", "pass e.g. eos_token_id=2 or [2, 32000]")
        for flag in ("pad_token_id", "bos_token_id"):
            v = getattr(self, flag)
            if v is not None and not (_is_int(v) and v >= 0):
                bad(flag, "must be a non-negative integer or None", f"pass a token id for {flag}")
        m = self.max_time
        if m is not None and not (_is_real(m) and m >= 0 and _finite(m)):
            bad("max_time", "must be a non-negative number of seconds or None", "pass e.g. max_time=10.0, or None for no limit")
        if self.seed is not None and not (_is_int(self.seed) and 0 <= self.seed < 2 ** 64):
            bad("seed", "must be an integer in [0, 2**64)", "pass e.g. seed=0, or None to draw one from set_seed")
        for flag in ("output_scores", "return_dict_in_generate"):
            if not isinstance(getattr(self, flag), (bool, np.bool_)):
                bad(flag, "must be True or False", f"pass {flag}=True or False")
        if not (_is_int(self.num_assistant_tokens) and self.num_assistant_tokens >= 1):
            bad("num_assistant_tokens", "must be a positive integer", "pass e.g. num_assistant_tokens=5")
        if self.num_assistant_tokens_schedule not in SCHEDULES:
            bad("num_assistant_tokens_schedule", "is not a known schedule", f"pass one of {', '.join(SCHEDULES)}")
        c = self.assistant_confidence_threshold
        if c is not None and not (_is_real(c) and 0 <= c < 1):
            bad("assistant_confidence_threshold", "must be a float in [0, 1)", "pass e.g. 0.4, or 0 to turn it off")
        for flag in ("prompt_lookup_num_tokens", "max_matching_ngram_size"):
            v = getattr(self, flag)
            if v is not None and not (_is_int(v) and v >= 1):
                bad(flag, "must be a positive integer or None", f"pass e.g. {flag}=10, or None")
        if self.assisted_sampling not in ASSISTED_SAMPLING:
            bad("assisted_sampling", "is not a known acceptance rule", f"pass one of {', '.join(ASSISTED_SAMPLING)}")


@dataclass
class GenerateDecoderOnlyOutput:
    """What generate(return_dict_in_generate=True) returns.

    sequences: np.int64 (batch, prompt + new). scores: with output_scores, one float32 (batch, vocab) array
    of the target's processed scores per step (-inf for rows already finished), else None.
    With assisted generation (assistant_model= or prompt_lookup_num_tokens=), also: num_draft_tokens
    (proposed), num_accepted_tokens (proposed and kept), num_target_passes and num_draft_passes (appends,
    prefill included), proposed_per_position and accepted_per_position (np.int64 (K,): drafts proposed and
    accepted at draft position j, so accepted / proposed is the acceptance rate by position)."""

    sequences: np.ndarray
    scores: Optional[Tuple[np.ndarray, ...]] = None
    num_draft_tokens: Optional[int] = None
    num_accepted_tokens: Optional[int] = None
    num_target_passes: Optional[int] = None
    num_draft_passes: Optional[int] = None
    proposed_per_position: Optional[np.ndarray] = None
    accepted_per_position: Optional[np.ndarray] = None

    def __getitem__(self, key):
        return getattr(self, key)

    def keys(self):
        return [k for k, v in self.__dict__.items() if v is not None]
