"""The SentencePiece backend of habana_assist.tokenization: LlamaTokenizer (tokenizer.model, through Debian's
python3-sentencepiece; Transformers' slow LlamaTokenizer) and the protobuf helpers it reads the model file with
(_proto_fields, _bad_piece, _normalizer_spec). The shared surface is PreTrainedTokenizerBase in tokenization.py,
which re-exports everything here; build one with AutoTokenizer.from_pretrained or LlamaTokenizer.from_pretrained.
"""

import copy

from ..errors import CheckpointError, InvalidInputError
from .tokenizer_json import check_text
from .tokenization_utils import (TOKENIZER_FILE, PreTrainedTokenizerBase, _flag,
                           _special_token_texts)


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


class LlamaTokenizer(PreTrainedTokenizerBase):
    """A SentencePiece tokenizer (Llama's kind, Transformers' slow LlamaTokenizer). Build it with
    AutoTokenizer.from_pretrained(path) (from a directory with tokenizer.model and no tokenizer.json, or with
    use_fast=False) or LlamaTokenizer.from_pretrained(path)."""

    model_input_names = ["input_ids", "attention_mask"]
    _FILE = TOKENIZER_FILE  # what from_pretrained reads

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
        check_text(text)
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
