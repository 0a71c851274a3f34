"""TextGenerationPipeline: Transformers' "text-generation" pipeline, thin over tokenizer -> generate() -> decode.

Facts kept from Transformers 5 (pipelines/text_generation.py and pipelines/base.py):
- a call takes a str, a chat (a list of {"role", "content"} dicts, rendered by the tokenizer's chat template
  with add_generation_prompt, or continuing the final message when it is the assistant's), or a list of them;
  each input gives a list of dicts ({"generated_text": ...} or {"generated_token_ids": [...]}), one per returned
  sequence; a single input gives that list, a list of inputs a list of such lists;
- the pipeline's generation defaults: max_new_tokens=256, do_sample=True, temperature=0.7, where the model's
  generation_config.json does not set the key (a model's max_length other than 20 is honoured in place of
  max_new_tokens); pad_token_id from the tokenizer where the config has none; arguments given at construction
  become the pipeline's own defaults, those given to a call apply to that call;
- the new text is decode(sequence)[len(decode(prompt)):] (skip_special_tokens=True unless passed, and
  clean_up_tokenization_spaces as passed, else the tokenizer's own setting, as in Transformers 5); return_full_text=True
  (the default) puts the prompt as given before it, and for a chat appends an assistant message (or extends the final
  one that was continued);
- prefix (default: model.config.prefix) is put before each str prompt and cut from the text again; stop_sequence
  becomes eos_token_id (its ids); handle_long_generation="hole" cuts the prompt's left to leave room for the new
  tokens; batch_size > 1 pads prompts on the left (the tokenizer's padding_side is set to "left", as there);
- assistant_model (a name or a model) and assistant_tokenizer reach generate(); a draft with another tokenizer
  needs assistant_tokenizer, and generate() then gets tokenizer= and assistant_tokenizer=.
Where this differs, and why, is in docs/generation.md ("pipeline()").
"""

from __future__ import annotations

import collections.abc
import copy
import enum
import itertools
import os
import sys
import types
from typing import TYPE_CHECKING, Any, Optional, Union

import numpy as np

from ..checkpoints.loading import WEIGHT_DTYPES
from ..errors import InvalidInputError
from ..generation import candidate_generator
from ..generation.configuration_utils import GenerationConfig
from ..generation.utils import _REFUSED_ARGUMENTS, GenerationMixin
from ..models.auto import AutoModelForCausalLM
from ..tokenization.tokenization_utils import AutoTokenizer
from ..utils.tensors import cpu_device

if TYPE_CHECKING:
    from ..tokenization.tokenization_utils import PreTrainedTokenizerBase


class ReturnType(enum.Enum):
    """What each record holds: the token ids, the new text only, or the prompt and the new text."""

    TENSORS = 0
    NEW_TEXT = 1
    FULL_TEXT = 2


# Transformers' TextGenerationPipeline._default_generation_config: used where the model's own
# generation_config.json does not set the key.
DEFAULT_GENERATION = {"max_new_tokens": 256, "do_sample": True, "temperature": 0.7}
_GLOBAL_MAX_LENGTH = GenerationConfig().max_length  # 20: a max_length other than it was set on purpose

# The pipeline's own call arguments (Transformers' _sanitize_parameters), by the step that reads them.
_PREPROCESS_ARGS = (
    "prefix",
    "handle_long_generation",
    "add_special_tokens",
    "truncation",
    "padding",
    "max_length",
    "continue_final_message",
    "tokenizer_encode_kwargs",
    "tools",
    "documents",
)
_POSTPROCESS_ARGS = (
    "return_full_text",
    "return_tensors",
    "return_text",
    "return_type",
    "clean_up_tokenization_spaces",
    "skip_special_tokens",
    "continue_final_message",
)
_PIPELINE_ARGS = frozenset(_PREPROCESS_ARGS + _POSTPROCESS_ARGS + ("stop_sequence",))
# generate()'s arguments beside GenerationConfig's fields; those it refuses reach it and raise its message.
_GENERATE_ARGS = frozenset(
    (
        "generation_config",
        "streamer",
        "logits_processor",
        "stopping_criteria",
        "tokenizer",
        "progress",
        "assistant_model",
        "assistant_tokenizer",
    )
) | frozenset(_REFUSED_ARGUMENTS)
# pipeline()'s loading arguments: a pipeline built from a loaded model has nothing to apply them to.
_LOADING_ARGS = (
    "dtype",
    "torch_dtype",
    "device_map",
    "model_kwargs",
    "trust_remote_code",
    "revision",
    "token",
    "use_fast",
    "config",
    "framework",
)
_CHAT_ONLY = ("continue_final_message", "tools", "documents")
_PER_ROW_OUTPUTS = ("scores", "logits", "token_sources")  # what a record gets from return_dict_in_generate=True


def check_cpu(name, value):
    """Raises InvalidInputError unless value names the CPU: None, "cpu", "cpu:0", "auto", -1, torch.device("cpu"),
    or (a device_map) a dict whose values all do."""
    values = value.values() if isinstance(value, dict) else (value,)
    if not all(_is_cpu(v) for v in values):
        raise InvalidInputError(
            f"{name}={value!r}: habana_assist runs models on the CPU, with its own C kernels; "
            f"pass {name}='cpu' or leave it unset (a GPU needs transformers' own pipeline)"
        )


def _is_cpu(value):
    if value is None:
        return True
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, np.integer)):
        return value == -1  # Transformers: -1 is the CPU, 0, 1... are GPU ordinals
    return str(value) in ("cpu", "cpu:0", "auto")


class Chat:
    """One conversation given to the pipeline (Transformers' Chat: it tells a chat from a batch of prompts).
    messages: the list of {"role", "content"} dicts, as given."""

    def __init__(self, messages):
        self.messages = list(messages)
        if not self.messages:
            raise InvalidInputError("a chat needs at least one message ({'role': ..., 'content': ...})")
        for m in self.messages:
            if not (isinstance(m, dict) and "role" in m and ("content" in m or "tool_calls" in m)):
                raise InvalidInputError(
                    f"When passing chat dicts as input, each dict must have a 'role' and 'content' key; got {m!r}"
                )


def _as_items(text_inputs):
    """A call's input -> (items, single): items a list of str or Chat (an iterator of them for a stream: see
    _as_stream), single whether the call returns one input's records."""
    if isinstance(text_inputs, str):
        return [text_inputs], True
    stream = _as_stream(text_inputs)
    if stream is not None:
        return stream
    if not isinstance(text_inputs, (list, tuple)):
        raise InvalidInputError(
            f"the pipeline takes a str, a chat (a list of {{'role', 'content'}} dicts), a list of "
            "them, or a generator, iterator or torch Dataset of them (streamed); got "
            f"{type(text_inputs).__name__}"
        )
    if text_inputs and isinstance(text_inputs[0], dict):
        return [Chat(text_inputs)], True
    return [_as_item(i, item) for i, item in enumerate(text_inputs)], False


def _as_item(i, item):
    """One input of a batch or a stream -> a str or a Chat."""
    if isinstance(item, str):
        return item
    if isinstance(item, (list, tuple)) and item and isinstance(item[0], dict):
        return Chat(item)
    if hasattr(item, "messages"):  # a Conversation-like object (Transformers 4)
        return Chat(item.messages)
    raise InvalidInputError(
        f"input {i} is a {type(item).__name__}: each input must be a str or a chat (a list of "
        "{'role', 'content'} dicts)"
    )


def _as_stream(text_inputs):
    """Transformers' lazy inputs: a generator or a torch Dataset (and here any other iterator, which Transformers
    fails on) -> (an iterator of items, False), whose records the call yields as each batch is generated; None for
    other inputs. A generator whose first item is a message dict is one chat (-> ([Chat], True)), as Transformers
    peeks; an empty generator gives an empty list, as there."""
    torch = sys.modules.get("torch")  # a torch Dataset exists only where the caller imported torch
    data = getattr(torch, "utils", None) and getattr(torch.utils, "data", None)
    if data is not None and isinstance(text_inputs, data.Dataset) and not isinstance(text_inputs, data.IterableDataset):
        iterator = (text_inputs[i] for i in range(len(text_inputs)))
    elif isinstance(text_inputs, (types.GeneratorType, collections.abc.Iterator)) or (
        data is not None and isinstance(text_inputs, data.IterableDataset)
    ):
        iterator = iter(text_inputs)
    else:
        return None
    try:
        first = next(iterator)
    except StopIteration:
        return [], False
    if isinstance(first, dict):  # a generator of messages: one chat
        return [Chat([first, *iterator])], True
    return (_as_item(i, item) for i, item in enumerate(itertools.chain([first], iterator))), False


def _positive_or_none(name, value):
    if value is not None and (
        isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1
    ):
        raise InvalidInputError(f"{name}={value!r} must be a positive integer or None")


class TextGenerationPipeline:
    """Transformers' TextGenerationPipeline over a habana_assist model: pipe(text_inputs, **kwargs) -> records.

    model: a habana_assist model (AutoModelForCausalLM.from_pretrained, ha.wrap(torch_model)); tokenizer: its
    tokenizer (required); task: "text-generation"; device: the CPU only (see check_cpu); batch_size: prompts
    generated together (default 1); assistant_model: a draft model, or its name (loaded as model.weight_dtype, with
    its tokenizer); assistant_tokenizer: the draft's tokenizer, needed where its vocabulary differs. Other
    keyword arguments are call arguments (below) that become this pipeline's defaults; GenerationConfig fields
    among them go into self.generation_config.

    A call's arguments:
    - text_inputs: a str, a chat (list of {"role", "content"} dicts), or a list (tuple) of them, whose records
      come back as a list; or a generator, iterator or torch Dataset of them, whose records come back lazily (a
      generator that generates each batch when it is reached, as Transformers' PipelineIterator);
    - return_full_text (default True), return_text, return_tensors (records of "generated_token_ids": the whole
      sequence, prompt and new tokens, as a list of ints), return_type (a ReturnType), skip_special_tokens
      (default True), clean_up_tokenization_spaces (default: the tokenizer's own setting);
    - prefix, handle_long_generation (None or "hole"), stop_sequence, add_special_tokens (str prompts; default:
      the tokenizer's), truncation, padding, max_length (the tokenizer's and generate()'s),
      tokenizer_encode_kwargs, and for chats continue_final_message, tools, documents;
    - batch_size, num_workers (None, 0 or 1: inputs are tokenized in the calling thread);
    - every generate() argument (max_new_tokens, do_sample, seed, num_return_sequences, generation_config,
      streamer, logits_processor, stop_strings...), passed through.
    Unknown arguments raise InvalidInputError naming them.

    -> for a single input, a list of num_return_sequences dicts; for a list of inputs, a list of such lists."""

    def __init__(
        self,
        model: GenerationMixin,
        tokenizer: Optional[PreTrainedTokenizerBase] = None,
        task: str = "text-generation",
        device: Any = None,
        batch_size: Optional[int] = None,
        num_workers: Optional[int] = None,
        assistant_model: Union[GenerationMixin, str, None] = None,
        assistant_tokenizer: Optional[PreTrainedTokenizerBase] = None,
        **kwargs: Any,
    ) -> None:
        if task not in ("", "text-generation"):
            raise InvalidInputError(f"task={task!r}: TextGenerationPipeline runs 'text-generation' only")
        if not isinstance(model, GenerationMixin):
            raise InvalidInputError(
                f"model must be a habana_assist model (AutoModelForCausalLM.from_pretrained, or "
                f"ha.wrap(torch_model)), or its name given to pipeline(); got "
                f"{type(model).__name__}"
            )
        if tokenizer is None:
            raise InvalidInputError(
                "TextGenerationPipeline needs a tokenizer: pass tokenizer= (a tokenizer from "
                "AutoTokenizer.from_pretrained, or its name given to pipeline())"
            )
        loading = [k for k in _LOADING_ARGS if k in kwargs]
        if loading:
            raise InvalidInputError(
                f"{', '.join(loading)}: loading arguments, which apply when pipeline() loads the "
                "model from its name; the model here is already loaded"
            )
        check_cpu("device", device)
        _positive_or_none("batch_size", batch_size)
        self._check_num_workers(num_workers)
        self.task = "text-generation"
        self.model = model
        self.tokenizer = tokenizer
        self._batch_size = batch_size
        self._num_workers = num_workers
        # Transformers does this too: decoder-only models need left padding to generate from a batch
        if getattr(tokenizer, "padding_side", "left") == "right":
            tokenizer.padding_side = "left"
        self.assistant_model, self.assistant_tokenizer = self._load_assistant(assistant_model, assistant_tokenizer)
        self.prefix = getattr(model.config, "prefix", None)
        fields = self._config_fields()  # absorbed into the pipeline's config, as in Transformers (max_length too)
        generation = {k: kwargs.pop(k) for k in list(kwargs) if k in fields}
        self._user_generation = set(generation)
        self.generation_config, self._defaulted = self._prepare_generation_config(generation)
        self._preprocess_params, self._forward_params, self._postprocess_params = self._sanitize_parameters(**kwargs)
        if "prefix" not in self._preprocess_params and self.prefix:
            add = self._preprocess_params.get("add_special_tokens", False)
            self._preprocess_params["prefix"] = self.prefix
            self._forward_params["prefix_length"] = self._prefix_length(self.prefix, add)

    def __repr__(self) -> str:
        assistant = "" if self.assistant_model is None else f", assistant_model={self.assistant_model!r}"
        return f"{type(self).__name__}(model={self.model!r}{assistant}, tokenizer={self.tokenizer!r})"

    @property
    def device(self) -> Any:
        """Where the model runs: torch.device("cpu") where torch is importable (as Transformers' pipelines), else
        CPUDevice ("cpu"), as model.device."""
        return cpu_device()

    # ---- construction ------------------------------------------------------------------------------------

    @staticmethod
    def _check_num_workers(num_workers):
        if num_workers not in (None, 0, 1) or isinstance(num_workers, bool):
            raise InvalidInputError(
                f"num_workers={num_workers!r}: inputs are tokenized in the calling thread here "
                "(generation itself runs on the core's threads, ha.set_num_threads); pass None, "
                "0 or 1"
            )

    def _config_fields(self):
        """The names generate() reads from a GenerationConfig: its fields, and the model's own extra keys."""
        names = set(GenerationConfig().__dict__) | set(self.model.generation_config.__dict__)
        return {n for n in names if not n.startswith("_")}

    def _load_assistant(self, assistant_model, assistant_tokenizer):
        """Transformers' load_assistant_model -> (assistant model or None, its tokenizer where generate() needs
        it: where its vocabulary or special tokens differ from model's, or where one was passed)."""
        if assistant_model is None:
            if assistant_tokenizer is not None:
                raise InvalidInputError(
                    "assistant_tokenizer= is the tokenizer of assistant_model: pass "
                    "assistant_model= too, or leave assistant_tokenizer unset"
                )
            return None, None
        if isinstance(assistant_tokenizer, (str, os.PathLike)):
            assistant_tokenizer = AutoTokenizer.from_pretrained(assistant_tokenizer)
        loaded_tokenizer = assistant_tokenizer
        if isinstance(assistant_model, (str, os.PathLike)):
            # Transformers moves the assistant to model's dtype; here it is held as model's matrices are (int8 too)
            held = getattr(self.model, "weight_dtype", None)
            assistant = AutoModelForCausalLM.from_pretrained(
                assistant_model, dtype=held if held in WEIGHT_DTYPES else None
            )
            if loaded_tokenizer is None:
                loaded_tokenizer = AutoTokenizer.from_pretrained(assistant_model)
        else:
            assistant = candidate_generator.as_assistant(assistant_model, GenerationMixin)
            if not isinstance(assistant, GenerationMixin):
                raise InvalidInputError(
                    f"assistant_model must be a model (AutoModelForCausalLM.from_pretrained, "
                    f"ha.wrap(torch_model)) or its name; got {type(assistant_model).__name__}"
                )
        same_vocab = assistant.config.vocab_size == self.model.config.vocab_size
        same_special = all(
            getattr(assistant.config, t, None) == getattr(self.model.config, t, None)
            for t in ("eos_token_id", "pad_token_id", "bos_token_id")
        )
        if same_vocab and same_special:
            return assistant, assistant_tokenizer  # the one given, if any: generate() compares the vocabularies
        if loaded_tokenizer is None:
            raise InvalidInputError(
                "The assistant model has a different tokenizer than the main model (vocab_size "
                f"{assistant.config.vocab_size} vs {self.model.config.vocab_size}, or its special "
                "tokens): pass assistant_tokenizer= (the assistant's tokenizer or its name)"
            )
        return assistant, loaded_tokenizer

    def _prepare_generation_config(self, user):
        """-> (the pipeline's GenerationConfig, the keys holding DEFAULT_GENERATION's values). Priority, as
        Transformers states it: user's arguments > the model's generation config > the pipeline's defaults."""
        model_config = self.model.generation_config
        gc = GenerationConfig(**model_config.to_dict())
        set_by_model = set(model_config.to_diff_dict())
        defaulted = set()
        for key, value in DEFAULT_GENERATION.items():
            if key not in set_by_model:
                setattr(gc, key, value)
                defaulted.add(key)
        gc.update(**user)
        defaulted -= set(user)
        # Transformers: a max_length set on purpose (not the global 20) wins over the pipeline's max_new_tokens;
        # here also over the model's, where the user set max_length (the user's arguments come first)
        if (
            "max_new_tokens" not in user
            and gc.max_length is not None
            and gc.max_length != _GLOBAL_MAX_LENGTH
            and ("max_new_tokens" in defaulted or "max_length" in user)
        ):
            gc.max_new_tokens = None
            defaulted.discard("max_new_tokens")
        task_params = getattr(self.model.config, "task_specific_params", None)  # legacy, e.g. GPT-2's config.json
        if isinstance(task_params, dict) and isinstance(task_params.get("text-generation"), dict):
            params = dict(task_params["text-generation"])
            if "prefix" in params:
                self.prefix = params.pop("prefix")
            params = {k: v for k, v in params.items() if k not in user}
            gc.update(**params)
            defaulted -= set(params)
        if gc.pad_token_id is None and getattr(self.tokenizer, "pad_token_id", None) is not None:
            gc.pad_token_id = self.tokenizer.pad_token_id
        settled = self._settle(gc, {}, defaulted, set(user))
        settled.validate()
        settled.check_supported()
        return gc, defaulted

    @staticmethod
    def _settle(gc, call_kwargs, defaulted, user):
        """A copy of gc for a call with call_kwargs: where the call is greedy, the pipeline's default temperature (a
        sampling knob the user did not set) goes back to 1.0, so that generate() has no unused knob to warn about;
        where the call sets max_length but not max_new_tokens, and the user (keys `user`, given at construction)
        did not set max_new_tokens either, max_length decides the length (Transformers would let the default
        max_new_tokens win, with a warning)."""
        gc = copy.deepcopy(gc)
        if "max_length" in call_kwargs and "max_new_tokens" not in call_kwargs and "max_new_tokens" not in user:
            gc.max_new_tokens = None
        greedy = call_kwargs.get("do_sample", gc.do_sample) is not True
        if greedy and "temperature" in defaulted and "temperature" not in call_kwargs:
            gc.temperature = GenerationConfig().temperature
        return gc

    # ---- arguments ---------------------------------------------------------------------------------------

    def _prefix_length(self, prefix, add_special_tokens):
        return len(self.tokenizer(prefix, add_special_tokens=bool(add_special_tokens))["input_ids"])

    def _sanitize_parameters(self, **kwargs):
        """A call's (or the constructor's) keyword arguments -> (preprocess, forward, postprocess) parameters;
        InvalidInputError for an argument that is none of the pipeline's or generate()'s."""
        fields = self._config_fields()
        unknown = sorted(k for k in kwargs if k not in _PIPELINE_ARGS and k not in _GENERATE_ARGS and k not in fields)
        if unknown:
            raise InvalidInputError(
                f"{', '.join(unknown)}: not an argument of the text-generation pipeline nor of generate(); check the "
                f"spelling. The pipeline takes {', '.join(sorted(_PIPELINE_ARGS))}, batch_size, and generate()'s "
                "arguments (GenerationConfig's fields, generation_config, streamer, logits_processor, "
                "stopping_criteria, assistant_model...)"
            )
        preprocess, postprocess = {}, {}
        generate = {k: v for k, v in kwargs.items() if k not in _PIPELINE_ARGS}
        for key in ("add_special_tokens", "padding", "tools", "documents"):
            if key in kwargs:
                preprocess[key] = kwargs[key]
        if kwargs.get("truncation") is not None:
            preprocess["truncation"] = kwargs["truncation"]
        if kwargs.get("max_length") is not None:  # the tokenizer's and generate()'s, as in Transformers
            preprocess["max_length"] = generate["max_length"] = kwargs["max_length"]
        encode_kwargs = kwargs.get("tokenizer_encode_kwargs")
        if encode_kwargs is not None:
            if not isinstance(encode_kwargs, dict):
                raise InvalidInputError(f"tokenizer_encode_kwargs must be a dict, got {type(encode_kwargs).__name__}")
            preprocess["tokenizer_encode_kwargs"] = encode_kwargs
        prefix = kwargs.get("prefix")
        if prefix is not None:
            if not isinstance(prefix, str):
                raise InvalidInputError(f"prefix must be a str, got {type(prefix).__name__}")
            preprocess["prefix"] = prefix  # "" turns off a prefix given before (or the model config's)
            generate["prefix_length"] = (
                self._prefix_length(prefix, kwargs.get("add_special_tokens", False)) if prefix else 0
            )
        long_generation = kwargs.get("handle_long_generation")
        if long_generation is not None:
            if long_generation != "hole":
                raise InvalidInputError(
                    f"{long_generation!r} is not a valid value for `handle_long_generation` "
                    "parameter expected [None, 'hole']"
                )
            preprocess["handle_long_generation"] = long_generation
        if kwargs.get("continue_final_message") is not None:
            preprocess["continue_final_message"] = postprocess["continue_final_message"] = kwargs[
                "continue_final_message"
            ]
        stop_sequence = kwargs.get("stop_sequence")
        if stop_sequence is not None:
            ids = self.tokenizer.encode(stop_sequence, add_special_tokens=False)
            if not ids:
                raise InvalidInputError(f"stop_sequence={stop_sequence!r} encodes to no token; pass a non-empty str")
            generate["eos_token_id"] = list(ids)  # Transformers 5: each of its tokens ends a sequence
        return_type = self._return_type(kwargs)
        if return_type is not None:
            postprocess["return_type"] = return_type
        for key in ("clean_up_tokenization_spaces", "skip_special_tokens"):
            if kwargs.get(key) is not None:
                postprocess[key] = kwargs[key]
        assistant = generate.get("assistant_model")
        if isinstance(assistant, (str, os.PathLike)):
            raise InvalidInputError(
                "assistant_model as a name is loaded once, when the pipeline is built: pass it to "
                "pipeline(..., assistant_model=name), or pass a loaded model to the call"
            )
        return preprocess, generate, postprocess

    @staticmethod
    def _return_type(kwargs):
        """Transformers' return_full_text / return_text / return_tensors / return_type rules -> a ReturnType or
        None (the default, FULL_TEXT)."""
        return_type = kwargs.get("return_type")
        full, text, tensors = (kwargs.get(k) for k in ("return_full_text", "return_text", "return_tensors"))
        if return_type is not None:
            if not isinstance(return_type, ReturnType):
                raise InvalidInputError(f"return_type={return_type!r} must be a ReturnType")
            return return_type
        if full is not None:
            if text is not None:
                raise InvalidInputError("`return_text` is mutually exclusive with `return_full_text`")
            if tensors:
                raise InvalidInputError("`return_full_text` is mutually exclusive with `return_tensors`")
            return ReturnType.FULL_TEXT if full else ReturnType.NEW_TEXT
        if tensors:
            if text:
                raise InvalidInputError("`return_text` is mutually exclusive with `return_tensors`")
            return ReturnType.TENSORS
        if text is False:
            raise InvalidInputError(
                "return_text=False leaves nothing to return; pass return_tensors=True for the "
                "token ids, or leave return_text unset"
            )
        return None

    # ---- a call ------------------------------------------------------------------------------------------

    def __call__(
        self,
        text_inputs: Any,
        *args: Any,
        batch_size: Optional[int] = None,
        num_workers: Optional[int] = None,
        **kwargs: Any,
    ) -> Any:
        """Completes each prompt or chat; see the class docstring for the arguments and the result (a list of
        records, a list of such lists, or a generator of them: Any, so that a caller indexes it as it knows)."""
        if args:
            raise InvalidInputError(
                f"the pipeline takes one positional argument (the inputs), got {1 + len(args)}; "
                "pass a list of prompts, and other arguments by name"
            )
        _positive_or_none("batch_size", batch_size)
        self._check_num_workers(num_workers)
        preprocess, forward, postprocess = self._sanitize_parameters(**kwargs)
        preprocess = {**self._preprocess_params, **preprocess}
        forward = {**self._forward_params, **forward}
        postprocess = {**self._postprocess_params, **postprocess}
        batch_size = batch_size or self._batch_size or 1
        if batch_size > 1 and self.tokenizer.pad_token_id is None:
            raise InvalidInputError(
                "Pipeline with tokenizer without pad_token cannot do batching. You can try to set "
                "it with `pipe.tokenizer.pad_token_id = model.config.eos_token_id`, or pass "
                "batch_size=1"
            )
        items, single = _as_items(text_inputs)
        if not isinstance(items, list):  # lazy, as Transformers' PipelineIterator: each batch generated when reached
            return self._records(items, batch_size, kwargs, preprocess, forward, postprocess)
        self._check_applies(items, kwargs)
        records = list(self._records(items, batch_size, None, preprocess, forward, postprocess))
        return records[0] if single else records

    def _records(self, items, batch_size, kwargs, preprocess, forward, postprocess):
        """Each input's records, batch after batch of batch_size inputs (items: a list, or an iterator read one
        batch at a time). kwargs: the call's, for a stream, whose chat-only arguments are checked against all of its
        inputs once it ends (_check_applies); None where they were checked before."""
        items, seen = iter(items), {}
        while True:
            batch = list(itertools.islice(items, batch_size))
            if not batch:
                break
            seen.update((type(item), item) for item in batch)  # one input of each kind
            encoded = [self.preprocess(item, **{**forward, **preprocess}) for item in batch]
            yield from (self.postprocess(out, **postprocess) for out in self._forward(encoded, **forward))
        if kwargs is not None:
            self._check_applies(list(seen.values()), kwargs)

    @staticmethod
    def _check_applies(items, kwargs):
        """A call's chat-only arguments with no chat, or a prefix with no str prompt, would change nothing."""
        if not any(isinstance(item, Chat) for item in items):
            given = [k for k in _CHAT_ONLY if kwargs.get(k) is not None]
            if given and items:
                raise InvalidInputError(
                    f"{', '.join(given)} apply to chats only, and this call has none; pass chats "
                    "(lists of {'role', 'content'} dicts) or leave them unset"
                )
        if kwargs.get("prefix") and items and not any(isinstance(item, str) for item in items):
            raise InvalidInputError(
                "prefix applies to str prompts only, and this call has none; for a chat, put it in a message"
            )

    def preprocess(
        self,
        prompt_text: Any,
        prefix: str = "",
        handle_long_generation: Optional[str] = None,
        add_special_tokens: Optional[bool] = None,
        truncation: Union[bool, str, None] = None,
        padding: Union[bool, str, None] = None,
        max_length: Optional[int] = None,
        continue_final_message: Optional[bool] = None,
        tokenizer_encode_kwargs: Optional[dict[str, Any]] = None,
        tools: Any = None,
        documents: Any = None,
        **generate_kwargs: Any,
    ) -> dict[str, Any]:
        """One input -> {"input_ids": int64 (1, S), "attention_mask": int64 (1, S), "prompt_text": the input}: a
        str (prefix + it) through the tokenizer, a Chat through its chat template."""
        tokenizer_kwargs: dict[str, Any] = {
            "add_special_tokens": add_special_tokens,
            "truncation": truncation,
            "padding": padding,
            "max_length": max_length,
        }
        tokenizer_kwargs = {k: v for k, v in tokenizer_kwargs.items() if v is not None}
        tokenizer_kwargs.update(tokenizer_encode_kwargs or {})
        if isinstance(prompt_text, Chat):
            tokenizer_kwargs.pop("add_special_tokens", None)  # the template writes them (Transformers ignores it too)
            if continue_final_message is None:  # a chat ending in the assistant's message is a prefill
                continue_final_message = prompt_text.messages[-1]["role"] == "assistant"
            inputs = self.tokenizer.apply_chat_template(
                prompt_text.messages,
                add_generation_prompt=not continue_final_message,
                continue_final_message=continue_final_message,
                return_dict=True,
                return_tensors="np",
                tools=tools,
                documents=documents,
                **tokenizer_kwargs,
            )
        else:
            inputs = self.tokenizer((prefix or "") + prompt_text, return_tensors="np", **tokenizer_kwargs)
        ids = np.asarray(inputs["input_ids"], dtype=np.int64).reshape(1, -1)
        mask = inputs.get("attention_mask") if hasattr(inputs, "get") else None
        mask = np.ones_like(ids) if mask is None else np.asarray(mask, dtype=np.int64).reshape(1, -1)
        if handle_long_generation == "hole":
            ids, mask = self._hole(ids, mask, generate_kwargs)
        return {"input_ids": ids, "attention_mask": mask, "prompt_text": prompt_text}

    def _hole(self, ids, mask, generate_kwargs):
        """Transformers' handle_long_generation="hole": keep the prompt's last tokens, so that they and the new ones
        fit the model (here the smaller of the tokenizer's model_max_length and the model's max_cache_len)."""
        cur_len = ids.shape[1]
        gc = generate_kwargs.get("generation_config") or self._settle(
            self.generation_config, generate_kwargs, self._defaulted, self._user_generation
        )  # as _forward's
        new_tokens = generate_kwargs.get("max_new_tokens", gc.max_new_tokens)
        if new_tokens is None:
            new_tokens = generate_kwargs.get("max_length", gc.max_length) - cur_len
            if new_tokens < 0:
                raise InvalidInputError("We cannot infer how many new tokens are expected: pass max_new_tokens")
        limit = min(self.tokenizer.model_max_length, self.model.max_cache_len)
        if cur_len + new_tokens > limit:
            keep = limit - new_tokens
            if keep <= 0:
                raise InvalidInputError(
                    f"We cannot use `hole` to handle this generation: max_new_tokens={new_tokens} "
                    f"exceeds the model's maximum length ({limit}); lower max_new_tokens"
                )
            ids, mask = ids[:, -keep:], mask[:, -keep:]
        return ids, mask

    def _forward(self, encoded, **generate_kwargs):
        """Prompts from preprocess() -> one generate() call over them, left-padded -> for each prompt
        {"generated_sequence": int64 (num_return_sequences, its prompt + new; left padding cut off), "input_ids":
        its prompt (1, S) or None where it was empty, "prompt_text", "additional_outputs": {name: per-row arrays}}."""
        kwargs = dict(generate_kwargs)
        prefix_length = kwargs.pop("prefix_length", 0)
        gc = kwargs.pop("generation_config", None)
        if gc is None:
            gc = self._settle(self.generation_config, kwargs, self._defaulted, self._user_generation)
        if prefix_length > 0:  # Transformers: a length counted in tokens from the start grows by the prefix's
            if kwargs.get("max_new_tokens", gc.max_new_tokens) is None:
                kwargs["max_length"] = (kwargs.get("max_length") or gc.max_length) + prefix_length
            if kwargs.get("min_new_tokens", gc.min_new_tokens) is None and "min_length" in kwargs:
                kwargs["min_length"] += prefix_length
        if "assistant_model" not in kwargs and self.assistant_model is not None:
            kwargs["assistant_model"] = self.assistant_model
            if self.assistant_tokenizer is not None:
                kwargs["assistant_tokenizer"] = self.assistant_tokenizer
        kwargs.setdefault("tokenizer", self.tokenizer)  # for stop_strings, a draft's other tokenizer, the view
        prompts = []
        for item in encoded:
            ids, mask = item["input_ids"], item["attention_mask"]
            if ids.shape[1] == 0:  # Transformers generates from bos_token_id when the prompt is empty
                bos = (
                    gc.bos_token_id if gc.bos_token_id is not None else getattr(self.model.config, "bos_token_id", None)
                )
                if bos is None:
                    raise InvalidInputError(
                        "the prompt is empty and the model has no bos_token_id to start from; pass a non-empty prompt"
                    )
                ids, mask = np.array([[int(bos)]], dtype=np.int64), np.ones((1, 1), dtype=np.int64)
            prompts.append((ids, mask))
        width = max(ids.shape[1] for ids, _ in prompts)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        batch_ids = np.full((len(prompts), width), pad, dtype=np.int64)
        batch_mask = np.zeros((len(prompts), width), dtype=np.int64)
        for row, (ids, mask) in enumerate(prompts):
            batch_ids[row, width - ids.shape[1] :] = ids[0]
            batch_mask[row, width - ids.shape[1] :] = mask[0]
        out = self.model.generate(input_ids=batch_ids, attention_mask=batch_mask, generation_config=gc, **kwargs)
        sequences = np.asarray(getattr(out, "sequences", out))
        per_row = {}
        if hasattr(out, "sequences"):
            for name in _PER_ROW_OUTPUTS:
                value = getattr(out, name, None)
                if isinstance(value, tuple) and value:  # one (rows, vocab) array per step -> (rows, steps, vocab)
                    per_row[name] = np.stack([np.asarray(v) for v in value], axis=1)
                elif value is not None and not isinstance(value, tuple):
                    per_row[name] = np.asarray(value)
        n_return = sequences.shape[0] // len(prompts)
        results = []
        for row, item in enumerate(encoded):
            rows = slice(row * n_return, (row + 1) * n_return)
            cut = width - prompts[row][0].shape[1]
            results.append(
                {
                    "generated_sequence": sequences[rows, cut:],
                    "input_ids": item["input_ids"] if item["input_ids"].shape[1] else None,
                    "prompt_text": item["prompt_text"],
                    "additional_outputs": {name: value[rows] for name, value in per_row.items()},
                }
            )
        return results

    def postprocess(
        self,
        model_outputs: dict[str, Any],
        return_type: ReturnType = ReturnType.FULL_TEXT,
        clean_up_tokenization_spaces: Optional[bool] = None,
        continue_final_message: Optional[bool] = None,
        skip_special_tokens: Optional[bool] = None,
    ) -> list[dict[str, Any]]:
        """One prompt's outputs -> its records, one dict per returned sequence: {"generated_token_ids": list of int}
        or {"generated_text": str, or for a chat the messages}, plus, with return_dict_in_generate=True, that
        row's scores / logits (steps, vocab) and token_sources (steps,) as lists."""
        skip = True if skip_special_tokens is None else skip_special_tokens
        input_ids = model_outputs["input_ids"]
        prompt_text = model_outputs["prompt_text"]
        prompt_length = (
            0
            if input_ids is None
            else len(
                self.tokenizer.decode(
                    input_ids[0], skip_special_tokens=skip, clean_up_tokenization_spaces=clean_up_tokenization_spaces
                )
            )
        )
        extras = model_outputs.get("additional_outputs", {})
        records = []
        for idx, sequence in enumerate(model_outputs["generated_sequence"].tolist()):
            if return_type == ReturnType.TENSORS:
                records.append({"generated_token_ids": sequence})
                continue
            text = self.tokenizer.decode(
                sequence, skip_special_tokens=skip, clean_up_tokenization_spaces=clean_up_tokenization_spaces
            )
            new_text = text[prompt_length:]
            if return_type == ReturnType.FULL_TEXT:
                new_text = self._full(prompt_text, new_text, continue_final_message)
            record = {"generated_text": new_text}
            for name, values in extras.items():
                record[name] = values[idx].tolist()
            records.append(record)
        return records

    @staticmethod
    def _full(prompt_text, new_text, continue_final_message):
        """The prompt as given and the new text: a str, or for a chat its messages with the new assistant message
        (or, when the final message was continued, that message extended)."""
        if isinstance(prompt_text, str):
            return prompt_text + new_text
        messages = list(prompt_text.messages)
        if continue_final_message is None:
            continue_final_message = messages[-1]["role"] == "assistant"
        if continue_final_message:
            last = messages[-1]
            return messages[:-1] + [{"role": last["role"], "content": last["content"] + new_text}]
        return messages + [{"role": "assistant", "content": new_text}]
