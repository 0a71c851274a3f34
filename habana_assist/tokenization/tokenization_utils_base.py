"""Tokenizers in a Hugging Face checkpoint directory, with Transformers' call conventions, over two backends.

AutoTokenizer.from_pretrained(path) reads tokenizer.json (Hugging Face tokenizers' format, through
habana_assist.tokenizer_json) where the directory has one, as Transformers' fast tokenizer does, else SentencePiece's
tokenizer.model (through Debian's python3-sentencepiece); use_fast=False picks tokenizer.model where both exist.
Both read tokenizer_config.json and special_tokens_map.json (special tokens, add_bos_token/add_eos_token,
padding_side, truncation_side, model_max_length, clean_up_tokenization_spaces, chat_template) and give the same
surface, written once in PreTrainedTokenizerBase: __call__ (texts, pairs, padding, truncation, tensors) and its old
names encode_plus / batch_encode_plus, pad, encode, decode, batch_decode, the token/id conversions, the
special-token attributes, add_tokens / add_special_tokens, save_pretrained and apply_chat_template. The backends
supply text -> ids, the special tokens around them, and ids -> text:

    LlamaTokenizer            tokenizer.model: Transformers' slow LlamaTokenizer: added and special tokens split
                              out of the text (its tokens trie), sentencepiece's ids between them; added tokens get
                              ids after the model's pieces
    PreTrainedTokenizerFast   tokenizer.json: ids exactly Rust tokenizers' (TokenizerJSON), the post-processor as
                              Transformers leaves it (add_bos_token/add_eos_token rewrite it as its Llama/Gemma
                              classes do); added tokens from tokenizer_config.json join the vocabulary

Where the backends' Transformers counterparts differ (the slow and the fast tokenizer), each keeps its own:
truncation of pairs (the slow one-token-at-a-time rule, the fast length split), which ids decode() skips (all
special tokens set on the tokenizer, or the special added tokens of tokenizer.json), what split_special_tokens
leaves unsplit (every added token, or the special ones), and whether add_tokens(..., special_tokens=True) lists the
tokens in additional_special_tokens (the slow one does). save_pretrained(directory)
writes the files back, so that from_pretrained(directory) encodes and decodes alike.

This module is the bottom layer of the package's tokenizers: BatchEncoding and PreTrainedTokenizerBase, with the
loading (from_pretrained) every backend inherits; reading and writing the files (tokenizer_config.json,
special_tokens_map.json) is tokenizer_files.py's. The backends build on it: tokenization_spm.py (LlamaTokenizer and
its protobuf helpers) and tokenization_fast.py (PreTrainedTokenizerFast and its tokenizer_config.json handling);
tokenization_utils.py above them holds AutoTokenizer, which picks a backend and delegates to its from_pretrained, and
re-exports every name, so `from habana_assist.tokenization.tokenization_utils import LlamaTokenizer` keeps working.
"""

from __future__ import annotations

import copy
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union, overload

import numpy as np

from ..errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from ..utils.tensors import import_torch, is_torch_tensor, to_numpy
from ..utils.types import PathLike, TokenIds
from .tokenizer_files import (
    _NULL_WHEN_UNSET,
    _SPECIAL_NAMES,
    _TOKEN_ARGUMENTS,
    CHAT_TEMPLATE_FILE,
    SPECIAL_TOKENS_MAP_FILE,
    TOKENIZER_CONFIG_FILE,
    _chat_template,
    _flag,
    _json_bytes,
    _read_directory,
    _token_spec,
    _token_text,
    _write_file,
)
from .tokenizer_json import AddedToken, _encodable

__all__ = ["AddedToken", "BatchEncoding", "PreTrainedTokenizerBase", "clean_up_tokenization"]

_Tokenizer = TypeVar("_Tokenizer", bound="PreTrainedTokenizerBase")
# What __call__ encodes: a text, a batch of texts, or of (text, pair) tuples.
_TextInput = Union[str, Sequence[str], Sequence[tuple[str, str]]]
_Token = Union[str, AddedToken]

_DEFAULT_MAX_LENGTH = 1 << 30  # LlamaTokenizer's model_max_length when tokenizer_config.json has none
_VERY_LARGE_INTEGER = int(1e30)  # Transformers' "no limit" (PreTrainedTokenizerFast's default model_max_length)
_LARGE_INTEGER = int(1e20)  # above this, Transformers treats model_max_length as "no limit" for padding/truncation
# Truncation and padding strategies, Transformers' names; True means the first of each.
_TRUNCATIONS = ("longest_first", "only_first", "only_second", "do_not_truncate")
_PADDINGS = ("longest", "max_length", "do_not_pad")
# Transformers' clean_up_tokenization: (written, cleaned), applied in this order with str.replace.
_CLEANUPS = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # habana_assist/


def _stacklevel_outside_package():
    """warnings.warn's stacklevel, for a warning given by the function that calls this one, that reports the first
    frame outside the package: the user's line (tok(...), tok.encode(...), apply_chat_template(...))."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def clean_up_tokenization(text: str) -> str:
    """Transformers' clean_up_tokenization: drops the space English tokenizers put before punctuation and
    contractions (" ." -> ".", " n't" -> "n't", ...). decode() applies it where clean_up_tokenization_spaces."""
    for written, cleaned in _CLEANUPS:
        text = text.replace(written, cleaned)
    return text


class BatchEncoding(dict[str, Any]):
    """{"input_ids": ..., "attention_mask": ...} that also reads as attributes, so generate(**inputs) works."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device: Any) -> BatchEncoding:
        """Transformers' inputs.to(model.device): torch tensors moved with their .to(device); numpy arrays and
        lists live on the CPU, so only "cpu" is accepted for them."""
        out = BatchEncoding()
        for key, value in self.items():
            if is_torch_tensor(value):
                out[key] = value.to(device)
            elif str(device) != "cpu":
                raise InvalidInputError(
                    f"BatchEncoding.to({device!r}): {key} is not a torch tensor and stays on the "
                    "CPU; this package computes on the CPU: use .to('cpu') or leave .to() out"
                )
            else:
                out[key] = value
        return out


class _SpecialToken:
    """The attributes bos_token / bos_token_id (and eos, unk, pad), linked as in Transformers' SpecialTokensMixin:
    one stored token text per name; the *_id attribute reads its id and sets it by id. Only tokens the tokenizer
    has are accepted (the model's embedding cannot grow to meet a new one)."""

    def __init__(self, name: str, as_id: bool) -> None:
        self.name, self.as_id = name, as_id

    def __get__(self, tok: Any, owner: Any = None) -> Any:
        if tok is None:
            return self
        text = tok._special_tokens[self.name]
        if not self.as_id or text is None:
            return text
        return tok._token_to_id(text)

    def __set__(self, tok: Any, value: Any) -> None:
        before = tok._special_tokens[self.name]
        tok._special_tokens[self.name] = (
            tok._token_of_id(self.name, value) if self.as_id else tok._known_token(self.name, value)
        )
        try:
            tok._special_tokens_changed()
        except InvalidInputError:  # e.g. bos_token = None while add_bos_token: refused, nothing changed
            tok._special_tokens[self.name] = before
            raise


def _int_list(ids, what):
    """ids (an int, a list, a 1-D numpy array or torch tensor) -> list of int; InvalidInputError otherwise."""
    a = to_numpy(ids, what)[0] if is_torch_tensor(ids) else np.asarray(ids)
    if a.dtype == object or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InvalidInputError(f"{what} must be integers, got dtype {a.dtype}")
    return [int(i) for i in a.reshape(-1)]


class PreTrainedTokenizerBase:
    """The Transformers surface both backends share. A backend provides:

        _text_ids(text, split_special_tokens) -> [id]   the text's tokens (added tokens split out of it unless
                                                   split_special_tokens says otherwise), no special tokens around
        _tokens_to_string([token]) -> str          convert_tokens_to_string
        _post_process(ids, pair_ids, add_special_tokens) -> (ids, type_ids)   the special tokens put around them
        num_special_tokens_to_add(pair=False) -> int
        _decode_ids([id], skip_special_tokens) -> str                         (ids checked in range)
        _token_to_id(text) -> id or None ; _id_to_token(id) -> str
        vocab_size, __len__, get_vocab(), added_tokens_decoder, _add_new_tokens(specs) -> number new,
        _files_to_save()
        _FILE (the file it reads) and __init__(path of _FILE, config, special_tokens_map, arguments)
    and sets in __init__: _special_tokens {name: text or None}, _additional_special_tokens [text],
    padding_side, truncation_side, model_max_length, clean_up_tokenization_spaces, split_special_tokens, chat_template,
    model_input_names.
    """

    @classmethod
    def from_pretrained(
        cls: type[_Tokenizer], pretrained_model_name_or_path: PathLike, *inputs: Any, **kwargs: Any
    ) -> _Tokenizer:
        """A directory (or a shipped model's name) with this backend's file -> the tokenizer
        (PreTrainedTokenizerFast reads tokenizer.json, LlamaTokenizer tokenizer.model).

        Args:
            pretrained_model_name_or_path: a local directory, a shipped name ("habana-assist/pycode") or a Hub
                repo id ("org/name"), resolved as every from_pretrained resolves a name (checkpoints/hub.py).
            *inputs: refused: Transformers' *init_inputs, which it hands to the tokenizer's __init__; pass
                keyword arguments.
            **kwargs: the arguments AutoTokenizer.from_pretrained takes: padding_side, model_max_length, the
                special tokens, add_prefix_space, legacy...; the hub arguments cache_dir, force_download,
                local_files_only, token, revision (and subfolder, proxies), as Transformers' own parameters take
                them; trust_remote_code, accepted (no code from a checkpoint is ever run). Anything else raises
                InvalidInputError naming it.

        Returns:
            An instance of this class.

        Raises:
            CheckpointNotFoundError: no such directory, name or repo, or no file of this backend in it (use
                AutoTokenizer.from_pretrained, which picks the file).
            CheckpointError: a malformed tokenizer file or tokenizer_config.json; the message names the file.
            InvalidInputError: an argument that is unknown, out of range or of the wrong type.
        """
        directory, config, special_map, overrides = _read_directory(pretrained_model_name_or_path, inputs, kwargs)
        path = os.path.join(directory, cls._FILE)
        if not os.path.exists(path):
            raise CheckpointNotFoundError(
                f"{directory}: no {cls._FILE}, which {cls.__name__} reads; use "
                "AutoTokenizer.from_pretrained, which reads tokenizer.json or "
                "tokenizer.model"
            )
        tok = cls(path, config, special_map, arguments=set(overrides))
        for name in _TOKEN_ARGUMENTS & set(kwargs):  # a token the vocabulary lacks is added, as Transformers does
            if kwargs[name] is None:
                setattr(tok, name, None)
            else:
                tok.add_special_tokens({name: kwargs[name]})
        return tok

    bos_token, bos_token_id = _SpecialToken("bos_token", False), _SpecialToken("bos_token", True)
    eos_token, eos_token_id = _SpecialToken("eos_token", False), _SpecialToken("eos_token", True)
    unk_token, unk_token_id = _SpecialToken("unk_token", False), _SpecialToken("unk_token", True)
    pad_token, pad_token_id = _SpecialToken("pad_token", False), _SpecialToken("pad_token", True)
    sep_token, sep_token_id = _SpecialToken("sep_token", False), _SpecialToken("sep_token", True)
    cls_token, cls_token_id = _SpecialToken("cls_token", False), _SpecialToken("cls_token", True)
    mask_token, mask_token_id = _SpecialToken("mask_token", False), _SpecialToken("mask_token", True)
    # The slow tokenizer truncates a pair one token at a time from the longer sequence (ties: the second); the fast
    # one (Rust tokenizers) splits max_length between the two. A backend says which Transformers class it follows.
    _fast_truncation = False
    _default_max_length = _DEFAULT_MAX_LENGTH

    if TYPE_CHECKING:  # what a backend provides (the list above), as the type checker sees it
        _FILE: str
        _special_tokens: dict[str, Optional[str]]
        _additional_special_tokens: list[str]
        _loaded_config: dict[str, Any]
        _loaded_special: dict[str, Any]

        def __init__(
            self,
            path: str,
            config: Optional[dict[str, Any]] = None,
            special_tokens_map: Optional[dict[str, Any]] = None,
            arguments: Any = (),
        ) -> None: ...
        def __len__(self) -> int: ...
        @property
        def vocab_size(self) -> int: ...
        @property
        def added_tokens_decoder(self) -> dict[int, AddedToken]: ...
        def get_vocab(self) -> dict[str, int]: ...
        def num_special_tokens_to_add(self, pair: bool = False) -> int: ...
        def _text_ids(self, text: str, split_special_tokens: bool = False) -> list[int]: ...
        def _tokens_to_string(self, tokens: list[str]) -> str: ...
        def _post_process(
            self, ids: list[int], pair_ids: Optional[list[int]], add_special_tokens: bool
        ) -> tuple[list[int], list[int]]: ...
        def _decode_ids(self, ids: list[int], skip_special_tokens: bool) -> str: ...
        def _token_to_id(self, text: str) -> Optional[int]: ...
        def _id_to_token(self, i: int) -> str: ...
        def _add_new_tokens(self, specs: list[Any]) -> int: ...
        def _files_to_save(self, config: dict[str, Any]) -> Any: ...

    _model_max_length_set = False
    pad_token_type_id = 0

    def _read_common_config(self, config, arguments):
        """padding_side, truncation_side, model_max_length, clean_up_tokenization_spaces, split_special_tokens,
        chat_template and model_input_names from tokenizer_config.json (or from_pretrained's arguments)."""
        self._padding_side = config.get("padding_side", "right")
        self._truncation_side = config.get("truncation_side", "right")
        for side in ("padding_side", "truncation_side"):
            if getattr(self, side) not in ("left", "right"):
                raise CheckpointError(
                    f"tokenizer_config.json: {side}={getattr(self, side)!r} must be 'left' or 'right'"
                )
        max_length = config.get("model_max_length")
        self._model_max_length_set = max_length is not None
        if max_length is None:
            max_length = self._default_max_length
        elif isinstance(max_length, float) and max_length.is_integer():  # e.g. 1e+30 written as a float
            max_length = int(max_length)
        if not (isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= 1):
            raise CheckpointError(
                f"tokenizer_config.json: model_max_length={config['model_max_length']!r} must be a "
                "positive integer; fix the file"
            )
        self.model_max_length = max_length
        self.deprecation_warnings = {}  # Transformers' name: which once-per-tokenizer warnings were given
        self.clean_up_tokenization_spaces = _flag(config, "clean_up_tokenization_spaces", False)
        self.split_special_tokens = _flag(config, "split_special_tokens", False)
        self.chat_template = _chat_template(config.get("chat_template"), TOKENIZER_CONFIG_FILE)
        names = config.get("model_input_names", self.model_input_names)
        if not (
            isinstance(names, list)
            and "input_ids" in names
            and all(n in ("input_ids", "attention_mask", "token_type_ids") for n in names)
        ):
            raise CheckpointError(
                f"tokenizer_config.json: model_input_names={names!r}: expected a list of "
                "'input_ids', 'attention_mask' and 'token_type_ids'; fix the file"
            )
        self.model_input_names = list(names)

    @property
    def padding_side(self) -> str:
        """Where padding goes: "left" or "right"."""
        return self._padding_side

    @padding_side.setter
    def padding_side(self, value: str) -> None:
        if value not in ("left", "right"):
            raise InvalidInputError(
                f"padding_side={value!r}; use 'left' (what generate() needs for a batch) or 'right'"
            )
        self._padding_side = value

    @property
    def truncation_side(self) -> str:
        """Where truncation cuts: "left" or "right"."""
        return self._truncation_side

    @truncation_side.setter
    def truncation_side(self, value: str) -> None:
        if value not in ("left", "right"):
            raise InvalidInputError(f"truncation_side={value!r}; use 'left' or 'right'")
        self._truncation_side = value

    @property
    def is_fast(self) -> bool:
        return self._fast_truncation

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(vocab_size={self.vocab_size}, len={len(self)}, bos={self.bos_token!r}, "
            f"eos={self.eos_token!r}, pad={self.pad_token!r}, padding_side={self.padding_side!r})"
        )

    # ---- special tokens (Transformers' SpecialTokensMixin) -----------------------------------------------------

    def _special_tokens_changed(self):
        """Called after a special token is set; a backend whose special tokens live in its post-processor
        rewrites it."""

    def _known_token(self, name, value):
        """A value set as bos_token (eos, unk, pad) -> its text; InvalidInputError unless None or a token the
        tokenizer has (a str, or an object with a str .content such as tokenizers' AddedToken)."""
        if value is None:
            return None
        content = value if isinstance(value, str) else getattr(value, "content", None)
        if not isinstance(content, str):
            raise InvalidInputError(
                f"cannot set a non-string value as the {name}: got {value!r}; set a token string "
                f"(e.g. tokenizer.{name} = tokenizer.eos_token) or None"
            )
        content = str(content)
        if not _encodable(content) or self._token_to_id(content) is None:
            raise InvalidInputError(
                f"{name}={content!r} is not a token of this vocabulary ({len(self)} tokens); setting the attribute "
                f"does not add it (Transformers would map it to the unk id). Use a token the vocabulary has, e.g. "
                f"tokenizer.{name} = tokenizer.eos_token, or add it as a new token with "
                f"tokenizer.add_special_tokens({{{name!r}: {content!r}}}) (a new id, which generate() refuses where "
                "the model's embedding has no row for it)"
            )
        return content

    def _token_of_id(self, name, value):
        """A value set as bos_token_id (eos, unk, pad) -> the text of that token, or None."""
        if value is None:
            return None
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and 0 <= value < len(self):
            return self._id_to_token(int(value))
        raise InvalidInputError(
            f"{name}_id={value!r} is not a token id of this vocabulary [0, {len(self)}); "
            f"set an id in that range (e.g. tokenizer.{name}_id = tokenizer.eos_token_id) or None"
        )

    @property
    def additional_special_tokens(self) -> list[str]:
        return list(self._additional_special_tokens)

    @property
    def additional_special_tokens_ids(self) -> list[Optional[int]]:
        return [self._token_to_id(t) for t in self._additional_special_tokens]

    @property
    def special_tokens_map(self) -> dict[str, Any]:
        """{name: token text} for the special tokens that are set (bos, eos, unk, sep, pad, cls, mask;
        additional_special_tokens as a list where there are any), as Transformers 4's special_tokens_map."""
        out: dict[str, Any] = {name: text for name, text in self._special_tokens.items() if text is not None}
        if self._additional_special_tokens:
            out["additional_special_tokens"] = list(self._additional_special_tokens)
        return out

    @property
    def all_special_tokens(self) -> list[str]:
        """The special tokens that are set, each once, in Transformers' order (bos, eos, unk, sep, pad, cls, mask,
        additional)."""
        tokens = [t for t in self._special_tokens.values() if t is not None] + self._additional_special_tokens
        return list(dict.fromkeys(tokens))

    @property
    def all_special_ids(self) -> list[Optional[int]]:
        return [self._token_to_id(t) for t in self.all_special_tokens]

    @property
    def added_tokens_encoder(self) -> dict[str, int]:
        """{content: id} of the added tokens (special ones included), by id, as Transformers'."""
        return {t.content: i for i, t in self.added_tokens_decoder.items()}

    def get_added_vocab(self) -> dict[str, int]:
        """{content: id} of the added tokens, as Transformers' get_added_vocab."""
        return self.added_tokens_encoder

    def add_tokens(
        self, new_tokens: Union[_Token, list[_Token], tuple[_Token, ...]], special_tokens: bool = False
    ) -> int:
        """Transformers' add_tokens: a str, an AddedToken-like object (content, single_word, lstrip, rstrip,
        normalized, special) or a list of them -> the number of tokens new to the vocabulary (they get the ids
        after len(tok)). Tokens the vocabulary has already are registered as added tokens, and count 0."""
        if not new_tokens:
            return 0
        if not isinstance(new_tokens, (list, tuple)):
            new_tokens = [new_tokens]
        tokens = [_token_spec(t, special_tokens, "add_tokens") for t in new_tokens]
        return self._add_new_tokens(tokens)

    def add_special_tokens(
        self, special_tokens_dict: Mapping[str, Any], replace_additional_special_tokens: bool = True
    ) -> int:
        """Transformers' add_special_tokens: {bos/eos/unk/sep/pad/cls/mask_token: token, additional_special_tokens:
        [token]} (a token: a str or an AddedToken) -> the number of tokens new to the vocabulary. Each is set as
        that special token and registered as a special added token (split out of text, skipped by
        skip_special_tokens); one the vocabulary lacks gets the next id and len(tokenizer) grows. With
        replace_additional_special_tokens=False the list is extended instead of replaced. All are checked before
        anything is set: a refusal changes nothing."""
        if not isinstance(special_tokens_dict, dict):
            raise InvalidInputError(
                "add_special_tokens takes a dict such as {'pad_token': tokenizer.eos_token}, "
                f"got {type(special_tokens_dict).__name__}"
            )
        specs, named, additional = [], {}, None
        for key, value in special_tokens_dict.items():
            if key == "additional_special_tokens":
                if not isinstance(value, (list, tuple)):
                    raise InvalidInputError("add_special_tokens: additional_special_tokens must be a list of tokens")
                additional = [dict(_token_spec(v, True, "add_special_tokens"), name=key) for v in value]
                specs += additional
            elif key in _SPECIAL_NAMES:
                spec = dict(_token_spec(value, True, f"add_special_tokens: {key}"), name=key)
                named[key] = spec["content"]
                specs.append(spec)
            else:
                raise InvalidInputError(
                    f"add_special_tokens: {key!r} is not a special token name; use {', '.join(_SPECIAL_NAMES)} or "
                    "additional_special_tokens (other tokens: add_tokens)"
                )
        added = self._add_new_tokens(specs)  # refuses (changing nothing) where the backend cannot take them
        self._special_tokens.update(named)
        if additional is not None:
            texts = [s["content"] for s in additional]
            self._additional_special_tokens = (
                texts
                if replace_additional_special_tokens
                else list(dict.fromkeys(self._additional_special_tokens + texts))
            )
        self._special_tokens_changed()
        return added

    # ---- text -> ids --------------------------------------------------------------------------------------------

    def _truncate(self, ids, pair, room, strategy):
        """The text's ids (and the pair's) cut to `room` ids in all, by strategy, on truncation_side, as the
        backend's Transformers class does; InvalidInputError where that class would fail or leave them uncut."""
        total = len(ids) + (len(pair) if pair is not None else 0)
        if total <= room:
            return ids, pair
        remove = total - room

        def cut(seq, n):  # keep n of seq
            return seq[:n] if self.truncation_side == "right" else seq[len(seq) - n :]

        if strategy == "only_second" and pair is None:
            raise InvalidInputError("truncation='only_second' needs a text_pair; use truncation=True for one text")
        if strategy in ("only_first", "only_second") or pair is None:
            target = pair if strategy == "only_second" else ids
            if len(target) <= remove and not (self._fast_truncation and pair is None and strategy == "longest_first"):
                which = "second" if strategy == "only_second" else "first"
                raise InvalidInputError(
                    f"truncation={strategy!r}: the {which} sequence has {len(target)} tokens but {remove} must go to "
                    f"fit max_length; raise max_length or use truncation='longest_first'"
                )
            kept = cut(target, max(0, len(target) - remove))
            return (ids, kept) if strategy == "only_second" else (kept, pair)
        if self._fast_truncation:  # Rust tokenizers' truncate_encodings (LongestFirst, a pair)
            n1, n2 = len(ids), len(pair)
            short, long_ = min(n1, n2), max(n1, n2)
            long_ = short if short > room else max(short, room - short)
            if short + long_ > room:
                short, long_ = room // 2, room // 2 + room % 2
            n1, n2 = (long_, short) if n1 > n2 else (short, long_)
            return cut(ids, n1), cut(pair, n2)
        n1, n2 = len(ids), len(pair)  # Transformers' slow truncate_sequences: one at a time from the longer
        for _ in range(remove):
            if n1 > n2:
                n1 -= 1
            else:
                n2 -= 1
        return cut(ids, n1), cut(pair, n2)

    def _encode_one(
        self, text, pair, add_special_tokens, strategy, max_length, split_special_tokens=False, offsets=False
    ):
        """One text (and its pair) -> (ids, type_ids), truncated to max_length where strategy says; with offsets
        (ids, type_ids, offsets): each token's (start, end) characters in its own text, (0, 0) for the special tokens
        the post-processor adds, as Transformers' fast tokenizers' offset_mapping."""
        if offsets:  # (id, offset) pairs through the truncation, then split
            ids = list(zip(*self._text_ids_offsets(text, split_special_tokens)))
            pair_ids = list(zip(*self._text_ids_offsets(pair, split_special_tokens))) if pair is not None else None
        else:
            ids = self._text_ids(text, split_special_tokens)
            pair_ids = self._text_ids(pair, split_special_tokens) if pair is not None else None
        if strategy != "do_not_truncate" and max_length is not None:
            special = self.num_special_tokens_to_add(pair is not None) if add_special_tokens else 0
            if max_length < special:
                raise InvalidInputError(
                    f"max_length={max_length} leaves no room for the text: the tokenizer adds "
                    f"{special} special token(s); raise max_length"
                )
            ids, pair_ids = self._truncate(ids, pair_ids, max_length - special, strategy)
        if not offsets:
            return self._post_process(ids, pair_ids, add_special_tokens)
        spans = [o for _, o in ids] + ([o for _, o in pair_ids] if pair_ids is not None else [])
        # the post-processor run on markers (-1 - k for the k-th token of text and pair; special ids are >= 0)
        marks, _ = self._post_process(
            [-1 - k for k in range(len(ids))],
            None if pair_ids is None else [-1 - len(ids) - k for k in range(len(pair_ids))],
            add_special_tokens,
        )
        out_ids, types = self._post_process(
            [i for i, _ in ids], None if pair_ids is None else [i for i, _ in pair_ids], add_special_tokens
        )
        return out_ids, types, [spans[-1 - m] if m < 0 else (0, 0) for m in marks]

    def _text_ids_offsets(self, text, split_special_tokens=False):
        raise InvalidInputError(
            f"return_offsets_mapping=True is not available with {type(self).__name__} over "
            "tokenizer.model (SentencePiece), as with Transformers' slow tokenizers: it needs a "
            "fast tokenizer, one read from a tokenizer.json (is_fast True)"
        )

    def __call__(
        self,
        text: Optional[_TextInput] = None,
        text_pair: Union[str, Sequence[str], None] = None,
        add_special_tokens: bool = True,
        padding: Union[bool, str] = False,
        truncation: Union[bool, str, None] = None,
        max_length: Optional[int] = None,
        stride: int = 0,
        pad_to_multiple_of: Optional[int] = None,
        padding_side: Optional[str] = None,
        return_tensors: Optional[str] = None,
        return_token_type_ids: Optional[bool] = None,
        return_attention_mask: Optional[bool] = None,
        verbose: bool = True,
        split_special_tokens: Optional[bool] = None,
        **kwargs: Any,
    ) -> BatchEncoding:
        """str, list of str (or of (text, pair) tuples), with text_pair a str or a list -> BatchEncoding with
        input_ids, attention_mask (as model_input_names says, or return_attention_mask) and token_type_ids (where
        asked or in model_input_names), Transformers' semantics:

        - padding: False / "do_not_pad", True / "longest", or "max_length" (max_length, else model_max_length);
          pad_to_multiple_of rounds the padded length up; pad_token_id on padding_side (this call's, else the
          tokenizer's).
        - truncation: True / "longest_first", "only_first", "only_second", False / "do_not_truncate"; with
          max_length (default model_max_length) counting the special tokens, cut on truncation_side. Unset with
          a max_length and no padding, it means "longest_first", as in Transformers.
        - return_tensors: "np" int64 arrays (batch, seq), "pt" torch int64 tensors where torch is importable,
          None lists (flat for a single text).
        - split_special_tokens (default: the tokenizer's attribute, from tokenizer_config.json): True tokenizes
          the text of special tokens as text instead of splitting them out as their ids (the fast backend, as Rust
          tokenizers, keeps splitting non-special added tokens; the SentencePiece one, as Transformers' slow
          tokenizers, splits none).
        - return_offsets_mapping=True adds offset_mapping: each token's (start, end) characters in its text, (0, 0)
          for special and pad tokens, as the Rust tokenizers give them (fast tokenizers, read from tokenizer.json;
          (batch, seq, 2) int64 arrays with return_tensors); a SentencePiece tokenizer (is_fast False) refuses it,
          as Transformers' slow ones do.
        Transformers' arguments not implemented here (stride > 0, is_split_into_words, return_overflowing_tokens,
        return_special_tokens_mask, return_length, text_target) raise InvalidInputError."""
        want_offsets = kwargs.pop("return_offsets_mapping", False)
        if want_offsets not in (None, True, False):
            raise InvalidInputError(f"return_offsets_mapping={want_offsets!r}: pass True or False")
        _refuse_unimplemented(kwargs, "the tokenizer call")
        if stride:
            raise InvalidInputError(
                f"stride={stride!r} is not supported (it only shapes the overflowing tokens, "
                "which are not returned here); leave it 0"
            )
        texts, pairs, single = _batch_of(text, text_pair)
        if return_tensors not in (None, "np", "pt"):
            raise InvalidInputError(
                f"return_tensors={return_tensors!r} is not supported; use 'np' (numpy), 'pt' (torch) or None (lists)"
            )
        if padding_side not in (None, "left", "right"):
            raise InvalidInputError(f"padding_side={padding_side!r}; use 'left', 'right' or None (the tokenizer's)")
        torch = _import_torch() if return_tensors == "pt" else None
        padding, strategy, max_length = self._strategies(padding, truncation, max_length, pad_to_multiple_of)
        split = self._split_flag(split_special_tokens)
        rows = [
            self._encode_one(t, p, add_special_tokens, strategy, max_length, split, bool(want_offsets))
            for t, p in zip(texts, pairs)
        ]
        ids = [r[0] for r in rows]
        types = [r[1] for r in rows]
        spans = [r[2] for r in rows] if want_offsets else None
        masks = [[1] * len(s) for s in ids]
        if not self.is_fast:  # Transformers' slow tokenizers check each row before padding, the fast ones after
            self._warn_if_too_long(ids, max_length, verbose)
        if padding != "do_not_pad":
            width = max(len(s) for s in ids) if padding == "longest" else max_length
            if pad_to_multiple_of and width % pad_to_multiple_of:
                width += pad_to_multiple_of - width % pad_to_multiple_of
            left = (padding_side or self.padding_side) == "left"
            for i, s in enumerate(ids):
                fill = max(0, width - len(s))
                if left:
                    ids[i], masks[i] = [self.pad_token_id] * fill + s, [0] * fill + masks[i]
                    types[i] = [self.pad_token_type_id] * fill + types[i]
                    if spans is not None:
                        spans[i] = [(0, 0)] * fill + spans[i]
                else:
                    ids[i], masks[i] = s + [self.pad_token_id] * fill, masks[i] + [0] * fill
                    types[i] = types[i] + [self.pad_token_type_id] * fill
                    if spans is not None:
                        spans[i] = spans[i] + [(0, 0)] * fill
        if self.is_fast:
            self._warn_if_too_long(ids, max_length, verbose)
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_token_type_ids and any(t is None for t in types):
            raise InvalidInputError(self._no_type_ids_message())
        fields = (
            [("input_ids", ids)]
            + ([("token_type_ids", types)] if return_token_type_ids else [])
            + ([("attention_mask", masks)] if return_attention_mask else [])
            + ([("offset_mapping", spans)] if spans is not None else [])
        )
        if return_tensors is not None:
            if len({len(s) for s in ids}) > 1:
                raise InvalidInputError("the texts have different lengths; pass padding=True to make one array")
            as_tensor = torch.from_numpy if torch is not None else (lambda a: a)
            return BatchEncoding(
                (
                    k,
                    as_tensor(
                        np.array(v, dtype=np.int64).reshape(len(v), -1, 2)
                        if k == "offset_mapping"
                        else np.array(v, dtype=np.int64)
                    ),
                )
                for k, v in fields
            )
        return BatchEncoding((k, v[0] if single else v) for k, v in fields)

    def _split_flag(self, split_special_tokens):
        if split_special_tokens is None:
            return bool(self.split_special_tokens)
        if not isinstance(split_special_tokens, bool):
            raise InvalidInputError(
                f"split_special_tokens={split_special_tokens!r}; pass True, False or None (the tokenizer's)"
            )
        return split_special_tokens

    def _warn_if_too_long(self, rows, max_length, verbose):
        """Transformers' _eventual_warn_about_too_long_sequence: a row longer than model_max_length, encoded with
        no max_length (none passed, and no truncation or padding to model_max_length), warns once per tokenizer
        (UserWarning, reported at the user's line that called into the package)."""
        key = "sequence-length-is-longer-than-the-specified-maximum"
        if max_length is not None or not verbose or self.deprecation_warnings.get(key):
            return
        first = next((len(r) for r in rows if len(r) > self.model_max_length), None)  # the first, as Transformers
        if first is not None:
            warnings.warn(
                "Token indices sequence length is longer than the specified maximum sequence length for "
                f"this model ({first} > {self.model_max_length}). Running this sequence through the model "
                "will result in indexing errors; pass truncation=True to cut it to model_max_length",
                UserWarning,
                stacklevel=_stacklevel_outside_package(),
            )
            self.deprecation_warnings[key] = True

    def _no_type_ids_message(self):
        return "token_type_ids are not available from this tokenizer's post-processor; pass return_token_type_ids=False"

    def _strategies(self, padding, truncation, max_length, pad_to_multiple_of):
        """Transformers' _get_padding_truncation_strategies -> (padding strategy, truncation strategy,
        max_length or None), with its refusals as InvalidInputError."""
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length < 1
        ):
            raise InvalidInputError(f"max_length={max_length!r} must be a positive integer")
        if pad_to_multiple_of is not None and (
            isinstance(pad_to_multiple_of, bool)
            or not isinstance(pad_to_multiple_of, (int, np.integer))
            or pad_to_multiple_of < 1
        ):
            raise InvalidInputError(f"pad_to_multiple_of={pad_to_multiple_of!r} must be a positive integer or None")
        if truncation is None and max_length is not None and padding in (False, None, "do_not_pad"):
            truncation = "longest_first"  # Transformers: max_length alone asks for truncation (with a warning)
        requested = padding
        padding = (
            {True: "longest", False: "do_not_pad", None: "do_not_pad"}.get(padding, padding)
            if isinstance(padding, (bool, type(None)))
            else padding
        )
        if padding not in _PADDINGS:
            raise InvalidInputError(f"padding={requested!r}; use False, True ('longest') or 'max_length'")
        strategy = (
            {True: "longest_first", False: "do_not_truncate", None: "do_not_truncate"}.get(truncation)
            if isinstance(truncation, (bool, type(None)))
            else truncation
        )
        if strategy not in _TRUNCATIONS:
            raise InvalidInputError(
                f"truncation={truncation!r}; use True ('longest_first'), 'only_first', 'only_second' or False"
            )
        limit = (
            self.model_max_length if self._model_max_length_set and self.model_max_length <= _LARGE_INTEGER else None
        )
        if padding == "max_length" and max_length is None:
            if limit is None:
                raise InvalidInputError(
                    "padding='max_length' needs max_length (the tokenizer has no "
                    "model_max_length to use instead); pass max_length=N"
                )
            max_length = limit
        if strategy != "do_not_truncate" and max_length is None:
            max_length = limit  # None: no limit, so nothing is cut (Transformers warns)
        if padding != "do_not_pad" and self.pad_token_id is None:
            raise InvalidInputError(
                f"padding={requested!r}: asking to pad but the tokenizer does not have a "
                "padding token; set one, e.g. `tokenizer.pad_token = tokenizer.eos_token`, "
                "or pass padding=False"
            )
        if (
            strategy != "do_not_truncate"
            and padding != "do_not_pad"
            and pad_to_multiple_of
            and max_length is not None
            and max_length % pad_to_multiple_of
        ):
            raise InvalidInputError(
                f"truncation and padding are both on but max_length={max_length} is not a "
                f"multiple of pad_to_multiple_of={pad_to_multiple_of}; make it one"
            )
        return padding, strategy, max_length

    def encode(
        self,
        text: str,
        text_pair: Optional[str] = None,
        add_special_tokens: bool = True,
        padding: Union[bool, str] = False,
        truncation: Union[bool, str, None] = None,
        max_length: Optional[int] = None,
        stride: int = 0,
        padding_side: Optional[str] = None,
        return_tensors: Optional[str] = None,
        **kwargs: Any,
    ) -> Any:
        """str (and a str text_pair) -> list of ids, with the special tokens the tokenizer adds; return_tensors
        gives a (1, seq) array or tensor instead, as Transformers."""
        if isinstance(text_pair, bool):
            raise InvalidInputError(
                f"encode(text, {text_pair}): the second argument is text_pair, as in Transformers; "
                f"pass add_special_tokens={text_pair} by name"
            )
        if not isinstance(text, str) or not (text_pair is None or isinstance(text_pair, str)):
            raise InvalidInputError(
                f"encode takes a str (and a str text_pair), got {type(text).__name__}"
                + ("" if text_pair is None else f" and {type(text_pair).__name__}")
            )
        return self(
            text,
            text_pair,
            add_special_tokens=add_special_tokens,
            padding=padding,
            truncation=truncation,
            max_length=max_length,
            stride=stride,
            padding_side=padding_side,
            return_tensors=return_tensors,
            return_attention_mask=False,
            return_token_type_ids=False,
            **kwargs,
        )["input_ids"]

    def tokenize(
        self,
        text: str,
        pair: Optional[str] = None,
        add_special_tokens: bool = False,
        split_special_tokens: Optional[bool] = None,
        **kwargs: Any,
    ) -> list[str]:
        """str -> the token strings it encodes to (no special tokens unless add_special_tokens)."""
        _refuse_unimplemented(kwargs, "tokenize")
        return self.convert_ids_to_tokens(
            self.encode(text, pair, add_special_tokens=add_special_tokens, split_special_tokens=split_special_tokens)
        )

    def encode_plus(self, text: str, text_pair: Optional[str] = None, **kwargs: Any) -> BatchEncoding:
        """Transformers' older name for __call__ on one text (and its pair): the same arguments, the same
        BatchEncoding (flat lists, or (1, seq) arrays with return_tensors)."""
        if not isinstance(text, str) or not (text_pair is None or isinstance(text_pair, str)):
            raise InvalidInputError(
                f"encode_plus takes one text (a str, and a str text_pair), got "
                f"{type(text).__name__}; for many texts use batch_encode_plus(texts) or "
                "tokenizer(texts)"
            )
        return self(text, text_pair, **kwargs)

    def batch_encode_plus(
        self, batch_text_or_text_pairs: Union[Sequence[str], Sequence[tuple[str, str]]], **kwargs: Any
    ) -> BatchEncoding:
        """Transformers' older name for __call__ on many texts: a list of str or of (text, pair) tuples, the same
        arguments as __call__ (but no text_pair), the same BatchEncoding (a list per text)."""
        if isinstance(batch_text_or_text_pairs, str) or "text_pair" in kwargs:
            raise InvalidInputError(
                "batch_encode_plus takes a list of texts, or of (text, pair) tuples; for one "
                "text use encode_plus(text) or tokenizer(text)"
            )
        return self(batch_text_or_text_pairs, **kwargs)

    # ---- padding encodings ------------------------------------------------------------------------------------

    def pad(
        self,
        encoded_inputs: Union[Mapping[str, Any], Sequence[Mapping[str, Any]]],
        padding: Union[bool, str] = True,
        max_length: Optional[int] = None,
        pad_to_multiple_of: Optional[int] = None,
        padding_side: Optional[str] = None,
        return_attention_mask: Optional[bool] = None,
        return_tensors: Optional[str] = None,
        verbose: bool = True,
    ) -> BatchEncoding:
        """Transformers' pad: an encoding (a BatchEncoding or dict of input_ids and optionally attention_mask,
        token_type_ids, special_tokens_mask; one sequence each, or a batch of them) or a list of such dicts (a
        data collator's features) -> BatchEncoding padded with pad_token_id on padding_side (this call's, else the
        tokenizer's). padding: True / "longest" (default), "max_length" (max_length, else model_max_length) or
        False; pad_to_multiple_of rounds the length up. attention_mask is made where missing (unless
        return_attention_mask=False, which leaves it out) and padded with 0; token_type_ids with
        pad_token_type_id; special_tokens_mask with 1; other keys pass unchanged. Nothing is truncated.
        return_tensors: "np", "pt" or None (default: the type input_ids came in: numpy arrays, torch tensors or
        lists); a single sequence stays 1-D, as in Transformers."""
        if (
            isinstance(encoded_inputs, (list, tuple))
            and encoded_inputs
            and all(isinstance(e, Mapping) for e in encoded_inputs)
        ):
            keys = list(encoded_inputs[0].keys())
            if any(set(e.keys()) != set(keys) for e in encoded_inputs):
                raise InvalidInputError(
                    f"pad: every encoding in the list must have the same keys; the first has {keys}"
                )
            encoded_inputs = {k: [e[k] for e in encoded_inputs] for k in keys}
        if not isinstance(encoded_inputs, Mapping):
            raise InvalidInputError(
                f"pad takes an encoding (a BatchEncoding or dict with input_ids) or a list of "
                f"them, got {type(encoded_inputs).__name__}"
            )
        if "input_ids" not in encoded_inputs:
            raise InvalidInputError(f"pad: the encoding must include input_ids, but it has {list(encoded_inputs)}")
        if return_tensors not in (None, "np", "pt"):
            raise InvalidInputError(f"return_tensors={return_tensors!r} is not supported; use 'np', 'pt' or None")
        if padding_side not in (None, "left", "right"):
            raise InvalidInputError(f"padding_side={padding_side!r}; use 'left', 'right' or None (the tokenizer's)")
        kind, data = None, {}
        for key, value in encoded_inputs.items():
            value_kind, data[key] = _as_lists(value)
            if key == "input_ids":
                kind = value_kind
        return_tensors = kind if return_tensors is None else return_tensors
        torch = _import_torch() if return_tensors == "pt" else None
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if not return_attention_mask:
            data.pop("attention_mask", None)
        required = data["input_ids"]
        if not isinstance(required, list):
            raise InvalidInputError(
                f"pad: input_ids must be token ids (a list, array or tensor), got {type(required).__name__}"
            )
        if not required:
            if return_attention_mask:
                data["attention_mask"] = []
            return BatchEncoding(data)
        padding, _, max_length = self._strategies(padding, False, max_length, pad_to_multiple_of)
        side = padding_side or self.padding_side
        if not isinstance(required[0], list):  # one sequence
            out = self._pad_one(data, padding, max_length, pad_to_multiple_of, side, return_attention_mask)
        else:
            n = len(required)
            bad = [k for k, v in data.items() if not isinstance(v, list) or len(v) != n]
            if bad:
                raise InvalidInputError(
                    f"pad: {bad[0]} does not hold one entry per sequence of input_ids ({n}); "
                    "give every key the same batch size"
                )
            if padding == "longest":
                padding, max_length = "max_length", max(len(r) if isinstance(r, list) else 0 for r in required)
            rows = [
                self._pad_one(
                    {k: v[i] for k, v in data.items()},
                    padding,
                    max_length,
                    pad_to_multiple_of,
                    side,
                    return_attention_mask,
                )
                for i in range(n)
            ]
            out = {k: [r[k] for r in rows] for k in rows[0]}
        if return_tensors is None:
            return BatchEncoding(out)
        as_tensor = torch.from_numpy if torch is not None else (lambda a: a)
        converted = BatchEncoding()
        for key, value in out.items():
            try:
                array = np.array(value, dtype=np.int64 if key in _PADDED_KEYS else None)
            except (ValueError, TypeError):
                array = None
            if array is None or array.dtype == object:
                raise InvalidInputError(
                    f"pad: {key} has sequences of different lengths, so it cannot be one array; "
                    "pad them (padding=True) or pass return_tensors=None"
                )
            converted[key] = as_tensor(array)
        return converted

    def _pad_one(self, row, padding, max_length, pad_to_multiple_of, side, return_attention_mask):
        """Transformers' _pad for one sequence: {key: list} -> the same keys padded to max_length (the sequence's
        own length for "longest", rounded up to pad_to_multiple_of); a longer sequence is left as it is."""
        ids = row["input_ids"]
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise InvalidInputError("pad: input_ids must be token ids (integers), one list per sequence")
        for key in _PADDED_KEYS[1:]:
            if key in row and (not isinstance(row[key], list) or len(row[key]) != len(ids)):
                raise InvalidInputError(f"pad: {key} must have one entry per token of input_ids ({len(ids)})")
        row = dict(row)
        if padding == "longest":
            max_length = len(ids)
        if max_length is not None and pad_to_multiple_of and max_length % pad_to_multiple_of:
            max_length += pad_to_multiple_of - max_length % pad_to_multiple_of
        if return_attention_mask and "attention_mask" not in row:
            row["attention_mask"] = [1] * len(ids)
        fill = max_length - len(ids) if padding != "do_not_pad" and max_length is not None else 0
        if fill > 0:
            values = {
                "input_ids": self.pad_token_id,
                "attention_mask": 0,
                "token_type_ids": self.pad_token_type_id,
                "special_tokens_mask": 1,
            }
            for key, value in values.items():
                if key in row:
                    row[key] = [value] * fill + row[key] if side == "left" else row[key] + [value] * fill
        return row

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """Token strings (as tokenize() and convert_ids_to_tokens() give) -> the text they stand for, special and
        added tokens written as they are: what decode() gives for their ids."""
        if (
            isinstance(tokens, str)
            or not isinstance(tokens, (list, tuple))
            or not all(isinstance(t, str) for t in tokens)
        ):
            raise InvalidInputError(
                "convert_tokens_to_string takes a list of token strings (e.g. from tokenizer.tokenize(text))"
            )
        return self._tokens_to_string(list(tokens))

    # ---- ids -> text ----------------------------------------------------------------------------------------

    def _check_ids(self, ids):
        ids = _int_list(ids, "token ids")
        bad = [i for i in ids if not 0 <= i < len(self)]
        if bad:
            raise InvalidInputError(
                f"token id {bad[0]} is outside [0, {len(self)}); use the tokenizer that belongs to the model"
            )
        return ids

    def decode(
        self,
        token_ids: Union[int, TokenIds],
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: Optional[bool] = None,
        **kwargs: Any,
    ) -> str:
        """ids (an int, a list, a 1-D numpy array or torch tensor) -> str; special tokens written as their text
        unless skipped; clean_up_tokenization_spaces (default: the tokenizer's, from tokenizer_config.json)
        applies Transformers' clean_up_tokenization."""
        _refuse_unimplemented(kwargs, "decode")
        text = self._decode_ids(self._check_ids(token_ids), bool(skip_special_tokens))
        clean = (
            self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else clean_up_tokenization_spaces
        )
        return clean_up_tokenization(text) if clean else text

    def batch_decode(
        self,
        sequences: TokenIds,
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: Optional[bool] = None,
        **kwargs: Any,
    ) -> list[str]:
        """(batch, seq) ids (a numpy array, a torch tensor, or a list of rows, which may differ in length) ->
        list of str."""
        seqs = sequences if isinstance(sequences, (list, tuple)) else to_numpy(sequences, "sequences")[0]
        return [
            self.decode(
                s,
                skip_special_tokens=skip_special_tokens,
                clean_up_tokenization_spaces=clean_up_tokenization_spaces,
                **kwargs,
            )
            for s in seqs
        ]

    @overload
    def convert_ids_to_tokens(self, ids: int, skip_special_tokens: bool = False) -> str: ...
    @overload
    def convert_ids_to_tokens(self, ids: TokenIds, skip_special_tokens: bool = False) -> list[str]: ...
    def convert_ids_to_tokens(
        self, ids: Union[int, TokenIds], skip_special_tokens: bool = False
    ) -> Union[str, list[str]]:
        """An id -> its token string; a list (array) of ids -> a list of them, special ones left out with
        skip_special_tokens."""
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, (bool, np.bool_)):
            return self._id_to_token(self._check_ids([ids])[0])
        special = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._id_to_token(i) for i in self._check_ids(ids) if i not in special]

    @overload
    def convert_tokens_to_ids(self, tokens: str) -> Optional[int]: ...
    @overload
    def convert_tokens_to_ids(self, tokens: Union[list[str], tuple[str, ...]]) -> list[Optional[int]]: ...
    @overload
    def convert_tokens_to_ids(self, tokens: None) -> None: ...
    def convert_tokens_to_ids(self, tokens: Union[str, Sequence[str], None]) -> Union[int, list[Optional[int]], None]:
        """A token string -> its id (unk_token_id where the tokenizer lacks it); a list -> a list of them."""
        if tokens is None:
            return None
        if isinstance(tokens, str):
            tid = self._token_to_id(tokens)
            return self.unk_token_id if tid is None else tid
        return [self.convert_tokens_to_ids(t) for t in tokens]

    # ---- chat templates -------------------------------------------------------------------------------------

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        """Renders conversation with the tokenizer's chat_template; see habana_assist.chat_template."""
        from .chat_template import apply_chat_template  # deferred: jinja2 loads at the first template

        return apply_chat_template(self, conversation, **kwargs)

    # ---- saving ---------------------------------------------------------------------------------------------

    def save_pretrained(
        self,
        save_directory: PathLike,
        legacy_format: Optional[bool] = None,
        filename_prefix: Optional[str] = None,
        push_to_hub: bool = False,
        **kwargs: Any,
    ) -> tuple[str, ...]:
        """Writes tokenizer_config.json, special_tokens_map.json and the backend's tokenizer file into
        save_directory (created if needed): as read at load, with what the script changed since (special tokens,
        padding_side, truncation_side, add_bos_token, add_eos_token, model_max_length, added tokens).
        from_pretrained(save_directory) then encodes and decodes alike. -> the paths written, Transformers' order."""
        if push_to_hub:
            raise InvalidInputError(
                "save_pretrained: push_to_hub=True is not supported (this package downloads from "
                "the Hub but never uploads); save locally and upload the directory with "
                "huggingface-cli upload"
            )
        self._check_legacy_format(legacy_format)
        if filename_prefix is not None:
            raise InvalidInputError(
                f"save_pretrained: filename_prefix={filename_prefix!r} would name files that "
                "from_pretrained does not read; leave it unset"
            )
        if kwargs:
            raise InvalidInputError(
                f"save_pretrained: unexpected argument(s) {', '.join(sorted(kwargs))}; it takes "
                "save_directory (and Transformers' legacy_format)"
            )
        if not isinstance(save_directory, (str, os.PathLike)):
            raise InvalidInputError(f"save_pretrained: save_directory={save_directory!r} must be a path")
        save_directory = os.fspath(save_directory)
        if os.path.isfile(save_directory):
            raise InvalidInputError(f"save_pretrained: {save_directory} is a file; pass a directory")
        special = copy.deepcopy(self._loaded_special)
        config = copy.deepcopy(self._loaded_config)
        for name, text in self._special_tokens.items():
            if text is None:
                special.pop(name, None)
                if name in _NULL_WHEN_UNSET or name in config:
                    config[name] = None  # null: Transformers' way of writing an unset token
                continue
            for saved in (special, config):
                if _token_text(saved.get(name)) != text:  # kept as loaded ({"content": ...} too) if unchanged
                    saved[name] = text
        loaded_additional = [_token_text(t) for t in config.get("additional_special_tokens") or []]
        if self._additional_special_tokens or loaded_additional:
            if loaded_additional != self._additional_special_tokens:
                config["additional_special_tokens"] = list(self._additional_special_tokens)
            special["additional_special_tokens"] = config["additional_special_tokens"]
        config.update(
            padding_side=self.padding_side,
            truncation_side=self.truncation_side,
            clean_up_tokenization_spaces=bool(self.clean_up_tokenization_spaces),
        )
        if self.split_special_tokens or "split_special_tokens" in config:
            config["split_special_tokens"] = bool(self.split_special_tokens)
        if "model_max_length" in config or self.model_max_length != self._default_max_length:
            config["model_max_length"] = self.model_max_length
        config.pop("chat_template", None)
        if isinstance(self.chat_template, str):
            config["chat_template"] = self.chat_template
        elif isinstance(self.chat_template, dict):  # written back in the file's list form
            config["chat_template"] = [{"name": k, "template": v} for k, v in self.chat_template.items()]
        files = self._files_to_save(config)  # the backend adds its keys to config
        os.makedirs(save_directory, exist_ok=True)
        paths = [
            os.path.join(save_directory, TOKENIZER_CONFIG_FILE),
            os.path.join(save_directory, SPECIAL_TOKENS_MAP_FILE),
        ]
        _write_file(paths[0], _json_bytes(config))
        _write_file(paths[1], _json_bytes(special))
        for name, data in files:
            paths.append(os.path.join(save_directory, name))
            _write_file(paths[-1], data)
        stale = os.path.join(save_directory, CHAT_TEMPLATE_FILE)  # it would override the config's template
        if os.path.exists(stale):
            os.remove(stale)
        return tuple(paths)

    def _check_legacy_format(self, legacy_format):
        pass


# Transformers' __call__ / encode / decode arguments this package does not implement, with the value that means
# "not used" (accepted).
_UNIMPLEMENTED = {
    "is_split_into_words": False,
    "return_overflowing_tokens": False,
    "return_special_tokens_mask": False,
    "return_offsets_mapping": False,
    "return_length": False,
    "text_target": None,
    "text_pair_target": None,
    "spaces_between_special_tokens": False,
    "use_source_tokenizer": False,
}


def _refuse_unimplemented(kwargs, where):
    bad = {k: v for k, v in kwargs.items() if k not in _UNIMPLEMENTED or (v is not None and v != _UNIMPLEMENTED[k])}
    if bad:
        raise InvalidInputError(
            f"{where}: {', '.join(f'{k}={v!r}' for k, v in bad.items())} is not supported here; leave it out"
        )


# The keys pad() pads, and with what (input_ids first: the others must match its length).
_PADDED_KEYS = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")


def _as_lists(value):
    """A value of an encoding pad() is given -> (its kind: "np", "pt" or None, the value as (nested) lists of int
    where it is an array, a tensor or a list of them)."""
    if is_torch_tensor(value):
        return "pt", to_numpy(value, "pad")[0].tolist()
    if isinstance(value, np.ndarray):
        return "np", value.tolist()
    if isinstance(value, (list, tuple)):
        kind = None
        rows = []
        for item in value:
            if is_torch_tensor(item) or isinstance(item, np.ndarray):
                item_kind, item = _as_lists(item)
                kind = kind or item_kind
            elif isinstance(item, (list, tuple)):
                item = [int(x) if isinstance(x, np.integer) else x for x in item]
            elif isinstance(item, np.integer):
                item = int(item)
            rows.append(item)
        return kind, rows
    return None, value


def _batch_of(text, text_pair):
    """The call's text and text_pair -> (texts, pairs (None each where no pair), single)."""
    if isinstance(text, str):
        if text_pair is not None and not isinstance(text_pair, str):
            raise InvalidInputError("text_pair must be a str when text is a str")
        return [text], [text_pair], True
    if not isinstance(text, (list, tuple)) or not text:
        raise InvalidInputError("the tokenizer takes a str or a non-empty list of str")
    if text_pair is None and all(
        isinstance(t, (list, tuple)) and len(t) == 2 and all(isinstance(s, str) for s in t) for t in text
    ):
        return [t[0] for t in text], [t[1] for t in text], False  # a batch of (text, pair)
    if not all(isinstance(t, str) for t in text):
        raise InvalidInputError("the tokenizer takes a str or a non-empty list of str")
    if text_pair is None:
        return list(text), [None] * len(text), False
    if (
        not isinstance(text_pair, (list, tuple))
        or len(text_pair) != len(text)
        or not all(isinstance(t, str) for t in text_pair)
    ):
        raise InvalidInputError(f"text_pair must be a list of {len(text)} str, one per text")
    return list(text), list(text_pair), False


def _import_torch():
    """torch, for return_tensors="pt"."""
    return import_torch("return_tensors='pt'", "install Debian's python3-torch, or use return_tensors='np'")
