"""Generation arguments, with Transformers' names, defaults, validation and file format (the results are in utils.py).

GenerationConfig holds every field of Transformers' GenerationConfig (beam search and encoder-decoder fields
included, so that any generation_config.json loads and saves unchanged), plus four of ours (seed,
assisted_sampling, assistant_tree_width, assistant_tree_shape). Three layers of checks:
  validate()         is each value well formed? (types, ranges; Transformers' own refusals). Never refuses a
                     valid config that this package cannot run, such as num_beams=4 from a checkpoint's file.
  check_supported()  can generate() here do what the config asks? Refuses beam search, contrastive search,
                     DoLa, guidance... naming the flag and what to use instead; warns for knobs that have no
                     effect without beams.
  save_pretrained()  validates, then writes the fields that differ from the defaults (to_diff_dict).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import warnings
from typing import Any, Literal, Optional, Union, overload

import numpy as np

from .. import _core
from ..checkpoints.hub import Files, pop_hub_arguments, resolve
from ..errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from ..utils.files import write_atomic
from ..utils.types import PathLike

GENERATION_CONFIG_NAME = "generation_config.json"

# Transformers' defaults (generation/configuration_utils.py, 4.x), then ours.
_DEFAULTS: dict[str, Any] = {
    # length of the output
    "max_length": 20,
    "max_new_tokens": None,
    "min_length": 0,
    "min_new_tokens": None,
    "early_stopping": False,  # beam search only
    "max_time": None,  # seconds: no step starts once this much time has passed since generate() began
    "stop_strings": None,
    # strategy
    "do_sample": False,
    "num_beams": 1,
    "num_beam_groups": 1,
    "penalty_alpha": None,
    "dola_layers": None,
    # cache (performance only: outputs are the same for every choice but "quantized")
    "use_cache": True,
    "cache_implementation": None,
    "cache_config": None,
    "return_legacy_cache": None,
    "prefill_chunk_size": None,
    # logits processors and warpers
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "min_p": None,
    "top_h": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "diversity_penalty": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "length_penalty": 1.0,  # beam search only
    "no_repeat_ngram_size": 0,
    "bad_words_ids": None,
    "force_words_ids": None,
    "renormalize_logits": False,
    "constraints": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "remove_invalid_values": False,
    "exponential_decay_length_penalty": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_decoder_ids": None,
    "sequence_bias": None,
    "token_healing": False,
    "guidance_scale": None,
    "low_memory": None,
    "watermarking_config": None,
    # outputs
    "num_return_sequences": 1,
    "output_attentions": False,
    "output_hidden_states": False,
    "output_scores": False,
    "output_logits": None,
    "return_dict_in_generate": False,
    # special tokens
    "pad_token_id": None,
    "bos_token_id": None,
    "eos_token_id": None,
    # encoder-decoder models only (decoder_start_token_id has no effect on a decoder-only model, as there)
    "encoder_no_repeat_ngram_size": 0,
    "decoder_start_token_id": None,
    # assisted generation (read from the assistant's generation config unless passed to generate())
    "is_assistant": False,
    "num_assistant_tokens": 20,
    "num_assistant_tokens_schedule": "constant",
    "assistant_confidence_threshold": 0.4,
    "prompt_lookup_num_tokens": None,
    "max_matching_ngram_size": None,
    "assistant_early_exit": None,
    "assistant_lookbehind": 10,  # only used with a different assistant tokenizer
    "target_lookbehind": 10,
    # compilation (no effect here)
    "compile_config": None,
    "disable_compile": False,
    # extra generate() keyword arguments
    "generation_kwargs": {},
    # metadata
    "_from_model_config": False,
    # ours
    "seed": None,  # the key of the position-keyed sampler; None: a sampled call draws one (utils.call_seed)
    "assisted_sampling": "rejection",  # "rejection" (Transformers' speculative sampling) or "coupled"
    "assistant_tree_width": 1,  # 1: chains; w > 1: each drafted token with up to w - 1 siblings (token trees)
    "assistant_tree_shape": "siblings",  # with w > 1: "siblings" (beside the chain) or "dynamic" (EAGLE-2's)
}
_OURS = ("seed", "assisted_sampling", "assistant_tree_width", "assistant_tree_shape")

# For fields Transformers also accepts as None: the value that turns their processor off (see effective()).
_OFF = {
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "min_p": 0.0,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "length_penalty": 1.0,
    "diversity_penalty": 0.0,
    "penalty_alpha": 0.0,
    "guidance_scale": 1.0,
    "num_beams": 1,
    "num_beam_groups": 1,
    "output_logits": False,
    "low_memory": False,
}

VERSION_KEY = "habana_assist_version"  # written by to_dict(), as Transformers writes transformers_version
METADATA_FIELDS = ("_from_model_config", "_commit_hash", "_original_object_hash", "transformers_version", VERSION_KEY)
_NOT_SERIALIZED = ("_commit_hash", "_original_object_hash")

# Arguments of generate() itself: a config holding one is a mistake (Transformers refuses them too).
_GENERATE_ARGUMENTS = (
    "logits_processor",
    "stopping_criteria",
    "prefix_allowed_tokens_fn",
    "synced_gpus",
    "assistant_model",
    "streamer",
    "negative_prompt_ids",
    "negative_prompt_attention_mask",
)
CACHE_IMPLEMENTATIONS = (
    "dynamic",
    "static",
    "offloaded",
    "offloaded_static",
    "sliding_window",
    "hybrid",
    "hybrid_chunked",
    "offloaded_hybrid",
    "offloaded_hybrid_chunked",
    "mamba",
    "quantized",
    "paged",
)

_MAX_COUNT = 2**31 - 1  # token counts, positions and token ids are 32-bit in the core

ASSISTANT_KEYS = ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")
# The core's names, from its one table of each (csrc/bindings/generate.c), which generate_assisted() takes them by:
# ("constant", "heuristic", "heuristic_transient", "cost"), ("rejection", "coupled") and ("siblings", "dynamic").
SCHEDULES = _core.SCHEDULES
ASSISTED_SAMPLING = _core.ACCEPTANCES
TREE_SHAPES = _core.TREE_SHAPES
MAX_TREE_WIDTH = 63  # the native context's ha_lm.max_tree, less the row's newest token

_BIAS_KEY = re.compile(r"^\(\s*\d+\s*(?:,\s*\d+\s*)*,?\s*\)$")  # "(5, 6)": a tuple key as str() wrote it


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_real(x):
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _is_bool(x):
    return isinstance(x, (bool, np.bool_))


def _finite(x):
    """math.isfinite, but False rather than OverflowError for an int too large for a float (10**400)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _show(value, limit=200):
    """repr(value), cut to limit characters (a bad_words_ids of 10,000 lists stays readable)."""
    try:
        text = repr(value)
    except RecursionError:
        return "<nested too deeply to show>"
    return text if len(text) <= limit else text[:limit] + "..."


def _token_ids_problem(ids, allow_empty=False):
    """None if ids is a list or tuple of token ids (ints in [0, 2**31)), else what is wrong with it."""
    if not isinstance(ids, (list, tuple)):
        return f"{_show(ids)} is a {type(ids).__name__}, not a list of token ids"
    if not ids and not allow_empty:
        return "a list is empty"
    for t in ids:
        if not _is_int(t) or t < 0:
            return f"{_show(t)} is not a token id (an int >= 0)"
        if t > _MAX_COUNT:
            return f"token id {t} is past this implementation's limit of {_MAX_COUNT}"
    return None


def _bias_pairs(value):
    """sequence_bias -> ([(token ids tuple, float bias)], None), or (None, what is wrong).

    Accepts both of Transformers' forms: {(5, 6): -1.0} and [[[5, 6], -1.0]]; also a str key "(5, 6)", which is
    how json writes a tuple key. A bias is a number (int or float), finite or -inf (a ban)."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = []
        for entry in value:
            if not (isinstance(entry, (list, tuple)) and len(entry) == 2):
                return None, f"entry {_show(entry)} is not a [token ids, bias] pair"
            items.append((entry[0], entry[1]))
    else:
        return None, f"it is a {type(value).__name__}, not a dict or a list of pairs"
    if not items:
        return None, "it is empty"
    pairs = []
    for ids, bias in items:
        if isinstance(ids, str) and _BIAS_KEY.match(ids):
            ids = tuple(int(t) for t in ids.strip("() ").split(",") if t.strip())
        problem = _token_ids_problem(ids)
        if problem is not None:
            return None, f"key {_show(ids)}: {problem}"
        if not _is_real(bias) or not (_finite(bias) or bias == -math.inf):
            return None, f"the bias of {_show(ids)} is {_show(bias)}, not a finite number (or -inf)"
        pairs.append((tuple(int(t) for t in ids), float(bias)))
    return pairs, None


def _jsonable(value, strict, where):
    """value with numpy scalars and arrays, tuples and objects with to_dict() made JSON types; dict keys become
    str (as Transformers writes them). strict: raise for anything else; else write its repr."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist(), strict, where)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, strict, where) for v in value]
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _jsonable(v, strict, where) for k, v in value.items()}
    if callable(getattr(value, "to_dict", None)):
        return _jsonable(value.to_dict(), strict, where)
    if strict:
        raise InvalidInputError(
            f"GenerationConfig.{where} holds {_show(value)} ({type(value).__name__}), which "
            "JSON cannot hold; set it to numbers, strings, lists or dicts"
        )
    return repr(value)


def _json_ready(d, strict):
    """A to_dict()-style dict as JSON types; sequence_bias in its list-of-pairs form (JSON has no tuple keys)."""
    out = {}
    for key, value in d.items():
        if key == "sequence_bias" and value is not None:
            pairs, _ = _bias_pairs(value)
            if pairs is not None:
                out[key] = [[list(ids), bias] for ids, bias in pairs]
                continue
        out[key] = _jsonable(value, strict, key)
    return out


def _same(a, b):
    """a == b as a plain bool (numpy arrays and odd objects compare as different)."""
    try:
        return type(a) is type(b) and bool(a == b) or (_is_real(a) and _is_real(b) and bool(a == b))
    except Exception:  # noqa: BLE001 - an ambiguous or failing comparison means "different"
        return False


def _version():
    from .. import __version__  # at call time: the package imports this module while it initializes

    return __version__


_MAX_NESTING = 100  # levels of lists and objects a generation_config.json may nest (deepcopy's recursion)


def _nested_deeper_than(value, limit):
    """Whether JSON data (dicts and lists) nests more than `limit` levels (iterative: any depth is measured)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


class GenerationConfig:
    """Arguments of generate(); unknown keys from a generation_config.json are kept as attributes."""

    # The fields (Transformers' names; __init__ sets each from _DEFAULTS or its argument), as a type checker sees
    # them: Any where Transformers takes several kinds of value.
    max_length: int
    max_new_tokens: Optional[int]
    min_length: int
    min_new_tokens: Optional[int]
    early_stopping: bool
    max_time: Optional[float]
    stop_strings: Union[str, list[str], None]
    do_sample: bool
    num_beams: Optional[int]
    num_beam_groups: Optional[int]
    penalty_alpha: Any
    dola_layers: Any
    use_cache: bool
    cache_implementation: Any
    cache_config: Any
    return_legacy_cache: Any
    prefill_chunk_size: Any
    temperature: Optional[float]
    top_k: Optional[int]
    top_p: Optional[float]
    min_p: Optional[float]
    top_h: Any
    typical_p: Optional[float]
    epsilon_cutoff: Optional[float]
    eta_cutoff: Optional[float]
    diversity_penalty: Optional[float]
    repetition_penalty: Optional[float]
    encoder_repetition_penalty: Optional[float]
    length_penalty: Optional[float]
    no_repeat_ngram_size: Optional[int]
    bad_words_ids: Any
    force_words_ids: Any
    renormalize_logits: bool
    constraints: Any
    forced_bos_token_id: Optional[int]
    forced_eos_token_id: Any  # int, list of int, or None
    remove_invalid_values: bool
    exponential_decay_length_penalty: Any
    suppress_tokens: Any
    begin_suppress_tokens: Any
    forced_decoder_ids: Any
    sequence_bias: Any
    token_healing: bool
    guidance_scale: Any
    low_memory: Any
    watermarking_config: Any
    num_return_sequences: int
    output_attentions: bool
    output_hidden_states: bool
    output_scores: bool
    output_logits: Optional[bool]
    return_dict_in_generate: bool
    pad_token_id: Optional[int]
    bos_token_id: Optional[int]
    eos_token_id: Any  # int, list of int, or None
    encoder_no_repeat_ngram_size: Optional[int]
    decoder_start_token_id: Any
    is_assistant: bool
    num_assistant_tokens: int
    num_assistant_tokens_schedule: str
    assistant_confidence_threshold: float
    prompt_lookup_num_tokens: Optional[int]
    max_matching_ngram_size: Optional[int]
    assistant_early_exit: Optional[int]
    assistant_lookbehind: int
    target_lookbehind: int
    compile_config: Any
    disable_compile: bool
    generation_kwargs: dict[str, Any]
    seed: Optional[int]
    assisted_sampling: str
    assistant_tree_width: int
    assistant_tree_shape: str

    def __init__(self, **kwargs: Any) -> None:
        for key, value in _DEFAULTS.items():
            setattr(self, key, kwargs.pop(key) if key in kwargs else copy.deepcopy(value))  # {} not shared
        for key, value in kwargs.items():
            if hasattr(type(self), key):  # data in place of validate, to_dict... would break every later call
                raise InvalidInputError(
                    f"GenerationConfig: {key!r} names one of its methods or attributes, not a "
                    "generation argument; remove it"
                )
            setattr(self, key, value)

    # ---- construction ------------------------------------------------------------------------------------

    @overload
    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name: PathLike,
        config_file_name: Optional[PathLike] = None,
        *,
        return_unused_kwargs: Literal[False] = False,
        **kwargs: Any,
    ) -> GenerationConfig: ...
    @overload
    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name: PathLike,
        config_file_name: Optional[PathLike] = None,
        *,
        return_unused_kwargs: Literal[True],
        **kwargs: Any,
    ) -> tuple[GenerationConfig, dict[str, Any]]: ...
    @classmethod
    def from_pretrained(
        cls, pretrained_model_name: PathLike, config_file_name: Optional[PathLike] = None, **kwargs: Any
    ) -> Union[GenerationConfig, tuple[GenerationConfig, dict[str, Any]]]:
        """Reads pretrained_model_name/[subfolder/]config_file_name (generation_config.json by default).

        pretrained_model_name: a local directory, a shipped name or a Hub repo id, resolved as every
        from_pretrained resolves it (checkpoints/hub.py, with the hub arguments revision, cache_dir,
        local_files_only, token, force_download, proxies, subfolder). kwargs override the file's values, as in
        from_dict (return_unused_kwargs=True returns (config, unused)).
        """
        hub_arguments = pop_hub_arguments(kwargs, "GenerationConfig.from_pretrained")
        for key in ("_from_auto", "_from_pipeline"):
            kwargs.pop(key, None)
        name = config_file_name or GENERATION_CONFIG_NAME
        if not isinstance(name, (str, os.PathLike)):
            raise InvalidInputError(f"config_file_name={name!r} must be a file name such as 'generation_config.json'")
        path = os.path.join(resolve(pretrained_model_name, Files(required=[(os.fspath(name),)]), **hub_arguments), name)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if _nested_deeper_than(data, _MAX_NESTING):  # to_dict() copies it: no depth a copy could not take
                raise ValueError(f"nested more than {_MAX_NESTING} levels deep")
        except FileNotFoundError:
            raise CheckpointNotFoundError(f"{path} does not exist; pass the directory of a Hugging Face checkpoint")
        except (OSError, ValueError, RecursionError) as e:  # ValueError: bad UTF-8 or JSON, an int of > 4300 digits
            raise CheckpointError(
                f"{path} is not valid JSON ({e or 'nested too deeply'}); fix or delete the file"
            ) from None
        if not isinstance(data, dict):
            raise CheckpointError(f"{path} must hold a JSON object, not {type(data).__name__}; fix or delete the file")
        methods = sorted(k for k in data if k not in _DEFAULTS and hasattr(cls, k))
        if methods:
            raise CheckpointError(
                f"{path}: key(s) {methods} name GenerationConfig methods or attributes, not "
                "generation arguments; remove them from the file"
            )
        return cls.from_dict(data, **kwargs)

    @overload
    @classmethod
    def from_dict(
        cls, config_dict: dict[str, Any], *, return_unused_kwargs: Literal[False] = False, **kwargs: Any
    ) -> GenerationConfig: ...
    @overload
    @classmethod
    def from_dict(
        cls, config_dict: dict[str, Any], *, return_unused_kwargs: Literal[True], **kwargs: Any
    ) -> tuple[GenerationConfig, dict[str, Any]]: ...
    @classmethod
    def from_dict(
        cls, config_dict: dict[str, Any], **kwargs: Any
    ) -> Union[GenerationConfig, tuple[GenerationConfig, dict[str, Any]]]:
        """A config from a dict (as to_dict() or a generation_config.json gives); kwargs override its values.

        With return_unused_kwargs=True, returns (config, unused): the kwargs that name no field are returned, not
        set. Without it they are kept as attributes, as unknown keys of the dict are."""
        if not isinstance(config_dict, dict):
            raise InvalidInputError(
                f"GenerationConfig.from_dict: config_dict must be a dict, not "
                f"{type(config_dict).__name__}; pass e.g. GenerationConfig().to_dict()"
            )
        return_unused = kwargs.pop("return_unused_kwargs", False)
        for key in ("_from_auto", "_from_pipeline"):
            kwargs.pop(key, None)
        known = {k: v for k, v in kwargs.items() if k in _DEFAULTS or k in config_dict}
        unused = {k: v for k, v in kwargs.items() if k not in known}
        config = cls(**{**copy.deepcopy(config_dict), **known, **({} if return_unused else unused)})
        return (config, unused) if return_unused else config

    @classmethod
    def from_model_config(cls, config: Any) -> GenerationConfig:
        """Defaults plus the generation fields a model config holds (its special tokens; older checkpoints keep
        other generation arguments in config.json too), as Transformers builds it without generation_config.json."""
        fields = {k: getattr(config, k, None) for k in _DEFAULTS if k not in _OURS and not k.startswith("_")}
        gc = cls(**{k: v for k, v in fields.items() if v is not None}, _from_model_config=True)
        if any(
            getattr(gc, flag) is True
            for flag in ("output_attentions", "output_hidden_states", "output_scores", "output_logits")
        ):
            gc.return_dict_in_generate = True
        return gc

    def _get_default_generation_params(self):
        """What Transformers' assisted generation asks of its assistant_model's generation config first: a model of
        this package cannot be that assistant (Transformers drives it through a torch model's internals), so the
        call is refused here, naming the ways that work."""
        raise TypeError(
            "a habana_assist model cannot be the assistant_model of Transformers' generate(); verify "
            "with habana_assist instead: ha.wrap(transformers_model).generate(..., assistant_model="
            "this_model), or a habana_assist target with the Transformers model as assistant_model"
        )

    def update(self, **kwargs: Any) -> dict[str, Any]:
        """Sets the known attributes among kwargs; returns the others, unused (a method's name among them: data
        in place of validate or to_dict would break every later call; metadata such as _from_model_config)."""
        unused: dict[str, Any] = {}
        for key, value in kwargs.items():
            if not key.startswith("_") and (key in _DEFAULTS or key in self.__dict__):
                setattr(self, key, value)
            else:
                unused[key] = value
        return unused

    # ---- serialization -----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of every attribute, plus habana_assist_version (this package's version, as Transformers
        adds transformers_version)."""
        out = copy.deepcopy({k: v for k, v in self.__dict__.items() if k not in _NOT_SERIALIZED})
        out[VERSION_KEY] = _version()
        return out

    def to_diff_dict(self) -> dict[str, Any]:
        """to_dict() less the attributes equal to GenerationConfig()'s; habana_assist_version always stays."""
        default = GenerationConfig().to_dict()
        return {
            k: v for k, v in self.to_dict().items() if k == VERSION_KEY or k not in default or not _same(v, default[k])
        }

    def to_json_string(self, use_diff: bool = True, ignore_metadata: bool = False) -> str:
        """JSON text: sorted keys, indent 2, a trailing newline. sequence_bias is written as a list of
        [token ids, bias] pairs, a form Transformers and from_pretrained read back."""
        d = self.to_diff_dict() if use_diff else self.to_dict()
        d.pop("compile_config", None)  # a torch.compile setting, never written (as in Transformers)
        if ignore_metadata:
            for key in METADATA_FIELDS:
                d.pop(key, None)
        try:
            return json.dumps(_json_ready(d, strict=True), indent=2, sort_keys=True) + "\n"
        except RecursionError:
            raise InvalidInputError(
                "GenerationConfig holds a value nested too deeply (or containing itself) to "
                "write as JSON; set plain numbers, strings and lists"
            ) from None

    def to_json_file(self, json_file_path: PathLike, use_diff: bool = True) -> None:
        text = self.to_json_string(use_diff=use_diff)  # before opening: a value JSON cannot hold leaves no file
        with open(json_file_path, "w", encoding="utf-8") as f:
            f.write(text)

    def save_pretrained(
        self,
        save_directory: PathLike,
        config_file_name: Optional[PathLike] = None,
        push_to_hub: bool = False,
        **kwargs: Any,
    ) -> None:
        """Writes save_directory/generation_config.json (to_diff_dict), creating the directory.

        Refuses a config that validate() refuses (Transformers refuses to save an invalid config too); its
        warnings do not stop the save. A config this package cannot run (num_beams=4) is valid and saves.
        kwargs are the hub's (token, commit_message...), meaningless without push_to_hub."""
        if push_to_hub:
            raise InvalidInputError(
                "`push_to_hub` (=True) is not supported: this package never uploads; save with "
                "push_to_hub=False and upload the directory with huggingface-cli upload"
            )
        try:
            self.validate()
        except InvalidInputError as e:
            raise InvalidInputError(
                f"GenerationConfig.save_pretrained: not saved, the config is invalid: {e}"
            ) from None
        directory = os.fspath(save_directory)
        if os.path.isfile(directory):
            raise InvalidInputError(
                f"save_pretrained: save_directory {directory!r} is a file, not a directory; "
                "pass the path of a directory (it is created if missing)"
            )
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, config_file_name or GENERATION_CONFIG_NAME)
        text = self.to_json_string(use_diff=True)
        write_atomic(path, lambda f: f.write(text.encode("utf-8")))  # never a half-written file under the real name

    def _comparable(self, use_diff):
        d = self.to_diff_dict() if use_diff else self.to_dict()
        for key in METADATA_FIELDS + ("compile_config",):  # what a saved file does not keep
            d.pop(key, None)
        try:
            return _json_ready(d, strict=False)
        except RecursionError:
            return {"<unprintable>": id(self)}

    def __repr__(self) -> str:
        return f"GenerationConfig {json.dumps(self._comparable(use_diff=True), indent=2, sort_keys=True)}"

    def __eq__(self, other: object) -> bool:
        """Equal when their JSON forms are, metadata aside (as Transformers compares): so a config equals what
        save_pretrained / from_pretrained gives back, whichever form its sequence_bias had."""
        return isinstance(other, GenerationConfig) and self._comparable(False) == other._comparable(False)

    def __hash__(self) -> int:
        return hash(json.dumps(self._comparable(use_diff=True), sort_keys=True))

    # ---- normalized views for generate() -----------------------------------------------------------------

    def eos_token_ids(self) -> list[int]:
        """eos_token_id as a list (empty when unset)."""
        e = self.eos_token_id
        return [] if e is None else [int(e)] if _is_int(e) else [int(x) for x in e]

    def forced_eos_token_ids(self) -> list[int]:
        """forced_eos_token_id as a list (empty when unset)."""
        e = self.forced_eos_token_id
        return [] if e is None else [int(e)] if _is_int(e) else [int(x) for x in e]

    def sequence_bias_pairs(self) -> list[tuple[tuple[int, ...], float]]:
        """sequence_bias as [(token ids tuple, float bias)] in its order (empty when unset), from either of
        Transformers' forms; call after validate()."""
        if self.sequence_bias is None:
            return []
        pairs, problem = _bias_pairs(self.sequence_bias)
        if problem is not None:
            raise InvalidInputError(
                f"`sequence_bias` (={_show(self.sequence_bias)}): {problem}; call validate() for the fix"
            )
        return pairs

    def stop_strings_list(self) -> list[str]:
        """stop_strings as a list of str (empty when unset)."""
        s = self.stop_strings
        return [] if s is None else [s] if isinstance(s, str) else list(s)

    def effective(self, flag: str) -> Any:
        """The value of flag, with None read as the value that turns its processor off (Transformers accepts
        top_k=None, temperature=None, typical_p=None... and skips the processor): top_k None -> 0,
        temperature None -> 1.0, min_p None -> 0.0, output_logits None -> False, num_beams None -> 1, ..."""
        value = getattr(self, flag)
        return _OFF[flag] if value is None and flag in _OFF else value

    # ---- validation --------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raises InvalidInputError (a ValueError) naming the flag, its value and the fix for any malformed value.

        Warns (UserWarning) for a knob that has no effect where it is: a sampling knob with do_sample=False, an
        output_* flag without return_dict_in_generate. Does not refuse what this package cannot run (beam search
        and the like): see check_supported()."""
        for arg in _GENERATE_ARGUMENTS:
            if arg in self.__dict__:
                raise InvalidInputError(
                    f"`{arg}` is an argument of generate(), not a GenerationConfig field; pass "
                    "it to generate() directly"
                )
        self._validate_lengths()
        self._validate_strategy()
        self._validate_warpers()
        self._validate_processors()
        self._validate_outputs()
        self._validate_assisted()
        self._warn_unused_sampling_knobs()

    def _bad(self, flag, problem, fix):
        raise InvalidInputError(f"`{flag}` (={_show(getattr(self, flag))}) {problem}; {fix}.")

    def _check_bool(self, flags, optional=False):
        for flag in flags:
            v = getattr(self, flag)
            if not (_is_bool(v) or optional and v is None):
                self._bad(
                    flag, "must be True or False" + (" (or None)" if optional else ""), f"pass {flag}=True or False"
                )

    def _check_count(self, flag, minimum, fix, optional=False):
        v = getattr(self, flag)
        if optional and v is None:
            return
        if not (_is_int(v) and v >= minimum):
            self._bad(flag, f"must be an integer >= {minimum}" + (" or None" if optional else ""), fix)
        if v > _MAX_COUNT:
            self._bad(flag, f"is larger than this implementation's limit of {_MAX_COUNT}", "pass a smaller value")

    def _check_token_id(self, flag, fix):
        v = getattr(self, flag)
        if v is not None and not (_is_int(v) and 0 <= v <= _MAX_COUNT):
            self._bad(flag, f"must be a token id (an int in [0, {_MAX_COUNT}]) or None", fix)

    def _check_real(self, flag, ok, rule, fix, optional=True):
        """ok(v) for a finite real v; rule: the allowed range in words."""
        v = getattr(self, flag)
        if optional and v is None:
            return
        if not (_is_real(v) and _finite(v) and ok(v)):
            self._bad(flag, f"must be {rule}" + (" or None" if optional else ""), fix)

    def _validate_lengths(self):
        for flag in ("max_new_tokens", "max_length", "min_new_tokens", "min_length"):
            v = getattr(self, flag)
            if _is_int(v) and v > _MAX_COUNT:
                self._bad(flag, f"is larger than this implementation's limit of {_MAX_COUNT}", "pass a smaller value")
        if self.max_new_tokens is not None and not (_is_int(self.max_new_tokens) and self.max_new_tokens >= 1):
            self._bad(
                "max_new_tokens", "must be a positive integer", "pass max_new_tokens >= 1 (or None to use max_length)"
            )
        if not (_is_int(self.max_length) and self.max_length >= 1) and not (
            self.max_length is None and self.max_new_tokens is not None
        ):  # None: max_new_tokens bounds it
            self._bad("max_length", "must be a positive integer", "pass max_length >= 1 or set max_new_tokens")
        if self.min_new_tokens is not None and not (_is_int(self.min_new_tokens) and self.min_new_tokens >= 0):
            self._bad("min_new_tokens", "must be a non-negative integer", "pass min_new_tokens >= 0 or None")
        if not (_is_int(self.min_length) and self.min_length >= 0):
            self._bad("min_length", "must be a non-negative integer", "pass min_length >= 0")
        m = self.max_time
        if m is not None and not (_is_real(m) and m >= 0 and _finite(m)):
            self._bad(
                "max_time",
                "must be a non-negative number of seconds or None",
                "pass e.g. max_time=10.0, or None for no limit",
            )
        s = self.stop_strings
        if s is not None:
            strings = [s] if isinstance(s, str) else s
            if not (isinstance(strings, (list, tuple)) and strings and all(isinstance(x, str) and x for x in strings)):
                self._bad(
                    "stop_strings",
                    "must be a non-empty string or a non-empty list of non-empty strings",
                    'pass e.g. stop_strings=["\\n\\n"] (with tokenizer= in generate()), or None',
                )

    def _validate_strategy(self):
        self._check_bool(
            (
                "do_sample",
                "use_cache",
                "renormalize_logits",
                "remove_invalid_values",
                "token_healing",
                "is_assistant",
                "disable_compile",
                "_from_model_config",
            )
        )
        self._check_bool(("low_memory", "return_legacy_cache"), optional=True)
        if not (
            _is_bool(self.early_stopping) or isinstance(self.early_stopping, str) and self.early_stopping == "never"
        ):
            self._bad(
                "early_stopping", "must be True, False or 'never'", "pass early_stopping=False (beam search only)"
            )
        self._check_count("num_beams", 1, "pass num_beams=1 (beam search is not implemented here)", optional=True)
        self._check_count("num_beam_groups", 1, "pass num_beam_groups=1", optional=True)
        self._check_real("diversity_penalty", lambda v: v >= 0, "a non-negative float", "pass diversity_penalty=0.0")
        self._check_real("length_penalty", lambda v: True, "a finite float", "pass length_penalty=1.0")
        self._check_real("penalty_alpha", lambda v: v >= 0, "a non-negative float", "pass penalty_alpha=None")
        self._check_real("guidance_scale", lambda v: True, "a finite float", "pass guidance_scale=None")
        d = self.dola_layers
        if (
            d is not None
            and not (isinstance(d, str) and d in ("low", "high"))
            and not (isinstance(d, (list, tuple)) and all(_is_int(x) and x >= 0 for x in d))
        ):
            self._bad("dola_layers", "must be 'low', 'high', a list of layer indices or None", "pass dola_layers=None")
        c = self.cache_implementation
        if c is not None and (not isinstance(c, str) or c not in CACHE_IMPLEMENTATIONS):
            self._bad(
                "cache_implementation",
                "is not a cache Transformers knows",
                f"pass one of {', '.join(CACHE_IMPLEMENTATIONS)}, or None",
            )
        self._check_count("prefill_chunk_size", 1, "pass e.g. prefill_chunk_size=512, or None", optional=True)
        if not isinstance(self.generation_kwargs, dict):
            self._bad(
                "generation_kwargs", "must be a dict", "pass generation_kwargs={} and the arguments to generate()"
            )
        for flag in ("constraints", "force_words_ids"):
            if getattr(self, flag) is not None and not isinstance(getattr(self, flag), (list, tuple)):
                self._bad(flag, "must be a list or None", f"pass {flag}=None")
        for flag in ("watermarking_config", "cache_config", "compile_config"):
            v = getattr(self, flag)
            if v is not None and not isinstance(v, dict) and not callable(getattr(v, "to_dict", None)):
                self._bad(flag, "must be a dict (or a config object) or None", f"pass {flag}=None")

    def _validate_warpers(self):
        t = self.temperature
        if t is not None and not (_is_real(t) and _finite(t) and t >= 0):
            self._bad(
                "temperature",
                "must be a finite non-negative float",
                "pass e.g. temperature=0.7, or 1.0 to leave logits as they are",
            )
        if self.do_sample is True and t == 0:
            self._bad(
                "temperature",
                "has to be a strictly positive float when sampling",
                "pass temperature > 0, or do_sample=False for greedy decoding",
            )
        k = self.top_k
        if k is not None and not (_is_int(k) and k >= 0):
            self._bad("top_k", "must be a non-negative integer or None", "pass top_k >= 1, or 0 or None to disable it")
        if _is_int(k) and k > _MAX_COUNT:
            self._bad("top_k", f"is larger than this implementation's limit of {_MAX_COUNT}", "pass a smaller value")
        self._check_real(
            "top_p", lambda v: 0 < v <= 1, "a float in (0, 1]", "pass e.g. top_p=0.9, or 1.0 to disable it"
        )
        self._check_real(
            "min_p", lambda v: 0 <= v <= 1, "a float in [0, 1]", "pass e.g. min_p=0.1, or None to disable it"
        )
        self._check_real("top_h", lambda v: 0 < v <= 1, "a float in (0, 1]", "pass e.g. top_h=0.4, or None")
        self._check_real(
            "typical_p", lambda v: 0 < v <= 1, "a float in (0, 1]", "pass e.g. typical_p=0.9, or 1.0 to disable it"
        )
        for flag, example in (("epsilon_cutoff", "3e-4"), ("eta_cutoff", "1e-3")):
            self._check_real(
                flag, lambda v: 0 <= v < 1, "a float in [0, 1)", f"pass e.g. {flag}={example}, or 0.0 to disable it"
            )

    def _validate_processors(self):
        for flag in ("repetition_penalty", "encoder_repetition_penalty"):
            self._check_real(flag, lambda v: v > 0, "a strictly positive float", "pass e.g. 1.2, or 1.0 for no penalty")
        for flag in ("no_repeat_ngram_size", "encoder_no_repeat_ngram_size"):
            self._check_count(flag, 0, f"pass e.g. {flag}=3, or 0 to disable it", optional=True)
        b = self.bad_words_ids
        if b is not None:
            problem = (
                "it is empty"
                if isinstance(b, (list, tuple)) and not b
                else _token_ids_problem(b, allow_empty=True)
                if not isinstance(b, (list, tuple))
                else next((p for p in map(_token_ids_problem, b) if p is not None), None)
            )
            if problem is not None:
                self._bad(
                    "bad_words_ids",
                    f"must be a non-empty list of non-empty lists of token ids ({problem})",
                    "pass e.g. bad_words_ids=[[5], [7, 8]] (tok(words, add_special_tokens=False).input_ids), or None",
                )
        if self.sequence_bias is not None:
            _, problem = _bias_pairs(self.sequence_bias)
            if problem is not None:
                self._bad(
                    "sequence_bias",
                    f"must map token-id sequences to biases ({problem})",
                    "pass e.g. sequence_bias={(5,): -10.0, (7, 8): 2.5} or [[[5], -10.0], [[7, 8], 2.5]], or None",
                )
        for flag in ("suppress_tokens", "begin_suppress_tokens"):
            v = getattr(self, flag)
            if v is not None and _token_ids_problem(v, allow_empty=True) is not None:
                self._bad(
                    flag,
                    f"must be a list of token ids ({_token_ids_problem(v, allow_empty=True)})",
                    f"pass e.g. {flag}=[5, 7], or None",
                )
        self._check_token_id("forced_bos_token_id", "pass e.g. forced_bos_token_id=1, or None")
        e = self.forced_eos_token_id
        if e is not None and not (_is_int(e) and 0 <= e <= _MAX_COUNT) and _token_ids_problem(e) is not None:
            self._bad(
                "forced_eos_token_id",
                "must be a token id or a non-empty list of them",
                "pass e.g. forced_eos_token_id=2 or [2, 32000], or None",
            )
        x = self.exponential_decay_length_penalty
        if x is not None and not (
            isinstance(x, (list, tuple))
            and len(x) == 2
            and _is_int(x[0])
            and 0 <= x[0] <= _MAX_COUNT
            and _is_real(x[1])
            and _finite(x[1])
            and x[1] > 0
        ):
            self._bad(
                "exponential_decay_length_penalty",
                "must be a (start_index, decay_factor) pair: an int >= 0 and a float > 0",
                "pass e.g. exponential_decay_length_penalty=(15, 1.1), or None",
            )
        if self.forced_decoder_ids is not None and not isinstance(self.forced_decoder_ids, (list, tuple)):
            self._bad(
                "forced_decoder_ids",
                "must be a list of [index, token id] pairs or None",
                "pass forced_decoder_ids=None",
            )

    def _validate_outputs(self):
        self._check_bool(("output_attentions", "output_hidden_states", "output_scores", "return_dict_in_generate"))
        self._check_bool(("output_logits",), optional=True)
        e = self.eos_token_id
        if (
            e is not None
            and not (_is_int(e) and e >= 0)
            and not (isinstance(e, (list, tuple)) and all(_is_int(x) and x >= 0 for x in e))
        ):
            self._bad(
                "eos_token_id", "must be a non-negative int or a list of them", "pass e.g. eos_token_id=2 or [2, 32000]"
            )
        for flag in ("pad_token_id", "bos_token_id"):
            v = getattr(self, flag)
            if v is not None and not (_is_int(v) and v >= 0):
                self._bad(flag, "must be a non-negative integer or None", f"pass a token id for {flag}")
        d = self.decoder_start_token_id
        if d is not None and not (_is_int(d) and d >= 0) and _token_ids_problem(d) is not None:
            self._bad(
                "decoder_start_token_id",
                "must be a token id, a list of them or None",
                "pass decoder_start_token_id=None (encoder-decoder models only)",
            )
        self._check_count("num_return_sequences", 1, "pass e.g. num_return_sequences=2 with do_sample=True, or 1")
        n, beams = self.num_return_sequences, self.effective("num_beams")
        if n > 1 and beams == 1 and self.do_sample is not True:
            self._bad(
                "num_return_sequences",
                f"needs do_sample=True: greedy decoding would return the same sequence {n} times",
                "pass do_sample=True, or num_return_sequences=1",
            )
        if beams > 1 and n > beams:
            self._bad(
                "num_return_sequences", f"is larger than num_beams (={beams})", f"pass num_return_sequences <= {beams}"
            )
        if self.seed is not None and not (_is_int(self.seed) and 0 <= self.seed < 2**64):
            self._bad(
                "seed",
                "must be an integer in [0, 2**64)",
                "pass e.g. seed=0, or None to draw one (from torch's generator, or set_seed's)",
            )

    def _validate_assisted(self):
        self._check_count("num_assistant_tokens", 1, "pass e.g. num_assistant_tokens=5")
        if self.num_assistant_tokens_schedule not in SCHEDULES:
            self._bad("num_assistant_tokens_schedule", "is not a known schedule", f"pass one of {', '.join(SCHEDULES)}")
        c = self.assistant_confidence_threshold
        if c is not None and not (_is_real(c) and 0 <= c < 1):
            self._bad(
                "assistant_confidence_threshold", "must be a float in [0, 1)", "pass e.g. 0.4, or 0 to turn it off"
            )
        for flag in ("prompt_lookup_num_tokens", "max_matching_ngram_size"):
            self._check_count(flag, 1, f"pass e.g. {flag}=10, or None", optional=True)
        self._check_count(
            "assistant_early_exit",
            1,
            "pass e.g. assistant_early_exit=4 (draft with the first 4 layers), or None",
            optional=True,
        )
        for flag in ("assistant_lookbehind", "target_lookbehind"):
            self._check_count(flag, 0, f"pass e.g. {flag}=10", optional=True)
        if self.assisted_sampling not in ASSISTED_SAMPLING:
            self._bad(
                "assisted_sampling", "is not a known acceptance rule", f"pass one of {', '.join(ASSISTED_SAMPLING)}"
            )
        self._check_count(
            "assistant_tree_width",
            1,
            "pass e.g. assistant_tree_width=2 (each drafted token and the "
            "draft's next most probable one beside it), or 1 for chains",
        )
        if _is_int(self.assistant_tree_width) and self.assistant_tree_width > MAX_TREE_WIDTH:
            self._bad(
                "assistant_tree_width",
                f"must be at most {MAX_TREE_WIDTH} (a tree verification takes 64 nodes per row)",
                "pass e.g. assistant_tree_width=2",
            )
        if not isinstance(self.assistant_tree_shape, str) or self.assistant_tree_shape not in TREE_SHAPES:
            self._bad(
                "assistant_tree_shape",
                "is not a known tree shape",
                f"pass one of {', '.join(repr(s) for s in TREE_SHAPES)} ('siblings': each drafted token with the "
                "draft's next choices beside it; 'dynamic': the draft expands its most probable nodes, as EAGLE-2)",
            )

    def _warn_unused_sampling_knobs(self):
        if self.do_sample is not True:
            off = {
                "temperature": 1.0,
                "top_p": 1.0,
                "min_p": None,
                "top_h": None,
                "typical_p": 1.0,
                "epsilon_cutoff": 0.0,
                "eta_cutoff": 0.0,
            }
            if self.penalty_alpha is None:  # contrastive search reads top_k without sampling
                off["top_k"] = 50
            for flag, default in off.items():
                v = getattr(self, flag)
                if v is not None and v != default:
                    _warn(
                        f"`{flag}` (={v!r}) is only used when sampling and has no effect with do_sample=False; "
                        f"pass do_sample=True, or leave {flag} at {default!r} (or None)",
                        2,
                    )
        if self.return_dict_in_generate is not True:
            for flag in ("output_attentions", "output_hidden_states", "output_scores", "output_logits"):
                if getattr(self, flag) is True:
                    _warn(
                        f"`{flag}` (=True) has no effect without return_dict_in_generate=True; pass "
                        f"return_dict_in_generate=True to get it, or {flag}=False",
                        2,
                    )

    # ---- what this package runs --------------------------------------------------------------------------

    def check_supported(self) -> None:
        """Raises InvalidInputError for a valid setting this package does not implement, naming the flag and what
        to use instead (call after validate()). Warns (UserWarning) for beam-only knobs set with num_beams=1,
        where they have no effect, as Transformers does."""

        def refuse(flag, what, fix):
            raise InvalidInputError(f"`{flag}` (={_show(getattr(self, flag))}) {what}; {fix}.")

        if self.effective("num_beams") > 1:
            refuse(
                "num_beams",
                "asks for beam search, which is not implemented",
                "use num_beams=1, with "
                "do_sample=True for diverse outputs or num_return_sequences for several per prompt",
            )
        if self.effective("num_beam_groups") > 1:
            refuse(
                "num_beam_groups",
                "asks for diverse (group) beam search, which is not implemented",
                "use num_beam_groups=1, and do_sample=True with num_return_sequences for diverse outputs",
            )
        if self.effective("diversity_penalty") != 0:
            refuse(
                "diversity_penalty",
                "is used by group beam search only, which is not implemented",
                "use diversity_penalty=0.0, and do_sample=True with num_return_sequences for diverse outputs",
            )
        for flag in ("constraints", "force_words_ids"):
            if getattr(self, flag) is not None:
                refuse(
                    flag,
                    "asks for constrained beam search, which is not implemented",
                    f"use {flag}=None; sequence_bias or a logits_processor can favour words",
                )
        alpha, k = self.effective("penalty_alpha"), self.effective("top_k")
        if alpha > 0 and k > 1 and self.do_sample is not True:
            refuse(
                "penalty_alpha",
                f"with top_k={k} asks for contrastive search, which is not implemented",
                "use penalty_alpha=None (greedy), or do_sample=True with top_k/top_p",
            )
        if self.dola_layers is not None:
            refuse(
                "dola_layers",
                "asks for DoLa decoding, which is not implemented",
                "use dola_layers=None, and repetition_penalty or no_repeat_ngram_size against repetition",
            )
        g = self.guidance_scale
        if g is not None and g != 1:
            refuse(
                "guidance_scale",
                "asks for classifier-free guidance, which is not implemented",
                "use guidance_scale=None (or 1)",
            )
        if self.top_h is not None:
            refuse("top_h", "asks for Top-H sampling, which is not implemented", "use top_p, min_p or typical_p")
        if self.watermarking_config is not None:
            refuse(
                "watermarking_config", "asks for watermarking, which is not implemented", "use watermarking_config=None"
            )
        for flag, instead in (
            ("output_attentions", "output_scores or output_logits with return_dict_in_generate"),
            ("output_hidden_states", "output_logits, or model(input_ids).logits"),
        ):
            if getattr(self, flag) is True:
                refuse(flag, "asks for what this package's models do not return", f"use {flag}=False; {instead}")
        if self.token_healing is True:
            refuse("token_healing", "is not implemented", "use token_healing=False")
        r = self.encoder_repetition_penalty
        if r is not None and r != 1:
            refuse(
                "encoder_repetition_penalty",
                "is not implemented",
                "use encoder_repetition_penalty=1.0; repetition_penalty or sequence_bias on the prompt's tokens",
            )
        if self.effective("encoder_no_repeat_ngram_size") > 0:
            refuse(
                "encoder_no_repeat_ngram_size",
                "is for encoder-decoder models only",
                "use encoder_no_repeat_ngram_size=0; no_repeat_ngram_size applies to decoder-only models",
            )
        if self.forced_decoder_ids is not None:
            refuse(
                "forced_decoder_ids",
                "is for encoder-decoder models only",
                "use forced_decoder_ids=None; forced_bos_token_id or a logits_processor forces tokens",
            )
        if self.low_memory is True:
            refuse("low_memory", "is for beam and contrastive search only, not implemented here", "use low_memory=None")
        if self.cache_implementation == "quantized":
            refuse(
                "cache_implementation",
                "asks for a quantized KV cache, which changes outputs and is not implemented",
                'use cache_implementation=None, or load the model with dtype="int8"',
            )
        if self.generation_kwargs:
            refuse("generation_kwargs", "is not read here", "pass those arguments to generate() directly")

        if self.effective("num_beams") == 1:
            for flag, default in (("early_stopping", False), ("length_penalty", 1.0)):
                v = getattr(self, flag)
                if v is not None and v != default:
                    _warn(
                        f"`{flag}` (={v!r}) is only used by beam search and has no effect with num_beams=1; "
                        f"leave {flag} at {default!r}",
                        1,
                    )
        if alpha > 0 and not (k > 1 and self.do_sample is not True):
            _warn(
                f"`penalty_alpha` (={alpha!r}) is only used by contrastive search (do_sample=False and top_k > 1) "
                "and has no effect here; leave penalty_alpha at None",
                1,
            )


def _warn(message, depth):
    """A UserWarning reported at the line depth frames above the one calling _warn (the caller of validate()
    or check_supported(): generate(), or the user's own call)."""
    warnings.warn(message, UserWarning, stacklevel=depth + 2)
