"""The SentencePiece backend of habana_assist.tokenization: LlamaTokenizer (tokenizer.model, through Debian's
python3-sentencepiece; Transformers' slow LlamaTokenizer) and the protobuf helpers it reads the model file with
(_proto_fields, _bad_piece, _normalizer_spec). The shared surface is PreTrainedTokenizerBase in
tokenization_utils_base.py, below this module; tokenization_utils.py, above it, re-exports everything here; build
one with AutoTokenizer.from_pretrained or LlamaTokenizer.from_pretrained.

Added tokens work as in Transformers' slow tokenizers (PreTrainedTokenizer.tokenize over its tokens trie): the
special tokens and every added token are split out of the text first (leftmost, longest), an AddedToken's
lstrip/rstrip take the whitespace beside it, single_word keeps it inside a word, and sentencepiece encodes the
text between them; `legacy` decides whether each such piece starts with sentencepiece's space (Llama's legacy
behaviour) or only the text's first. Tokens the model lacks get the ids after its pieces.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Optional

from ..errors import CheckpointError, InvalidInputError
from .tokenization_utils_base import PreTrainedTokenizerBase
from .tokenizer_files import (
    _SPECIAL_NAMES,
    ADDED_TOKENS_FILE,
    TOKENIZER_FILE,
    _added_tokens_decoder,
    _added_tokens_json,
    _additional_special_tokens,
    _flag,
    _json_bytes,
    _special_token_texts,
    _token_spec,
    _token_text,
)
from .tokenizer_json import AddedToken, _trie_pattern, check_text


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
            value, i = data[i : i + n], i + n
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

    def __init__(
        self,
        model_file: str,
        config: Optional[dict[str, Any]] = None,
        special_tokens_map: Optional[dict[str, Any]] = None,
        arguments: Any = (),
    ) -> None:
        """arguments: the keys of config that came from from_pretrained's keyword arguments, not from the file
        (their refusals are InvalidInputError naming the argument rather than CheckpointError naming the file)."""
        try:
            import sentencepiece
        except ImportError:
            raise ImportError(
                "habana_assist's tokenizer needs sentencepiece: apt-get install python3-sentencepiece "
                "(scripts/setup.sh does)"
            ) from None
        self.sp = sentencepiece.SentencePieceProcessor()
        try:
            with open(model_file, "rb") as f:
                proto = f.read()
            bad = _bad_piece(proto)
            if bad is not None:  # sentencepiece would abort the process (its trie's keys are non-empty C strings)
                raise CheckpointError(
                    f"{model_file}: piece {bad} is empty or holds a NUL byte, so it is not a "
                    "SentencePiece model or it is corrupt; re-download it"
                )
            self.sp.load_from_serialized_proto(proto)
            self._proto = proto  # written back byte for byte by save_pretrained
        except (OSError, RuntimeError) as e:
            raise CheckpointError(f"{model_file} is not a SentencePiece model ({e}); re-download it") from None
        for i in range(self.sp.get_piece_size()):  # sentencepiece loads such pieces; id_to_piece would raise later
            try:
                self.sp.id_to_piece(i)
            except UnicodeDecodeError:
                raise CheckpointError(
                    f"{model_file}: piece {i} is not valid UTF-8, so it is not a SentencePiece "
                    "model or it is corrupt; re-download it"
                ) from None
        config = dict(config or {})
        # As read, for save_pretrained: it writes them back with what the script changed since.
        self._loaded_config, self._loaded_special = copy.deepcopy(config), copy.deepcopy(dict(special_tokens_map or {}))
        special_map = dict(special_tokens_map or {})
        tokens = _special_token_texts(config, special_map)
        self.add_bos_token = _flag(config, "add_bos_token", True)
        self.add_eos_token = _flag(config, "add_eos_token", False)
        self._read_common_config(config, arguments)
        self._set_prefix_space(config, arguments, model_file)
        # What is split out of the text before sentencepiece (Transformers' added_tokens_decoder and encoder).
        self._added: dict[int, AddedToken] = {}
        self._added_ids: dict[str, int] = {}  # content -> id
        self._past = 0  # how many of them have ids past the model's pieces
        self._split: Any = None  # the added tokens' trie, as a regex (None: no added tokens)
        self._additional_special_tokens = _additional_special_tokens(config, special_map)
        self._load_added_tokens(config, model_file, set(tokens.values()) | set(self._additional_special_tokens))
        defaults = {
            "bos_token": self.sp.bos_id(),
            "eos_token": self.sp.eos_id(),
            "unk_token": self.sp.unk_id(),
            "pad_token": self.sp.pad_id(),
        }
        self._special_tokens = {}  # name -> token text or None; the *_token and *_token_id attributes read it
        for name in _SPECIAL_NAMES:
            text = tokens.get(name)
            if not text and defaults.get(name, -1) >= 0:
                text = self.sp.id_to_piece(defaults[name])
            self._special_tokens[name] = text or None
        # Transformers' slow __init__: every special token becomes a special added token (Llama's bos/eos/unk/pad
        # as AddedToken(normalized=False, special=True) unless the config gives its flags); one the model lacks
        # gets the next id.
        given = {n: config.get(n, special_map.get(n)) for n in _SPECIAL_NAMES}
        specs = [
            dict(
                _token_spec(given[n] if isinstance(given[n], dict) and _token_text(given[n]) == t else t, True, n),
                name=n,
            )
            for n, t in self._special_tokens.items()
            if t is not None and t not in self._added_ids
        ]
        specs += [
            dict(_token_spec(t, True, "additional_special_tokens"), name="additional_special_tokens")
            for t in self._additional_special_tokens
            if t not in self._added_ids
        ]
        self._add_new_tokens(specs)
        # Ids decode() treats as special: the control pieces and the special tokens as loaded (Transformers keeps
        # those in added_tokens_decoder); the current ones are added at each decode.
        self._special = {self._token_to_id(t) for t in self._special_tokens.values() if t is not None} | {
            i for i in range(self.sp.get_piece_size()) if self.sp.is_control(i)
        }

    def _load_added_tokens(self, config, model_file, special_texts):
        """tokenizer_config.json's added_tokens_decoder, else (Transformers' legacy) added_tokens.json beside the
        model ({content: id}; special where the content is a special token). An id the model has keeps its piece
        unless the entry names another content (Transformers lets the entry win); ids past the model must follow
        it without gaps."""
        if "added_tokens_decoder" in config:
            entries, source = _added_tokens_decoder(config), "tokenizer_config.json: added_tokens_decoder"
        else:
            entries, source = _added_tokens_json(os.path.dirname(model_file), special_texts), ADDED_TOKENS_FILE
        for want, value in entries:
            content = value["content"]
            if content in self._added_ids and self._added_ids[content] != want:
                raise CheckpointError(
                    f"{source} gives {content!r} ids {self._added_ids[content]} and {want}; fix the file"
                )
            if want >= self.sp.get_piece_size() and want != len(self) and want not in self._added:
                raise CheckpointError(
                    f"{source} gives {content!r} id {want}, but the next id after {model_file}'s "
                    f"{self.sp.get_piece_size()} pieces and the added tokens before it is "
                    f"{len(self)} (ids must follow without gaps); fix the ids"
                )
            flags = {f: value[f] for f in ("special", "single_word", "lstrip", "rstrip", "normalized") if f in value}
            self._register(AddedToken(content, **flags), want)
        self._rebuild_split()

    def _set_prefix_space(self, config, arguments, model_file):
        """add_prefix_space and legacy (tokenizer_config.json or from_pretrained's arguments), with the meaning
        Transformers' Llama tokenizers give them on text without special tokens: add_prefix_space=True puts one
        "\u2581" (a space) before a non-empty text and decode() drops one leading space of its result;
        add_prefix_space=False puts none (a model whose normalizer adds a dummy prefix is loaded with it off, as
        Transformers does); legacy=False without add_prefix_space means add_prefix_space=True. Unset: the text
        as sentencepiece's own normalizer treats it (Transformers' slow LlamaTokenizer in its legacy mode). With
        added tokens in the text, legacy (unset or true) treats each piece of text between them as a text of its
        own, and legacy=False only the text's first ("Hello <s>." ends "▁." or ".")."""
        for key in ("add_prefix_space", "legacy"):
            value = config.get(key)
            if value not in (None, True, False):
                if key in arguments:
                    raise InvalidInputError(f"{key}={value!r}; pass True, False or None")
                raise CheckpointError(
                    f"tokenizer_config.json: {key}={value!r} must be true, false or null; fix the file"
                )
        self.add_prefix_space, self.legacy = config.get("add_prefix_space"), config.get("legacy")
        want = self.add_prefix_space if self.add_prefix_space is not None else (True if self.legacy is False else None)
        name, dummy_prefix, extra_whitespaces = _normalizer_spec(self._proto)
        # legacy (unset or true): each piece of text between added tokens is encoded as a text of its own (the
        # model's dummy prefix, or "▁", before each); legacy=False: the model without its dummy prefix,
        # "▁" before the text's start only (Transformers' LlamaTokenizer, its tokenize and _tokenize).
        self._legacy = self.legacy is not False
        self._prepend_space = bool(want) and (not dummy_prefix or not self._legacy)
        if want is None or (want == dummy_prefix and (self._legacy or not dummy_prefix)):
            return
        if want == dummy_prefix:  # legacy=False over a dummy prefix: Transformers' way, exact for any normalizer
            self.sp.load_from_serialized_proto(self._proto + _NO_DUMMY_PREFIX)
            return
        if name not in ("identity", "") or extra_whitespaces:
            # Transformers' converted (fast) tokenizer skips these normalizations, its slow one applies them: no
            # single meaning to reproduce.
            key = "add_prefix_space" if self.add_prefix_space is not None else "legacy"
            fix = "leave it unset (the tokenizer then follows sentencepiece's own normalizer)"
            message = (
                f"{key}={config[key]!r} changes where this tokenizer puts a leading space, which is exact only "
                f"for an 'identity' sentencepiece normalizer that keeps whitespace; {model_file} has "
                f"normalizer {name!r} with remove_extra_whitespaces={extra_whitespaces}: {fix}"
            )
            if key in arguments:
                raise InvalidInputError(message)
            raise CheckpointError(f"tokenizer_config.json: {message}")
        if not want:  # the model's normalizer adds a dummy prefix: load it with that off
            self.sp.load_from_serialized_proto(self._proto + _NO_DUMMY_PREFIX)

    # ---- the backend --------------------------------------------------------------------------------------

    def _sp_id(self, text):
        """The id of a piece of the model, or None."""
        tid = self.sp.piece_to_id(text)
        unk = self.sp.unk_id()
        return None if tid == unk and text != self.sp.id_to_piece(unk) else tid

    def _token_to_id(self, text):
        tid = self._added_ids.get(text)
        return self._sp_id(text) if tid is None else tid

    def _id_to_token(self, i):
        token = self._added.get(i)
        return self.sp.id_to_piece(i) if token is None else token.content

    def __len__(self) -> int:
        """The model's pieces and the added tokens past them (Transformers' len(tokenizer))."""
        return self.sp.get_piece_size() + self._past

    @property
    def vocab_size(self) -> int:
        """The model's pieces, without the tokens added past them (Transformers' vocab_size)."""
        return self.sp.get_piece_size()

    def get_vocab(self) -> dict[str, int]:
        """{token: id} for every id, added tokens included."""
        vocab = {self.sp.id_to_piece(i): i for i in range(self.sp.get_piece_size())}
        vocab.update(self._added_ids)
        return vocab

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        """{id: AddedToken} of the added tokens (the special tokens among them), by id."""
        return {i: self._added[i] for i in sorted(self._added)}

    def _register(self, token, tid):
        before = self._added.get(tid)
        if before is not None and before.content != token.content:
            self._added_ids.pop(before.content, None)
        self._past += before is None and tid >= self.sp.get_piece_size()
        token.id = tid
        self._added[tid], self._added_ids[token.content] = token, tid

    def _rebuild_split(self):
        self._split = _trie_pattern([t.content for t in self._added.values()]) if self._added else None

    def _add_new_tokens(self, specs):
        """Transformers' slow _add_tokens: a token already added is left as it is when given as a str and takes
        the new flags when given as an AddedToken; a piece of the model becomes an added token with its id; any
        other gets the next id. A special token given to add_tokens (no "name" in its spec) joins
        additional_special_tokens where it is no special token yet. -> how many got new ids."""
        new = 0
        for spec in specs:
            content = spec["content"]
            tid = self._token_to_id(content)
            if content in self._added_ids and not spec.get("flags_given"):
                continue
            special = spec["special"] or (not spec.get("flags_given") and content in self.all_special_tokens)
            normalized = spec["normalized"] if spec.get("flags_given") else not special
            if tid is None:
                tid, new = len(self), new + 1
            self._register(
                AddedToken(
                    content,
                    single_word=spec["single_word"],
                    lstrip=spec["lstrip"],
                    rstrip=spec["rstrip"],
                    normalized=normalized,
                    special=special,
                ),
                tid,
            )
            if special and "name" not in spec and content not in self.all_special_tokens:
                self._additional_special_tokens.append(content)
        self._rebuild_split()
        return new

    # ---- text -> ids ----------------------------------------------------------------------------------------

    def _split_added(self, text):
        """Transformers' slow tokenize before _tokenize: text -> [str], the added tokens' contents and the text
        between them, whitespace beside a token taken by its lstrip/rstrip (Python's str.strip), a single_word
        token next to a non-space put back into its neighbour."""
        if self._split is None or not text:
            return [text] if text else []
        pieces, at = [], 0
        for m in self._split.finditer(text):
            if m.start() > at:
                pieces.append(text[at : m.start()])
            pieces.append(m.group())
            at = m.end()
        if at < len(text):
            pieces.append(text[at:])
        for i, piece in enumerate(pieces):
            if piece not in self._added_ids:
                continue
            token = self._added[self._added_ids[piece]]
            left = pieces[i - 1] if i > 0 else None
            right = pieces[i + 1] if i < len(pieces) - 1 else None
            if token.rstrip and right:
                pieces[i + 1] = right.lstrip()
            if token.lstrip and left:
                pieces[i - 1] = left.rstrip()
            if token.single_word and left and left[-1] != " ":
                pieces[i - 1] += piece
                pieces[i] = ""
            elif token.single_word and right and right[0] != " ":
                pieces[i + 1] = piece + pieces[i + 1]
                pieces[i] = ""
        return [p for p in pieces if p]

    def _sp_encode(self, text):
        """One piece of text between added tokens -> sentencepiece's ids (Transformers' LlamaTokenizer._tokenize):
        legacy, with the model's own dummy prefix ("▁" first for add_prefix_space where the model has none);
        not legacy (the model loaded without its dummy prefix), a piece that starts with a space encoded as if text
        came before it (the unk piece, dropped after)."""
        if self._legacy:
            return self.sp.encode(_SPIECE_UNDERLINE + text if self._prepend_space else text)
        if not text.startswith((_SPIECE_UNDERLINE, " ")):
            return self.sp.encode(text)
        unk = self.sp.id_to_piece(self.sp.unk_id()) if self.sp.unk_id() >= 0 else ""
        ids = self.sp.encode(unk + text)
        n = len(self.sp.encode(unk)) if unk else 0
        return ids[n:] if len(ids) >= n else ids

    def _text_ids(self, text, split_special_tokens=False):
        """str -> ids, no <s> or </s>: Transformers' slow LlamaTokenizer.tokenize. split_special_tokens: nothing is
        split out (Transformers' slow tokenizers then pass the whole text to sentencepiece)."""
        check_text(text)
        if not text:
            return []
        if not self._legacy:
            text = text.replace(_SPIECE_UNDERLINE, " ")
            if self._prepend_space:
                text = _SPIECE_UNDERLINE + text
        pieces = [text] if split_special_tokens else self._split_added(text)
        ids = []
        for piece in pieces:
            tid = None if split_special_tokens else self._added_ids.get(piece)
            ids.extend(self._sp_encode(piece) if tid is None else [tid])
        if (
            not self._legacy
            and len(ids) > 1
            and ids[0] == self._sp_id(_SPIECE_UNDERLINE)
            and self._id_to_token(ids[1]) in self.all_special_tokens
        ):
            ids = ids[1:]  # the space put before a special token that starts the text
        return ids

    def _specials_around(self):
        bos = [self.bos_token_id] if self.add_bos_token and self.bos_token_id is not None else []
        eos = [self.eos_token_id] if self.add_eos_token and self.eos_token_id is not None else []
        return bos, eos

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
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
        their text or skipped; added tokens written as their text, sentencepiece decoding the runs between. With
        add_prefix_space (where this tokenizer adds the space itself), one leading space of the result is dropped,
        as Transformers' decoder strips the space it added."""
        special = self._special | {self._token_to_id(t) for t in self.all_special_tokens}
        pieces = []
        for i in ids:
            if skip_special_tokens and i in special:
                continue
            pieces.append(
                (i, None)
                if i < self.sp.get_piece_size() and i not in self._added and i not in special
                else (None, self._id_to_token(i))
            )
        return self._join(pieces, lambda run: self.sp.decode([i for i, _ in run]))

    def _tokens_to_string(self, tokens):
        """Token strings -> text as decode() writes their ids (special and added tokens as they are, pieces through
        sentencepiece; a string that is no piece decodes as sentencepiece's unknown)."""
        special = set(self.all_special_tokens) | {self.sp.id_to_piece(i) for i in self._special}
        pieces = [(None, t) if t in self._added_ids or t in special else (t, None) for t in tokens]
        return self._join(pieces, lambda run: self.sp.decode_pieces([t for t, _ in run]))

    def _join(self, pieces, decode_run):
        """[(piece, None) to decode | (None, text as it is)] -> the text, runs of pieces decoded together."""
        out, run = [], []
        for piece, text in pieces:
            if text is None:
                run.append((piece, None))
                continue
            if run:
                out.append(decode_run(run))
                run = []
            out.append(text)
        if run:
            out.append(decode_run(run))
        text = "".join(out)
        return text[1:] if self._prepend_space and text.startswith(" ") else text

    def _check_legacy_format(self, legacy_format):
        if legacy_format is False:
            raise InvalidInputError(
                "save_pretrained: legacy_format=False writes only tokenizer.json, which a "
                "SentencePiece tokenizer does not have; leave legacy_format unset"
            )

    def _files_to_save(self, config):
        """tokenizer.model as loaded; the added tokens as Transformers' slow tokenizers write them:
        tokenizer_config.json's added_tokens_decoder (every one) and added_tokens.json (those past the model)."""
        config.setdefault("tokenizer_class", "LlamaTokenizer")
        config.update(add_bos_token=bool(self.add_bos_token), add_eos_token=bool(self.add_eos_token))
        for key in ("add_prefix_space", "legacy"):  # fixed at load; written where set, as Transformers does
            if getattr(self, key) is not None:
                config[key] = getattr(self, key)
        config["added_tokens_decoder"] = {
            str(i): {k: v for k, v in t.to_dict().items() if k != "id"} for i, t in self.added_tokens_decoder.items()
        }
        files = [(TOKENIZER_FILE, self._proto)]
        past = {t.content: i for i, t in self.added_tokens_decoder.items() if i >= self.vocab_size}
        if past:
            files.append((ADDED_TOKENS_FILE, _json_bytes(past)))
        return files
