"""Transformers' tokenizer habits on both backends: special and added tokens split out of the
text, split_special_tokens, add_tokens / add_special_tokens growing the vocabulary (and save_pretrained keeping
them), encode_plus / batch_encode_plus, pad, convert_tokens_to_string, get_vocab / len, and the model's
resize_token_embeddings and generate() refusing ids past its embedding.

The SentencePiece backend (LlamaTokenizer, Transformers' slow tokenizer) is checked on a tokenizer.model built from
the real Llama-family tokenizer.json of tests/data/npm (tokenizer_data.sentencepiece_model; first checked to encode
plain text exactly as the reference does) against Hugging Face's JavaScript tokenizers on that tokenizer.json:
Transformers converted such a model into that file, and both split special tokens out of the text and encode each
piece between them as a text of its own (Llama's legacy behaviour). legacy=False is checked against the file's
non-legacy conversion (Metaspace, prepend_scheme "first", as Transformers' converter writes it). The tokenizer.json
backend (PreTrainedTokenizerFast) is checked against the same reference on variants of the real files.
"""

import json
import os

import numpy as np
import pytest
import tokenizer_data as td
import tokenizer_fixture as tf

import habana_assist as ha
from habana_assist.errors import CheckpointError, InvalidInputError

SPIECE = "\u2581"
PLAIN = [
    "Hello world",
    "def f(x):\n\treturn x**2\n",
    "caf\u00e9 \U0001f600 \u4e2d\u6587",
    "x" * 40,
    "a\u00a0b",
    "",
    " leading",
    "  two",
    "\n\n",
]
# Special tokens of the Llama vocabulary in text: at the start, the end, between spaces, adjacent, alone.
SPECIAL = [
    "Hello <s>.",
    "<s>Hi</s> there<unk>",
    "<s> <s>  x",
    "a</s>b",
    " </s> ",
    "</s>",
    "x <s>\n<s>\ty",
    "<s>",
    "  <s>",
    "<s>[INST] Hi [/INST] ok</s><s>[INST] more",
    "<<s>>",
    "</s</s>>",
    "<unk><unk>",
]
LEGACY_FALSE = {"type": "Metaspace", "replacement": SPIECE, "prepend_scheme": "first", "split": False}


def _llama_dir(tmp_path_factory, name, config_changes=None, tokenizer_json=None):
    """A directory with the Llama-family tokenizer.model (built from tokenizer.json), its real tokenizer_config.json
    (with changes) and, where given, a tokenizer.json; -> its path."""
    directory = tmp_path_factory.mktemp(name)
    (directory / "tokenizer.model").write_bytes(td.sentencepiece_model("llama2"))
    with open(td.config_path("llama2"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(config_changes or {})
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    if tokenizer_json is not None:
        td.write_json(str(directory), tokenizer_json)
    return str(directory)


@pytest.fixture(scope="module")
def llama_spm(tmp_path_factory):
    """LlamaTokenizer over the built tokenizer.model, as the checkpoint's config says (legacy: true)."""
    tok = ha.AutoTokenizer.from_pretrained(_llama_dir(tmp_path_factory, "llama_spm"))
    assert type(tok).__name__ == "LlamaTokenizer"
    return tok


@pytest.fixture(scope="module")
def llama_spm_non_legacy(tmp_path_factory):
    return ha.AutoTokenizer.from_pretrained(_llama_dir(tmp_path_factory, "llama_spm_nl", {"legacy": False}))


@pytest.fixture(scope="module")
def non_legacy_json(tmp_path_factory):
    """The Llama tokenizer.json as Transformers converts it with legacy=False (no normalizer, Metaspace first)."""
    return td.write_json(
        str(tmp_path_factory.mktemp("nl_json")), td.variant("llama2", normalizer=None, pre_tokenizer=LEGACY_FALSE)
    )


@pytest.fixture
def small(tmp_path):
    """The small SentencePiece tokenizer of tokenizer_fixture (no dummy prefix; <unk> <s> </s> <pad> = 0 1 2 3)."""
    return ha.AutoTokenizer.from_pretrained(tf.write_tokenizer(tmp_path / "small"))


def _fast(family, **kwargs):
    return ha.AutoTokenizer.from_pretrained(os.path.dirname(td.tokenizer_path(family)), **kwargs)


@pytest.fixture(scope="module")
def fast():
    """Loaded once, for the tests that change nothing on them: {family: PreTrainedTokenizerFast}."""
    return {family: _fast(family) for family in ("llama2", "llama3", "qwen3")}


# ---- the SentencePiece model built from tokenizer.json is the reference's tokenizer -----------------------------


def test_the_built_sentencepiece_model_encodes_plain_text_as_the_reference(llama_spm):
    refs, _ = td.reference(td.tokenizer_path("llama2"), td.config_path("llama2"), PLAIN)
    for text, ref in zip(PLAIN, refs):
        got = llama_spm.encode(text, add_special_tokens=False)
        assert got == ref.ids_plain, f"{text!r}: the built model gives {got}, the reference {ref.ids_plain}"


# ---- special tokens in the text ------------------------------------------------------------------------------


def test_sentencepiece_splits_special_tokens_out_of_the_text_as_the_reference(llama_spm):
    refs, _ = td.reference(td.tokenizer_path("llama2"), td.config_path("llama2"), SPECIAL)
    for text, ref in zip(SPECIAL, refs):
        assert llama_spm.encode(text, add_special_tokens=False) == ref.ids_plain, (
            f"{text!r}: got {llama_spm.encode(text, add_special_tokens=False)}, reference {ref.ids_plain}"
        )
        assert llama_spm.encode(text) == ref.ids, f"{text!r} with <s>: got {llama_spm.encode(text)}, ref {ref.ids}"
        assert llama_spm.tokenize(text) == ref.tokens, f"{text!r}: got {llama_spm.tokenize(text)}, ref {ref.tokens}"


def test_transformers_documented_legacy_example_hello_s_dot(llama_spm, llama_spm_non_legacy):
    # Transformers' LlamaTokenizer docstring: "Hello <s>." ends with "▁." (legacy) or "." (legacy=False).
    hello, space, dot, spaced_dot = (
        llama_spm.convert_tokens_to_ids(t) for t in (f"{SPIECE}Hello", SPIECE, ".", f"{SPIECE}.")
    )
    assert llama_spm.encode("Hello <s>.") == [1, hello, space, 1, spaced_dot], llama_spm.encode("Hello <s>.")
    got = llama_spm_non_legacy.encode("Hello <s>.")
    assert got == [1, hello, space, 1, dot], f"legacy=False: expected '.' without a space after <s>, got {got}"


def test_sentencepiece_legacy_false_encodes_as_its_converted_tokenizer_json(llama_spm_non_legacy, non_legacy_json):
    # Texts that do not start with whitespace: there the slow tokenizer puts "▁" before the text even where it
    # starts with a space, the converted Metaspace does not (a slow/fast difference of Transformers itself).
    texts = [t for t in SPECIAL + PLAIN if t and not t[0].isspace()]
    refs, _ = td.reference(non_legacy_json, None, texts)
    for text, ref in zip(texts, refs):
        got = llama_spm_non_legacy.encode(text, add_special_tokens=False)
        assert got == ref.ids_plain, f"legacy=False {text!r}: got {got}, reference {ref.ids_plain}"
    assert llama_spm_non_legacy.encode(" x", add_special_tokens=False) == llama_spm_non_legacy.encode(
        f"{SPIECE}x", add_special_tokens=False
    ), "'▁' and ' ' are the same space"


def test_chat_template_bos_token_is_one_id_on_sentencepiece(llama_spm, small):
    template = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    for tok in (llama_spm, small):
        ids = tok.apply_chat_template(messages, chat_template=template)
        text = tok.apply_chat_template(messages, chat_template=template, tokenize=False)
        assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1, f"{text!r} -> {ids}"
        assert ids.count(tok.eos_token_id) == 2 and ids[-1] == tok.eos_token_id, f"{text!r} -> {ids}"
        assert ids == tok.encode(text, add_special_tokens=False), "the template's text encodes to the same ids"


def test_split_special_tokens_sentencepiece_leaves_every_added_token_as_text(small):
    sp = tf.sentencepiece_processor()
    small.add_tokens(["hello_world"])
    for text in ["<s>x</s> <pad>", "a<unk>b hello_world"]:
        got = small.encode(text, add_special_tokens=False, split_special_tokens=True)
        assert got == sp.encode(text), f"{text!r}: sentencepiece's own ids expected, got {got}"
        assert small.tokenize(text, split_special_tokens=True) == sp.encode(text, out_type=str)
    assert small.encode("x<s>", add_special_tokens=False) == sp.encode("x") + [small.bos_token_id]


def test_split_special_tokens_fast_leaves_special_added_tokens_as_text_as_rust_does(tmp_path, fast):
    qwen = fast["qwen3"]
    added = td.load_json("qwen3")["added_tokens"]
    assert {t["special"] for t in added} == {True, False}, "qwen3 has special and plain added tokens"
    # Rust's encode_special_tokens: the special ones are matched no more, the others still are.
    without = td.write_json(str(tmp_path), td.variant("qwen3", added_tokens=[t for t in added if not t["special"]]))
    texts = ["<|im_start|>user\n<think>hi</think><|im_end|>", "<tool_call>{}</tool_call><|endoftext|>x"]
    refs, _ = td.reference(without, None, texts)
    for text, ref in zip(texts, refs):
        got = qwen.encode(text, split_special_tokens=True)
        assert got == ref.ids_plain, f"{text!r}: got {got}, reference without special added tokens {ref.ids_plain}"
        assert qwen(text, split_special_tokens=True)["input_ids"] == got
        assert qwen.encode(text) != got, "split_special_tokens=False still splits them"


@pytest.mark.parametrize("backend", ["sentencepiece", "fast"])
def test_split_special_tokens_from_the_config_is_the_default_and_is_saved(tmp_path, backend):
    if backend == "fast":
        directory = tmp_path / "fast"
        directory.mkdir()
        os.symlink(td.tokenizer_path("llama3"), directory / "tokenizer.json")
        with open(td.config_path("llama3"), encoding="utf-8") as f:
            config = json.load(f)
        (directory / "tokenizer_config.json").write_text(json.dumps({**config, "split_special_tokens": True}))
        text = "<|begin_of_text|>hi"
    else:
        directory = tf.write_tokenizer(tmp_path / "spm", {**tf.TOKENIZER_CONFIG, "split_special_tokens": True})
        text = "<s>hi"
    tok = ha.AutoTokenizer.from_pretrained(directory)
    split, whole = (
        tok.encode(text, add_special_tokens=False),
        tok.encode(text, add_special_tokens=False, split_special_tokens=False),
    )
    assert tok.split_special_tokens and len(split) > len(whole) and whole[0] == tok.bos_token_id, (split, whole)
    tok.save_pretrained(tmp_path / "saved")
    again = ha.AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert again.split_special_tokens and again.encode(text, add_special_tokens=False) == split
    tok.split_special_tokens = False
    assert tok.encode(text, add_special_tokens=False) == whole
    with pytest.raises(InvalidInputError, match="split_special_tokens='yes'"):
        tok(text, split_special_tokens="yes")


# ---- added tokens ------------------------------------------------------------------------------------------------


def test_added_token_flags_on_sentencepiece_as_the_reference(tmp_path_factory):
    # The same added tokens in the Llama tokenizer.json (for the reference) and added to the slow tokenizer:
    # lstrip/rstrip take the spaces beside a token, on both.
    added = list(td.load_json("llama2")["added_tokens"]) + [
        {
            "id": 32000,
            "content": "<tool>",
            "single_word": False,
            "lstrip": True,
            "rstrip": True,
            "normalized": False,
            "special": True,
        },
        {
            "id": 32001,
            "content": "[X]",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": False,
        },
    ]
    path = td.write_json(str(tmp_path_factory.mktemp("flags")), td.variant("llama2", added_tokens=added))
    tok = ha.AutoTokenizer.from_pretrained(_llama_dir(tmp_path_factory, "flags_spm"))
    assert (
        tok.add_special_tokens({"additional_special_tokens": [ha.AddedToken("<tool>", lstrip=True, rstrip=True)]}) == 1
    )
    assert tok.add_tokens("[X]") == 1 and len(tok) == 32002
    texts = ["a <tool> b", "a  <tool>\n\nb", "<tool>x", "x[X]y", " [X] ", "a [X]<tool> [X] b", "<s><tool></s>"]
    refs, _ = td.reference(path, td.config_path("llama2"), texts)
    for text, ref in zip(texts, refs):
        assert tok.encode(text) == ref.ids, f"{text!r}: got {tok.encode(text)}, reference {ref.ids}"


def test_single_word_added_token_follows_the_slow_tokenizers_rule(small):
    # Transformers' slow tokenize: a single_word token next to a non-space goes back into its neighbour's text.
    sp = tf.sentencepiece_processor()
    small.add_tokens(ha.AddedToken("fib", single_word=True))
    fib = small.convert_tokens_to_ids("fib")
    assert small.encode("a fib b", add_special_tokens=False) == sp.encode("a ") + [fib] + sp.encode(" b")
    assert small.encode("afib b", add_special_tokens=False) == sp.encode("afib") + sp.encode(" b")
    assert small.encode("a fibb", add_special_tokens=False) == sp.encode("a ") + sp.encode("fibb")


@pytest.mark.parametrize("backend", ["sentencepiece", "fast"])
def test_add_special_tokens_grows_the_vocabulary_splits_renders_and_saves(tmp_path, small, backend):
    tok = small if backend == "sentencepiece" else _fast("llama3")
    n = len(tok)
    assert (
        tok.add_special_tokens(
            {
                "pad_token": "[PAD]",
                "sep_token": "<sep>",
                "additional_special_tokens": ["<tool>", ha.AddedToken("<x>", rstrip=True)],
            }
        )
        == 4
    )
    assert len(tok) == n + 4 and tok.vocab_size <= n and len(tok.get_vocab()) == len(tok)
    assert (tok.pad_token, tok.pad_token_id, tok.sep_token, tok.sep_token_id) == ("[PAD]", n, "<sep>", n + 1)
    assert tok.additional_special_tokens == ["<tool>", "<x>"] and tok.additional_special_tokens_ids == [n + 2, n + 3]
    assert tok.get_vocab()["<tool>"] == n + 2 and tok.convert_tokens_to_ids("[PAD]") == n
    assert tok.add_special_tokens({"pad_token": "[PAD]"}) == 0 and len(tok) == n + 4, "an added token stays one"
    body = tok.encode("a b", add_special_tokens=False)
    ids = tok.encode("[PAD]a<x>  b<tool>", add_special_tokens=False)
    assert ids[0] == n and n + 3 in ids and ids[-1] == n + 2, f"each added token is one id: {ids}"
    assert tok.decode(ids, skip_special_tokens=True) == tok.decode(tok.encode("ab", add_special_tokens=False)), (
        "special added tokens are skipped (and <x> took the spaces after it)"
    )
    assert tok.decode([n + 2]) == "<tool>" and tok.convert_ids_to_tokens(n + 1) == "<sep>"
    assert tok.convert_ids_to_tokens(ids, skip_special_tokens=True) == tok.convert_ids_to_tokens(
        tok.encode("a", add_special_tokens=False) + tok.encode("b", add_special_tokens=False)
    )
    paths = tok.save_pretrained(tmp_path / "saved")
    with open(tmp_path / "saved" / "tokenizer_config.json", encoding="utf-8") as f:
        decoder = json.load(f)["added_tokens_decoder"]
    # An AddedToken keeps its own flags (normalized: True, as made); add_special_tokens makes it special.
    assert decoder[str(n + 3)] == {
        "content": "<x>",
        "lstrip": False,
        "normalized": True,
        "rstrip": True,
        "single_word": False,
        "special": True,
    }, decoder[str(n + 3)]
    assert decoder[str(n)]["normalized"] is False, "a str special token is not normalized"
    if backend == "sentencepiece":  # Transformers' slow tokenizers also write added_tokens.json
        assert os.path.basename(paths[-1]) == "added_tokens.json"
        with open(paths[-1], encoding="utf-8") as f:
            assert json.load(f) == {"[PAD]": n, "<sep>": n + 1, "<tool>": n + 2, "<x>": n + 3}
    again = ha.AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert (len(again), again.pad_token_id, again.sep_token, again.additional_special_tokens) == (
        n + 4,
        n,
        "<sep>",
        ["<tool>", "<x>"],
    )
    for text in ["[PAD]a<x>  b<tool>", "plain text", "<sep><sep>"]:
        assert again.encode(text) == tok.encode(text), text
    assert again.decode(ids) == tok.decode(ids) and tok.encode("a b", add_special_tokens=False) == body


@pytest.mark.parametrize("backend", ["sentencepiece", "fast"])
def test_add_tokens_counts_new_ones_and_special_ones_follow_their_backend(small, backend):
    tok = small if backend == "sentencepiece" else _fast("llama3")
    n = len(tok)
    assert tok.add_tokens([]) == 0 and tok.add_tokens(tok.bos_token) == 0 and len(tok) == n, "a token it has is not new"
    assert tok.add_tokens(["<a>", "<b>", "<a>"]) == 2 and len(tok) == n + 2
    assert tok.encode("x<a><b>", add_special_tokens=False)[-2:] == [n, n + 1]
    assert tok.decode(tok.encode("x<a>", add_special_tokens=False), skip_special_tokens=True).endswith("<a>"), (
        "a plain added token is not skipped"
    )
    assert tok.add_tokens("<c>", special_tokens=True) == 1
    assert tok.decode([n + 2], skip_special_tokens=True) == ""
    # Transformers' slow _add_tokens lists a new special token in additional_special_tokens; the fast one does not.
    assert ("<c>" in tok.additional_special_tokens) == (backend == "sentencepiece"), tok.additional_special_tokens
    assert tok.added_tokens_encoder["<c>"] == n + 2 and tok.get_added_vocab()["<a>"] == n
    assert tok.added_tokens_decoder[n + 2].special and not tok.added_tokens_decoder[n].special


def test_sentencepiece_added_tokens_load_from_config_or_added_tokens_json(tmp_path):
    entry = {
        "content": "<tool>",
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
        "special": True,
    }
    tok = ha.AutoTokenizer.from_pretrained(
        tf.write_tokenizer(
            tmp_path / "a",
            {
                **tf.TOKENIZER_CONFIG,
                "added_tokens_decoder": {str(tf.VOCAB_SIZE): entry},
                "additional_special_tokens": ["<tool>"],
            },
        )
    )
    assert (len(tok), tok.convert_tokens_to_ids("<tool>"), tok.additional_special_tokens_ids) == (
        tf.VOCAB_SIZE + 1,
        tf.VOCAB_SIZE,
        [tf.VOCAB_SIZE],
    )
    legacy_dir = tf.write_tokenizer(tmp_path / "b")
    with open(os.path.join(legacy_dir, "added_tokens.json"), "w", encoding="utf-8") as f:
        json.dump({"<tool>": tf.VOCAB_SIZE, "<more>": tf.VOCAB_SIZE + 1}, f)
    legacy = ha.AutoTokenizer.from_pretrained(legacy_dir)
    assert legacy.encode("a<more><tool>", add_special_tokens=False)[-2:] == [tf.VOCAB_SIZE + 1, tf.VOCAB_SIZE]
    with pytest.raises(CheckpointError, match="without gaps"):
        ha.AutoTokenizer.from_pretrained(
            tf.write_tokenizer(
                tmp_path / "c", {**tf.TOKENIZER_CONFIG, "added_tokens_decoder": {str(tf.VOCAB_SIZE + 5): entry}}
            )
        )


def test_setting_a_special_token_attribute_to_a_new_token_is_refused_pointing_at_add_special_tokens(small):
    with pytest.raises(InvalidInputError, match=r"add_special_tokens\(\{'pad_token': '\[PAD\]'\}\)"):
        small.pad_token = "[PAD]"
    assert small.pad_token == "<pad>" and len(small) == tf.VOCAB_SIZE


# ---- encode_plus, batch_encode_plus, pad, convert_tokens_to_string --------------------------------------------


@pytest.mark.parametrize("backend", ["sentencepiece", "fast"])
def test_encode_plus_and_batch_encode_plus_are_the_call(small, fast, backend):
    tok = small if backend == "sentencepiece" else fast["qwen3"]
    kwargs = dict(padding="max_length", max_length=12, truncation=True, return_tensors="np")
    one = tok.encode_plus("hello there", "pair", **kwargs)
    call = tok("hello there", "pair", **kwargs)
    assert set(one) == set(call) and all(np.array_equal(one[k], call[k]) for k in call)
    assert tok.encode_plus("hi")["input_ids"] == tok("hi")["input_ids"] == tok.encode("hi")
    texts = ["a", "a longer text", ""]
    many = tok.batch_encode_plus(texts, padding=True)
    assert many == tok(texts, padding=True) and len(many["input_ids"]) == 3
    pairs = [("q1", "a1"), ("question two", "answer")]
    assert tok.batch_encode_plus(pairs)["input_ids"] == tok(["q1", "question two"], ["a1", "answer"])["input_ids"]
    with pytest.raises(InvalidInputError, match="batch_encode_plus"):
        tok.encode_plus(["a", "b"])
    with pytest.raises(InvalidInputError, match="encode_plus"):
        tok.batch_encode_plus("a")


@pytest.mark.parametrize("backend", ["sentencepiece", "fast"])
def test_pad_equals_padding_in_the_call(small, fast, backend):
    tok = small if backend == "sentencepiece" else fast["qwen3"]
    texts = ["a", "a longer text here", "mid text"]
    unpadded = tok(texts)
    for kwargs in (
        dict(),
        dict(padding_side="right"),
        dict(pad_to_multiple_of=8),
        dict(padding="max_length", max_length=20),
        dict(return_tensors="np"),
    ):
        padded = tok.pad(unpadded, **kwargs)
        call = tok(texts, padding=kwargs.pop("padding", True), **kwargs)
        assert set(padded) == set(call), (kwargs, set(padded))
        for key in call:
            assert np.array_equal(np.asarray(padded[key]), np.asarray(call[key])), (kwargs, key, padded[key])
    rows = [{"input_ids": ids} for ids in unpadded["input_ids"]]  # a data collator's features, no mask
    assert tok.pad(rows) == tok(texts, padding=True)
    assert tok.pad(unpadded, padding=False) == unpadded, "padding=False changes nothing"


def test_pad_details_as_transformers(small):
    pad, n = small.pad_token_id, small.pad_token_type_id
    enc = {"input_ids": [[5, 6, 7], [8]], "token_type_ids": [[0, 0, 1], [1]], "labels": [1, 0]}
    out = small.pad(enc, padding_side="right")
    assert out["input_ids"] == [[5, 6, 7], [8, pad, pad]] and out["attention_mask"] == [[1, 1, 1], [1, 0, 0]]
    assert out["token_type_ids"] == [[0, 0, 1], [1, n, n]] and out["labels"] == [1, 0], out
    one = small.pad({"input_ids": [5, 6, 7]}, pad_to_multiple_of=4, return_tensors="np")
    assert one["input_ids"].tolist() == [pad, 5, 6, 7] and one["attention_mask"].tolist() == [0, 1, 1, 1], (
        "a single sequence stays 1-D, padded on the tokenizer's padding_side (left here)"
    )
    arrays = small.pad({"input_ids": [np.array([5, 6]), np.array([7])]})
    assert isinstance(arrays["input_ids"], np.ndarray) and arrays["input_ids"].tolist() == [[5, 6], [pad, 7]], (
        "numpy in, numpy out"
    )
    assert "attention_mask" not in small.pad({"input_ids": [[5], [6, 7]]}, return_attention_mask=False)
    assert small.pad({"input_ids": [[5, 6, 7, 8, 9], [1]]}, padding="max_length", max_length=3)["input_ids"] == [
        [5, 6, 7, 8, 9],
        [pad, pad, 1],
    ], "pad never truncates"
    with pytest.raises(InvalidInputError, match="must include input_ids"):
        small.pad({"attention_mask": [[1]]})
    with pytest.raises(InvalidInputError, match="cannot be one array"):
        small.pad({"input_ids": [[1, 2], [3]]}, padding=False, return_tensors="np")
    small.pad_token = None
    with pytest.raises(InvalidInputError, match="does not have a padding token"):
        small.pad({"input_ids": [[1, 2], [3]]})


def test_pad_torch_in_torch_out(small):
    import torch  # scripts/setup.sh installs python3-torch, as tests/integrations/test_torch_io.py needs

    out = small.pad([{"input_ids": torch.tensor([5, 6])}, {"input_ids": torch.tensor([7])}])
    assert isinstance(out["input_ids"], torch.Tensor) and out["input_ids"].tolist() == [[5, 6], [small.pad_token_id, 7]]


@pytest.mark.parametrize("family", ["llama2", "llama3", "qwen3"])
def test_convert_tokens_to_string_fast_is_the_reference_decoder(fast, family):
    tok = fast[family]
    texts = PLAIN + ["<s>a</s>", "<|im_start|>x<|im_end|>"]
    refs, _ = td.reference(td.tokenizer_path(family), td.config_path(family), texts)
    for text, ref in zip(texts, refs):
        got = tok.convert_tokens_to_string(tok.tokenize(text))
        assert got == ref.decode_plain, f"{family} {text!r}: got {got!r}, reference {ref.decode_plain!r}"


def test_convert_tokens_to_string_sentencepiece_is_decode_of_their_ids(llama_spm, small):
    for tok in (llama_spm, small):
        for text in PLAIN + SPECIAL:
            ids = tok.encode(text)
            assert tok.convert_tokens_to_string(tok.convert_ids_to_tokens(ids)) == tok.decode(ids), text
    with pytest.raises(InvalidInputError, match="list of token strings"):
        small.convert_tokens_to_string("abc")


# ---- the model: ids past its embedding -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tf.write_checkpoint(tmp_path_factory.mktemp("model"), seed=3)


def test_resize_token_embeddings_accepts_what_fits_and_refuses_growth(model_dir):
    model = ha.AutoModelForCausalLM.from_pretrained(model_dir)
    for size in (None, tf.VOCAB_SIZE, tf.VOCAB_SIZE - 100):
        emb = model.resize_token_embeddings(size)
        assert (emb.num_embeddings, emb.embedding_dim) == (tf.VOCAB_SIZE, tf.MODEL["hidden_size"]), size
    assert model.vocab_size == tf.VOCAB_SIZE and model(np.array([[1, 2]])).logits.shape[-1] == tf.VOCAB_SIZE
    for kwargs in (
        dict(new_num_tokens=tf.VOCAB_SIZE + 1),
        dict(new_num_tokens=tf.VOCAB_SIZE - 1, pad_to_multiple_of=64),
    ):
        with pytest.raises(InvalidInputError, match=r"embedding has 500 rows and its weights are fixed"):
            model.resize_token_embeddings(**kwargs)
    with pytest.raises(InvalidInputError, match="new_num_tokens=0"):
        model.resize_token_embeddings(0)


def test_generate_refuses_an_added_token_id_past_the_embedding(model_dir):
    model = ha.AutoModelForCausalLM.from_pretrained(model_dir)
    tok = ha.AutoTokenizer.from_pretrained(model_dir)
    assert tok.add_special_tokens({"additional_special_tokens": ["<new>"]}) == 1
    inputs = tok("a <new> b", return_tensors="np")
    assert int(inputs["input_ids"].max()) == tf.VOCAB_SIZE
    with pytest.raises(InvalidInputError, match=r"token id 500, outside \[0, 500\).*add_special_tokens"):
        model.generate(**inputs, max_new_tokens=2)
