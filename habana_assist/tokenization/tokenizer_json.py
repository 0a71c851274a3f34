"""tokenizer.json: Hugging Face tokenizers' pipeline, read from the file and run as its Rust library runs it.

encode(text): the text is split on added tokens (special ones match the raw text; "normalized" ones match the
normalized text), each other piece is normalized, pre-tokenized into words and the words are encoded by the
model (BPE: merges in C, csrc/tokenizer/bpe.c, with a cache of words already seen); then the post-processor adds its
special tokens. decode(ids): the ids' token strings go through the decoders. Supported components (anything
else is a CheckpointError naming it, never a silently different tokenization):

    model           BPE (byte-level; byte_fallback; ignore_merges; fuse_unk; dropout null or 0)
    normalizers     NFC NFD NFKC NFKD Lowercase Strip StripAccents Replace Prepend Sequence
    pre_tokenizers  ByteLevel Split Metaspace Digits Whitespace WhitespaceSplit Punctuation Sequence
    post_processors TemplateProcessing ByteLevel RobertaProcessing BertProcessing Sequence
    decoders        ByteLevel Metaspace ByteFallback Fuse Strip Replace Sequence

Regexes (Split, Replace) are Oniguruma patterns in the file; Debian's python3-regex runs them (\\p{L}, \\p{N},
lookahead, inline flags).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any, Optional

import numpy as np

from .. import _core
from ..errors import CheckpointError, InvalidInputError

try:
    import regex
except ImportError:  # pragma: no cover - setup.sh installs it
    regex = None

_WORD_CACHE_LIMIT = 1 << 17  # words kept by a model's cache before it starts again
_GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def _bytes_to_unicode():
    """GPT-2's byte -> printable character table (byte-level BPE's alphabet): printable Latin-1 bytes stand for
    themselves, the others for 256 + their rank."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def _encodable(text):
    """Whether text is valid Unicode that UTF-8 can carry (no lone surrogate such as JSON's "\\ud800")."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def check_text(text):
    """InvalidInputError for a str that holds a lone surrogate: it has no UTF-8 bytes to tokenize."""
    if not _encodable(text):
        raise InvalidInputError(
            "the text holds a lone surrogate (e.g. '\\ud800'), which is not Unicode text and "
            "has no UTF-8 bytes to tokenize; fix the string (e.g. decode your bytes with "
            "errors='replace')"
        )


def _is_space(c):
    """Rust's char::is_whitespace (Unicode White_Space): Python's isspace() without U+001C..U+001F."""
    return c.isspace() and not "\x1c" <= c <= "\x1f"


class AddedToken:
    """An added token: tokenizers' (and Transformers') AddedToken, with the same keyword arguments and defaults
    (normalized: not special), so `ha.AddedToken("<x>", lstrip=True)` goes where Transformers takes one. `id` is
    set by the tokenizer that holds it (tokenizer.json's added_tokens, tokenizer_config.json's added_tokens_decoder).
    """

    __slots__ = ("content", "id", "special", "single_word", "lstrip", "rstrip", "normalized")

    def __init__(
        self,
        content: str,
        single_word: bool = False,
        lstrip: bool = False,
        rstrip: bool = False,
        normalized: Optional[bool] = None,
        special: bool = False,
        id: Optional[int] = None,
    ) -> None:
        self.content, self.id, self.special = content, id, bool(special)
        self.single_word, self.lstrip, self.rstrip = bool(single_word), bool(lstrip), bool(rstrip)
        self.normalized = (not self.special) if normalized is None else bool(normalized)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "single_word": self.single_word,
            "lstrip": self.lstrip,
            "rstrip": self.rstrip,
            "normalized": self.normalized,
            "special": self.special,
        }

    def __str__(self) -> str:
        return self.content

    def __repr__(self) -> str:
        return (
            f"AddedToken({self.content!r}, rstrip={self.rstrip}, lstrip={self.lstrip}, "
            f"single_word={self.single_word}, normalized={self.normalized}, special={self.special})"
        )


class _Bad(Exception):
    """A component that cannot be built; load() turns it into a CheckpointError naming the file."""


def _need(cond, message):
    if not cond:
        raise _Bad(message)


def _type_of(cfg, kind):
    _need(isinstance(cfg, dict), f"{kind} must be an object, got {type(cfg).__name__}")
    t = cfg.get("type")
    _need(isinstance(t, str), f'{kind} has no "type"')
    return t


def _field(cfg, kind, name, types, default=None, required=False):
    if name not in cfg or cfg[name] is None:
        _need(not required, f"{kind} {cfg.get('type')} has no {name!r}")
        return default
    value = cfg[name]
    _need(
        isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types)),
        f"{kind} {cfg.get('type')}: {name}={value!r} has the wrong type",
    )
    return value


def _as_tuple(types):
    return types if isinstance(types, tuple) else (types,)


def _compile(pattern, kind):
    """tokenizer.json's {"String": s} (literal) or {"Regex": r} (Oniguruma) -> a compiled pattern."""
    _need(isinstance(pattern, dict) and len(pattern) == 1, f'{kind}: pattern must be {{"String"}} or {{"Regex"}}')
    ((key, value),) = pattern.items()
    _need(
        key in ("String", "Regex") and isinstance(value, str), f"{kind}: pattern {pattern!r} is not a String or a Regex"
    )
    if regex is None:
        raise _Bad("tokenizer.json regexes need python3-regex: apt-get install python3-regex (scripts/setup.sh does)")
    try:
        return regex.compile(regex.escape(value) if key == "String" else value)
    except (regex.error, ValueError, OverflowError, RecursionError) as e:
        raise _Bad(f"{kind}: regex {value!r} does not compile ({e})") from None


# ---- normalizers: str -> str ----------------------------------------------------------------------------------


def _lowercase(s):
    # Rust lowercases char by char; Python's str.lower() turns a final capital sigma into a final small sigma.
    return s.lower() if "\u03a3" not in s else "".join(c.lower() for c in s)


def _strip(s, left, right):
    i, j = 0, len(s)
    if left:
        while i < j and _is_space(s[i]):
            i += 1
    if right:
        while j > i and _is_space(s[j - 1]):
            j -= 1
    return s[i:j]


def _normalizer(cfg, kind="normalizer"):
    """A normalizer config -> callable(str) -> str, or None for null."""
    if cfg is None:
        return None
    t = _type_of(cfg, kind)
    if t in ("NFC", "NFD", "NFKC", "NFKD"):
        return lambda s, form=t: unicodedata.normalize(form, s)
    if t == "Lowercase":
        return _lowercase
    if t == "Strip":
        left = _field(cfg, kind, "strip_left", bool, True)
        right = _field(cfg, kind, "strip_right", bool, True)
        return lambda s: _strip(s, left, right)
    if t == "StripAccents":
        return lambda s: "".join(c for c in s if not unicodedata.category(c).startswith("M"))
    if t == "Replace":
        pattern = _compile(_field(cfg, kind, "pattern", dict, required=True), f"{kind} Replace")
        content = _field(cfg, kind, "content", str, required=True)
        return lambda s: pattern.sub(lambda m: content, s)
    if t == "Prepend":
        prepend = _field(cfg, kind, "prepend", str, required=True)
        return lambda s: prepend + s if s else s
    if t == "Sequence":
        parts = [_normalizer(c, kind) for c in _field(cfg, kind, "normalizers", list, required=True)]

        def sequence(s):
            for f in parts:
                s = f(s) if f is not None else s
            return s

        return sequence
    raise _Bad(
        f"{kind} type {t!r} is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
        "StripAccents, Replace, Prepend, Sequence)"
    )


# ---- pre-tokenizers: (pieces, first) -> (pieces, first) ---------------------------------------------------------
# pieces: the words so far (non-empty str); first: whether pieces[0] starts at the text's offset 0 (Metaspace's
# prepend_scheme "first" prepends only there, as Rust checks the split's original offset).

_BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def _split(s, pattern, behavior, invert=False):
    """Rust NormalizedString::split(pattern, behavior) -> [(start, end)] of the non-empty pieces kept."""
    segments, prev = [], 0  # (start, end, is_match) covering s
    for m in pattern.finditer(s):
        a, b = m.span()
        if prev != a:
            segments.append((prev, a, invert))
        segments.append((a, b, not invert))
        prev = b
    if prev != len(s):
        segments.append((prev, len(s), invert))
    out = []
    if behavior == "Isolated":
        out = [(a, b) for a, b, _ in segments]
    elif behavior == "Removed":
        out = [(a, b) for a, b, is_match in segments if not is_match]
    elif behavior == "Contiguous":
        previous = None
        for a, b, is_match in segments:
            if out and is_match == previous:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
            previous = is_match
    elif behavior == "MergedWithPrevious":
        previous = False
        for a, b, is_match in segments:
            if out and is_match and not previous:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
            previous = is_match
    else:  # MergedWithNext
        previous = False
        for a, b, is_match in reversed(segments):
            if out and is_match and not previous:
                out[-1] = (a, out[-1][1])
            else:
                out.append((a, b))
            previous = is_match
        out.reverse()
    return [(a, b) for a, b in out if b > a]


def _split_pieces(pieces, first, pattern, behavior, invert=False):
    out, out_first = [], False
    for k, piece in enumerate(pieces):
        spans = _split(piece, pattern, behavior, invert)
        if k == 0 and first and spans and spans[0][0] == 0:
            out_first = True
        out.extend(piece[a:b] for a, b in spans)
    return out, out_first and bool(out)


def _metaspace_scheme(cfg, kind):
    scheme = _field(cfg, kind, "prepend_scheme", str)
    prefix = _field(cfg, kind, "add_prefix_space", bool)
    if prefix is False:  # as Rust's loader: add_prefix_space false means never, and contradicts any other scheme
        _need(
            scheme in (None, "never"),
            f"{kind} Metaspace: add_prefix_space false does not match prepend_scheme {scheme!r}",
        )
        scheme = "never"
    if scheme is None:  # files written before prepend_scheme: add_prefix_space alone (true when absent)
        scheme = "always"
    _need(
        scheme in ("first", "always", "never"),
        f"{kind} Metaspace: prepend_scheme={scheme!r} is not first, always or never",
    )
    replacement = _field(cfg, kind, "replacement", str, required=True)
    _need(len(replacement) == 1, f"{kind} Metaspace: replacement={replacement!r} must be one character")
    return replacement, scheme


def _pre_tokenizer(cfg, kind="pre_tokenizer"):
    """A pre_tokenizer config -> callable(pieces, first) -> (pieces, first), or None for null."""
    if cfg is None:
        return None
    t = _type_of(cfg, kind)
    if t == "ByteLevel":
        prefix = _field(cfg, kind, "add_prefix_space", bool, True)
        gpt2 = _compile({"Regex": _GPT2_PATTERN}, kind) if _field(cfg, kind, "use_regex", bool, True) else None

        def byte_level(pieces, first):
            if prefix:
                pieces = [p if p.startswith(" ") else " " + p for p in pieces]
            if gpt2 is not None:
                pieces, first = _split_pieces(pieces, first, gpt2, "Isolated")
            return [p.encode("utf-8").decode("latin-1").translate(BYTE_TO_CHAR) for p in pieces], first

        return byte_level
    if t == "Split":
        pattern = _compile(_field(cfg, kind, "pattern", dict, required=True), f"{kind} Split")
        behavior = _field(cfg, kind, "behavior", str, required=True)
        _need(behavior in _BEHAVIORS, f"{kind} Split: behavior={behavior!r} is not one of {', '.join(_BEHAVIORS)}")
        invert = _field(cfg, kind, "invert", bool, False)
        return lambda pieces, first: _split_pieces(pieces, first, pattern, behavior, invert)
    if t == "Metaspace":
        replacement, scheme = _metaspace_scheme(cfg, kind)
        split = _field(cfg, kind, "split", bool, True)
        marker = regex.compile(regex.escape(replacement)) if regex is not None else None

        def metaspace(pieces, first):
            out = []
            for k, piece in enumerate(pieces):
                piece = piece.replace(" ", replacement)
                if not piece.startswith(replacement) and (
                    scheme == "always" or (scheme == "first" and k == 0 and first)
                ):
                    piece = replacement + piece
                out.append(piece)
            if split:
                return _split_pieces(out, first, marker, "MergedWithNext")
            return out, first

        return metaspace
    if t == "Digits":
        individual = _field(cfg, kind, "individual_digits", bool, False)
        digits = _compile({"Regex": r"\p{N}" if individual else r"\p{N}+"}, kind)
        return lambda pieces, first: _split_pieces(pieces, first, digits, "Isolated")
    if t == "Whitespace":
        words = _compile({"Regex": r"\w+|[^\w\s]+"}, kind)
        return lambda pieces, first: _split_pieces(pieces, first, words, "Isolated", invert=True)
    if t == "WhitespaceSplit":
        spaces = _compile({"Regex": r"\s+"}, kind)
        return lambda pieces, first: _split_pieces(pieces, first, spaces, "Removed")
    if t == "Punctuation":
        behavior = _field(cfg, kind, "behavior", str, "Isolated")
        _need(
            behavior in _BEHAVIORS, f"{kind} Punctuation: behavior={behavior!r} is not one of {', '.join(_BEHAVIORS)}"
        )
        punct = _compile({"Regex": r"[\p{P}!-/:-@\[-`{-~]"}, kind)
        return lambda pieces, first: _split_pieces(pieces, first, punct, behavior)
    if t == "Sequence":
        parts = [_pre_tokenizer(c, kind) for c in _field(cfg, kind, "pretokenizers", list, required=True)]

        def sequence(pieces, first):
            for f in parts:
                if f is not None:
                    pieces, first = f(pieces, first)
            return pieces, first

        return sequence
    raise _Bad(
        f"{kind} type {t!r} is not supported (supported: ByteLevel, Split, Metaspace, Digits, Whitespace, "
        "WhitespaceSplit, Punctuation, Sequence)"
    )


# ---- decoders: list of token strings -> list of strings ---------------------------------------------------------


def _byte_level_decode(tokens):
    out = bytearray()
    for t in tokens:
        try:
            out += bytes(CHAR_TO_BYTE[c] for c in t)
        except KeyError:  # a token outside the byte alphabet (an added token) stands for its own UTF-8
            out += t.encode("utf-8")
    return [out.decode("utf-8", errors="replace")]


def _byte_fallback_decode(tokens):
    out, run = [], bytearray()

    def flush():
        if run:
            try:
                out.append(run.decode("utf-8"))
            except UnicodeDecodeError:  # Rust writes one U+FFFD per byte of an invalid run
                out.extend("\ufffd" * len(run))
            run.clear()

    for t in tokens:
        if (
            len(t) == 6
            and t.startswith("<0x")
            and t.endswith(">")
            and all(c in "0123456789abcdefABCDEF" for c in t[3:5])
        ):
            run.append(int(t[3:5], 16))
        else:
            flush()
            out.append(t)
    flush()
    return out


def _strip_decode(tokens, content, start, stop):
    out = []
    for t in tokens:
        i = 0
        while i < min(start, len(t)) and t[i] == content:
            i += 1
        j = len(t)
        for _ in range(stop):
            if j > i and t[j - 1] == content:
                j -= 1
            else:
                break
        out.append(t[i:j])
    return out


def _decoder(cfg, kind="decoder"):
    """A decoder config -> callable(list of token str) -> list of str, or None for null."""
    if cfg is None:
        return None
    t = _type_of(cfg, kind)
    if t == "ByteLevel":
        return _byte_level_decode
    if t == "Metaspace":
        replacement, scheme = _metaspace_scheme(cfg, kind)

        def metaspace(tokens):
            # Rust drops every replacement character of the first token where a space may have been prepended.
            return [
                tok.replace(replacement, "" if i == 0 and scheme != "never" else " ") for i, tok in enumerate(tokens)
            ]

        return metaspace
    if t == "ByteFallback":
        return _byte_fallback_decode
    if t == "Fuse":
        return lambda tokens: ["".join(tokens)]
    if t == "Strip":
        content = _field(cfg, kind, "content", str, required=True)
        _need(len(content) == 1, f"{kind} Strip: content={content!r} must be one character")
        start = _field(cfg, kind, "start", int, 0)
        stop = _field(cfg, kind, "stop", int, 0)
        _need(start >= 0 and stop >= 0, f"{kind} Strip: start and stop must be >= 0")
        return lambda tokens: _strip_decode(tokens, content, start, stop)
    if t == "Replace":
        pattern = _compile(_field(cfg, kind, "pattern", dict, required=True), f"{kind} Replace")
        content = _field(cfg, kind, "content", str, required=True)
        return lambda tokens: [pattern.sub(lambda m: content, tok) for tok in tokens]
    if t == "Sequence":
        parts = [_decoder(c, kind) for c in _field(cfg, kind, "decoders", list, required=True)]

        def sequence(tokens):
            for f in parts:
                if f is not None:
                    tokens = f(tokens)
            return tokens

        return sequence
    raise _Bad(
        f"{kind} type {t!r} is not supported (supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, "
        "Replace, Sequence)"
    )


# ---- post-processors: (ids, type ids, pair ids, add_special_tokens) ------------------------------------------


class _Template:
    """TemplateProcessing (and Roberta/Bert processing, which are templates): pieces ("A"|"B"|special name,
    type id) for single and pair inputs; special name -> ids."""

    def __init__(self, single, pair, specials):
        self.single, self.pair, self.specials = single, pair, specials

    def apply(self, a, b, add_special_tokens):
        ids, types = [], []
        for name, type_id in self.single if b is None else self.pair:
            if name in ("A", "B"):
                seq = a if name == "A" else b
                if seq is None:
                    continue
            elif add_special_tokens:
                seq = self.specials[name]
            else:
                continue
            ids += seq
            types += [type_id] * len(seq)
        return ids, types


def _template_pieces(items, kind, specials):
    _need(isinstance(items, list), f"{kind}: single and pair must be lists")
    out = []
    for item in items:
        _need(
            isinstance(item, dict) and len(item) == 1,
            f'{kind}: template piece {item!r} is not {{"SpecialToken"}} or {{"Sequence"}}',
        )
        ((key, value),) = item.items()
        _need(key in ("SpecialToken", "Sequence") and isinstance(value, dict), f"{kind}: template piece {item!r}")
        name, type_id = value.get("id"), value.get("type_id", 0)
        _need(isinstance(name, str), f"{kind}: template piece {item!r} has an id that is not a string")
        _need(
            isinstance(type_id, int) and not isinstance(type_id, bool) and 0 <= type_id < 1 << 32,
            f"{kind}: type_id {type_id!r} must be an integer in [0, 2^32) (Rust's u32)",
        )
        if key == "Sequence":
            _need(name in ("A", "B"), f"{kind}: sequence {name!r} must be A or B")
        else:
            _need(name in specials, f"{kind}: special token {name!r} is not in special_tokens")
        out.append((name, type_id))
    return out


def _post_processor(cfg, kind="post_processor"):
    """A post_processor config -> _Template or None (no special tokens: ByteLevel, null)."""
    if cfg is None:
        return None
    t = _type_of(cfg, kind)
    if t == "ByteLevel":
        return None  # trims offsets only; ids pass unchanged
    if t == "TemplateProcessing":
        specials = {}
        table = _field(cfg, kind, "special_tokens", dict, {})
        for name, spec in table.items():
            ids = spec.get("ids") if isinstance(spec, dict) else None
            _need(
                isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids),
                f"{kind}: special token {name!r} has no list of ids",
            )
            for i in ids:
                _need(0 <= i, f"{kind}: special token {name!r} has id {i}")
            specials[name] = list(ids)
        return _Template(
            _template_pieces(_field(cfg, kind, "single", list, required=True), kind, specials),
            _template_pieces(_field(cfg, kind, "pair", list, []), kind, specials),
            specials,
        )
    if t in ("RobertaProcessing", "BertProcessing"):

        def token(name):
            v = cfg.get(name)
            _need(
                isinstance(v, list) and len(v) == 2 and isinstance(v[1], int), f"{kind} {t}: {name} must be [token, id]"
            )
            return [v[1]]

        specials = {"cls": token("cls"), "sep": token("sep")}
        single = [("cls", 0), ("A", 0), ("sep", 0)]
        pair = single + ([("sep", 0)] if t == "RobertaProcessing" else []) + [("B", 1), ("sep", 1)]
        if t == "RobertaProcessing":  # Roberta's type ids are all 0
            pair = [(n, 0) for n, _ in pair]
        return _Template(single, pair, specials)
    if t == "Sequence":
        parts = [_post_processor(c, kind) for c in _field(cfg, kind, "processors", list, required=True)]
        parts = [p for p in parts if p is not None]
        _need(len(parts) <= 1, f"{kind} Sequence: more than one processor that adds special tokens is not supported")
        return parts[0] if parts else None
    raise _Bad(
        f"{kind} type {t!r} is not supported (supported: TemplateProcessing, ByteLevel, RobertaProcessing, "
        "BertProcessing, Sequence)"
    )


# ---- the model ----------------------------------------------------------------------------------------------


class _BPE:
    """tokenizer.json's BPE model: vocab {token: id}, merges -> the C merge loop (habana_assist._core.BPE)."""

    def __init__(self, cfg):
        kind = "model"
        self.cfg = {k: v for k, v in cfg.items() if k not in ("vocab", "merges")}
        dropout = cfg.get("dropout")
        _need(
            dropout is None or (isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and dropout == 0),
            f"model BPE: dropout={dropout!r} is not supported (only null): it makes tokenization random",
        )
        for name in ("continuing_subword_prefix", "end_of_word_suffix"):
            value = _field(cfg, kind, name, str, "")
            _need(value == "", f'model BPE: {name}={value!r} is not supported (only null or "")')
        vocab = _field(cfg, kind, "vocab", dict, required=True)
        for token, i in vocab.items():
            if not (isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 31):
                raise _Bad(f"model BPE: vocab entry {token!r} has id {i!r}; ids are integers >= 0")
        self.vocab = vocab
        self.size = len(vocab)
        self.max_id = max(vocab.values(), default=-1)
        # Ids index arrays here (Rust keeps a map): a vocabulary is dense in real files, so an id far beyond the
        # number of tokens is a corrupt file, not something to allocate for.
        _need(
            self.max_id < 2 * self.size + 65536,
            f"model BPE: the vocab's largest id is {self.max_id} for "
            f"{self.size} tokens; ids must be about 0 to the vocab's size",
        )
        unk = _field(cfg, kind, "unk_token", str)
        _need(unk is None or unk in vocab, f"model BPE: unk_token {unk!r} is not in the vocab")
        self.unk_id = vocab[unk] if unk is not None else -1
        self.fuse_unk = _field(cfg, kind, "fuse_unk", bool, False)
        self.byte_fallback = _field(cfg, kind, "byte_fallback", bool, False)
        self.ignore_merges = _field(cfg, kind, "ignore_merges", bool, False)
        merges = _field(cfg, kind, "merges", list, [])
        self.merges_as_strings = bool(merges) and isinstance(merges[0], str)
        rows = np.empty((len(merges), 3), dtype=np.int32)
        get = vocab.get
        for rank, m in enumerate(merges):
            if isinstance(m, str):
                parts = m.split(" ")
                _need(
                    len(parts) == 2, f"model BPE: merges entry {rank} ({m!r}) is not two tokens separated by one space"
                )
            else:
                _need(
                    isinstance(m, list) and len(m) == 2 and all(isinstance(p, str) for p in m),
                    f"model BPE: merges entry {rank} ({m!r}) is not a pair of tokens",
                )
                parts = m
            a, b = get(parts[0]), get(parts[1])
            c = get(parts[0] + parts[1])
            if a is None or b is None or c is None:
                missing = parts[0] if a is None else parts[1] if b is None else parts[0] + parts[1]
                raise _Bad(
                    f"model BPE: merges entry {rank} ({parts[0]!r} {parts[1]!r}) names {missing!r}, which "
                    "is not in the vocab"
                )
            rows[rank] = (a, b, c)
        self.merges = rows
        singles = [(t, i) for t, i in vocab.items() if len(t) == 1]
        chars = np.array([ord(t) for t, _ in singles], dtype=np.uint32)
        char_ids = np.array([i for _, i in singles], dtype=np.int32)
        byte_ids = None
        if self.byte_fallback:
            byte_ids = np.array([vocab.get(f"<0x{b:02X}>", -1) for b in range(256)], dtype=np.int32)
        self.core = _core.BPE(rows, chars, char_ids, byte_ids, self.unk_id, self.fuse_unk, self.max_id + 1)
        self.cache = {}

    def encode_word(self, word):
        """A pre-tokenized word -> tuple of ids."""
        ids = self.cache.get(word)
        if ids is None:
            if self.ignore_merges and word in self.vocab:
                ids = (self.vocab[word],)
            else:
                ids = self.core.encode(word)
            if len(self.cache) >= _WORD_CACHE_LIMIT:
                self.cache.clear()
            if len(word) < 256:
                self.cache[word] = ids
        return ids

    def to_dict(self, id_to_token):
        merges = [[id_to_token[a], id_to_token[b]] for a, b, _ in self.merges.tolist()]
        if self.merges_as_strings:
            merges = [f"{a} {b}" for a, b in merges]
        return {**self.cfg, "vocab": dict(self.vocab), "merges": merges}


def _model(cfg):
    _need(isinstance(cfg, dict), "model must be an object")
    t = cfg.get("type")
    if t is None and "merges" in cfg:  # Rust's untagged form: a BPE is known by its merges
        t = "BPE"
    if t == "BPE":
        return _BPE(cfg)
    raise _Bad(
        f"model type {t!r} is not supported (supported: BPE; the checkpoint families this package loads — "
        "Llama 2/3, Mistral, Qwen2/3, Gemma, SmolLM, Phi-3/4, GPT-2 — use BPE)"
    )


# ---- the tokenizer ------------------------------------------------------------------------------------------


def _trie_pattern(strings):
    """Literal strings -> a compiled regex matching the longest of them that starts at a position: their trie, each
    node's children tried before the node's own end (a checkpoint has thousands of added tokens, which a flat
    alternation would try one by one at every character)."""
    trie = {}
    for s in strings:
        node = trie
        for c in s:
            node = node.setdefault(c, {})
        node[""] = {}

    def emit(node):
        ends = "" in node
        branches = []
        for c, child in sorted(node.items()):
            if not c:
                continue
            run = c  # a chain of single-child nodes is one literal (no recursion along a long token)
            while len(child) == 1 and "" not in child:
                ((c2, child),) = child.items()
                run += c2
            branches.append(regex.escape(run) + emit(child))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 and not ends else "(?:" + "|".join(branches) + ")"
        return body + "?" if ends else body

    try:
        return regex.compile(emit(trie))
    except (RecursionError, regex.error):  # thousands of nested prefixes: the flat alternation, longest first
        return regex.compile("|".join(regex.escape(s) for s in sorted(set(strings), key=len, reverse=True)))


class TokenizerJSON:
    """A tokenizer.json pipeline. Build it with TokenizerJSON.load(path) or from_dict(data)."""

    def __init__(self, data, source="tokenizer.json"):
        self.source = source
        try:
            self._build(data)
        except _Bad as e:
            raise CheckpointError(f"{source}: {e}; this tokenizer cannot be loaded exactly") from None
        except RecursionError:
            raise CheckpointError(f"{source}: components nested too deeply") from None

    @classmethod
    def load(cls, path):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            raise CheckpointError(f"{path} cannot be read ({e})") from None
        except (ValueError, RecursionError) as e:  # bad UTF-8, bad or truncated JSON
            raise CheckpointError(
                f"{path} is not valid JSON ({e}); it is truncated or corrupt: re-download it"
            ) from None
        return cls(data, source=str(path))

    @classmethod
    def from_dict(cls, data, source="tokenizer.json"):
        return cls(data, source=source)

    def _build(self, data):
        _need(isinstance(data, dict), f"the file must hold a JSON object, not {type(data).__name__}")
        _need("model" in data, 'there is no "model"')
        self._kept = {
            k: data.get(k)
            for k in ("version", "truncation", "padding", "normalizer", "pre_tokenizer", "post_processor", "decoder")
        }
        self.truncation, self.padding = data.get("truncation"), data.get("padding")
        self._aligned = None  # offsets.AlignedPipeline, built at the first offsets.text_ids_offsets
        self._normalize = _normalizer(data.get("normalizer"))
        self._pre_tokenize = _pre_tokenizer(data.get("pre_tokenizer"))
        self._decode = _decoder(data.get("decoder"))
        self.model = _model(data["model"])
        self._id_to_token = [None] * (self.model.max_id + 1)
        for token, i in self.model.vocab.items():
            self._id_to_token[i] = token
        self._token_to_id = dict(self.model.vocab)
        self.added_tokens, self._added_by_id = [], {}
        added = data.get("added_tokens") or []
        _need(isinstance(added, list), "added_tokens must be a list")
        for k, item in enumerate(added):
            _need(
                isinstance(item, dict) and isinstance(item.get("content"), str) and item["content"],
                f'added_tokens[{k}] has no non-empty "content"',
            )
            flags = {f: item.get(f) for f in ("special", "single_word", "lstrip", "rstrip", "normalized")}
            for f, v in flags.items():
                _need(
                    v is None or isinstance(v, bool),
                    f"added_tokens[{k}] ({item['content']!r}): {f}={v!r} must be true or false",
                )
            want = item.get("id")
            _need(
                want is None or (isinstance(want, int) and not isinstance(want, bool) and want >= 0),
                f"added_tokens[{k}] ({item['content']!r}): id {want!r} must be an integer >= 0",
            )
            token = AddedToken(item["content"], **{f: v for f, v in flags.items() if v is not None})
            got = self._add(token)
            _need(
                want is None or got == want,
                f"added token {item['content']!r} has id {want} but the vocab gives "
                f"it id {got} (a duplicate or a gap in added_tokens)",
            )
        self._rebuild_splitters()
        self._template = _post_processor(data.get("post_processor"))
        if self._template is not None:
            for name, ids in self._template.specials.items():
                for i in ids:
                    _need(
                        i < len(self._id_to_token) and self._id_to_token[i] is not None,
                        f"post_processor: special token {name!r} has id {i}, which is not in the vocab",
                    )

    # -- added tokens --

    def _add(self, token):
        """Gives token its id as Rust's AddedVocabulary does: the vocab's id for a known content, else the next
        id after the largest so far -> that id. A content already added keeps its entry (flags updated)."""
        i = self._token_to_id.get(token.content)
        if i is None:
            i = max(len(self._id_to_token), self.model.max_id + 1)
        if i in self._added_by_id:
            self.added_tokens.remove(self._added_by_id[i])
        token.id = i
        if i >= len(self._id_to_token):
            self._id_to_token.extend([None] * (i + 1 - len(self._id_to_token)))
        self._id_to_token[i] = token.content
        self._token_to_id[token.content] = i
        self._added_by_id[i] = token
        self.added_tokens.append(token)
        return i

    def add_tokens(self, tokens):
        """AddedToken list -> how many were new. Tokens already added are updated in place."""
        new = 0
        for token in tokens:
            if not isinstance(token, AddedToken) or not isinstance(token.content, str) or not token.content:
                raise InvalidInputError(f"add_tokens takes AddedToken objects with non-empty content, got {token!r}")
            new += token.content not in self._token_to_id
            self._add(
                AddedToken(
                    token.content,
                    single_word=token.single_word,
                    lstrip=token.lstrip,
                    rstrip=token.rstrip,
                    normalized=token.normalized,
                    special=token.special,
                )
            )
        self._rebuild_splitters()
        return new

    def _rebuild_splitters(self):
        """One pattern per kind of added token (raw or normalized), matching leftmost-longest as the Rust
        library's Aho-Corasick automaton does."""
        self.special_ids = {t.id for t in self.added_tokens if t.special}
        self._by_content = {}
        self._raw_split = self._norm_split = None
        raw, norm = [], []
        for t in self.added_tokens:
            if t.normalized and self._normalize is not None:
                content = self._normalize(t.content)
                if not content:
                    continue
                norm.append(content)
                self._by_content[("n", content)] = t
            else:
                raw.append(t.content)
                self._by_content[("r", t.content)] = t
        if regex is None and (raw or norm):
            raise _Bad("added tokens need python3-regex: apt-get install python3-regex (scripts/setup.sh does)")
        if raw:
            self._raw_split = _trie_pattern(raw)
        if norm:
            self._norm_split = _trie_pattern(norm)

    def _find_added(self, s, pattern, kind, split_special_tokens=False):
        """s -> [(piece, added token id or None)] as Rust's AddedVocabulary::find_matches: single_word matches
        need non-word characters around them; lstrip/rstrip take the whitespace beside them into the token;
        split_special_tokens (Rust's encode_special_tokens) passes over the matches of special tokens, which
        then stay text."""
        out, start_offset = [], 0
        for m in pattern.finditer(s):
            start, stop = m.span()
            token = self._by_content[(kind, m.group())]
            if split_special_tokens and token.special:
                continue
            if token.single_word:
                before = start == 0 or not s[start - 1].isalnum()
                after = stop == len(s) or not s[stop].isalnum()
                if not (before and after):
                    continue
            if token.lstrip:
                k = start
                while k > 0 and _is_space(s[k - 1]):
                    k -= 1
                start = max(k, start_offset)
            if token.rstrip:
                while stop < len(s) and _is_space(s[stop]):
                    stop += 1
            if start_offset < start:
                out.append((s[start_offset:start], None))
            out.append((s[start:stop], token.id))
            start_offset = stop
        if start_offset < len(s):
            out.append((s[start_offset:], None))
        return out

    # -- encoding --

    def text_ids(self, text, split_special_tokens=False):
        """str -> ids: added tokens, normalization, pre-tokenization and the model; no post-processing.
        split_special_tokens: special added tokens in the text are not split out (tokenized as text)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"the tokenizer encodes str, got {type(text).__name__}")
        check_text(text)
        ids = []
        pieces = (
            self._find_added(text, self._raw_split, "r", split_special_tokens)
            if self._raw_split is not None
            else [(text, None)]
        )
        offset = 0
        for piece, tid in pieces:
            at_start = offset == 0
            offset += len(piece)
            if tid is not None:
                ids.append(tid)
                continue
            if self._normalize is not None:
                piece = self._normalize(piece)
            parts = (
                self._find_added(piece, self._norm_split, "n", split_special_tokens)
                if self._norm_split is not None
                else [(piece, None)]
            )
            for k, (part, pid) in enumerate(parts):
                if pid is not None:
                    ids.append(pid)
                    continue
                if not part:
                    continue
                words, first = [part], at_start and k == 0
                if self._pre_tokenize is not None:
                    words, first = self._pre_tokenize(words, first)
                encode = self.model.encode_word
                for w in words:
                    ids.extend(encode(w))
        return ids

    def post_process(self, ids, pair_ids=None, add_special_tokens=True, return_type_ids=False):
        """ids (and pair_ids) -> the post-processor's ids (with type ids where return_type_ids)."""
        if self._template is None:
            out = list(ids) + (list(pair_ids) if pair_ids is not None else [])
            types = [0] * len(ids) + ([1] * len(pair_ids) if pair_ids is not None else [])
        else:
            out, types = self._template.apply(
                list(ids), None if pair_ids is None else list(pair_ids), add_special_tokens
            )
        return (out, types) if return_type_ids else out

    def num_special_tokens_to_add(self, pair=False):
        return len(self.post_process([], [] if pair else None))

    def encode(self, text, add_special_tokens=True):
        return self.post_process(self.text_ids(text), None, add_special_tokens)

    def encode_pair(self, text, pair, add_special_tokens=True):
        return self.post_process(self.text_ids(text), self.text_ids(pair), add_special_tokens)

    def set_template(self, bos, eos, add_bos, add_eos):
        """Transformers' Llama/Gemma fast tokenizers' update_post_processor: single = [bos] A [eos], pair =
        [bos] A [eos] [bos] B [eos], each special where its flag says; bos/eos are token strings."""
        specials = {}
        for name, token, on in (("bos", bos, add_bos), ("eos", eos, add_eos)):
            if on:
                if token is None or token not in self._token_to_id:
                    raise InvalidInputError(
                        f"add_{name}_token is set but the {name} token {token!r} is not in the "
                        "vocabulary; set the token or turn the flag off"
                    )
                specials[token] = [self._token_to_id[token]]

        def side(seq, type_id):
            return ([(bos, type_id)] if add_bos else []) + [(seq, type_id)] + ([(eos, type_id)] if add_eos else [])

        self._template = _Template(side("A", 0), side("A", 0) + side("B", 1), specials)
        self._aligned = None  # the post-processor changed: offsets' trimming is read again
        single = [
            {"SpecialToken": {"id": n, "type_id": t}} if n not in ("A", "B") else {"Sequence": {"id": n, "type_id": t}}
            for n, t in self._template.single
        ]
        pair = [
            {"SpecialToken": {"id": n, "type_id": t}} if n not in ("A", "B") else {"Sequence": {"id": n, "type_id": t}}
            for n, t in self._template.pair
        ]
        self._kept["post_processor"] = {
            "type": "TemplateProcessing",
            "single": single,
            "pair": pair,
            "special_tokens": {n: {"id": n, "ids": ids, "tokens": [n]} for n, ids in specials.items()},
        }

    def tokens(self, text):
        return [self._id_to_token[i] for i in self.text_ids(text)]

    # -- decoding --

    def _check_id(self, i):
        if not (0 <= i < len(self._id_to_token)) or self._id_to_token[i] is None:
            raise InvalidInputError(
                f"token id {i} is not in this tokenizer's vocabulary (ids 0 to "
                f"{len(self._id_to_token) - 1}); use the tokenizer that belongs to the model"
            )
        return self._id_to_token[i]

    def decode(self, ids, skip_special_tokens=False):
        """ids -> str: each id's token (special ones left out where skip_special_tokens), through the decoders
        (joined with spaces where the file has none), as the Rust library decodes."""
        tokens = [self._check_id(i) for i in ids if not (skip_special_tokens and i in self.special_ids)]
        if self._decode is None:
            return " ".join(tokens)
        return "".join(self._decode(tokens))

    def tokens_to_string(self, tokens):
        """Token strings -> str through the decoders (joined with spaces where the file has none): Transformers'
        fast convert_tokens_to_string."""
        tokens = list(tokens)
        if self._decode is None:
            return " ".join(tokens)
        return "".join(self._decode(tokens))

    # -- vocabulary --

    def id_to_token(self, i):
        return self._id_to_token[i] if 0 <= i < len(self._id_to_token) else None

    def token_to_id(self, token):
        return self._token_to_id.get(token)

    @property
    def vocab_size(self):
        """The model's vocabulary, without added tokens (Transformers' vocab_size)."""
        return self.model.size

    def __len__(self):
        """Every token, added ones included (Transformers' len(tokenizer))."""
        return len(self._token_to_id)

    def get_vocab(self):
        return dict(self._token_to_id)

    def to_dict(self):
        """The tokenizer.json to write back: the components as loaded (the post-processor as set_template left
        it), the model's vocab and merges, and every added token."""
        k = self._kept
        return {
            "version": k.get("version") or "1.0",
            "truncation": k["truncation"],
            "padding": k["padding"],
            "added_tokens": [t.to_dict() for t in sorted(self.added_tokens, key=lambda t: t.id)],
            "normalizer": k["normalizer"],
            "pre_tokenizer": k["pre_tokenizer"],
            "post_processor": k["post_processor"],
            "decoder": k["decoder"],
            "model": self.model.to_dict(self._id_to_token),
        }
