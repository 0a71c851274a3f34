"""Tokenizers in a Hugging Face checkpoint directory, with Transformers' call conventions, over two backends.

AutoTokenizer.from_pretrained(path) reads tokenizer.json (Hugging Face tokenizers' format, through
habana_assist.tokenizer_json) where the directory has one, as Transformers' fast tokenizer does, else SentencePiece's
tokenizer.model (through Debian's python3-sentencepiece); use_fast=False picks tokenizer.model where both exist.
Both read tokenizer_config.json and special_tokens_map.json (special tokens, add_bos_token/add_eos_token,
padding_side, truncation_side, model_max_length, clean_up_tokenization_spaces, chat_template) and give the same
surface, written once in PreTrainedTokenizerBase: __call__ (texts, pairs, padding, truncation, tensors), encode,
decode, batch_decode, the token/id conversions, the special-token attributes, add_tokens, save_pretrained and
apply_chat_template. The backends supply text -> ids, the special tokens around them, and ids -> text:

    LlamaTokenizer            tokenizer.model: ids exactly sentencepiece's, <s>/</s> as the config says; the
                              vocabulary cannot grow (add_tokens of a new token is refused)
    PreTrainedTokenizerFast   tokenizer.json: ids exactly Rust tokenizers' (TokenizerJSON), the post-processor as
                              Transformers leaves it (add_bos_token/add_eos_token rewrite it as its Llama/Gemma
                              classes do); added tokens from tokenizer_config.json join the vocabulary

Where the backends' Transformers counterparts differ (the slow and the fast tokenizer), each keeps its own:
truncation of pairs (the slow one-token-at-a-time rule, the fast length split), and which ids decode() skips (all
special tokens set on the tokenizer, or the special added tokens of tokenizer.json). save_pretrained(directory)
writes the files back, so that from_pretrained(directory) encodes and decodes alike.
"""

import copy
import json
import os

import numpy as np

from .errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from .hub import resolve
from .tensors import is_torch_tensor, to_numpy

TOKENIZER_FILE = "tokenizer.model"
TOKENIZER_JSON_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")
_DEFAULT_MAX_LENGTH = 1 << 30  # LlamaTokenizer's model_max_length when tokenizer_config.json has none
_VERY_LARGE_INTEGER = int(1e30)  # Transformers' "no limit" (PreTrainedTokenizerFast's default model_max_length)
_LARGE_INTEGER = int(1e20)  # above this, Transformers treats model_max_length as "no limit" for padding/truncation
# from_pretrained's keyword arguments: read as tokenizer_config.json's keys; set as special tokens; ignored.
_CONFIG_ARGUMENTS = frozenset({"padding_side", "truncation_side", "model_max_length", "add_bos_token",
                               "add_eos_token", "add_prefix_space", "legacy", "clean_up_tokenization_spaces",
                               "split_special_tokens"})
_TOKEN_ARGUMENTS = frozenset(_SPECIAL_NAMES)
_IGNORED_ARGUMENTS = frozenset({"use_fast", "trust_remote_code", "revision", "token", "use_auth_token", "cache_dir",
                                "local_files_only", "force_download", "resume_download", "proxies"})
# Truncation and padding strategies, Transformers' names; True means the first of each.
_TRUNCATIONS = ("longest_first", "only_first", "only_second", "do_not_truncate")
_PADDINGS = ("longest", "max_length", "do_not_pad")
# Transformers' clean_up_tokenization: (written, cleaned), applied in this order with str.replace.
_CLEANUPS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def clean_up_tokenization(text):
    """Transformers' clean_up_tokenization: drops the space English tokenizers put before punctuation and
    contractions (" ." -> ".", " n't" -> "n't", ...). decode() applies it where clean_up_tokenization_spaces."""
    for written, cleaned in _CLEANUPS:
        text = text.replace(written, cleaned)
    return text


def _check_config_arguments(overrides):
    """InvalidInputError for a from_pretrained argument that tokenizer_config.json could not hold either."""
    for key, value in overrides.items():
        if key in ("padding_side", "truncation_side") and value not in ("left", "right"):
            raise InvalidInputError(f"{key}={value!r}; use 'left' or 'right'")
        if key in ("add_bos_token", "add_eos_token", "clean_up_tokenization_spaces") and not isinstance(value, bool):
            raise InvalidInputError(f"{key}={value!r}; pass True or False")
        if key == "model_max_length" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise InvalidInputError(f"model_max_length={value!r}; pass a positive integer")
        if key == "split_special_tokens" and value is not False:
            raise InvalidInputError(f"split_special_tokens={value!r} is not supported (special tokens in the text "
                                    "are always single tokens here); leave it out or pass False")
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
    """The attributes bos_token / bos_token_id (and eos, unk, pad), linked as in Transformers' SpecialTokensMixin:
    one stored token text per name; the *_id attribute reads its id and sets it by id. Only tokens the tokenizer
    has are accepted (the model's embedding cannot grow to meet a new one)."""

    def __init__(self, name, as_id):
        self.name, self.as_id = name, as_id

    def __get__(self, tok, owner=None):
        if tok is None:
            return self
        text = tok._special_tokens[self.name]
        if not self.as_id or text is None:
            return text
        return tok._token_to_id(text)

    def __set__(self, tok, value):
        before = tok._special_tokens[self.name]
        tok._special_tokens[self.name] = tok._token_of_id(self.name, value) if self.as_id else \
            tok._known_token(self.name, value)
        try:
            tok._special_tokens_changed()
        except InvalidInputError:  # e.g. bos_token = None while add_bos_token: refused, nothing changed
            tok._special_tokens[self.name] = before
            raise


def _flag(config, key, default, source=TOKENIZER_CONFIG_FILE):
    """A true/false key of a config file, or CheckpointError naming it."""
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise CheckpointError(f"{source}: {key}={value!r} must be true or false; fix the file")
    return value


def _int_list(ids, what):
    """ids (an int, a list, a 1-D numpy array or torch tensor) -> list of int; InvalidInputError otherwise."""
    a = to_numpy(ids, what)[0] if is_torch_tensor(ids) else np.asarray(ids)
    if a.dtype == object or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InvalidInputError(f"{what} must be integers, got dtype {a.dtype}")
    return [int(i) for i in a.reshape(-1)]


class PreTrainedTokenizerBase:
    """The Transformers surface both backends share. A backend provides:

        _text_ids(text) -> [id]                    the text's tokens, no special tokens around them
        _post_process(ids, pair_ids, add_special_tokens) -> (ids, type_ids)   the special tokens put around them
        num_special_tokens_to_add(pair=False) -> int
        _decode_ids([id], skip_special_tokens) -> str                         (ids checked in range)
        _token_to_id(text) -> id or None ; _id_to_token(id) -> str
        vocab_size, __len__, get_vocab(), _add_new_tokens(tokens), _files_to_save() and from_pretrained
    and sets in __init__: _special_tokens {name: text or None}, _additional_special_tokens [text],
    padding_side, truncation_side, model_max_length, clean_up_tokenization_spaces, chat_template, model_input_names.
    """

    bos_token, bos_token_id = _SpecialToken("bos_token", False), _SpecialToken("bos_token", True)
    eos_token, eos_token_id = _SpecialToken("eos_token", False), _SpecialToken("eos_token", True)
    unk_token, unk_token_id = _SpecialToken("unk_token", False), _SpecialToken("unk_token", True)
    pad_token, pad_token_id = _SpecialToken("pad_token", False), _SpecialToken("pad_token", True)
    # The slow tokenizer truncates a pair one token at a time from the longer sequence (ties: the second); the fast
    # one (Rust tokenizers) splits max_length between the two. A backend says which Transformers class it follows.
    _fast_truncation = False
    _default_max_length = _DEFAULT_MAX_LENGTH
    _model_max_length_set = False
    pad_token_type_id = 0

    def _read_common_config(self, config, arguments):
        """padding_side, truncation_side, model_max_length, clean_up_tokenization_spaces, split_special_tokens,
        chat_template and model_input_names from tokenizer_config.json (or from_pretrained's arguments)."""
        self._padding_side = config.get("padding_side", "right")
        self._truncation_side = config.get("truncation_side", "right")
        for side in ("padding_side", "truncation_side"):
            if getattr(self, side) not in ("left", "right"):
                raise CheckpointError(f"tokenizer_config.json: {side}={getattr(self, side)!r} must be 'left' or "
                                      "'right'")
        max_length = config.get("model_max_length")
        self._model_max_length_set = max_length is not None
        if max_length is None:
            max_length = self._default_max_length
        elif isinstance(max_length, float) and max_length.is_integer():  # e.g. 1e+30 written as a float
            max_length = int(max_length)
        if not (isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= 1):
            raise CheckpointError(f"tokenizer_config.json: model_max_length={config['model_max_length']!r} must be a "
                                  "positive integer; fix the file")
        self.model_max_length = max_length
        self.clean_up_tokenization_spaces = _flag(config, "clean_up_tokenization_spaces", False)
        if _flag(config, "split_special_tokens", False):
            raise CheckpointError("tokenizer_config.json: split_special_tokens=true is not supported (special tokens "
                                  "in the text are always single tokens here, which changes the ids): set it to "
                                  "false or remove it")
        self.chat_template = _chat_template(config.get("chat_template"), TOKENIZER_CONFIG_FILE)
        names = config.get("model_input_names", self.model_input_names)
        if not (isinstance(names, list) and "input_ids" in names and
                all(n in ("input_ids", "attention_mask", "token_type_ids") for n in names)):
            raise CheckpointError(f"tokenizer_config.json: model_input_names={names!r}: expected a list of "
                                  "'input_ids', 'attention_mask' and 'token_type_ids'; fix the file")
        self.model_input_names = list(names)

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

    @property
    def is_fast(self):
        return self._fast_truncation

    def __repr__(self):
        return (f"{type(self).__name__}(vocab_size={self.vocab_size}, len={len(self)}, bos={self.bos_token!r}, "
                f"eos={self.eos_token!r}, pad={self.pad_token!r}, padding_side={self.padding_side!r})")

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
            raise InvalidInputError(f"cannot set a non-string value as the {name}: got {value!r}; set a token string "
                                    f"(e.g. tokenizer.{name} = tokenizer.eos_token) or None")
        content = str(content)
        if not _encodable(content) or self._token_to_id(content) is None:
            raise InvalidInputError(
                f"{name}={content!r} is not a token of this vocabulary ({len(self)} tokens). Transformers would "
                "add it as a new token, but the model's embedding cannot grow here: use a token the vocabulary has, "
                f"e.g. tokenizer.{name} = tokenizer.eos_token (or add it first with add_special_tokens where the "
                "tokenizer can grow)")
        return content

    def _token_of_id(self, name, value):
        """A value set as bos_token_id (eos, unk, pad) -> the text of that token, or None."""
        if value is None:
            return None
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and \
                0 <= value < len(self):
            return self._id_to_token(int(value))
        raise InvalidInputError(f"{name}_id={value!r} is not a token id of this vocabulary [0, {len(self)}); "
                                f"set an id in that range (e.g. tokenizer.{name}_id = tokenizer.eos_token_id) or None")

    @property
    def additional_special_tokens(self):
        return list(self._additional_special_tokens)

    @property
    def additional_special_tokens_ids(self):
        return [self._token_to_id(t) for t in self._additional_special_tokens]

    @property
    def special_tokens_map(self):
        """{name: token text} for the special tokens that are set (bos, eos, unk, pad; additional_special_tokens
        as a list where there are any), as Transformers 4's special_tokens_map."""
        out = {name: text for name, text in self._special_tokens.items() if text is not None}
        if self._additional_special_tokens:
            out["additional_special_tokens"] = list(self._additional_special_tokens)
        return out

    @property
    def all_special_tokens(self):
        """The special tokens that are set, each once, in Transformers' order (bos, eos, unk, pad, additional)."""
        tokens = [t for t in self._special_tokens.values() if t is not None] + self._additional_special_tokens
        return list(dict.fromkeys(tokens))

    @property
    def all_special_ids(self):
        return [self._token_to_id(t) for t in self.all_special_tokens]

    def add_tokens(self, new_tokens, special_tokens=False):
        """Transformers' add_tokens: a str, an AddedToken-like object (content, single_word, lstrip, rstrip,
        normalized, special) or a list of them -> the number of tokens new to the vocabulary (they get the ids
        after len(tok)). Tokens the vocabulary has already are registered as added tokens, and count 0."""
        if not new_tokens:
            return 0
        if not isinstance(new_tokens, (list, tuple)):
            new_tokens = [new_tokens]
        tokens = [_token_spec(t, special_tokens, "add_tokens") for t in new_tokens]
        return self._add_new_tokens(tokens)

    def add_special_tokens(self, special_tokens_dict, replace_additional_special_tokens=True):
        """Transformers' add_special_tokens: {bos/eos/unk/pad_token: token, additional_special_tokens: [token]}
        -> the number of tokens new to the vocabulary; each token is added as a special token where the backend
        can grow (PreTrainedTokenizerFast), and must be one of the vocabulary where it cannot (LlamaTokenizer).
        All are checked before anything is set: a refusal changes nothing."""
        if not isinstance(special_tokens_dict, dict):
            raise InvalidInputError("add_special_tokens takes a dict such as {'pad_token': tokenizer.eos_token}, "
                                    f"got {type(special_tokens_dict).__name__}")
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
                    f"add_special_tokens: {key!r} is not supported; this tokenizer keeps {', '.join(_SPECIAL_NAMES)} "
                    "and additional_special_tokens")
        added = self._add_new_tokens(specs)  # refuses (changing nothing) where the backend cannot take them
        self._special_tokens.update(named)
        if additional is not None:
            texts = [s["content"] for s in additional]
            self._additional_special_tokens = texts if replace_additional_special_tokens else \
                list(dict.fromkeys(self._additional_special_tokens + texts))
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
            return seq[:n] if self.truncation_side == "right" else seq[len(seq) - n:]

        if strategy == "only_second" and pair is None:
            raise InvalidInputError("truncation='only_second' needs a text_pair; use truncation=True for one text")
        if strategy in ("only_first", "only_second") or pair is None:
            target = pair if strategy == "only_second" else ids
            if len(target) <= remove and not (self._fast_truncation and pair is None and strategy == "longest_first"):
                which = "second" if strategy == "only_second" else "first"
                raise InvalidInputError(
                    f"truncation={strategy!r}: the {which} sequence has {len(target)} tokens but {remove} must go to "
                    f"fit max_length; raise max_length or use truncation='longest_first'")
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

    def _encode_one(self, text, pair, add_special_tokens, strategy, max_length):
        """One text (and its pair) -> (ids, type_ids), truncated to max_length where strategy says."""
        ids = self._text_ids(text)
        pair_ids = self._text_ids(pair) if pair is not None else None
        if strategy != "do_not_truncate" and max_length is not None:
            special = self.num_special_tokens_to_add(pair is not None) if add_special_tokens else 0
            if max_length < special:
                raise InvalidInputError(f"max_length={max_length} leaves no room for the text: the tokenizer adds "
                                        f"{special} special token(s); raise max_length")
            ids, pair_ids = self._truncate(ids, pair_ids, max_length - special, strategy)
        return self._post_process(ids, pair_ids, add_special_tokens)

    def __call__(self, text=None, text_pair=None, add_special_tokens=True, padding=False, truncation=None,
                 max_length=None, stride=0, pad_to_multiple_of=None, padding_side=None, return_tensors=None,
                 return_token_type_ids=None, return_attention_mask=None, verbose=True, **kwargs):
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
        Transformers' arguments not implemented here (stride > 0, is_split_into_words, return_overflowing_tokens,
        return_special_tokens_mask, return_offsets_mapping, return_length, text_target) raise InvalidInputError."""
        _refuse_unimplemented(kwargs, "the tokenizer call")
        if stride:
            raise InvalidInputError(f"stride={stride!r} is not supported (it only shapes the overflowing tokens, "
                                    "which are not returned here); leave it 0")
        texts, pairs, single = _batch_of(text, text_pair)
        if return_tensors not in (None, "np", "pt"):
            raise InvalidInputError(f"return_tensors={return_tensors!r} is not supported; use 'np' (numpy), 'pt' "
                                    "(torch) or None (lists)")
        if padding_side not in (None, "left", "right"):
            raise InvalidInputError(f"padding_side={padding_side!r}; use 'left', 'right' or None (the tokenizer's)")
        torch = _import_torch() if return_tensors == "pt" else None
        padding, strategy, max_length = self._strategies(padding, truncation, max_length, pad_to_multiple_of)
        rows = [self._encode_one(t, p, add_special_tokens, strategy, max_length) for t, p in zip(texts, pairs)]
        ids = [r[0] for r in rows]
        types = [r[1] for r in rows]
        masks = [[1] * len(s) for s in ids]
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
                else:
                    ids[i], masks[i] = s + [self.pad_token_id] * fill, masks[i] + [0] * fill
                    types[i] = types[i] + [self.pad_token_type_id] * fill
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_token_type_ids and any(t is None for t in types):
            raise InvalidInputError(self._no_type_ids_message())
        fields = [("input_ids", ids)] + ([("token_type_ids", types)] if return_token_type_ids else []) + \
            ([("attention_mask", masks)] if return_attention_mask else [])
        if return_tensors is not None:
            if len({len(s) for s in ids}) > 1:
                raise InvalidInputError("the texts have different lengths; pass padding=True to make one array")
            as_tensor = torch.from_numpy if torch is not None else (lambda a: a)
            return BatchEncoding((k, as_tensor(np.array(v, dtype=np.int64))) for k, v in fields)
        return BatchEncoding((k, v[0] if single else v) for k, v in fields)

    def _no_type_ids_message(self):
        return "token_type_ids are not available from this tokenizer's post-processor; pass return_token_type_ids=False"

    def _strategies(self, padding, truncation, max_length, pad_to_multiple_of):
        """Transformers' _get_padding_truncation_strategies -> (padding strategy, truncation strategy,
        max_length or None), with its refusals as InvalidInputError."""
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer))
                                       or max_length < 1):
            raise InvalidInputError(f"max_length={max_length!r} must be a positive integer")
        if pad_to_multiple_of is not None and (isinstance(pad_to_multiple_of, bool) or
                                               not isinstance(pad_to_multiple_of, (int, np.integer)) or
                                               pad_to_multiple_of < 1):
            raise InvalidInputError(f"pad_to_multiple_of={pad_to_multiple_of!r} must be a positive integer or None")
        if truncation is None and max_length is not None and padding in (False, None, "do_not_pad"):
            truncation = "longest_first"  # Transformers: max_length alone asks for truncation (with a warning)
        requested = padding
        padding = {True: "longest", False: "do_not_pad", None: "do_not_pad"}.get(padding, padding) \
            if isinstance(padding, (bool, type(None))) else padding
        if padding not in _PADDINGS:
            raise InvalidInputError(f"padding={requested!r}; use False, True ('longest') or 'max_length'")
        strategy = {True: "longest_first", False: "do_not_truncate", None: "do_not_truncate"}.get(truncation) \
            if isinstance(truncation, (bool, type(None))) else truncation
        if strategy not in _TRUNCATIONS:
            raise InvalidInputError(f"truncation={truncation!r}; use True ('longest_first'), 'only_first', "
                                    "'only_second' or False")
        limit = self.model_max_length if self._model_max_length_set and self.model_max_length <= _LARGE_INTEGER \
            else None
        if padding == "max_length" and max_length is None:
            if limit is None:
                raise InvalidInputError("padding='max_length' needs max_length (the tokenizer has no "
                                        "model_max_length to use instead); pass max_length=N")
            max_length = limit
        if strategy != "do_not_truncate" and max_length is None:
            max_length = limit  # None: no limit, so nothing is cut (Transformers warns)
        if padding != "do_not_pad" and self.pad_token_id is None:
            raise InvalidInputError(f"padding={requested!r}: asking to pad but the tokenizer does not have a "
                                    "padding token; set one, e.g. `tokenizer.pad_token = tokenizer.eos_token`, "
                                    "or pass padding=False")
        if strategy != "do_not_truncate" and padding != "do_not_pad" and pad_to_multiple_of and \
                max_length is not None and max_length % pad_to_multiple_of:
            raise InvalidInputError(f"truncation and padding are both on but max_length={max_length} is not a "
                                    f"multiple of pad_to_multiple_of={pad_to_multiple_of}; make it one")
        return padding, strategy, max_length

    def encode(self, text, text_pair=None, add_special_tokens=True, padding=False, truncation=None, max_length=None,
               stride=0, padding_side=None, return_tensors=None, **kwargs):
        """str (and a str text_pair) -> list of ids, with the special tokens the tokenizer adds; return_tensors
        gives a (1, seq) array or tensor instead, as Transformers."""
        if isinstance(text_pair, bool):
            raise InvalidInputError(f"encode(text, {text_pair}): the second argument is text_pair, as in Transformers; "
                                    f"pass add_special_tokens={text_pair} by name")
        if not isinstance(text, str) or not (text_pair is None or isinstance(text_pair, str)):
            raise InvalidInputError(f"encode takes a str (and a str text_pair), got {type(text).__name__}"
                                    + ("" if text_pair is None else f" and {type(text_pair).__name__}"))
        return self(text, text_pair, add_special_tokens=add_special_tokens, padding=padding, truncation=truncation,
                    max_length=max_length, stride=stride, padding_side=padding_side, return_tensors=return_tensors,
                    return_attention_mask=False, return_token_type_ids=False, **kwargs)["input_ids"]

    def tokenize(self, text, pair=None, add_special_tokens=False, **kwargs):
        """str -> the token strings it encodes to (no special tokens unless add_special_tokens)."""
        _refuse_unimplemented(kwargs, "tokenize")
        return self.convert_ids_to_tokens(self.encode(text, pair, add_special_tokens=add_special_tokens))

    # ---- ids -> text ----------------------------------------------------------------------------------------

    def _check_ids(self, ids):
        ids = _int_list(ids, "token ids")
        bad = [i for i in ids if not 0 <= i < len(self)]
        if bad:
            raise InvalidInputError(f"token id {bad[0]} is outside [0, {len(self)}); use the tokenizer that belongs "
                                    "to the model")
        return ids

    def decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None, **kwargs):
        """ids (an int, a list, a 1-D numpy array or torch tensor) -> str; special tokens written as their text
        unless skipped; clean_up_tokenization_spaces (default: the tokenizer's, from tokenizer_config.json)
        applies Transformers' clean_up_tokenization."""
        _refuse_unimplemented(kwargs, "decode")
        text = self._decode_ids(self._check_ids(token_ids), bool(skip_special_tokens))
        clean = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else \
            clean_up_tokenization_spaces
        return clean_up_tokenization(text) if clean else text

    def batch_decode(self, sequences, skip_special_tokens=False, clean_up_tokenization_spaces=None, **kwargs):
        """(batch, seq) ids (a numpy array, a torch tensor, or a list of rows, which may differ in length) ->
        list of str."""
        seqs = sequences if isinstance(sequences, (list, tuple)) else to_numpy(sequences, "sequences")[0]
        return [self.decode(s, skip_special_tokens=skip_special_tokens,
                            clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs) for s in seqs]

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        """An id -> its token string; a list (array) of ids -> a list of them, special ones left out with
        skip_special_tokens."""
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, (bool, np.bool_)):
            return self._id_to_token(self._check_ids([ids])[0])
        special = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._id_to_token(i) for i in self._check_ids(ids) if i not in special]

    def convert_tokens_to_ids(self, tokens):
        """A token string -> its id (unk_token_id where the tokenizer lacks it); a list -> a list of them."""
        if tokens is None:
            return None
        if isinstance(tokens, str):
            tid = self._token_to_id(tokens)
            return self.unk_token_id if tid is None else tid
        return [self.convert_tokens_to_ids(t) for t in tokens]

    # ---- chat templates -------------------------------------------------------------------------------------

    def apply_chat_template(self, conversation, **kwargs):
        """Renders conversation with the tokenizer's chat_template; see habana_assist.chat_template."""
        from .chat_template import apply_chat_template
        return apply_chat_template(self, conversation, **kwargs)

    # ---- saving ---------------------------------------------------------------------------------------------

    def save_pretrained(self, save_directory, legacy_format=None, filename_prefix=None, push_to_hub=False, **kwargs):
        """Writes tokenizer_config.json, special_tokens_map.json and the backend's tokenizer file into
        save_directory (created if needed): as read at load, with what the script changed since (special tokens,
        padding_side, truncation_side, add_bos_token, add_eos_token, model_max_length, added tokens).
        from_pretrained(save_directory) then encodes and decodes alike. -> the paths written, Transformers' order."""
        if push_to_hub:
            raise InvalidInputError("save_pretrained: push_to_hub=True is not supported (no model hub is reachable "
                                    "from this package); save locally and upload the directory yourself")
        self._check_legacy_format(legacy_format)
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
        special = copy.deepcopy(self._loaded_special)
        config = copy.deepcopy(self._loaded_config)
        for name, text in self._special_tokens.items():
            if text is None:
                special.pop(name, None)
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
        config.update(padding_side=self.padding_side, truncation_side=self.truncation_side,
                      clean_up_tokenization_spaces=bool(self.clean_up_tokenization_spaces))
        if "model_max_length" in config or self.model_max_length != self._default_max_length:
            config["model_max_length"] = self.model_max_length
        config.pop("chat_template", None)
        if isinstance(self.chat_template, str):
            config["chat_template"] = self.chat_template
        elif isinstance(self.chat_template, dict):  # written back in the file's list form
            config["chat_template"] = [{"name": k, "template": v} for k, v in self.chat_template.items()]
        files = self._files_to_save(config)  # the backend adds its keys to config
        os.makedirs(save_directory, exist_ok=True)
        paths = [os.path.join(save_directory, TOKENIZER_CONFIG_FILE), os.path.join(save_directory,
                                                                                   SPECIAL_TOKENS_MAP_FILE)]
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


def _chat_template(value, source):
    """tokenizer_config.json's chat_template -> tok.chat_template as Transformers exposes it: None, a str, or
    {name: template} from the list form [{"name": ..., "template": ...}]."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str) and
                                       isinstance(t.get("template"), str) for t in value):
        return {t["name"]: t["template"] for t in value}
    raise CheckpointError(f"{source}: chat_template must be a string or a list of {{\"name\": ..., \"template\": "
                          "...}} objects; fix the file")


# Transformers' __call__ / encode / decode arguments this package does not implement, with the value that means
# "not used" (accepted).
_UNIMPLEMENTED = {"is_split_into_words": False, "return_overflowing_tokens": False,
                  "return_special_tokens_mask": False, "return_offsets_mapping": False, "return_length": False,
                  "text_target": None, "text_pair_target": None, "split_special_tokens": False,
                  "spaces_between_special_tokens": False, "use_source_tokenizer": False}


def _refuse_unimplemented(kwargs, where):
    bad = {k: v for k, v in kwargs.items() if k not in _UNIMPLEMENTED or (v is not None and v != _UNIMPLEMENTED[k])}
    if bad:
        raise InvalidInputError(f"{where}: {', '.join(f'{k}={v!r}' for k, v in bad.items())} is not supported here; "
                                "leave it out")


def _batch_of(text, text_pair):
    """The call's text and text_pair -> (texts, pairs (None each where no pair), single)."""
    if isinstance(text, str):
        if text_pair is not None and not isinstance(text_pair, str):
            raise InvalidInputError("text_pair must be a str when text is a str")
        return [text], [text_pair], True
    if not isinstance(text, (list, tuple)) or not text:
        raise InvalidInputError("the tokenizer takes a str or a non-empty list of str")
    if text_pair is None and all(isinstance(t, (list, tuple)) and len(t) == 2 and all(isinstance(s, str) for s in t)
                                 for t in text):
        return [t[0] for t in text], [t[1] for t in text], False  # a batch of (text, pair)
    if not all(isinstance(t, str) for t in text):
        raise InvalidInputError("the tokenizer takes a str or a non-empty list of str")
    if text_pair is None:
        return list(text), [None] * len(text), False
    if not isinstance(text_pair, (list, tuple)) or len(text_pair) != len(text) or \
            not all(isinstance(t, str) for t in text_pair):
        raise InvalidInputError(f"text_pair must be a list of {len(text)} str, one per text")
    return list(text), list(text_pair), False


def _token_spec(value, special, where):
    """A token to add (a str, or an object/dict with content and tokenizers' AddedToken flags) -> {content,
    special, single_word, lstrip, rstrip, normalized}; Transformers' defaults: normalized = not special."""
    if isinstance(value, str):
        content, flags = value, {}
    elif isinstance(value, dict):
        content, flags = value.get("content"), value
    else:
        content = getattr(value, "content", None)
        flags = {k: getattr(value, k) for k in ("special", "single_word", "lstrip", "rstrip", "normalized")
                 if hasattr(value, k)}
    if not isinstance(content, str) or not content or not _encodable(content):
        raise InvalidInputError(f"{where}: {value!r} is not a token (a non-empty str, or an AddedToken)")
    spec = {"content": content, "special": bool(flags.get("special", special) or special),
            "single_word": bool(flags.get("single_word", False)), "lstrip": bool(flags.get("lstrip", False)),
            "rstrip": bool(flags.get("rstrip", False))}
    spec["normalized"] = bool(flags.get("normalized", not spec["special"]))
    return spec
class LlamaTokenizer(PreTrainedTokenizerBase):
    """A SentencePiece tokenizer (Llama's kind, Transformers' slow LlamaTokenizer). Build it with
    AutoTokenizer.from_pretrained(path) (from a directory with tokenizer.model and no tokenizer.json, or with
    use_fast=False) or LlamaTokenizer.from_pretrained(path)."""

    model_input_names = ["input_ids", "attention_mask"]

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
        tokens = _special_token_texts(config, special_tokens_map)
        self.add_bos_token = _flag(config, "add_bos_token", True)
        self.add_eos_token = _flag(config, "add_eos_token", False)
        self._read_common_config(config, arguments)
        self._set_prefix_space(config, arguments, model_file)
        defaults = {"bos_token": self.sp.bos_id(), "eos_token": self.sp.eos_id(), "unk_token": self.sp.unk_id(),
                    "pad_token": self.sp.pad_id()}
        self._special_tokens = {}  # name -> token text or None; the *_token and *_token_id attributes read it
        self._additional_special_tokens = []  # the vocabulary cannot grow: additional tokens are not loaded
        for name, default in defaults.items():
            text = tokens.get(name)
            tid = self._token_to_id(text) if text else default
            if text and tid is None:
                raise CheckpointError(f"the {name} {text!r} of tokenizer_config.json is not in {model_file}; fix the "
                                      "config")
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

    # ---- the backend --------------------------------------------------------------------------------------

    def _token_to_id(self, text):
        tid = self.sp.piece_to_id(text)
        unk = self.sp.unk_id()
        return None if tid == unk and text != self.sp.id_to_piece(unk) else tid

    def _id_to_token(self, i):
        return self.sp.id_to_piece(i)

    def __len__(self):
        return self.sp.get_piece_size()

    @property
    def vocab_size(self):
        return self.sp.get_piece_size()

    def get_vocab(self):
        """{piece: id} for every id of the vocabulary."""
        return {self.sp.id_to_piece(i): i for i in range(self.sp.get_piece_size())}

    def _add_new_tokens(self, tokens):
        """SentencePiece's vocabulary cannot grow here: tokens it has count 0, any other is refused (nothing
        added)."""
        new = [t for t in tokens if self._token_to_id(t["content"]) is None]
        if new:
            name = new[0].get("name")
            raise InvalidInputError(
                f"{name + '=' if name else ''}{new[0]['content']!r} is not a token of this vocabulary "
                f"({self.vocab_size} tokens) and a SentencePiece "
                "tokenizer cannot grow here (nor can the model's embedding); use a token the vocabulary has, e.g. "
                "tokenizer.pad_token = tokenizer.eos_token")
        return 0

    def _text_ids(self, text):
        """str -> the ids of its tokens, no <s> or </s>; "\u2581" first for add_prefix_space (see _set_prefix_space)."""
        return self.sp.encode(_SPIECE_UNDERLINE + text if self._prepend_space and text else text)

    def _specials_around(self):
        bos = [self.bos_token_id] if self.add_bos_token and self.bos_token_id is not None else []
        eos = [self.eos_token_id] if self.add_eos_token and self.eos_token_id is not None else []
        return bos, eos

    def num_special_tokens_to_add(self, pair=False):
        bos, eos = self._specials_around()
        return (len(bos) + len(eos)) * (2 if pair else 1)

    def _post_process(self, ids, pair_ids, add_special_tokens):
        """Transformers' slow LlamaTokenizer: <s> A </s> (<s> B </s>), token type 0 for the first part, 1 for the
        second."""
        bos, eos = self._specials_around() if add_special_tokens else ([], [])
        first = bos + ids + eos
        second = bos + pair_ids + eos if pair_ids is not None else []
        return first + second, [0] * len(first) + [1] * len(second)

    def _decode_ids(self, ids, skip_special_tokens):
        """Special tokens (the control pieces and all_special_ids, as Transformers' slow tokenizer) written as
        their piece or skipped. With add_prefix_space (where this tokenizer adds the space itself), one leading
        space of the result is dropped, as Transformers' decoder strips the space it added."""
        out, run = [], []
        special = self._special | {self.sp.piece_to_id(t) for t in self._special_tokens.values() if t is not None}
        for i in ids:
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

    def _check_legacy_format(self, legacy_format):
        if legacy_format is False:
            raise InvalidInputError("save_pretrained: legacy_format=False writes only tokenizer.json, which a "
                                    "SentencePiece tokenizer does not have; leave legacy_format unset")

    def _files_to_save(self, config):
        config.setdefault("tokenizer_class", "LlamaTokenizer")
        config.update(add_bos_token=bool(self.add_bos_token), add_eos_token=bool(self.add_eos_token))
        for key in ("add_prefix_space", "legacy"):  # fixed at load; written where set, as Transformers does
            if getattr(self, key) is not None:
                config[key] = getattr(self, key)
        return [(TOKENIZER_FILE, self._proto)]

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *inputs, **kwargs):
        """A directory (or a shipped model's name) with tokenizer.model -> LlamaTokenizer; see
        AutoTokenizer.from_pretrained for the keyword arguments."""
        directory, config, special_map, overrides = _read_directory(pretrained_model_name_or_path, inputs, kwargs)
        model_file = os.path.join(directory, TOKENIZER_FILE)
        if not os.path.exists(model_file):
            raise CheckpointNotFoundError(f"{directory}: no {TOKENIZER_FILE}, which LlamaTokenizer reads; use "
                                          "AutoTokenizer.from_pretrained, which reads tokenizer.json too")
        tok = cls(model_file, config, special_map, arguments=set(overrides))
        tok._apply_token_arguments(kwargs)
        return tok

    def _apply_token_arguments(self, kwargs):
        for name in _TOKEN_ARGUMENTS & set(kwargs):
            setattr(self, name, kwargs[name])


def _special_token_texts(config, special_tokens_map):
    """{name: text or None} of bos/eos/unk/pad: special_tokens_map.json's, overridden by tokenizer_config.json's
    (null there unsets); CheckpointError naming the file for a value that is not a token string."""
    special_tokens_map = special_tokens_map or {}
    tokens = {**{k: _token_text(v) for k, v in special_tokens_map.items() if k in _SPECIAL_NAMES},
              **{k: _token_text(config[k]) for k in _SPECIAL_NAMES if k in config}}
    for name in _SPECIAL_NAMES:
        text = tokens.get(name)
        if text is not None and not (isinstance(text, str) and _encodable(text)):
            source = TOKENIZER_CONFIG_FILE if name in config else SPECIAL_TOKENS_MAP_FILE
            raise CheckpointError(f"{source}: {name} is {text!r}; expected a string (or {{\"content\": string}}) "
                                  "of valid UTF-8 — fix the file")
    return tokens


def _read_directory(pretrained_model_name_or_path, inputs, kwargs):
    """from_pretrained's path and keyword arguments -> (directory, config with the arguments' overrides,
    special_tokens_map.json, the overrides); InvalidInputError for an argument it does not take."""
    if inputs:
        raise InvalidInputError(f"from_pretrained takes the path and keyword arguments only; got {len(inputs)} "
                                "more positional argument(s)")
    unknown = sorted(set(kwargs) - _CONFIG_ARGUMENTS - _TOKEN_ARGUMENTS - _IGNORED_ARGUMENTS - {"subfolder"})
    if unknown:
        raise InvalidInputError(
            f"AutoTokenizer.from_pretrained: {', '.join(f'{k}={kwargs[k]!r}' for k in unknown)} is not supported "
            "(it would change tokenization in a way this package does not reproduce); leave it out. Accepted: "
            f"{', '.join(sorted(_CONFIG_ARGUMENTS | _TOKEN_ARGUMENTS | {'subfolder', 'use_fast'}))} and the hub "
            "arguments")
    use_fast = kwargs.get("use_fast", True)
    if not isinstance(use_fast, bool):
        raise InvalidInputError(f"use_fast={use_fast!r}; pass True (tokenizer.json where the checkpoint has one) "
                                "or False (tokenizer.model)")
    overrides = {k: kwargs[k] for k in _CONFIG_ARGUMENTS if k in kwargs}
    _check_config_arguments(overrides)
    directory = resolve(pretrained_model_name_or_path)
    subfolder = kwargs.get("subfolder")
    if subfolder:
        if not isinstance(subfolder, str) or not os.path.isdir(os.path.join(directory, subfolder)):
            raise InvalidInputError(f"subfolder={subfolder!r}: no such folder in {directory}")
        directory = os.path.join(directory, subfolder)
    config = {**_read_json(os.path.join(directory, TOKENIZER_CONFIG_FILE)), **overrides}
    template_file = os.path.join(directory, CHAT_TEMPLATE_FILE)
    if os.path.exists(template_file):  # Transformers: chat_template.jinja overrides the config's template
        try:
            with open(template_file, encoding="utf-8") as f:
                config["chat_template"] = f.read()
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{template_file} cannot be read as UTF-8 text ({e}); fix or delete it") from None
    return directory, config, _read_json(os.path.join(directory, SPECIAL_TOKENS_MAP_FILE)), overrides


# tokenizer_class values of tokenizer_config.json whose Transformers fast class always rewrites the post-processor
# from bos/eos and add_bos_token (default true) / add_eos_token (default false) (update_post_processor in __init__).
_LLAMA_CLASSES = frozenset({"LlamaTokenizer", "LlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast",
                            "CodeLlamaTokenizer", "CodeLlamaTokenizerFast"})
# Classes whose model_input_names leave out token_type_ids (PreTrainedTokenizerFast's default has them).
_NO_TYPE_IDS_CLASSES = _LLAMA_CLASSES | {"Qwen2Tokenizer", "Qwen2TokenizerFast", "GPT2Tokenizer",
                                         "GPT2TokenizerFast", "GPTNeoXTokenizerFast", "CodeGenTokenizer",
                                         "CodeGenTokenizerFast"}
# Config keys with which Transformers rebuilds the normalizer or pre-tokenizer (BERT-style classes) or converts the
# slow tokenizer instead of reading tokenizer.json: not reproduced, so refused where set.
_REBUILDING_KEYS = ("do_lower_case", "strip_accents", "tokenize_chinese_chars", "from_slow")


class PreTrainedTokenizerFast(PreTrainedTokenizerBase):
    """A tokenizer.json tokenizer (Transformers' PreTrainedTokenizerFast and its Llama/Gemma/Qwen2/GPT-2 fast
    classes), backed by habana_assist.tokenizer_json.TokenizerJSON. Build it with AutoTokenizer.from_pretrained.

    From tokenizer_config.json (and special_tokens_map.json): bos/eos/unk/pad_token and additional_special_tokens
    (added to the vocabulary as special tokens where tokenizer.json lacks them, as Transformers does),
    added_tokens_decoder (tokens tokenizer.json lacks are added with their flags, at the ids the file gives),
    add_bos_token/add_eos_token (they rewrite the post-processor as Transformers' update_post_processor: always for
    the Llama and Gemma classes, where either key is set for the others), and the keys of
    PreTrainedTokenizerBase."""

    _fast_truncation = True
    _default_max_length = _VERY_LARGE_INTEGER

    def __init__(self, json_file, config=None, special_tokens_map=None, arguments=()):
        from .tokenizer_json import TokenizerJSON
        self._tok = TokenizerJSON.load(json_file)
        config = dict(config or {})
        self._loaded_config, self._loaded_special = copy.deepcopy(config), copy.deepcopy(dict(special_tokens_map or {}))
        self._class = config.get("tokenizer_class") or "PreTrainedTokenizerFast"
        if not isinstance(self._class, str):
            raise CheckpointError(f"tokenizer_config.json: tokenizer_class={self._class!r} must be a string")
        self.model_input_names = ["input_ids", "attention_mask"] if self._class in _NO_TYPE_IDS_CLASSES else \
            ["input_ids", "token_type_ids", "attention_mask"]
        defaults = self._defaults_from_json(json_file)
        self._read_common_config({**defaults, **config}, arguments)
        self._check_unreproduced(config, arguments)
        self._bound = 0
        self._add_config_tokens(config, json_file)
        tokens = _special_token_texts(config, special_tokens_map)
        if "pad_token" in defaults and "pad_token" not in tokens:
            tokens["pad_token"] = defaults["pad_token"]
        self._special_tokens = {name: tokens.get(name) for name in _SPECIAL_NAMES}
        self._additional_special_tokens = self._additional_from(config, special_tokens_map)
        # Transformers adds every special token the tokenizer lacks as an added (special) token.
        specs, added = [], {t.content for t in self._tok.added_tokens}
        for name, value in [(n, config.get(n, (special_tokens_map or {}).get(n))) for n in _SPECIAL_NAMES]:
            text = self._special_tokens[name]
            if text is not None and not self._is_added(text, added):
                specs.append(_token_spec(value if isinstance(value, dict) else text, True, name))
        specs += [_token_spec(t, True, "additional_special_tokens") for t in self._additional_special_tokens
                  if not self._is_added(t, added)]
        self._add_new_tokens(specs)
        self._extra_special_tokens = self._extra_from(config)
        # add_bos_token / add_eos_token: Transformers' update_post_processor, where its class would call it.
        explicit = "add_bos_token" in config or "add_eos_token" in config
        self._manages_template = self._class in _LLAMA_CLASSES or explicit
        default_bos = self._class in _LLAMA_CLASSES
        self._add_bos_token = _flag(config, "add_bos_token", default_bos)
        self._add_eos_token = _flag(config, "add_eos_token", False)
        if self._manages_template:
            self._update_post_processor(source="tokenizer_config.json")

    def _defaults_from_json(self, json_file):
        """Transformers' fast __init__ takes truncation_side, padding_side and pad_token from tokenizer.json's
        truncation and padding where set (tokenizer_config.json's keys win)."""
        out = {}
        truncation, padding = self._tok.truncation, self._tok.padding
        if isinstance(truncation, dict) and truncation.get("direction") in ("Left", "Right"):
            out["truncation_side"] = truncation["direction"].lower()
        if isinstance(padding, dict):
            if padding.get("direction") in ("Left", "Right"):
                out["padding_side"] = padding["direction"].lower()
            if isinstance(padding.get("pad_token"), str):
                out["pad_token"] = padding["pad_token"]
        return out

    def _check_unreproduced(self, config, arguments):
        """CheckpointError (InvalidInputError for an argument) for config keys with which Transformers would
        tokenize differently from tokenizer.json and which are not reproduced here."""
        for key in _REBUILDING_KEYS:
            if config.get(key) not in (None, False):
                self._refuse(key, config[key], arguments, "Transformers rebuilds the tokenizer.json pipeline from it "
                             "(or converts the slow tokenizer), which this package does not reproduce")
        value = config.get("add_prefix_space")
        if value not in (None, True, False):
            self._refuse("add_prefix_space", value, arguments, "it must be true, false or null")
        if value is not None:
            if self._class in _LLAMA_CLASSES:
                self._refuse("add_prefix_space", value, arguments, f"Transformers' {self._class} then converts "
                             "tokenizer.model instead of reading tokenizer.json, which this package does not do")
            pre = self._tok.to_dict().get("pre_tokenizer")
            if isinstance(pre, dict) and "add_prefix_space" in pre and pre["add_prefix_space"] != value:
                self._refuse("add_prefix_space", value, arguments, "it differs from tokenizer.json's pre_tokenizer "
                             f"(add_prefix_space={pre['add_prefix_space']}), which Transformers would rewrite; "
                             "this package does not")
        self.add_prefix_space, self.legacy = value, config.get("legacy")

    @staticmethod
    def _refuse(key, value, arguments, why):
        if key in arguments:
            raise InvalidInputError(f"{key}={value!r} is not supported for a tokenizer.json tokenizer: {why}; "
                                    "leave it out")
        raise CheckpointError(f"tokenizer_config.json: {key}={value!r} is not supported: {why}; remove the key "
                              "(or load tokenizer.model with use_fast=False)")

    def _is_added(self, text, added=None):
        """Whether text is an added token (added: a set of their contents, to reuse across many questions)."""
        return text in (added if added is not None else {t.content for t in self._tok.added_tokens})

    def _add_config_tokens(self, config, json_file):
        """tokenizer_config.json's added_tokens_decoder {"id": {"content", flags}}: tokens tokenizer.json lacks
        are added with their flags; each must get (or have) the id the file gives it."""
        from .tokenizer_json import AddedToken
        table = config.get("added_tokens_decoder") or {}
        if not isinstance(table, dict):
            raise CheckpointError("tokenizer_config.json: added_tokens_decoder must be an object {id: token}")
        entries, added = [], {t.content for t in self._tok.added_tokens}
        for key, value in table.items():
            if not (isinstance(key, str) and key.isdigit() and isinstance(value, dict) and
                    isinstance(value.get("content"), str) and value["content"] and _encodable(value["content"])):
                raise CheckpointError(f"tokenizer_config.json: added_tokens_decoder[{key!r}] = {value!r}: expected "
                                      "a token id and {\"content\": non-empty string, ...}; fix the file")
            for flag in ("special", "single_word", "lstrip", "rstrip", "normalized"):
                if not isinstance(value.get(flag, False), bool):
                    raise CheckpointError(f"tokenizer_config.json: added_tokens_decoder[{key!r}].{flag}="
                                          f"{value[flag]!r} must be true or false; fix the file")
            entries.append((int(key), value))
        for want, value in sorted(entries, key=lambda e: e[0]):
            content = value["content"]
            have = self._tok.token_to_id(content)
            if have is not None and have != want:
                raise CheckpointError(f"tokenizer_config.json: added_tokens_decoder gives {content!r} id {want} but "
                                      f"{json_file} has it at id {have}; the files do not belong together")
            if have is not None and content in added:
                continue
            flags = {f: value[f] for f in ("special", "single_word", "lstrip", "rstrip", "normalized") if f in value}
            self._tok.add_tokens([AddedToken(content, **flags)])
            got = self._tok.token_to_id(content)
            if got != want:
                raise CheckpointError(f"tokenizer_config.json: added_tokens_decoder gives {content!r} id {want}, but "
                                      f"added after {json_file}'s tokens it gets id {got} (ids must follow the "
                                      "vocabulary without gaps); fix the ids")
        self._bound = 0

    def _additional_from(self, config, special_tokens_map):
        value = config.get("additional_special_tokens", (special_tokens_map or {}).get("additional_special_tokens"))
        extra = config.get("extra_special_tokens")
        if value is None and isinstance(extra, list):  # Transformers 5 writes the list under this name
            value = extra
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(_token_text(t), str) and _token_text(t) for t in value):
            raise CheckpointError(f"tokenizer_config.json: additional_special_tokens={value!r} must be a list of "
                                  "tokens (strings or {\"content\": string}); fix the file")
        return list(dict.fromkeys(_token_text(t) for t in value))

    def _extra_from(self, config):
        """extra_special_tokens {name: token} (Transformers 4.50+: model-specific special tokens such as
        Gemma 3's image_token) -> {name: text}; each is an attribute (tok.image_token, tok.image_token_id) and
        a key of special_tokens_map."""
        extra = config.get("extra_special_tokens")
        if extra is None or isinstance(extra, list):
            return {}
        if not isinstance(extra, dict) or not all(isinstance(k, str) and k.endswith("_token") and
                                                  isinstance(_token_text(v), str) for k, v in extra.items()):
            raise CheckpointError(f"tokenizer_config.json: extra_special_tokens={extra!r} must map names ending in "
                                  "_token to token strings; fix the file")
        out = {k: _token_text(v) for k, v in extra.items()}
        missing = [t for t in out.values() if self._tok.token_to_id(t) is None]
        if missing:
            raise CheckpointError(f"tokenizer_config.json: extra_special_tokens names {missing[0]!r}, which the "
                                  "tokenizer does not have; fix the file")
        return out

    def __getattr__(self, name):
        extra = self.__dict__.get("_extra_special_tokens") or {}
        if name in extra:
            return extra[name]
        if name.endswith("_id") and name[:-3] in extra:
            return self._tok.token_to_id(extra[name[:-3]])
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def special_tokens_map(self):
        return {**super().special_tokens_map, **self._extra_special_tokens}

    @property
    def all_special_tokens(self):
        return list(dict.fromkeys(super().all_special_tokens + list(self._extra_special_tokens.values())))

    # ---- add_bos_token / add_eos_token ------------------------------------------------------------------------

    @property
    def add_bos_token(self):
        return self._add_bos_token

    @add_bos_token.setter
    def add_bos_token(self, value):
        self._set_add_flags(bool(value), self._add_eos_token)

    @property
    def add_eos_token(self):
        return self._add_eos_token

    @add_eos_token.setter
    def add_eos_token(self, value):
        self._set_add_flags(self._add_bos_token, bool(value))

    def _set_add_flags(self, add_bos, add_eos):
        before = (self._add_bos_token, self._add_eos_token, self._manages_template)
        self._add_bos_token, self._add_eos_token, self._manages_template = add_bos, add_eos, True
        try:
            self._update_post_processor()
        except InvalidInputError:
            self._add_bos_token, self._add_eos_token, self._manages_template = before
            raise

    def _update_post_processor(self, source=None):
        """Transformers' update_post_processor: [bos] A [eos] ([bos] B [eos]) from the current tokens and flags."""
        for name, on in (("bos", self._add_bos_token), ("eos", self._add_eos_token)):
            if on and self._special_tokens[name + "_token"] is None:
                message = f"add_{name}_token is true but {name}_token is null"
                if source:
                    raise CheckpointError(f"{source}: {message}; set {name}_token or add_{name}_token=false")
                raise InvalidInputError(f"{message}; set tokenizer.{name}_token first")
        self._tok.set_template(self._special_tokens["bos_token"], self._special_tokens["eos_token"],
                               self._add_bos_token, self._add_eos_token)

    def _special_tokens_changed(self):
        if self._manages_template:
            self._update_post_processor()

    # ---- the backend --------------------------------------------------------------------------------------

    def _token_to_id(self, text):
        return self._tok.token_to_id(text)

    def _id_to_token(self, i):
        return self._tok.id_to_token(i)

    def _check_ids(self, ids):
        ids = _int_list(ids, "token ids")
        for i in ids:
            if self._tok.id_to_token(i) is None:
                raise InvalidInputError(f"token id {i} is outside this tokenizer's vocabulary ({len(self)} tokens); "
                                        "use the tokenizer that belongs to the model")
        return ids

    def __len__(self):
        return len(self._tok)

    @property
    def vocab_size(self):
        """The model's vocabulary without added tokens (Transformers' vocab_size); len(tok) counts them."""
        return self._tok.vocab_size

    def get_vocab(self):
        """{token: id}, added tokens included (Transformers' fast get_vocab)."""
        return self._tok.get_vocab()

    @property
    def added_tokens_decoder(self):
        """{id: AddedToken} of the added tokens, by id."""
        return {t.id: t for t in sorted(self._tok.added_tokens, key=lambda t: t.id)}

    def _add_new_tokens(self, tokens):
        from .tokenizer_json import AddedToken
        return self._tok.add_tokens([AddedToken(t["content"], None, t["special"], t["single_word"], t["lstrip"],
                                                t["rstrip"], t["normalized"]) for t in tokens]) if tokens else 0

    def _text_ids(self, text):
        return self._tok.text_ids(text)

    def num_special_tokens_to_add(self, pair=False):
        return self._tok.num_special_tokens_to_add(pair)

    def _post_process(self, ids, pair_ids, add_special_tokens):
        return self._tok.post_process(ids, pair_ids, add_special_tokens, return_type_ids=True)

    def _decode_ids(self, ids, skip_special_tokens):
        """Rust tokenizers' decode: skip_special_tokens leaves out the special added tokens."""
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def _files_to_save(self, config):
        config.setdefault("tokenizer_class", self._class)
        if self._manages_template:
            config.update(add_bos_token=self._add_bos_token, add_eos_token=self._add_eos_token)
        config["added_tokens_decoder"] = {
            str(t.id): {k: v for k, v in t.to_dict().items() if k != "id"}
            for t in sorted(self._tok.added_tokens, key=lambda t: t.id)}
        data = json.dumps(self._tok.to_dict(), indent=2, ensure_ascii=False) + "\n"
        return [(TOKENIZER_JSON_FILE, data.encode("utf-8"))]

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *inputs, **kwargs):
        """A directory (or a shipped model's name) with tokenizer.json -> PreTrainedTokenizerFast; see
        AutoTokenizer.from_pretrained for the keyword arguments."""
        directory, config, special_map, overrides = _read_directory(pretrained_model_name_or_path, inputs, kwargs)
        json_file = os.path.join(directory, TOKENIZER_JSON_FILE)
        if not os.path.exists(json_file):
            raise CheckpointNotFoundError(f"{directory}: no {TOKENIZER_JSON_FILE}, which PreTrainedTokenizerFast "
                                          "reads; use AutoTokenizer.from_pretrained, which reads tokenizer.model too")
        tok = cls(json_file, config, special_map, arguments=set(overrides))
        for name in _TOKEN_ARGUMENTS & set(kwargs):  # Transformers adds a new one; here it must be a token
            setattr(tok, name, kwargs[name])
        return tok


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
    """Transformers-style entry point: from_pretrained(directory or shipped name) -> PreTrainedTokenizerFast where
    the directory has tokenizer.json, else LlamaTokenizer (tokenizer.model)."""

    def __init__(self):
        raise TypeError("use AutoTokenizer.from_pretrained(path)")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *inputs, **kwargs):
        """A directory (or a shipped model's name) -> a tokenizer. Which file: tokenizer.json where there is one
        (Transformers' fast tokenizer), else tokenizer.model; use_fast=False prefers tokenizer.model where both
        exist (Transformers' slow tokenizer), and still reads tokenizer.json where it is the only file. Keyword
        arguments, as Transformers':

        - padding_side, truncation_side ("left"/"right"), model_max_length (int >= 1), add_bos_token,
          add_eos_token, clean_up_tokenization_spaces (bool), split_special_tokens (False only): override
          tokenizer_config.json (and are saved by save_pretrained);
        - bos_token, eos_token, unk_token, pad_token: a token the tokenizer has (set as tokenizer.pad_token = ...);
        - add_prefix_space, legacy (True/False/None): see LlamaTokenizer._set_prefix_space; a tokenizer.json
          tokenizer refuses an add_prefix_space that would rewrite its pre-tokenizer;
        - subfolder: the tokenizer files are in that folder of the directory;
        - use_fast (True/False): which file, above;
        - trust_remote_code, revision, token, use_auth_token, cache_dir, local_files_only, force_download,
          resume_download, proxies: hub arguments, accepted and ignored, since the tokenizer is always read from a
          local directory (nothing is downloaded, and no code from a checkpoint is ever run).
        Anything else raises InvalidInputError naming it."""
        directory = resolve(pretrained_model_name_or_path)
        subfolder = kwargs.get("subfolder")
        if subfolder and isinstance(subfolder, str) and os.path.isdir(os.path.join(directory, subfolder)):
            directory = os.path.join(directory, subfolder)
        has_json = os.path.exists(os.path.join(directory, TOKENIZER_JSON_FILE))
        has_model = os.path.exists(os.path.join(directory, TOKENIZER_FILE))
        if has_json and not (kwargs.get("use_fast", True) is False and has_model):
            return PreTrainedTokenizerFast.from_pretrained(pretrained_model_name_or_path, *inputs, **kwargs)
        if not has_model and not has_json:
            _read_directory(pretrained_model_name_or_path, inputs, kwargs)  # its argument errors come first
            raise CheckpointNotFoundError(f"{directory}: no {TOKENIZER_JSON_FILE} and no {TOKENIZER_FILE}; a "
                                          "checkpoint's tokenizer is one of these files")
        return LlamaTokenizer.from_pretrained(pretrained_model_name_or_path, *inputs, **kwargs)
