"""Character offsets of tokens (return_offsets_mapping=True), as Hugging Face's Rust tokenizers give them: the span of
the original text each token comes from, in characters.

The tokenizer.json pipeline (tokenizer_json.py) runs here a second time over aligned strings: each character of a
string carries the (start, end) span of the original text it comes from, as Rust's NormalizedString keeps its
alignments. A normalizer or pre-tokenizer that replaces characters gives the new ones the span of what they replace
(a character decomposed by NFD or NFKD, the first one of those NFC composes; Replace over the match); one that
inserts characters (Prepend, a ByteLevel or Metaspace prefix) gives them the span of the character they go before;
ByteLevel's byte characters each carry the span of the character whose UTF-8 bytes they are. A token's offsets are then
the span from its first character's start to its last one's end: a token made of some of a character's bytes (byte-level
BPE, byte fallback) spans that whole character. Special tokens the post-processor adds have (0, 0); a ByteLevel (or
Roberta) post-processor with trim_offsets leaves the spaces out of its tokens' offsets, as Rust's process_offsets does.

AlignedPipeline(kept) builds the pipeline's aligned steps from tokenizer.json's kept components; token_spans turns
the model's ids for one word into spans; text_ids_offsets(tokenizer, text) runs it all for a TokenizerJSON. This
module builds on tokenizer_json.py, which never imports it.
"""

import unicodedata

from ..errors import InvalidInputError
from .tokenizer_json import (
    _BEHAVIORS,
    _GPT2_PATTERN,
    BYTE_TO_CHAR,
    _Bad,
    _compile,
    _field,
    _is_space,
    _metaspace_scheme,
    _need,
    _split,
    _type_of,
    check_text,
    regex,
)

# An aligned string: (s, spans), spans a list of (start, end) of the original text, one per character of s.


def _normalizer(cfg, kind="normalizer"):
    """A normalizer config -> f(s, spans) -> (s, spans), or None for null (tokenizer_json._normalizer's steps)."""
    if cfg is None:
        return None
    t = _type_of(cfg, kind)
    if t in ("NFC", "NFD", "NFKC", "NFKD"):
        return lambda s, spans, form=t: _unicode_form(form, s, spans)
    if t == "Lowercase":  # char by char, as Rust (a final sigma too)
        return lambda s, spans: _per_char(s, spans, lambda c: c.lower())
    if t == "Strip":
        left = _field(cfg, kind, "strip_left", bool, True)
        right = _field(cfg, kind, "strip_right", bool, True)

        def strip(s, spans):
            i, j = 0, len(s)
            while left and i < j and _is_space(s[i]):
                i += 1
            while right and j > i and _is_space(s[j - 1]):
                j -= 1
            return s[i:j], spans[i:j]

        return strip
    if t == "StripAccents":
        return lambda s, spans: _per_char(s, spans, lambda c: "" if unicodedata.category(c).startswith("M") else c)
    if t == "Replace":
        pattern = _compile(_field(cfg, kind, "pattern", dict, required=True), f"{kind} Replace")
        content = _field(cfg, kind, "content", str, required=True)

        def replace(s, spans):
            out, out_spans, prev = [], [], 0
            for m in pattern.finditer(s):
                a, b = m.span()
                out.append(s[prev:a])
                out_spans += spans[prev:a]
                if content:
                    out.append(content)
                    span = (spans[a][0], spans[b - 1][1]) if b > a else spans[min(a, len(s) - 1)] if s else (0, 0)
                    out_spans += [span] * len(content)
                prev = b
            out.append(s[prev:])
            out_spans += spans[prev:]
            return "".join(out), out_spans

        return replace
    if t == "Prepend":
        prepend = _field(cfg, kind, "prepend", str, required=True)
        return lambda s, spans: (prepend + s, [spans[0]] * len(prepend) + spans) if s else (s, spans)
    if t == "Sequence":
        parts = [_normalizer(c, kind) for c in _field(cfg, kind, "normalizers", list, required=True)]

        def sequence(s, spans):
            for f in parts:
                if f is not None:
                    s, spans = f(s, spans)
            return s, spans

        return sequence
    raise _Bad(f"{kind} type {t!r} has no offsets here")


def _per_char(s, spans, f):
    out, out_spans = [], []
    for c, span in zip(s, spans):
        new = f(c)
        out.append(new)
        out_spans += [span] * len(new)
    return "".join(out), out_spans


def _unicode_form(form, s, spans):
    """NFC/NFD/NFKC/NFKD over each starter and the combining marks after it: the parts of a decomposed character
    carry its span; characters composed carry the spans of the first ones of the run (the marks folded into them
    are gone), as Rust's alignments."""
    if unicodedata.is_normalized(form, s):
        return s, spans
    out, out_spans, i = [], [], 0
    while i < len(s):
        j = i + 1
        while j < len(s) and unicodedata.combining(s[j]):
            j += 1
        run = s[i:j]
        new = unicodedata.normalize(form, run)
        if new == run:
            out_spans += spans[i:j]
        elif j == i + 1:  # one character decomposed: each part carries its span
            out_spans += [spans[i]] * len(new)
        else:  # composed: as Rust, the k-th new character carries the k-th old one's span (the others are gone)
            out_spans += [spans[min(i + k, j - 1)] for k in range(len(new))]
        out.append(new)
        i = j
    return "".join(out), out_spans


# ---- pre-tokenizers: (pieces, first) -> (pieces, first), pieces a list of aligned strings ----------------------


def _split_pieces(pieces, first, pattern, behavior, invert=False):
    out, out_first = [], False
    for k, (s, spans) in enumerate(pieces):
        cuts = _split(s, pattern, behavior, invert)
        if k == 0 and first and cuts and cuts[0][0] == 0:
            out_first = True
        out.extend((s[a:b], spans[a:b]) for a, b in cuts)
    return out, out_first and bool(out)


def _prefixed(prefix, s, spans):
    return prefix + s, [spans[0]] * len(prefix) + spans


def _pre_tokenizer(cfg, kind="pre_tokenizer"):
    """A pre_tokenizer config -> f(pieces, first) -> (pieces, first), or None (tokenizer_json._pre_tokenizer's)."""
    if cfg is None:
        return None
    t = _type_of(cfg, kind)
    if t == "ByteLevel":
        prefix = _field(cfg, kind, "add_prefix_space", bool, True)
        gpt2 = _compile({"Regex": _GPT2_PATTERN}, kind) if _field(cfg, kind, "use_regex", bool, True) else None

        def byte_level(pieces, first):
            if prefix:
                pieces = [p if p[0].startswith(" ") else _prefixed(" ", *p) for p in pieces]
            if gpt2 is not None:
                pieces, first = _split_pieces(pieces, first, gpt2, "Isolated")
            out = []
            for s, spans in pieces:
                chars, char_spans = [], []
                for c, span in zip(s, spans):
                    data = c.encode("utf-8")
                    chars += [BYTE_TO_CHAR[b] for b in data]
                    char_spans += [span] * len(data)
                out.append(("".join(chars), char_spans))
            return out, first

        return byte_level
    if t == "Split":
        pattern = _compile(_field(cfg, kind, "pattern", dict, required=True), f"{kind} Split")
        behavior = _field(cfg, kind, "behavior", str, required=True)
        _need(behavior in _BEHAVIORS, f"{kind} Split: behavior={behavior!r}")
        invert = _field(cfg, kind, "invert", bool, False)
        return lambda pieces, first: _split_pieces(pieces, first, pattern, behavior, invert)
    if t == "Metaspace":
        replacement, scheme = _metaspace_scheme(cfg, kind)
        split = _field(cfg, kind, "split", bool, True)
        marker = regex.compile(regex.escape(replacement))

        def metaspace(pieces, first):
            out = []
            for k, (s, spans) in enumerate(pieces):
                s = s.replace(" ", replacement)
                if not s.startswith(replacement) and (scheme == "always" or (scheme == "first" and k == 0 and first)):
                    s, spans = _prefixed(replacement, s, spans)
                out.append((s, spans))
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
    raise _Bad(f"{kind} type {t!r} has no offsets here")


def _trim(cfg, kind="post_processor"):
    """The post-processor's trim_offsets: (add_prefix_space,) where a ByteLevel or Roberta processor trims, else
    None."""
    if cfg is None:
        return None
    t = _type_of(cfg, kind)
    if t in ("ByteLevel", "RobertaProcessing"):
        return (
            (_field(cfg, kind, "add_prefix_space", bool, True),)
            if _field(cfg, kind, "trim_offsets", bool, True)
            else None
        )
    if t == "Sequence":
        for c in _field(cfg, kind, "processors", list, required=True):
            found = _trim(c, kind)
            if found is not None:
                return found
    return None


class AlignedPipeline:
    """tokenizer.json's normalizer, pre-tokenizer and post-processor trimming over aligned strings."""

    def __init__(self, kept):
        self.normalize = _normalizer(kept.get("normalizer"))
        self.pre_tokenize = _pre_tokenizer(kept.get("pre_tokenizer"))
        self.trim = _trim(kept.get("post_processor"))

    def trim_offsets(self, tokens, offsets):
        """Rust's ByteLevel process_offsets: a token's leading and trailing spaces ('Ġ' or whitespace) out of its
        offsets, but the one space the processor's add_prefix_space put before the text's first token."""
        if self.trim is None:
            return offsets
        (add_prefix_space,) = self.trim

        def spaces(chars):
            n = 0
            for c in chars:
                if c != space and not c.isspace():
                    break
                n += 1
            return n

        space = BYTE_TO_CHAR[ord(" ")]
        out = []
        for i, (token, (start, end)) in enumerate(zip(tokens, offsets)):
            lead, trail = spaces(token), spaces(reversed(token))
            if lead and (i == 0 or start == 0) and add_prefix_space and lead == 1:
                lead = 0
            if lead:
                start = min(start + lead, end)
            if trail and end >= trail:
                end = max(end - trail, start)
            out.append((start, end))
        return out


def token_spans(model, id_to_token, word, spans, ids):
    """The spans of the tokens (ids) the BPE model gave for one word (an aligned string): each token covers the next
    characters of the word its string spells, or one byte of the next character (byte fallback, <0xNN>), or the
    next unknown character (with fuse_unk, the run of them)."""
    out, pos, byte = [], 0, 0
    singles = model.vocab
    for i in ids:
        token = id_to_token[i]
        if byte == 0 and token and word.startswith(token, pos):
            out.append((spans[pos][0], spans[pos + len(token) - 1][1]))
            pos += len(token)
        elif (
            model.byte_fallback
            and len(token) == 6
            and token.startswith("<0x")
            and token.endswith(">")
            and pos < len(word)
        ):
            out.append(spans[pos])
            byte += 1
            if byte == len(word[pos].encode("utf-8")):
                pos, byte = pos + 1, 0
        elif i == model.unk_id and pos < len(word):
            start = pos
            pos += 1
            while model.fuse_unk and pos < len(word) and word[pos] not in singles:
                pos += 1
            out.append((spans[start][0], spans[pos - 1][1]))
        else:
            raise AssertionError(f"token {token!r} does not continue the word {word!r} at {pos}")
    return out


def text_ids_offsets(tokenizer, text, split_special_tokens=False):
    """A TokenizerJSON and a str -> (ids, offsets): tokenizer.text_ids' ids and each token's (start, end)
    characters of text, as the Rust library's encoding.offsets (the module's docstring says how they are found);
    trimmed where the post-processor trims. The aligned pipeline is built once per tokenizer (its _aligned)."""
    if not isinstance(text, str):
        raise InvalidInputError(f"the tokenizer encodes str, got {type(text).__name__}")
    check_text(text)
    if tokenizer._aligned is None:
        try:
            tokenizer._aligned = AlignedPipeline(tokenizer._kept)
        except _Bad as e:
            raise InvalidInputError(f"return_offsets_mapping: {tokenizer.source}: {e}") from None
    aligned = tokenizer._aligned
    ids, offsets = [], []
    pieces = (
        tokenizer._find_added(text, tokenizer._raw_split, "r", split_special_tokens)
        if tokenizer._raw_split is not None
        else [(text, None)]
    )
    offset = 0
    for piece, tid in pieces:
        start, at_start = offset, offset == 0
        offset += len(piece)
        if tid is not None:
            ids.append(tid)
            offsets.append((start, offset))
            continue
        s, spans = piece, [(start + k, start + k + 1) for k in range(len(piece))]
        if aligned.normalize is not None:
            s, spans = aligned.normalize(s, spans)
        parts = (
            tokenizer._find_added(s, tokenizer._norm_split, "n", split_special_tokens)
            if tokenizer._norm_split is not None
            else [(s, None)]
        )
        at = 0
        for k, (part, pid) in enumerate(parts):
            part_spans, at = spans[at : at + len(part)], at + len(part)
            if pid is not None:
                ids.append(pid)
                offsets.append((part_spans[0][0], part_spans[-1][1]) if part_spans else (start, start))
                continue
            if not part:
                continue
            words, first = [(part, part_spans)], at_start and k == 0
            if aligned.pre_tokenize is not None:
                words, first = aligned.pre_tokenize(words, first)
            for w, w_spans in words:
                word_ids = tokenizer.model.encode_word(w)
                ids.extend(word_ids)
                offsets.extend(token_spans(tokenizer.model, tokenizer._id_to_token, w, w_spans, word_ids))
    return ids, aligned.trim_offsets([tokenizer._id_to_token[i] for i in ids], offsets)
