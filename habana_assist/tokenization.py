"""SentencePiece tokenizers in a Hugging Face checkpoint directory, with Transformers' call conventions.

AutoTokenizer.from_pretrained(path) reads tokenizer.model (through Debian's python3-sentencepiece),
tokenizer_config.json (add_bos_token, add_eos_token, padding_side, truncation_side, model_max_length, special
tokens) and special_tokens_map.json. Ids are exactly sentencepiece's; bos/eos are added as the config says.
save_pretrained(directory) writes those three files back, so that from_pretrained(directory) gives a tokenizer
that encodes and decodes alike.
"""

import copy
import json
import os

import numpy as np

from .errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from .hub import resolve
from .tensors import is_torch_tensor, to_numpy

TOKENIZER_FILE = "tokenizer.model"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")
_DEFAULT_MAX_LENGTH = 1 << 30  # model_max_length when tokenizer_config.json has none
# from_pretrained's keyword arguments: read as tokenizer_config.json's keys; set as special tokens; ignored.
_CONFIG_ARGUMENTS = frozenset({"padding_side", "truncation_side", "model_max_length", "add_bos_token",
                               "add_eos_token", "add_prefix_space", "legacy"})
_TOKEN_ARGUMENTS = frozenset(_SPECIAL_NAMES)
_IGNORED_ARGUMENTS = frozenset({"use_fast", "trust_remote_code", "revision", "token", "use_auth_token", "cache_dir",
                                "local_files_only", "force_download", "resume_download", "proxies"})


def _check_config_arguments(overrides):
    """InvalidInputError for a from_pretrained argument that tokenizer_config.json could not hold either."""
    for key, value in overrides.items():
        if key in ("padding_side", "truncation_side") and value not in ("left", "right"):
            raise InvalidInputError(f"{key}={value!r}; use 'left' or 'right'")
        if key in ("add_bos_token", "add_eos_token") and not isinstance(value, bool):
            raise InvalidInputError(f"{key}={value!r}; pass True or False")
        if key == "model_max_length" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise InvalidInputError(f"model_max_length={value!r}; pass a positive integer")


class BatchEncoding(dict):
    """{"input_ids": ..., "attention_mask": ...} that also reads as attributes, so generate(**inputs) works."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device):
        """Transformers' inputs.to(model.device): torch tensors moved with their .to(device); numpy arrays and
        lists live on the CPU, so only "cpu" is accepted for them."""
        out = BatchEncoding()
        for key, value in self.items():
            if is_torch_tensor(value):
                out[key] = value.to(device)
            elif str(device) != "cpu":
                raise InvalidInputError(f"BatchEncoding.to({device!r}): {key} is not a torch tensor and stays on the "
                                        "CPU; this package computes on the CPU: use .to('cpu') or leave .to() out")
            else:
                out[key] = value
        return out


def _read_json(path):
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError) as e:  # ValueError: bad UTF-8 or JSON, an int of > 4300 digits
        raise CheckpointError(f"{path} is not valid JSON ({e}); fix or delete the file") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object; fix or delete the file")
    return data


def _proto_fields(data, varints=False):
    """Top-level fields of serialized protobuf bytes -> [(field number, bytes for a length-delimited field, else
    None; with varints=True the value of a varint field too)]; ValueError where the bytes are not protobuf."""
    fields, i = [], 0

    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            if i >= len(data) or shift > 63:
                raise ValueError("bad varint")
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(data):
        key = varint()
        wire, value = key & 7, None
        if wire == 0:
            number = varint()
            value = number if varints else None
        elif wire == 1 or wire == 5:
            i += 8 if wire == 1 else 4
        elif wire == 2:
            n = varint()
            value, i = data[i:i + n], i + n
        else:
            raise ValueError("a protobuf group or a bad wire type")
        if i > len(data):
            raise ValueError("truncated")
        fields.append((key >> 3, value))
    return fields


def _bad_piece(proto):
    """The index of the first piece of a serialized sentencepiece ModelProto (pieces: field 1, each a message
    whose field 1 is the piece's text) that is empty or holds a NUL byte, or None; None too where the bytes
    are not protobuf, which sentencepiece rejects itself."""
    try:
        pieces = [value for number, value in _proto_fields(proto) if number == 1 and value is not None]
        for index, piece in enumerate(pieces):
            texts = [value for number, value in _proto_fields(piece) if number == 1 and value is not None]
            if not texts or not texts[-1] or b"\0" in texts[-1]:  # the last occurrence wins; absent means ""
                return index
    except ValueError:
        return None
    return None


def _encodable(text):
    """Whether text is valid Unicode that UTF-8 can carry (JSON's "\\ud800" gives a lone surrogate that it cannot)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _token_text(value):
    """A special token in tokenizer_config.json is a string or {"content": string, ...}."""
    return value.get("content") if isinstance(value, dict) else value


def _normalizer_spec(proto):
    """A serialized sentencepiece ModelProto -> (normalizer name, add_dummy_prefix, remove_extra_whitespaces) of its
    normalizer_spec (ModelProto field 3; in it name is 1, the two flags 3 and 4, both true when absent). Repeated
    specs merge field by field, as protobuf does."""
    name, dummy_prefix, extra_whitespaces = "", True, True
    try:
        for number, spec in _proto_fields(proto):
            if number != 3 or spec is None:
                continue
            for field, value in _proto_fields(spec, varints=True):
                if field == 1 and isinstance(value, bytes):
                    name = value.decode("utf-8", "replace")
                elif field == 3 and isinstance(value, int):
                    dummy_prefix = bool(value)
                elif field == 4 and isinstance(value, int):
                    extra_whitespaces = bool(value)
    except ValueError:
        pass  # sentencepiece loaded it, so this cannot happen; the defaults are sentencepiece's
    return name, dummy_prefix, extra_whitespaces


# Appended to a ModelProto: a normalizer_spec (field 3) holding add_dummy_prefix (its field 3) = false, which
# protobuf merges into the model's spec. Transformers turns the dummy prefix off the same way (a MergeFrom).
_NO_DUMMY_PREFIX = b"\x1a\x02\x18\x00"
_SPIECE_UNDERLINE = "\u2581"


class _SpecialToken:
    """The attributes bos_token / bos_token_id (and eos, unk, pad) of LlamaTokenizer, linked as in Transformers'
    SpecialTokensMixin: one stored token text per name; the *_id attribute reads its id and sets it by id. Only
    tokens of the vocabulary are accepted, since the model's embedding cannot grow."""

    def __init__(self, name, as_id):
        self.name, self.as_id = name, as_id

    def __get__(self, tok, owner=None):
        if tok is None:
            return self
        text = tok._special_tokens[self.name]
        if not self.as_id or text is None:
            return text
        return tok.sp.piece_to_id(text)

    def __set__(self, tok, value):
        tok._special_tokens[self.name] = tok._token_of_id(self.name, value) if self.as_id else \
            tok._vocabulary_token(self.name, value)


class LlamaTokenizer:
    """A SentencePiece tokenizer (Llama's kind). Build it with AutoTokenizer.from_pretrained(path)."""

    bos_token, bos_token_id = _SpecialToken("bos_token", False), _SpecialToken("bos_token", True)
    eos_token, eos_token_id = _SpecialToken("eos_token", False), _SpecialToken("eos_token", True)
    unk_token, unk_token_id = _SpecialToken("unk_token", False), _SpecialToken("unk_token", True)
    pad_token, pad_token_id = _SpecialToken("pad_token", False), _SpecialToken("pad_token", True)

    def __init__(self, model_file, config=None, special_tokens_map=None, arguments=()):
        """arguments: the keys of config that came from from_pretrained's keyword arguments, not from the file
        (their refusals are InvalidInputError naming the argument rather than CheckpointError naming the file)."""
        try:
            import sentencepiece
        except ImportError:
            raise ImportError("habana_assist's tokenizer needs sentencepiece: apt-get install python3-sentencepiece "
                              "(scripts/setup.sh does)") from None
        self.sp = sentencepiece.SentencePieceProcessor()
        try:
            with open(model_file, "rb") as f:
                proto = f.read()
            bad = _bad_piece(proto)
            if bad is not None:  # sentencepiece would abort the process (its trie's keys are non-empty C strings)
                raise CheckpointError(f"{model_file}: piece {bad} is empty or holds a NUL byte, so it is not a "
                                      "SentencePiece model or it is corrupt; re-download it")
            self.sp.load_from_serialized_proto(proto)
            self._proto = proto  # written back byte for byte by save_pretrained
        except (OSError, RuntimeError) as e:
            raise CheckpointError(f"{model_file} is not a SentencePiece model ({e}); re-download it") from None
        for i in range(self.sp.get_piece_size()):  # sentencepiece loads such pieces; id_to_piece would raise later
            try:
                self.sp.id_to_piece(i)
            except UnicodeDecodeError:
                raise CheckpointError(f"{model_file}: piece {i} is not valid UTF-8, so it is not a SentencePiece "
                                      "model or it is corrupt; re-download it") from None
        config = dict(config or {})
        # As read, for save_pretrained: it writes them back with what the script changed since.
        self._loaded_config, self._loaded_special = copy.deepcopy(config), copy.deepcopy(dict(special_tokens_map or {}))
        tokens = {**{k: _token_text(v) for k, v in (special_tokens_map or {}).items()},
                  **{k: _token_text(config[k]) for k in ("bos_token", "eos_token", "unk_token", "pad_token") if k in config}}
        for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
            text = tokens.get(name)
            if text is not None and not (isinstance(text, str) and _encodable(text)):
                source = "tokenizer_config.json" if name in config else "special_tokens_map.json"
                raise CheckpointError(f"{source}: {name} is {text!r}; expected a string (or {{\"content\": string}}) "
                                      "of valid UTF-8 — fix the file")
        self.add_bos_token = bool(config.get("add_bos_token", True))
        self.add_eos_token = bool(config.get("add_eos_token", False))
        self._padding_side = config.get("padding_side", "right")
        self._truncation_side = config.get("truncation_side", "right")
        self._set_prefix_space(config, arguments, model_file)
        max_length = config.get("model_max_length")
        if max_length is None:
            max_length = _DEFAULT_MAX_LENGTH
        elif isinstance(max_length, float) and max_length.is_integer():  # e.g. 1e+30 written as a float
            max_length = int(max_length)
        if not (isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= 1):
            raise CheckpointError(f"tokenizer_config.json: model_max_length={config['model_max_length']!r} must be a "
                                  "positive integer; fix the file")
        self.model_max_length = max_length
        for side in ("padding_side", "truncation_side"):
            if getattr(self, side) not in ("left", "right"):
                raise CheckpointError(f"tokenizer_config.json: {side}={getattr(self, side)!r} must be 'left' or 'right'")
        defaults = {"bos_token": self.sp.bos_id(), "eos_token": self.sp.eos_id(), "unk_token": self.sp.unk_id(),
                    "pad_token": self.sp.pad_id()}
        self._special_tokens = {}  # name -> token text or None; the *_token and *_token_id attributes read it
        for name, default in defaults.items():
            text = tokens.get(name)
            tid = self.sp.piece_to_id(text) if text else default
            if text and (tid == self.sp.unk_id() and text != self.sp.id_to_piece(self.sp.unk_id())):
                raise CheckpointError(f"the {name} {text!r} of tokenizer_config.json is not in {model_file}; fix the config")
            self._special_tokens[name] = self.sp.id_to_piece(tid) if tid is not None and tid >= 0 else None
        # Ids decode() treats as special: the control pieces and the special tokens as loaded (Transformers keeps
        # those in added_tokens_decoder); the current ones are added at each decode.
        self._special = {self.sp.piece_to_id(t) for t in self._special_tokens.values() if t is not None} | \
            {i for i in range(self.sp.get_piece_size()) if self.sp.is_control(i)}

    def _set_prefix_space(self, config, arguments, model_file):
        """add_prefix_space and legacy (tokenizer_config.json or from_pretrained's arguments), with the meaning
        Transformers' Llama tokenizers give them on text without special tokens: add_prefix_space=True puts one
        "\u2581" (a space) before a non-empty text and decode() drops one leading space of its result;
        add_prefix_space=False puts none (a model whose normalizer adds a dummy prefix is loaded with it off, as
        Transformers does); legacy=False without add_prefix_space means add_prefix_space=True. Unset: the text
        as sentencepiece's own normalizer treats it (Transformers' slow LlamaTokenizer in its legacy mode)."""
        for key in ("add_prefix_space", "legacy"):
            value = config.get(key)
            if value not in (None, True, False):
                if key in arguments:
                    raise InvalidInputError(f"{key}={value!r}; pass True, False or None")
                raise CheckpointError(f"tokenizer_config.json: {key}={value!r} must be true, false or null; "
                                      "fix the file")
        self.add_prefix_space, self.legacy = config.get("add_prefix_space"), config.get("legacy")
        want = self.add_prefix_space if self.add_prefix_space is not None else (True if self.legacy is False else None)
        name, dummy_prefix, extra_whitespaces = _normalizer_spec(self._proto)
        self._prepend_space = bool(want) and not dummy_prefix  # a dummy prefix already gives the space
        if want is None or want == dummy_prefix:
            return
        if name not in ("identity", "") or extra_whitespaces:
            # Transformers' converted (fast) tokenizer skips these normalizations, its slow one applies them: no
            # single meaning to reproduce.
            key = "add_prefix_space" if self.add_prefix_space is not None else "legacy"
            fix = "leave it unset (the tokenizer then follows sentencepiece's own normalizer)"
            message = (f"{key}={config[key]!r} changes where this tokenizer puts a leading space, which is exact only "
                       f"for an 'identity' sentencepiece normalizer that keeps whitespace; {model_file} has "
                       f"normalizer {name!r} with remove_extra_whitespaces={extra_whitespaces}: {fix}")
            if key in arguments:
                raise InvalidInputError(message)
            raise CheckpointError(f"tokenizer_config.json: {message}")
        if not want:  # the model's normalizer adds a dummy prefix: load it with that off
            self.sp.load_from_serialized_proto(self._proto + _NO_DUMMY_PREFIX)

    @property
    def padding_side(self):
        """"left" or "right": where padding goes."""
        return self._padding_side

    @padding_side.setter
    def padding_side(self, value):
        if value not in ("left", "right"):
            raise InvalidInputError(f"padding_side={value!r}; use 'left' (what generate() needs for a batch) or "
                                    "'right'")
        self._padding_side = value

    @property
    def truncation_side(self):
        """"left" or "right": where truncation cuts."""
        return self._truncation_side

    @truncation_side.setter
    def truncation_side(self, value):
        if value not in ("left", "right"):
            raise InvalidInputError(f"truncation_side={value!r}; use 'left' or 'right'")
        self._truncation_side = value

    # ---- special tokens (Transformers' SpecialTokensMixin, limited to the vocabulary) -----------------------

    def _vocabulary_token(self, name, value):
        """A value set as bos_token (eos, unk, pad) -> its text; InvalidInputError unless None or a token of the
        vocabulary (a str, or an object with a str .content such as tokenizers' AddedToken)."""
        if value is None:
            return None
        content = value if isinstance(value, str) else getattr(value, "content", None)
        if not isinstance(content, str):
            raise InvalidInputError(f"cannot set a non-string value as the {name}: got {value!r}; set a token string "
                                    f"(e.g. tokenizer.{name} = tokenizer.eos_token) or None")
        content = str(content)
        unk = self.sp.unk_id()
        if not _encodable(content) or (self.sp.piece_to_id(content) == unk and content != self.sp.id_to_piece(unk)):
            raise InvalidInputError(
                f"{name}={content!r} is not a token of this vocabulary ({self.vocab_size} tokens). Transformers would "
                "add it as a new token, but the model's embedding cannot grow here: use a token the vocabulary has, "
                f"e.g. tokenizer.{name} = tokenizer.eos_token")
        return content

    def _token_of_id(self, name, value):
        """A value set as bos_token_id (eos, unk, pad) -> the text of that token, or None."""
        if value is None:
            return None
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and \
                0 <= value < self.vocab_size:
            return self.sp.id_to_piece(int(value))
        raise InvalidInputError(f"{name}_id={value!r} is not a token id of this vocabulary [0, {self.vocab_size}); "
                                f"set an id in that range (e.g. tokenizer.{name}_id = tokenizer.eos_token_id) or None")

    @property
    def special_tokens_map(self):
        """{name: token text} for the special tokens that are set (bos, eos, unk, pad)."""
        return {name: text for name, text in self._special_tokens.items() if text is not None}

    @property
    def all_special_tokens(self):
        """The special tokens that are set, each once, in Transformers' order (bos, eos, unk, pad)."""
        return list(dict.fromkeys(self.special_tokens_map.values()))

    @property
    def all_special_ids(self):
        return [self.sp.piece_to_id(t) for t in self.all_special_tokens]

    def add_special_tokens(self, special_tokens_dict, replace_additional_special_tokens=True):
        """Transformers' add_special_tokens for bos/eos/unk/pad_token whose token the vocabulary has: sets them and
        returns 0 (the number of tokens added). A token not in the vocabulary, and the other kinds (sep, cls, mask,
        additional_special_tokens), would grow the vocabulary, which the model's embedding cannot follow here:
        refused, nothing set."""
        if not isinstance(special_tokens_dict, dict):
            raise InvalidInputError("add_special_tokens takes a dict such as {'pad_token': tokenizer.eos_token}, "
                                    f"got {type(special_tokens_dict).__name__}")
        texts = {}
        for key, value in special_tokens_dict.items():
            if key not in _SPECIAL_NAMES:
                raise InvalidInputError(
                    f"add_special_tokens: {key!r} is not supported; this tokenizer keeps {', '.join(_SPECIAL_NAMES)} "
                    "and cannot add tokens to the vocabulary (the model's embedding cannot grow here)")
            texts[key] = self._vocabulary_token(key, value)
        self._special_tokens.update(texts)  # all checked first: a refusal leaves every token as it was
        return 0

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *inputs, **kwargs):
        """A directory (or a shipped model's name) -> LlamaTokenizer. Keyword arguments, as Transformers':

        - padding_side, truncation_side ("left"/"right"), model_max_length (int >= 1), add_bos_token,
          add_eos_token (bool): override tokenizer_config.json (and are saved by save_pretrained);
        - bos_token, eos_token, unk_token, pad_token: a token of the vocabulary (set as tokenizer.pad_token = ...);
        - add_prefix_space, legacy (True/False/None): see _set_prefix_space;
        - subfolder: the tokenizer files are in that folder of the directory;
        - use_fast (True/False): accepted and changes nothing: there is one tokenizer, sentencepiece's;
        - trust_remote_code, revision, token, use_auth_token, cache_dir, local_files_only, force_download,
          resume_download, proxies: hub arguments, accepted and ignored, since the tokenizer is always read from a
          local directory (nothing is downloaded, and no code from a checkpoint is ever run).
        Anything else raises InvalidInputError naming it."""
        if inputs:
            raise InvalidInputError(f"from_pretrained takes the path and keyword arguments only; got {len(inputs)} "
                                    "more positional argument(s)")
        unknown = sorted(set(kwargs) - _CONFIG_ARGUMENTS - _TOKEN_ARGUMENTS - _IGNORED_ARGUMENTS - {"subfolder"})
        if unknown:
            raise InvalidInputError(
                f"AutoTokenizer.from_pretrained: {', '.join(f'{k}={kwargs[k]!r}' for k in unknown)} is not supported "
                "(it would change tokenization in a way this sentencepiece tokenizer does not reproduce); leave it "
                f"out. Accepted: {', '.join(sorted(_CONFIG_ARGUMENTS | _TOKEN_ARGUMENTS | {'subfolder', 'use_fast'}))} "
                "and the hub arguments")
        use_fast = kwargs.get("use_fast", True)
        if not isinstance(use_fast, bool):
            raise InvalidInputError(f"use_fast={use_fast!r}; pass True or False (both give this sentencepiece "
                                    "tokenizer)")
        overrides = {k: kwargs[k] for k in _CONFIG_ARGUMENTS if k in kwargs}
        _check_config_arguments(overrides)
        directory = resolve(pretrained_model_name_or_path)
        subfolder = kwargs.get("subfolder")
        if subfolder:
            if not isinstance(subfolder, str) or not os.path.isdir(os.path.join(directory, subfolder)):
                raise InvalidInputError(f"subfolder={subfolder!r}: no such folder in {directory}")
            directory = os.path.join(directory, subfolder)
        model_file = os.path.join(directory, TOKENIZER_FILE)
        if not os.path.exists(model_file):
            raise CheckpointNotFoundError(f"{directory}: no {TOKENIZER_FILE}; this package reads SentencePiece "
                                          "tokenizers (tokenizer.model) only")
        config = {**_read_json(os.path.join(directory, TOKENIZER_CONFIG_FILE)), **overrides}
        tok = cls(model_file, config, _read_json(os.path.join(directory, SPECIAL_TOKENS_MAP_FILE)),
                  arguments=set(overrides))
        for name in _TOKEN_ARGUMENTS & set(kwargs):
            setattr(tok, name, kwargs[name])
        return tok

    def __len__(self):
        return self.sp.get_piece_size()

    @property
    def vocab_size(self):
        return self.sp.get_piece_size()

    def __repr__(self):
        return (f"LlamaTokenizer(vocab_size={self.vocab_size}, bos={self.bos_token!r}, eos={self.eos_token!r}, "
                f"pad={self.pad_token!r}, padding_side={self.padding_side!r})")

    # ---- text -> ids ----------------------------------------------------------------------------------------

    def encode(self, text, add_special_tokens=True):
        """str -> list of ids (<s> first when the config says add_bos_token)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"encode takes a str, got {type(text).__name__}")
        ids = self._text_ids(text)
        if add_special_tokens:
            ids = ([self.bos_token_id] if self.add_bos_token and self.bos_token_id is not None else []) + ids + \
                  ([self.eos_token_id] if self.add_eos_token and self.eos_token_id is not None else [])
        return ids

    def _text_ids(self, text):
        """str -> the ids of its tokens, no <s> or </s>; "\u2581" first for add_prefix_space (see _set_prefix_space)."""
        return self.sp.encode(_SPIECE_UNDERLINE + text if self._prepend_space and text else text)

    def _encode_truncated(self, text, add_special_tokens, limit):
        """encode(), keeping at most `limit` ids: the text's tokens are cut on truncation_side, <s> and </s> stay."""
        if limit is None:
            return self.encode(text, add_special_tokens)
        bos = [self.bos_token_id] if add_special_tokens and self.add_bos_token and self.bos_token_id is not None else []
        eos = [self.eos_token_id] if add_special_tokens and self.add_eos_token and self.eos_token_id is not None else []
        body, room = self._text_ids(text), max(0, limit - len(bos) - len(eos))
        body = body[:room] if self.truncation_side == "right" else body[max(0, len(body) - room):]
        return (bos + body + eos)[:limit] if self.truncation_side == "right" else (bos + body + eos)[-limit:]

    def __call__(self, text, padding=False, truncation=False, max_length=None, return_tensors=None,
                 add_special_tokens=True, return_attention_mask=True, padding_side=None):
        """str or list of str -> BatchEncoding(input_ids, attention_mask), Transformers' semantics.

        padding: False, True / "longest", or "max_length"; with pad_token_id, on padding_side (this call's, else
        the tokenizer's). truncation with
        max_length (default model_max_length) cuts on truncation_side. return_tensors="np" gives int64 arrays
        (batch, seq), "pt" torch int64 tensors (batch, seq) where torch is importable; None gives lists (a flat
        list for a single str)."""
        single = isinstance(text, str)
        texts = [text] if single else text
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts) or not texts:
            raise InvalidInputError("the tokenizer takes a str or a non-empty list of str")
        if return_tensors not in (None, "np", "pt"):
            raise InvalidInputError(f"return_tensors={return_tensors!r} is not supported; use 'np' (numpy), 'pt' "
                                    "(torch) or None (lists)")
        if padding_side not in (None, "left", "right"):
            raise InvalidInputError(f"padding_side={padding_side!r}; use 'left', 'right' or None (the tokenizer's)")
        side = padding_side or self.padding_side
        torch = _import_torch() if return_tensors == "pt" else None
        requested = padding
        if padding is True:
            padding = "longest"
        if padding not in (False, "longest", "max_length", "do_not_pad"):
            raise InvalidInputError(f"padding={padding!r}; use False, True ('longest') or 'max_length'")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise InvalidInputError(f"max_length={max_length!r} must be a positive integer")
        limit = (max_length or self.model_max_length) if truncation else None
        ids = [self._encode_truncated(t, add_special_tokens, limit) for t in texts]
        width = max(len(s) for s in ids)
        if padding == "max_length":
            if max_length is None:
                raise InvalidInputError("padding='max_length' needs max_length")
            width = max(width, max_length)
        masks = [[1] * len(s) for s in ids]
        if padding in ("longest", "max_length"):
            pad_id = self.pad_token_id
            if pad_id is None:
                raise InvalidInputError(f"padding={requested!r}: asking to pad but the tokenizer does not have a "
                                        "padding token; set one, e.g. `tokenizer.pad_token = tokenizer.eos_token`, "
                                        "or pass padding=False")
            for i, s in enumerate(ids):
                fill = width - len(s)
                if side == "left":
                    ids[i], masks[i] = [pad_id] * fill + s, [0] * fill + masks[i]
                else:
                    ids[i], masks[i] = s + [pad_id] * fill, masks[i] + [0] * fill
        if return_tensors is not None:
            if len({len(s) for s in ids}) > 1:
                raise InvalidInputError("the texts have different lengths; pass padding=True to make one array")
            as_tensor = torch.from_numpy if torch is not None else (lambda a: a)
            out = BatchEncoding(input_ids=as_tensor(np.array(ids, dtype=np.int64)))
            if return_attention_mask:
                out["attention_mask"] = as_tensor(np.array(masks, dtype=np.int64))
            return out
        out = BatchEncoding(input_ids=ids[0] if single else ids)
        if return_attention_mask:
            out["attention_mask"] = masks[0] if single else masks
        return out

    # ---- ids -> text ----------------------------------------------------------------------------------------

    def _check_ids(self, ids):
        a = to_numpy(ids, "token ids")[0] if is_torch_tensor(ids) else np.asarray(ids)
        if a.dtype == object or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise InvalidInputError(f"token ids must be integers, got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() >= self.vocab_size):
            raise InvalidInputError(f"token id {int(a.min() if a.min() < 0 else a.max())} is outside [0, "
                                    f"{self.vocab_size}); use the tokenizer that belongs to the model")
        return [int(i) for i in a.reshape(-1)]

    def decode(self, ids, skip_special_tokens=False):
        """ids (an int, a list, a 1-D numpy array or torch tensor) -> str; special tokens written as their text
        unless skipped. With add_prefix_space (where this tokenizer adds the space itself), one leading space of
        the result is dropped, as Transformers' decoder strips the space it added."""
        out, run = [], []
        special = self._special | {self.sp.piece_to_id(t) for t in self._special_tokens.values() if t is not None}
        for i in self._check_ids(ids):
            if i in special:
                out.append(self.sp.decode(run))
                run = []
                if not skip_special_tokens:
                    out.append(self.sp.id_to_piece(i))
            else:
                run.append(i)
        out.append(self.sp.decode(run))
        text = "".join(out)
        return text[1:] if self._prepend_space and text.startswith(" ") else text

    def batch_decode(self, sequences, skip_special_tokens=False):
        """(batch, seq) ids (a numpy array, a torch tensor, or a list of rows, which may differ in length) ->
        list of str."""
        seqs = sequences if isinstance(sequences, (list, tuple)) else to_numpy(sequences, "sequences")[0]
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in seqs]

    def convert_ids_to_tokens(self, ids):
        return [self.sp.id_to_piece(i) for i in self._check_ids(ids)]

    def convert_tokens_to_ids(self, tokens):
        return [self.sp.piece_to_id(t) for t in tokens]

    def get_vocab(self):
        """{piece: id} for every id of the vocabulary."""
        return {self.sp.id_to_piece(i): i for i in range(self.sp.get_piece_size())}

    # ---- saving ---------------------------------------------------------------------------------------------

    def save_pretrained(self, save_directory, legacy_format=None, filename_prefix=None, push_to_hub=False, **kwargs):
        """Writes tokenizer.model (the bytes that were loaded), tokenizer_config.json and special_tokens_map.json
        into save_directory (created if needed), as read at load with what the script changed since (special
        tokens, padding_side, truncation_side, add_bos_token, add_eos_token, model_max_length). from_pretrained
        (save_directory) then encodes and decodes alike. -> (tokenizer_config.json, special_tokens_map.json,
        tokenizer.model) paths, Transformers' order."""
        if push_to_hub:
            raise InvalidInputError("save_pretrained: push_to_hub=True is not supported (no model hub is reachable "
                                    "from this package); save locally and upload the directory yourself")
        if legacy_format is False:
            raise InvalidInputError("save_pretrained: legacy_format=False writes only tokenizer.json, which a "
                                    "SentencePiece tokenizer does not have; leave legacy_format unset")
        if filename_prefix is not None:
            raise InvalidInputError(f"save_pretrained: filename_prefix={filename_prefix!r} would name files that "
                                    "from_pretrained does not read; leave it unset")
        if kwargs:
            raise InvalidInputError(f"save_pretrained: unexpected argument(s) {', '.join(sorted(kwargs))}; it takes "
                                    "save_directory (and Transformers' legacy_format)")
        if not isinstance(save_directory, (str, os.PathLike)):
            raise InvalidInputError(f"save_pretrained: save_directory={save_directory!r} must be a path")
        save_directory = os.fspath(save_directory)
        if os.path.isfile(save_directory):
            raise InvalidInputError(f"save_pretrained: {save_directory} is a file; pass a directory")
        tokens = dict(self._special_tokens)  # each a token of the vocabulary or None (the setters see to it)
        special = copy.deepcopy(self._loaded_special)
        config = copy.deepcopy(self._loaded_config)
        for name, text in tokens.items():
            if text is None:
                special.pop(name, None)
                config[name] = None  # null: Transformers' way of writing an unset token
                continue
            for saved in (special, config):
                if _token_text(saved.get(name)) != text:  # kept as loaded ({"content": ...} too) if unchanged
                    saved[name] = text
        config.setdefault("tokenizer_class", "LlamaTokenizer")
        config.update(add_bos_token=bool(self.add_bos_token), add_eos_token=bool(self.add_eos_token),
                      padding_side=self.padding_side, truncation_side=self.truncation_side)
        for key in ("add_prefix_space", "legacy"):  # fixed at load; written where set, as Transformers does
            if getattr(self, key) is not None:
                config[key] = getattr(self, key)
        if "model_max_length" in config or self.model_max_length != _DEFAULT_MAX_LENGTH:
            config["model_max_length"] = self.model_max_length
        chat_template = getattr(self, "chat_template", None)
        if chat_template is not None:
            config["chat_template"] = chat_template

        os.makedirs(save_directory, exist_ok=True)
        paths = (os.path.join(save_directory, TOKENIZER_CONFIG_FILE),
                 os.path.join(save_directory, SPECIAL_TOKENS_MAP_FILE),
                 os.path.join(save_directory, TOKENIZER_FILE))
        for path, data in zip(paths, (_json_bytes(config), _json_bytes(special), self._proto)):
            _write_file(path, data)
        return paths


def _json_bytes(obj):
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _write_file(path, data):
    """Writes data to path through a file beside it, renamed into place: never a half-written file."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _import_torch():
    """torch, for return_tensors="pt"; InvalidInputError saying how to get it where it is not importable."""
    try:
        import torch
    except ImportError:
        raise InvalidInputError("return_tensors='pt' needs PyTorch (torch), which is not importable here; install "
                                "Debian's python3-torch, or use return_tensors='np'") from None
    return torch


class AutoTokenizer:
    """Transformers-style entry point: from_pretrained(directory or shipped name) -> LlamaTokenizer."""

    def __init__(self):
        raise TypeError("use AutoTokenizer.from_pretrained(path)")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *inputs, **kwargs):
        """See LlamaTokenizer.from_pretrained for the keyword arguments."""
        return LlamaTokenizer.from_pretrained(pretrained_model_name_or_path, *inputs, **kwargs)
