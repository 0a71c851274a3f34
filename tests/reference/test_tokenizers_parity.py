"""The real tokenizer files of tests/data/npm (Llama 2, Llama 3, Qwen3, Gemma 3) beside the references of the
reference environment (tests/fixtures/hf_reference.py): Hugging Face's Rust tokenizers on the file itself
(tokenizers.Tokenizer.from_file), and Transformers' AutoTokenizer over it.

- Against the Rust tokenizers: ids, type ids and attention masks of single texts (with and without special
  tokens), pairs, added tokens (plain and special), batches padded on either side, and decode with and without
  skip_special_tokens; each token's character offsets (return_offsets_mapping=True) among them.
- Against AutoTokenizer, call for call: the same, through Transformers' surface (tokenize, convert_ids_to_tokens,
  batch_decode, padding="max_length", pad_to_multiple_of, the special tokens' attributes, padding_side, len) and
  apply_chat_template (text and ids) against Transformers' own renderer. Each call is one op ({"op": method, "args",
  "kwargs"}, or "set"/"get" of an attribute) run in order on one tokenizer on each side, so that add_tokens and a
  changed pad_token or padding_side carry to the calls after them.

Where Transformers 5 and we differ, KNOWN names the calls and why (each a decision in docs/tokenizers.md); the
test fails if another call differs, or if a named one no longer does (then the docs are out of date).
"""

import os

import numpy as np
import pytest
import tokenizer_data as td

import habana_assist as ha

TEXTS = [
    "Hello world",
    "def f(x):\n\treturn x**2\n",
    "caf\u00e9 \U0001f600 \u4e2d\u6587 na\u00efve",
    "  two  spaces",
    "x" * 40,
    "",
    "The year 2025 had 365 days.",
    "line one\n\nline three\r\n",
    "a\u00a0b\u200bc",
]
PAIRS = [("Question: what is it?", "Answer: a test."), ("one", "")]
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Add 2 and 3."},
]
ADDED = ["<extra_tok>", "newword"]
ADDED_SPECIAL = ["<|special_one|>"]
TRIM_TEXTS = ["Hello  world", "  two  spaces ", " x", TEXTS[2]]  # spaces a trimming post-processor leaves out
WITH_ADDED = ["a <extra_tok> b newword c", "<|special_one|>x<extra_tok>", "newwordnewword"]
DECODE_IDS = [1, 2, 3, 4, 100, 1000, 5000]
# Each file's pad token; the Llama files have none: eos as pad, the usual fix, set before their batches.
PAD = {"llama2": "</s>", "llama3": "<|end_of_text|>", "qwen3": "<|endoftext|>", "gemma3": "<pad>"}
NO_PAD = ("llama2", "llama3")
CHAT = {
    "text": dict(tokenize=False),
    "generation_prompt": dict(tokenize=False, add_generation_prompt=True),
    "ids": dict(tokenize=True),
    "ids_as_list": dict(tokenize=True, return_dict=False),
    "continue_final": dict(tokenize=False, continue_final_message=True),
}

# Transformers 5's own choices, where ours follows the file (and the Rust tokenizers on it) or Transformers 4.
REBUILT = (
    "Transformers 5's LlamaTokenizer builds its own pipeline (a Metaspace pre-tokenizer, no normalizer) in "
    "place of the file's legacy normalizer (Prepend + Replace): runs of spaces and normalized added tokens "
    "come out otherwise; ours encodes as the file says, as the Rust tokenizers do"
)
EMPTY_PAIR = (
    "Transformers drops an empty text_pair (''), ours applies the pair template to it, as the Rust tokenizers do"
)
MASK = (
    "Transformers 5's GemmaTokenizer declares mask_token '<mask>', which the file's added_tokens list as not "
    "special; ours follows the file, so '<mask>' is neither in all_special_tokens nor skipped by decode"
)
CHAT_DICT = (
    "Transformers 5's apply_chat_template(tokenize=True) returns a BatchEncoding (return_dict=True by "
    "default); ours keeps Transformers 4's default, the list of ids (equal ids; return_dict=True gives the "
    "BatchEncoding)"
)
KNOWN = {
    **{
        ("llama2", tag): REBUILT
        for tag in (
            "text:3",
            "text_plain:3",
            "tokenize:3",
            "offsets:3",
            "batch:right",
            "batch:left",
            "batch_max_length:right",
            "batch_max_length:left",
            "batch_multiple",
            "added:0",
            "added:1",
            "added:2",
            "added_tokenize:0",
            "added_tokenize:1",
            "added_tokenize:2",
        )
    },
    ("llama2", "pair:1"): EMPTY_PAIR,
    ("gemma3", "pair:1"): EMPTY_PAIR,
    **{
        ("gemma3", tag): MASK
        for tag in (
            "get:all_special_tokens",
            "get:all_special_ids",
            "decode_skip",
            "batch_decode",
            "after_added:all_special_tokens",
        )
    },
    **{(family, "chat:ids"): CHAT_DICT for family in ("llama3", "qwen3", "gemma3")},
}


def _dir(family):
    return os.path.dirname(td.tokenizer_path(family))


def _ops(family):
    """The calls made on both sides, in order, each with a tag naming it."""
    ops = [
        dict(op="get", name=name, tag=f"get:{name}")
        for name in (
            "bos_token",
            "eos_token",
            "pad_token",
            "unk_token",
            "all_special_tokens",
            "all_special_ids",
            "padding_side",
        )
    ]
    for i, text in enumerate(TEXTS):
        ops += [
            dict(op="__call__", args=[text], tag=f"text:{i}"),
            dict(op="__call__", args=[text], kwargs=dict(add_special_tokens=False), tag=f"text_plain:{i}"),
            dict(op="tokenize", args=[text], tag=f"tokenize:{i}"),
        ]
    for i, (text, pair) in enumerate(PAIRS):
        ops.append(dict(op="__call__", args=[text, pair], tag=f"pair:{i}"))
    for i, text in enumerate(TEXTS):
        ops.append(dict(op="__call__", args=[text], kwargs=dict(return_offsets_mapping=True), tag=f"offsets:{i}"))
    ops.append(dict(op="__call__", args=list(PAIRS[0]), kwargs=dict(return_offsets_mapping=True), tag="offsets:pair"))
    ops += [
        dict(op="decode", args=[DECODE_IDS], tag="decode"),
        dict(op="decode", args=[DECODE_IDS], kwargs=dict(skip_special_tokens=True), tag="decode_skip"),
        dict(op="convert_ids_to_tokens", args=[DECODE_IDS], tag="convert_ids_to_tokens"),
    ]
    if family in NO_PAD:
        ops.append(dict(op="set", name="pad_token", value=PAD[family], tag="set_pad"))
    for side in ("right", "left"):
        ops += [
            dict(op="set", name="padding_side", value=side, tag=f"set:{side}"),
            dict(op="__call__", args=[TEXTS[:4]], kwargs=dict(padding=True), tag=f"batch:{side}"),
            dict(
                op="__call__",
                args=[TEXTS[:4]],
                kwargs=dict(padding="max_length", max_length=24, truncation=True),
                tag=f"batch_max_length:{side}",
            ),
        ]
    ops += [
        dict(op="__call__", args=[TEXTS[:4]], kwargs=dict(padding=True, pad_to_multiple_of=8), tag="batch_multiple"),
        dict(
            op="batch_decode",
            args=[[DECODE_IDS[:4], [100, 200]]],
            kwargs=dict(skip_special_tokens=True),
            tag="batch_decode",
        ),
        dict(op="add_tokens", args=[ADDED], tag="add_tokens"),
        dict(op="add_special_tokens", args=[{"additional_special_tokens": ADDED_SPECIAL}], tag="add_special_tokens"),
        dict(op="__len__", tag="len"),
    ]
    for i, text in enumerate(WITH_ADDED):
        ops += [
            dict(op="__call__", args=[text], tag=f"added:{i}"),
            dict(op="tokenize", args=[text], tag=f"added_tokenize:{i}"),
        ]
    ops.append(dict(op="get", name="all_special_tokens", tag="after_added:all_special_tokens"))
    if family != "llama2":  # the Llama 2 files carry no chat template
        for name, kwargs in CHAT.items():
            messages = MESSAGES[:3] if kwargs.get("continue_final_message") else MESSAGES
            ops.append(dict(op="apply_chat_template", args=[messages], kwargs=kwargs, tag=f"chat:{name}"))
    return ops


def _rust_ops(family):
    """The Rust tokenizers' calls, and the same call made on ours: [(rust op, our call -> comparable value)]."""
    pairs = []
    for special in (True, False):
        for text in TEXTS:
            pairs.append(
                (
                    dict(op="encode", text=text, add_special_tokens=special),
                    lambda tok, t=text, s=special: _our_encoding(
                        tok(t, add_special_tokens=s, return_offsets_mapping=True)
                    ),
                )
            )
    for text, pair in PAIRS:
        pairs.append(
            (
                dict(op="encode", text=text, pair=pair, add_special_tokens=True),
                lambda tok, t=text, p=pair: _our_encoding(tok(t, p, return_offsets_mapping=True)),
            )
        )
    for skip in (False, True):
        pairs.append(
            (
                dict(op="decode", ids=DECODE_IDS, skip_special_tokens=skip),
                lambda tok, s=skip: tok.decode(DECODE_IDS, skip_special_tokens=s),
            )
        )
    pad = PAD[family]
    for side in ("right", "left"):
        pairs.append(
            (
                dict(op="encode_batch", texts=TEXTS[:4], direction=side, pad_token=pad),
                lambda tok, s=side: _our_batch(tok, padding_side=s),
            )
        )
    pairs.append((dict(op="add_tokens", tokens=ADDED), lambda tok: tok.add_tokens(ADDED)))
    pairs.append(
        (
            dict(op="add_special_tokens", tokens=ADDED_SPECIAL),
            lambda tok: tok.add_special_tokens({"additional_special_tokens": ADDED_SPECIAL}),
        )
    )
    for text in WITH_ADDED:
        pairs.append(
            (
                dict(op="encode", text=text, add_special_tokens=True),
                lambda tok, t=text: _our_encoding(tok(t, return_offsets_mapping=True)),
            )
        )
    return [op for op, _ in pairs], [call for _, call in pairs]


def _our_encoding(enc):
    return {
        "ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "offsets": [list(o) for o in enc["offset_mapping"]],
    }


def _our_batch(tok, padding_side):
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token  # PAD's choice for the Llama files
    enc = tok(TEXTS[:4], padding=True, padding_side=padding_side)
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


@pytest.fixture(scope="module")
def references(hf_reference, tmp_path_factory):
    """{(family, "transformers" | "rust"): the reference's results}, every family in one child process. A family
    whose file has no pad token gets eos as pad (PAD): before its batches here, and in the Rust batches' padding.
    ("trim", "rust"): the Rust tokenizers on TRIM_TEXTS with Llama 3's file given a trimming ByteLevel post-processor
    (its directory under ("trim", "dir"))."""
    jobs, keys = [], []
    for family in td.FAMILIES:
        jobs += [
            dict(kind="tokenizer", dir=_dir(family), ops=_ops(family)),
            dict(kind="rust_tokenizer", dir=_dir(family), ops=_rust_ops(family)[0]),
        ]
        keys += [(family, "transformers"), (family, "rust")]
    trim = os.path.dirname(
        td.write_variant(
            tmp_path_factory.mktemp("trim"),
            "llama3",
            "trim",
            post_processor={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        )
    )
    jobs.append(
        dict(
            kind="rust_tokenizer",
            dir=trim,
            ops=[dict(op="encode", text=t, add_special_tokens=True) for t in TRIM_TEXTS],
        )
    )
    keys.append(("trim", "rust"))
    return {**dict(zip(keys, hf_reference.run(jobs))), ("trim", "dir"): trim}


_pristine = {}


def _unchanged(family):
    """Our tokenizer of the family's files, loaded once, for the tests that change nothing in it."""
    if family not in _pristine:
        _pristine[family] = ha.AutoTokenizer.from_pretrained(_dir(family))
    return _pristine[family]


def _plain(value):
    """Our answer in the JSON shapes the runner gives Transformers' (BatchEncoding -> dict of lists)."""
    if hasattr(value, "keys") and hasattr(value, "__getitem__") and not isinstance(value, dict):
        value = {k: value[k] for k in value.keys()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _run_ours(tok, op):
    try:
        if op["op"] == "set":
            setattr(tok, op["name"], op["value"])
            return {"value": None}
        if op["op"] == "get":
            return {"value": _plain(getattr(tok, op["name"]))}
        return {"value": _plain(getattr(tok, op["op"])(*op.get("args", []), **op.get("kwargs", {})))}
    except Exception as e:  # noqa: BLE001 - a refusal is compared with Transformers' answer like any result
        return {"error": f"{type(e).__name__}: {e}"}


@pytest.mark.parametrize("family", td.FAMILIES)
def test_encodings_equal_rust_tokenizers_on_the_file(references, family):
    ref = references[family, "rust"]
    assert "error" not in ref, f"the Rust tokenizers could not run the {family} file: {ref.get('error')}"
    rust_ops, calls = _rust_ops(family)
    tok = ha.AutoTokenizer.from_pretrained(_dir(family))
    differences = []
    for op, call, theirs in zip(rust_ops, calls, ref["results"], strict=True):
        if op["op"] == "encode":  # type ids: below
            theirs = {k: theirs[k] for k in ("ids", "attention_mask", "offsets")}
        ours = _plain(call(tok))
        if ours != theirs:
            differences.append(f"{op}:\n    ours: {ours}\n    Rust: {theirs}")
    assert not differences, f"{family}: {len(differences)} of {len(rust_ops)} calls differ:\n" + "\n".join(differences)


@pytest.mark.parametrize("family", td.FAMILIES)
def test_tokenizer_calls_equal_transformers_but_the_named_differences(references, family):
    ref = references[family, "transformers"]
    assert "error" not in ref, f"Transformers could not load the {family} tokenizer: {ref.get('error')}"
    tok = ha.AutoTokenizer.from_pretrained(_dir(family))
    unexpected, gone = [], []
    for op, theirs in zip(_ops(family), ref["results"], strict=True):
        ours = _run_ours(tok, op)
        reason = KNOWN.get((family, op["tag"]))
        if reason is None and ours != theirs:
            unexpected.append(f"{op}:\n    ours:         {ours}\n    Transformers: {theirs}")
        elif reason is not None and ours == theirs:
            gone.append(f"{op['tag']}: {reason}")
        elif reason is CHAT_DICT:  # the ids themselves are Transformers'
            assert ours["value"] == theirs["value"]["input_ids"], f"{family} {op['tag']}: {ours} vs {theirs}"
    assert not unexpected, f"{family}: calls differ from Transformers:\n" + "\n".join(unexpected)
    assert not gone, f"{family}: these documented differences are gone (update docs/tokenizers.md):\n" + "\n".join(gone)


def test_type_ids_of_pairs_equal_rust_tokenizers(references):
    """Token type ids where the file's post-processor gives pairs their own (the Llama-family templates mark the
    second sequence 1): return_token_type_ids=True gives the Rust tokenizers' type_ids."""
    for family in td.FAMILIES:
        rust_ops, _ = _rust_ops(family)
        tok = _unchanged(family)
        for op, theirs in zip(rust_ops, references[family, "rust"]["results"], strict=True):
            if op["op"] == "encode" and op.get("pair") is not None:
                ours = tok(op["text"], op["pair"], return_token_type_ids=True)["token_type_ids"]
                assert ours == theirs["type_ids"], f"{family} {op}: type ids {ours}, Rust {theirs['type_ids']}"


def test_offsets_are_rust_tokenizers_for_batches_tensors_and_a_trimming_post_processor(references):
    """return_offsets_mapping=True beyond single texts: a padded batch ((0, 0) at the padding, on either side) and
    return_tensors="np" ((batch, seq, 2) int64) give the Rust tokenizers' offsets; a ByteLevel post-processor with
    trim_offsets (GPT-2's, RoBERTa's) leaves spaces out of them as Rust's does; and the SentencePiece tokenizer
    (tokenizer.model, is_fast False, as Transformers' slow tokenizers) refuses offsets by name."""
    tok = ha.AutoTokenizer.from_pretrained(references["trim", "dir"])
    assert tok.is_fast
    for text, theirs in zip(TRIM_TEXTS, references["trim", "rust"]["results"], strict=True):
        ours = tok(text, return_offsets_mapping=True)
        assert [list(o) for o in ours["offset_mapping"]] == theirs["offsets"], (
            f"{text!r}: ours {ours['offset_mapping']}, Rust {theirs['offsets']}"
        )
    for family in td.FAMILIES:
        tok = ha.AutoTokenizer.from_pretrained(_dir(family))
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        single = [tok(t, return_offsets_mapping=True)["offset_mapping"] for t in TEXTS[:4]]
        for side in ("left", "right"):
            batch = tok(TEXTS[:4], padding=True, padding_side=side, return_offsets_mapping=True, return_tensors="np")
            offsets, mask = batch["offset_mapping"], batch["attention_mask"]
            assert offsets.dtype == np.int64 and offsets.shape == batch["input_ids"].shape + (2,), offsets.shape
            for row, want in enumerate(single):
                assert offsets[row][mask[row] == 1].tolist() == [list(o) for o in want], f"{family} {side} {row}"
                assert (offsets[row][mask[row] == 0] == 0).all(), f"{family} {side}: padding's offsets are (0, 0)"
    spm = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    assert spm.is_fast is False
    with pytest.raises(ha.InvalidInputError, match="return_offsets_mapping.*tokenizer.json"):
        spm("def f():", return_offsets_mapping=True)
