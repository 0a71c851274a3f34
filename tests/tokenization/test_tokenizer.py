"""AutoTokenizer / LlamaTokenizer: sentencepiece's ids exactly, Transformers' call conventions, the special tokens
of tokenizer_config.json and special_tokens_map.json, and clear exceptions for bad files, paths and ids.

The tokenizer is the small one of tests/fixtures/tokenizer_fixture.py (trained like the shipped pair's); sentencepiece's
own processor over the same model file is the reference for every id.
"""

import os

import numpy as np
import pytest
import tokenizer_fixture as tf

import habana_assist as ha
from habana_assist.errors import CheckpointError, CheckpointNotFoundError, InvalidInputError

TEXTS = [
    "",
    "a",
    " ",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "\tindented\twith\ttabs\n\n\n",
    "  leading and trailing spaces  ",
    "numbers 1234567890 and 3.14159",
    "caf\u00e9 na\u00efve \u00fcber",
    "\u4e2d\u6587\u5b57\u7b26 and \u65e5\u672c\u8a9e",
    "emoji \U0001f600\U0001f680 mixed",
    "\u00a0non-breaking\u2003em space",
    "<s almost special, yet text s> </ s> <pad <unk",  # whole special tokens are split out: test_tokenizer_parity.py
    "\r\nwindows line end\r\n",
    "x" * 300,
    "import os\nimport sys\n\nclass A(object):\n    '''doc'''\n    pass\n",
]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return tf.write_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def tok(tok_dir):
    return ha.AutoTokenizer.from_pretrained(tok_dir)


@pytest.fixture(scope="module")
def sp():
    return tf.sentencepiece_processor()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    directory = tf.write_checkpoint(tmp_path_factory.mktemp("tok_model"), seed=5)
    return ha.AutoModelForCausalLM.from_pretrained(directory)


def _tokenizer_with(tmp_path, config=None, special_tokens_map=None):
    return ha.AutoTokenizer.from_pretrained(tf.write_tokenizer(tmp_path, config, special_tokens_map))


# ---- ids ---------------------------------------------------------------------------------------------------


def test_encode_ids_are_sentencepiece_ids_with_bos_prepended(tok, sp):
    for text in TEXTS:
        expected = [tf.BOS_ID] + sp.encode(text)
        got = tok.encode(text)
        assert got == expected, f"encode({text!r}): expected {expected}, got {got}"


def test_call_on_a_str_gives_flat_lists_equal_to_encode(tok, sp):
    for text in TEXTS:
        enc = tok(text)
        expected = [tf.BOS_ID] + sp.encode(text)
        assert enc["input_ids"] == expected, f"tok({text!r})['input_ids']: expected {expected}, got {enc['input_ids']}"
        assert enc["attention_mask"] == [1] * len(expected), (
            f"tok({text!r})['attention_mask']: expected all ones, got {enc['attention_mask']}"
        )
        assert enc.input_ids == enc["input_ids"], "BatchEncoding attribute access differs from item access"


def test_call_on_a_list_gives_one_list_per_text(tok, sp):
    enc = tok(TEXTS)
    expected = [[tf.BOS_ID] + sp.encode(t) for t in TEXTS]
    assert enc["input_ids"] == expected, f"expected {expected}, got {enc['input_ids']}"
    assert enc["attention_mask"] == [[1] * len(e) for e in expected], f"got {enc['attention_mask']}"


def test_add_special_tokens_false_gives_sentencepiece_ids_alone(tok, sp):
    for text in TEXTS:
        assert tok.encode(text, add_special_tokens=False) == sp.encode(text), f"encode({text!r}, no specials)"
        got = tok(text, add_special_tokens=False)["input_ids"]
        assert got == sp.encode(text), f"tok({text!r}, add_special_tokens=False): expected {sp.encode(text)}, got {got}"


def test_empty_string_encodes_to_bos_alone(tok):
    assert tok.encode("") == [tf.BOS_ID], f"expected [{tf.BOS_ID}], got {tok.encode('')}"
    assert tok.encode("", add_special_tokens=False) == [], f"got {tok.encode('', add_special_tokens=False)}"


def test_add_eos_token_in_config_appends_eos(tmp_path, sp):
    tok = _tokenizer_with(tmp_path, {**tf.TOKENIZER_CONFIG, "add_eos_token": True, "add_bos_token": False})
    expected = sp.encode("hello world") + [tf.EOS_ID]
    assert tok.encode("hello world") == expected, f"expected {expected}, got {tok.encode('hello world')}"


# ---- text ----------------------------------------------------------------------------------------------------


def test_decode_of_encode_round_trips_every_text(tok):
    for text in TEXTS:
        got = tok.decode(tok.encode(text), skip_special_tokens=True)
        assert got == text, f"decode(encode({text!r}), skip_special_tokens=True): got {got!r}"


def test_decode_numpy_ids_equals_decode_of_the_list(tok):
    ids = tok.encode(TEXTS[3])
    assert tok.decode(np.array(ids, dtype=np.int64)) == tok.decode(ids)
    assert tok.decode(np.array(ids, dtype=np.int32), skip_special_tokens=True) == TEXTS[3]


def test_decode_shows_special_tokens_unless_skipped(tok):
    ids = [tf.PAD_ID, tf.PAD_ID, tf.BOS_ID] + tok.encode("x = 1", add_special_tokens=False) + [tf.EOS_ID]
    shown = tok.decode(ids)
    assert shown == "<pad><pad><s>x = 1</s>", f"decode with specials: expected '<pad><pad><s>x = 1</s>', got {shown!r}"
    hidden = tok.decode(ids, skip_special_tokens=True)
    assert hidden == "x = 1", f"decode skipping specials: expected 'x = 1', got {hidden!r}"


def test_batch_decode_decodes_each_row(tok):
    enc = tok(["a", "bb cc", "def f():"], padding=True, return_tensors="np")
    got = tok.batch_decode(enc["input_ids"], skip_special_tokens=True)
    assert got == ["a", "bb cc", "def f():"], f"expected the three texts, got {got}"
    shown = tok.batch_decode(enc["input_ids"])
    assert all(s.endswith(t) and "<s>" in s for s, t in zip(shown, ["a", "bb cc", "def f():"])), f"got {shown}"
    assert shown[0].startswith("<pad>"), f"left padding should show as '<pad>' first, got {shown[0]!r}"
    as_lists = tok.batch_decode([tok.encode("a"), tok.encode("bb cc")], skip_special_tokens=True)
    assert as_lists == ["a", "bb cc"], f"batch_decode of lists: got {as_lists}"


def test_decode_of_an_out_of_range_id_raises_invalid_input(tok):
    for bad in ([5, tok.vocab_size], [-1], [10**9]):
        with pytest.raises(InvalidInputError) as e:
            tok.decode(bad)
        assert "outside" in str(e.value), f"decode({bad}): message should say the id is outside the vocab: {e.value}"


# ---- tensors, padding, truncation ------------------------------------------------------------------------------


def test_return_tensors_np_gives_int64_ids_and_mask(tok, sp):
    enc = tok("def f(x):", return_tensors="np")
    expected = np.array([[tf.BOS_ID] + sp.encode("def f(x):")], dtype=np.int64)
    assert isinstance(enc["input_ids"], np.ndarray) and enc["input_ids"].dtype == np.int64, (
        f"expected an int64 array, got {type(enc['input_ids']).__name__} {getattr(enc['input_ids'], 'dtype', None)}"
    )
    assert np.array_equal(enc["input_ids"], expected), f"expected {expected}, got {enc['input_ids']}"
    assert enc["attention_mask"].dtype == np.int64 and np.array_equal(enc["attention_mask"], np.ones_like(expected)), (
        f"got mask {enc['attention_mask']!r}"
    )


def test_padding_true_pads_on_the_configs_left_side(tok, sp):
    texts = ["a", "bb cc dd ee", "x = 1"]
    enc = tok(texts, padding=True, return_tensors="np")
    rows = [[tf.BOS_ID] + sp.encode(t) for t in texts]
    width = max(len(r) for r in rows)
    expected = np.array([[tf.PAD_ID] * (width - len(r)) + r for r in rows], dtype=np.int64)
    mask = np.array([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=np.int64)
    assert tok.padding_side == "left", f"tokenizer_config.json says left, got {tok.padding_side!r}"
    assert np.array_equal(enc["input_ids"], expected), f"expected\n{expected}\ngot\n{enc['input_ids']}"
    assert np.array_equal(enc["attention_mask"], mask), f"expected\n{mask}\ngot\n{enc['attention_mask']}"
    lists = tok(texts, padding=True)
    assert lists["input_ids"] == expected.tolist(), f"padding without tensors: got {lists['input_ids']}"


def test_padding_right_when_padding_side_is_set_to_right(tok_dir, sp):
    tok = ha.AutoTokenizer.from_pretrained(tok_dir)
    tok.padding_side = "right"
    texts = ["a", "bb cc dd ee"]
    enc = tok(texts, padding="longest", return_tensors="np")
    rows = [[tf.BOS_ID] + sp.encode(t) for t in texts]
    width = max(len(r) for r in rows)
    expected = np.array([r + [tf.PAD_ID] * (width - len(r)) for r in rows], dtype=np.int64)
    mask = np.array([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=np.int64)
    assert np.array_equal(enc["input_ids"], expected), f"expected\n{expected}\ngot\n{enc['input_ids']}"
    assert np.array_equal(enc["attention_mask"], mask), f"expected\n{mask}\ngot\n{enc['attention_mask']}"


def test_padding_max_length_pads_every_row_to_max_length(tok, sp):
    enc = tok(["a", "bb cc"], padding="max_length", max_length=12, return_tensors="np")
    assert enc["input_ids"].shape == (2, 12), f"expected shape (2, 12), got {enc['input_ids'].shape}"
    row = [tf.BOS_ID] + sp.encode("a")
    expected = [tf.PAD_ID] * (12 - len(row)) + row
    assert enc["input_ids"][0].tolist() == expected, f"expected {expected}, got {enc['input_ids'][0].tolist()}"
    mask = [0] * (12 - len(row)) + [1] * len(row)
    assert enc["attention_mask"][0].tolist() == mask, f"expected {mask}, got {enc['attention_mask'][0].tolist()}"
    single = tok("a", padding="max_length", max_length=5)
    assert single["input_ids"] == [tf.PAD_ID] * (5 - len(row)) + row, f"single str: got {single['input_ids']}"


def test_padding_max_length_without_max_length_raises_invalid_input(tok):
    with pytest.raises(InvalidInputError, match="max_length"):
        tok(["a", "bb"], padding="max_length")


def test_truncation_right_keeps_bos_and_the_first_tokens(tok, sp):
    text = "def fib(n): return n if n < 2 else fib(n - 1)"
    body = sp.encode(text)
    assert len(body) > 6, "the test text must be longer than the limit"
    got = tok(text, truncation=True, max_length=5)["input_ids"]
    expected = [tf.BOS_ID] + body[:4]
    assert got == expected, f"right truncation to 5: expected {expected}, got {got}"


def test_truncation_left_keeps_bos_and_the_last_tokens(tok_dir, sp):
    # Transformers truncates the text's tokens and then adds the special tokens, so <s> survives left truncation.
    tok = ha.AutoTokenizer.from_pretrained(tok_dir)
    tok.truncation_side = "left"
    text = "def fib(n): return n if n < 2 else fib(n - 1)"
    body = sp.encode(text)
    got = tok(text, truncation=True, max_length=5)["input_ids"]
    expected = [tf.BOS_ID] + body[-4:]
    assert got == expected, f"left truncation to 5: expected {expected} (<s> kept, then the last 4), got {got}"


def test_truncation_keeps_eos_when_the_config_adds_it(tmp_path, sp):
    # As in Transformers: max_length counts the special tokens, which are added after the text is cut.
    tok = _tokenizer_with(tmp_path, {**tf.TOKENIZER_CONFIG, "add_eos_token": True})
    text = "def fib(n): return n if n < 2 else fib(n - 1)"
    body = sp.encode(text)
    got = tok(text, truncation=True, max_length=5)["input_ids"]
    expected = [tf.BOS_ID] + body[:3] + [tf.EOS_ID]
    assert got == expected, (
        f"right truncation to 5 with add_eos_token: expected {expected} (<s>, 3 tokens, </s>), got {got}"
    )


def test_truncation_side_from_config_applies(tmp_path, sp):
    tok = _tokenizer_with(tmp_path, {**tf.TOKENIZER_CONFIG, "truncation_side": "left"})
    body = sp.encode("one two three four five six seven")
    got = tok("one two three four five six seven", truncation=True, max_length=4)["input_ids"]
    assert got[1:] == body[-3:], (
        f"truncation_side='left' from the config: expected the last 3 tokens {body[-3:]} after <s>, got {got}"
    )


def test_truncation_with_padding_gives_a_rectangular_array(tok):
    enc = tok(["a", "one two three four five six"], truncation=True, max_length=4, padding=True, return_tensors="np")
    assert enc["input_ids"].shape[1] <= 4, f"expected at most 4 columns, got {enc['input_ids'].shape}"


def test_unequal_lengths_with_np_and_no_padding_raise_invalid_input_naming_padding(tok):
    with pytest.raises(InvalidInputError) as e:
        tok(["a", "bb cc dd"], return_tensors="np")
    assert "padding" in str(e.value), f"the message should name padding=True: {e.value}"


def test_bad_call_arguments_raise_invalid_input(tok):
    for kwargs in (
        dict(text=[]),
        dict(text=[1, 2]),
        dict(text=None),
        dict(text="a", return_tensors="tf"),
        dict(text="a", padding="sideways"),
        dict(text="a", truncation=True, max_length=0),
    ):
        with pytest.raises(InvalidInputError):
            tok(**kwargs)


# ---- special tokens ----------------------------------------------------------------------------------------


def test_special_token_ids_and_strings_come_from_the_config(tok):
    got = {
        name: (getattr(tok, name), getattr(tok, name + "_id"))
        for name in ("bos_token", "eos_token", "unk_token", "pad_token")
    }
    expected = {
        "bos_token": ("<s>", tf.BOS_ID),
        "eos_token": ("</s>", tf.EOS_ID),
        "unk_token": ("<unk>", tf.UNK_ID),
        "pad_token": ("<pad>", tf.PAD_ID),
    }
    assert got == expected, f"expected {expected}, got {got}"
    assert tok.vocab_size == tf.VOCAB_SIZE == len(tok), f"vocab_size {tok.vocab_size}, len {len(tok)}"


def test_pad_token_named_in_tokenizer_config_is_used(tmp_path):
    tok = _tokenizer_with(tmp_path, {**tf.TOKENIZER_CONFIG, "pad_token": "</s>"}, {})
    assert (tok.pad_token, tok.pad_token_id) == ("</s>", tf.EOS_ID), f"got {(tok.pad_token, tok.pad_token_id)}"
    enc = tok(["a", "bb cc dd"], padding=True, return_tensors="np")
    assert enc["input_ids"][0, 0] == tf.EOS_ID, f"padding should use pad_token_id {tf.EOS_ID}: {enc['input_ids']}"


def test_special_tokens_map_alone_sets_the_tokens(tmp_path):
    config = {k: v for k, v in tf.TOKENIZER_CONFIG.items() if not k.endswith("_token")}
    tok = _tokenizer_with(
        tmp_path,
        config,
        {
            "pad_token": {
                "content": "<unk>",
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
            },
            "eos_token": "<s>",
        },
    )
    got = (tok.pad_token, tok.pad_token_id, tok.eos_token, tok.eos_token_id)
    assert got == ("<unk>", tf.UNK_ID, "<s>", tf.BOS_ID), f"expected pad <unk>/0 and eos <s>/1 from the map, got {got}"


def test_dict_form_of_a_token_in_tokenizer_config_is_read(tmp_path):
    tok = _tokenizer_with(tmp_path, {**tf.TOKENIZER_CONFIG, "bos_token": {"content": "</s>", "special": True}}, {})
    assert (tok.bos_token, tok.bos_token_id) == ("</s>", tf.EOS_ID), f"got {(tok.bos_token, tok.bos_token_id)}"
    assert tok.encode("a")[0] == tf.EOS_ID, f"bos_token </s> should lead encode(): {tok.encode('a')}"


def test_no_json_files_falls_back_to_the_models_own_special_ids(tmp_path):
    tf.write_tokenizer(tmp_path)
    os.remove(tmp_path / "tokenizer_config.json")
    os.remove(tmp_path / "special_tokens_map.json")
    tok = ha.AutoTokenizer.from_pretrained(str(tmp_path))
    got = (tok.bos_token_id, tok.eos_token_id, tok.unk_token_id, tok.pad_token_id)
    assert got == (tf.BOS_ID, tf.EOS_ID, tf.UNK_ID, tf.PAD_ID), f"expected sentencepiece's 1, 2, 0, 3, got {got}"
    assert tok.encode("a")[0] == tf.BOS_ID, "add_bos_token defaults to True, as Llama's tokenizer"


# Transformers' slow tokenizer adds a special token its model lacks as a new token (it once was a CheckpointError
# here, when the vocabulary could not grow).
def test_config_naming_a_token_not_in_the_model_adds_it_with_the_next_id(tmp_path):
    tok = _tokenizer_with(tmp_path, {**tf.TOKENIZER_CONFIG, "eos_token": "<|endoftext|>"})
    got = (tok.eos_token, tok.eos_token_id, len(tok), tok.vocab_size)
    assert got == ("<|endoftext|>", tf.VOCAB_SIZE, tf.VOCAB_SIZE + 1, tf.VOCAB_SIZE), f"got {got}"
    assert tok.encode("a<|endoftext|>", add_special_tokens=False)[-1] == tf.VOCAB_SIZE


def test_special_tokens_map_naming_a_token_not_in_the_model_adds_it_with_the_next_id(tmp_path):
    config = {k: v for k, v in tf.TOKENIZER_CONFIG.items() if k != "pad_token"}
    tok = _tokenizer_with(tmp_path, config, {**tf.SPECIAL_TOKENS_MAP, "pad_token": "[PAD]"})
    assert (tok.pad_token, tok.pad_token_id, len(tok)) == ("[PAD]", tf.VOCAB_SIZE, tf.VOCAB_SIZE + 1)


def test_invalid_tokenizer_config_json_raises_checkpoint_error(tmp_path):
    tf.write_tokenizer(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="tokenizer_config.json"):
        ha.AutoTokenizer.from_pretrained(str(tmp_path))


def test_bad_padding_side_in_config_raises_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="padding_side"):
        _tokenizer_with(tmp_path, {**tf.TOKENIZER_CONFIG, "padding_side": "middle"})


# ---- files and paths -----------------------------------------------------------------------------------------


def test_missing_tokenizer_model_raises_checkpoint_not_found(tmp_path):
    tf.write_tokenizer(tmp_path)
    os.remove(tmp_path / "tokenizer.model")
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoTokenizer.from_pretrained(str(tmp_path))
    assert "tokenizer.model" in str(e.value), f"the message should name tokenizer.model: {e.value}"
    assert isinstance(e.value, FileNotFoundError), "CheckpointNotFoundError should be a FileNotFoundError"


def test_corrupt_tokenizer_model_raises_checkpoint_error(tmp_path):
    tf.write_tokenizer(tmp_path)
    rng = np.random.default_rng(7)
    for content in (rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), tf.tokenizer_proto()[:100], b""):
        (tmp_path / "tokenizer.model").write_bytes(content)
        with pytest.raises(CheckpointError) as e:
            ha.AutoTokenizer.from_pretrained(str(tmp_path))
        assert "tokenizer.model" in str(e.value), f"the message should name the file: {e.value}"


def test_nonexistent_path_or_uncached_repo_raises_checkpoint_not_found_naming_it(tmp_path):
    name = str(tmp_path / "nowhere")
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoTokenizer.from_pretrained(name)
    msg = str(e.value)
    assert name in msg and "no such directory" in msg, f"the message should name {name!r}: {msg}"
    # conftest.py turns offline mode on (HF_HUB_OFFLINE=1) with an empty cache: a repo id is looked up there only
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-hf")
    msg = str(e.value)
    assert "meta-llama/Llama-2-7b-hf" in msg and "offline" in msg and "cache" in msg, msg


def test_pathlike_directory_is_accepted(tok_dir):
    import pathlib

    tok = ha.AutoTokenizer.from_pretrained(pathlib.Path(tok_dir))
    assert tok.encode("a") == ha.AutoTokenizer.from_pretrained(tok_dir).encode("a")


def test_shipped_name_without_the_installed_model_says_how_to_fix(monkeypatch, tmp_path):
    from habana_assist.checkpoints import hub

    monkeypatch.setattr(hub, "MODELS_DIR", str(tmp_path))  # a copy of the package without its models
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    assert "not installed" in str(e.value), f"got {e.value}"


# ---- with a model --------------------------------------------------------------------------------------------


def test_left_padded_batch_generates_each_row_as_it_would_alone(tok, model):
    texts = ["a", "bb cc"]
    enc = tok(texts, padding=True, return_tensors="np")
    assert (enc["attention_mask"] == 0).any(), f"the test needs padding: {enc['attention_mask']}"
    out = model.generate(**enc, max_new_tokens=4)
    width = enc["input_ids"].shape[1]
    assert out.shape == (2, width + 4), f"expected shape (2, {width + 4}), got {out.shape}"
    assert np.array_equal(out[:, :width], enc["input_ids"]), "the prompt columns must be returned as given"
    for i, text in enumerate(texts):
        alone = tok(text, return_tensors="np")
        single = model.generate(**alone, max_new_tokens=4)
        new_alone = single[0, alone["input_ids"].shape[1] :].tolist()
        new_batch = out[i, width : width + len(new_alone)].tolist()
        assert new_batch == new_alone, f"row {i} ({text!r}): alone {new_alone}, in the padded batch {new_batch}"
