"""The tokenizer surface Transformers' documentation scripts touch, on the shipped tokenizer.

Special-token attributes linked to their ids as in Transformers' SpecialTokensMixin (tok.pad_token = tok.eos_token
moves pad_token_id, padding and save_pretrained with it), add_special_tokens for tokens the vocabulary has,
from_pretrained's keyword arguments (padding_side, truncation_side, model_max_length, add_bos_token, add_eos_token,
use_fast, add_prefix_space, legacy, the hub arguments) and the refusals of what this tokenizer cannot do.
"""

import json
import os
import shutil
import warnings

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.errors import CheckpointError, InvalidInputError

PYCODE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "habana_assist",
    "pretrained",
    "pycode",
)
TEXTS = ["a", "longer text", "def fib(n):\n    return n", " leading space", "x  y", ""]
NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")


@pytest.fixture
def tok():
    return ha.AutoTokenizer.from_pretrained(PYCODE)


def _copy_with_proto_suffix(tmp_path, suffix, config=None):
    """The shipped tokenizer files in tmp_path, with `suffix` appended to tokenizer.model (protobuf merges an
    appended normalizer_spec into the model's) and tokenizer_config.json updated with `config`. The shipped file's
    add_prefix_space=false (said for Transformers 5, which otherwise puts a space first) is left out: the copy says
    nothing of it unless `config` does, so the sentencepiece model's own normalizer decides."""
    shutil.copy(os.path.join(PYCODE, "special_tokens_map.json"), tmp_path / "special_tokens_map.json")
    with open(os.path.join(PYCODE, "tokenizer.model"), "rb") as f:
        proto = f.read()
    (tmp_path / "tokenizer.model").write_bytes(proto + suffix)
    with open(os.path.join(PYCODE, "tokenizer_config.json")) as f:
        data = json.load(f)
    data.pop("add_prefix_space")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**data, **(config or {})}))
    return tmp_path


DUMMY_PREFIX_ON = b"\x1a\x02\x18\x01"  # normalizer_spec { add_dummy_prefix: true }
EXTRA_WHITESPACES_ON = b"\x1a\x02\x20\x01"  # normalizer_spec { remove_extra_whitespaces: true }


# ---- special tokens linked to their ids -----------------------------------------------------------------------


def test_pad_token_set_to_eos_token_moves_pad_token_id_and_left_padding_uses_it(tok):
    assert tok.pad_token_id != tok.eos_token_id, "the shipped tokenizer has its own <pad>; the test needs that"
    tok.padding_side = "left"
    tok.pad_token = tok.eos_token
    assert (tok.pad_token, tok.pad_token_id) == ("</s>", tok.eos_token_id), f"got {(tok.pad_token, tok.pad_token_id)}"
    enc = tok(["a", "longer text"], padding=True, return_tensors="np")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    short = tok.encode("a")
    n_pad = ids.shape[1] - len(short)
    assert n_pad > 0 and ids.dtype == np.int64, f"'a' should be padded: {ids}"
    assert ids[0, :n_pad].tolist() == [tok.eos_token_id] * n_pad and ids[0, n_pad:].tolist() == short, (
        f"row 0 should be {n_pad} eos ids ({tok.eos_token_id}) then {short}, got {ids[0].tolist()}"
    )
    assert mask[0].tolist() == [0] * n_pad + [1] * len(short) and mask[1].all(), f"mask: {mask}"
    assert ids[1].tolist() == tok.encode("longer text"), f"the longer row is unpadded: {ids[1]}"


def test_pad_token_id_set_by_id_moves_pad_token_and_padding(tok):
    tok.pad_token_id = 2
    assert (tok.pad_token, tok.pad_token_id) == ("</s>", 2), f"got {(tok.pad_token, tok.pad_token_id)}"
    tok.pad_token_id = np.int64(0)
    assert (tok.pad_token, tok.pad_token_id) == ("<unk>", 0), f"got {(tok.pad_token, tok.pad_token_id)}"
    enc = tok(["a", "longer text"], padding=True, padding_side="right", return_tensors="np")["input_ids"]
    assert enc[0, -1] == 0, f"right padding with <unk> (0): {enc}"


@pytest.mark.parametrize("name", NAMES)
def test_each_special_token_and_its_id_stay_linked(tok, name):
    piece = tok.convert_ids_to_tokens([7])[0]
    setattr(tok, name, piece)
    got = getattr(tok, name + "_id")
    assert got == 7, f"{name} = {piece!r} should give {name}_id 7, got {got}"
    setattr(tok, name + "_id", 5)
    expected = tok.convert_ids_to_tokens([5])[0]
    assert getattr(tok, name) == expected, f"{name}_id = 5 should give {name} {expected!r}, got {getattr(tok, name)!r}"
    setattr(tok, name, None)
    assert getattr(tok, name) is None and getattr(tok, name + "_id") is None, f"{name} = None unsets both"
    assert tok.special_tokens_map.get(name) is None and name not in tok.special_tokens_map


def test_bos_and_eos_set_by_text_change_what_encode_adds(tok):
    tok.add_eos_token = True
    tok.bos_token, tok.eos_token_id = "<pad>", 0
    ids = tok.encode("x = 1")
    assert ids[0] == tok.convert_tokens_to_ids(["<pad>"])[0] and ids[-1] == 0, f"<pad> first and <unk> last: {ids}"


def test_a_token_outside_the_vocabulary_is_refused_naming_it_and_nothing_changes(tok):
    for name in NAMES:
        before = (getattr(tok, name), getattr(tok, name + "_id"))
        with pytest.raises(
            InvalidInputError,
            match=rf"{name}='\[PAD\]' is not a token of this vocabulary.*"
            rf"tokenizer\.{name} = tokenizer\.eos_token",
        ):
            setattr(tok, name, "[PAD]")
        assert (getattr(tok, name), getattr(tok, name + "_id")) == before, f"a refused {name} must change nothing"


@pytest.mark.parametrize("value", [1, 2.0, ["</s>"], b"</s>"])
def test_a_non_string_token_is_refused(tok, value):
    with pytest.raises(InvalidInputError, match="non-string value as the pad_token"):
        tok.pad_token = value


@pytest.mark.parametrize("value", [-1, 4096, 10**12, True, 2.0, "2"])
def test_a_token_id_outside_the_vocabulary_or_not_an_int_is_refused(tok, value):
    with pytest.raises(InvalidInputError, match=r"pad_token_id=.* is not a token id of this vocabulary \[0, 4096\)"):
        tok.pad_token_id = value
    assert tok.pad_token == "<pad>", "a refused id must change nothing"


def test_an_object_with_content_is_accepted_as_tokenizers_added_token_is(tok):
    class AddedToken:
        content = "</s>"

    tok.pad_token = AddedToken()
    assert (tok.pad_token, tok.pad_token_id) == ("</s>", tok.eos_token_id)


def test_special_token_lists_and_decode_follow_the_current_tokens(tok):
    piece_id = tok.encode(" string", add_special_tokens=False)[-1]  # "\u2581string"
    tok.pad_token_id = piece_id
    assert tok.special_tokens_map["pad_token"] == tok.convert_ids_to_tokens([piece_id])[0]
    assert tok.all_special_ids == [tok.bos_token_id, tok.eos_token_id, tok.unk_token_id, piece_id], tok.all_special_ids
    ids = [tok.bos_token_id] + tok.encode("x = string", add_special_tokens=False)
    assert piece_id in ids and tok.decode(ids, skip_special_tokens=True) == "x =", (
        "the pad token is skipped by skip_special_tokens, as Transformers' all_special_ids"
    )


def test_add_special_tokens_sets_tokens_of_the_vocabulary_and_adds_none(tok):
    assert tok.add_special_tokens({"pad_token": "<unk>"}) == 0
    assert (tok.pad_token, tok.pad_token_id) == ("<unk>", tok.unk_token_id)
    assert tok.add_special_tokens({"pad_token": tok.eos_token, "bos_token": "<s>"}) == 0
    assert tok.pad_token_id == tok.eos_token_id


# A token the vocabulary lacks is added now (tests/tokenization/test_tokenizer_parity.py), as Transformers does;
# what is refused is what Transformers refuses too.
@pytest.mark.parametrize(
    "tokens, match",
    [
        ({"bos_token": "<unk>", "pad_token": ""}, "'' is not a token"),
        ({"bos_token": "<unk>", "pad_token": 5}, "5 is not a token"),
        ({"sep_tokn": "</s>"}, "'sep_tokn' is not a special token name"),
        ({"additional_special_tokens": "<x>"}, "must be a list"),
        ({"additional_special_tokens": ["<s>", None]}, "None is not a token"),
        ("pad_token", "takes a dict"),
    ],
)
def test_add_special_tokens_refuses_what_is_not_a_special_token_and_changes_nothing(tok, tokens, match):
    before = (dict(tok.special_tokens_map), len(tok))
    with pytest.raises(InvalidInputError, match=match):
        tok.add_special_tokens(tokens)
    assert (tok.special_tokens_map, len(tok)) == before, f"a refused call changed {before}"


def test_padding_without_a_pad_token_asks_for_pad_token_equal_eos_token(tok):
    tok.pad_token = None
    with pytest.raises(
        InvalidInputError,
        match=r"padding=True: asking to pad but the tokenizer does not have a "
        r"padding token.*tokenizer\.pad_token = tokenizer\.eos_token",
    ):
        tok(["a", "longer text"], padding=True)
    assert tok(["a", "longer text"])["input_ids"][0] == tok.encode("a"), "no padding asked: no pad token needed"


def test_pad_token_set_to_eos_survives_save_and_reload(tok, tmp_path):
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    tok.save_pretrained(tmp_path)
    with open(tmp_path / "special_tokens_map.json") as f:
        assert json.load(f)["pad_token"] == "</s>"
    with open(tmp_path / "tokenizer_config.json") as f:
        assert json.load(f)["pad_token"] == "</s>"
    again = ha.AutoTokenizer.from_pretrained(tmp_path)
    assert (again.pad_token, again.pad_token_id) == ("</s>", tok.eos_token_id), f"got {again}"
    a = tok(["a", "longer text"], padding=True, return_tensors="np")["input_ids"]
    b = again(["a", "longer text"], padding=True, return_tensors="np")["input_ids"]
    assert np.array_equal(a, b) and a[0, 0] == tok.eos_token_id, f"{a} vs {b}"


def test_pad_token_id_set_by_id_survives_save_and_reload(tok, tmp_path):
    tok.pad_token_id = 5
    tok.save_pretrained(tmp_path)
    assert ha.AutoTokenizer.from_pretrained(tmp_path).pad_token_id == 5


# ---- padding_side and truncation_side -------------------------------------------------------------------------


def test_padding_side_is_settable_after_load_and_per_call(tok):
    tok.padding_side = "right"
    assert tok(["a", "longer text"], padding=True)["attention_mask"][0][-1] == 0, "right padding after the set"
    assert tok(["a", "longer text"], padding=True, padding_side="left")["attention_mask"][0][0] == 0, "per call"
    for side in ("middle", None, "LEFT"):
        with pytest.raises(InvalidInputError, match="padding_side="):
            tok.padding_side = side
    with pytest.raises(InvalidInputError, match="truncation_side="):
        tok.truncation_side = "both"
    with pytest.raises(InvalidInputError, match="padding_side='up'"):
        tok(["a"], padding=True, padding_side="up")
    assert tok.padding_side == "right", "a refused side changes nothing"


# ---- from_pretrained's keyword arguments ----------------------------------------------------------------------


@pytest.mark.parametrize("side", ["left", "right"])
def test_from_pretrained_padding_side(side):
    tok = ha.AutoTokenizer.from_pretrained(PYCODE, padding_side=side)
    mask = tok(["a", "longer text"], padding=True)["attention_mask"][0]
    assert tok.padding_side == side and mask[0 if side == "left" else -1] == 0, f"{side}: mask {mask}"


def test_from_pretrained_truncation_side_and_model_max_length(tok):
    ids = tok.encode("def fib(n):\n    return n")
    left = ha.AutoTokenizer.from_pretrained(PYCODE, truncation_side="left", model_max_length=4)
    right = ha.AutoTokenizer.from_pretrained(PYCODE, truncation_side="right", model_max_length=4)
    assert left.model_max_length == 4
    got_left = left("def fib(n):\n    return n", truncation=True)["input_ids"]
    got_right = right("def fib(n):\n    return n", truncation=True)["input_ids"]
    assert got_left == [ids[0]] + ids[-3:] and got_right == ids[:4], f"left {got_left}, right {got_right}, all {ids}"


LONG = "def fib(n):\n    return n"  # more than 4 tokens
TOO_LONG = "Token indices sequence length is longer than the specified maximum sequence length for this model"


def too_long_warnings(fn):
    """The messages of the too-long warnings fn() gave (every one, repeated or not)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in seen if TOO_LONG in str(w.message)]


def test_a_text_longer_than_model_max_length_warns_once_per_tokenizer_as_transformers(tok):
    """Transformers' _eventual_warn_about_too_long_sequence: encoding a row longer than model_max_length with no
    max_length warns (its logger, here a UserWarning at the caller) the first time only, per tokenizer."""
    n = len(tok.encode(LONG))
    short = ha.AutoTokenizer.from_pretrained(PYCODE, model_max_length=4)
    assert too_long_warnings(lambda: short("a")) == [], "a row within model_max_length must not warn"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        short(["a", LONG])
    got = [w for w in seen if TOO_LONG in str(w.message)]
    assert len(got) == 1 and f"({n} > 4)" in str(got[0].message) and got[0].filename == __file__, (
        f"expected one warning naming {n} > 4 at this test's line, got {[(str(w.message), w.filename) for w in seen]}"
    )
    assert too_long_warnings(lambda: (short(LONG), short.encode(LONG))) == [], "a tokenizer warns once only"
    again = ha.AutoTokenizer.from_pretrained(PYCODE, model_max_length=4)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again.encode(LONG)
    got = [w.filename for w in seen if TOO_LONG in str(w.message)]
    assert got == [__file__], f"another tokenizer warns again (encode too), at this test's line; got {got}"


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(truncation=True),
        dict(max_length=100),
        dict(max_length=3),
        dict(padding="max_length", truncation=True),
        dict(verbose=False),
    ],
    ids=["truncation", "max_length_above", "max_length_below", "padding_to_max", "not_verbose"],
)
def test_a_long_text_encoded_with_a_max_length_or_not_verbose_does_not_warn(kwargs):
    """The warning is for a call with no max_length: one passed, or model_max_length taken by truncation or by
    padding='max_length', silences it, as does verbose=False (which leaves the next verbose call its warning)."""
    short = ha.AutoTokenizer.from_pretrained(PYCODE, model_max_length=4)
    assert too_long_warnings(lambda: short(LONG, **kwargs)) == [], f"{kwargs}: expected no warning"
    assert len(too_long_warnings(lambda: short(LONG))) == 1, f"after {kwargs}, a plain call must still warn once"


def test_from_pretrained_add_bos_and_add_eos_token(tok):
    body = tok.encode("x = 1", add_special_tokens=False)
    other = ha.AutoTokenizer.from_pretrained(PYCODE, add_bos_token=False, add_eos_token=True)
    assert other.encode("x = 1") == body + [tok.eos_token_id], f"got {other.encode('x = 1')}"


def test_from_pretrained_special_token_arguments():
    tok = ha.AutoTokenizer.from_pretrained(PYCODE, pad_token="</s>")
    assert tok.pad_token_id == tok.eos_token_id
    new = ha.AutoTokenizer.from_pretrained(PYCODE, pad_token="[PAD]")  # Transformers adds it as a new token
    assert (new.pad_token, new.pad_token_id, len(new)) == ("[PAD]", 4096, 4097), new
    assert ha.AutoTokenizer.from_pretrained(PYCODE, pad_token=None).pad_token is None


def test_from_pretrained_keeps_its_arguments_through_save_pretrained(tmp_path):
    tok = ha.AutoTokenizer.from_pretrained(PYCODE, padding_side="right", model_max_length=64, add_prefix_space=True)
    tok.save_pretrained(tmp_path)
    again = ha.AutoTokenizer.from_pretrained(tmp_path)
    assert (again.padding_side, again.model_max_length, again.add_prefix_space) == ("right", 64, True), again
    assert again.encode("string") == tok.encode("string")


def test_use_fast_and_hub_arguments_change_nothing(tok):
    kwargs = [
        dict(use_fast=True),
        dict(use_fast=False),
        dict(trust_remote_code=True),
        dict(revision="main"),
        dict(token="hf_x"),
        dict(cache_dir="/nonexistent"),
        dict(local_files_only=True),
        dict(force_download=True),
        dict(legacy=True),
        dict(add_prefix_space=False),
    ]
    for kw in kwargs:
        other = ha.AutoTokenizer.from_pretrained(PYCODE, **kw)
        for text in TEXTS:
            assert other.encode(text) == tok.encode(text), f"{kw}: {text!r} encodes differently"
            assert other.decode(tok.encode(text)) == tok.decode(tok.encode(text)), f"{kw}: {text!r} decodes differently"


def test_from_pretrained_subfolder(tmp_path):
    shutil.copytree(PYCODE, tmp_path / "tok", ignore=shutil.ignore_patterns("*.safetensors"))
    tok = ha.AutoTokenizer.from_pretrained(tmp_path, subfolder="tok")
    assert tok.encode("a") == ha.AutoTokenizer.from_pretrained(PYCODE).encode("a")
    with pytest.raises(ha.CheckpointNotFoundError, match="subfolder='nope' does not exist.*'tok'"):
        ha.AutoTokenizer.from_pretrained(tmp_path, subfolder="nope")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(split_special_tokens="yes"), "split_special_tokens='yes'"),
        (dict(clean_up_tokenization_spaces="yes"), "clean_up_tokenization_spaces='yes'"),
        (dict(padding_side="middle"), "padding_side='middle'"),
        (dict(truncation_side=None), "truncation_side=None"),
        (dict(model_max_length=0), "model_max_length=0"),
        (dict(model_max_length=True), "model_max_length=True"),
        (dict(add_bos_token="yes"), "add_bos_token='yes'"),
        (dict(add_prefix_space="yes"), "add_prefix_space='yes'"),
        (dict(legacy=1.5), "legacy=1.5"),
        (dict(use_fast="auto"), "use_fast='auto'"),
    ],
)
def test_from_pretrained_refuses_what_it_cannot_honour_naming_the_argument(kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        ha.AutoTokenizer.from_pretrained(PYCODE, **kwargs)


def test_from_pretrained_refuses_extra_positional_arguments():
    with pytest.raises(InvalidInputError, match="positional"):
        ha.AutoTokenizer.from_pretrained(PYCODE, "extra")


# ---- add_prefix_space and legacy ------------------------------------------------------------------------------


def test_add_prefix_space_treats_the_first_word_as_any_other_word(tok):
    spaced = ha.AutoTokenizer.from_pretrained(PYCODE, add_prefix_space=True)
    word = spaced(["string"], add_special_tokens=False).input_ids[0]
    assert (
        word
        == tok([" string"], add_special_tokens=False).input_ids[0]
        != tok.encode("string", add_special_tokens=False)
    ), f"'string' with add_prefix_space should tokenize as ' string' does without: {word}"
    assert spaced.decode(spaced.encode("string x"), skip_special_tokens=True) == "string x", "added space dropped"
    assert spaced.decode(spaced.encode("string x")) == "<s> string x", "after <s> the space stays (Transformers' Strip)"
    assert spaced.encode("") == [tok.bos_token_id], "an empty text gets no space"
    for text in TEXTS[:-1]:
        assert spaced.encode(text, add_special_tokens=False) == tok.encode(" " + text, add_special_tokens=False), text


def test_legacy_false_means_add_prefix_space_unless_it_is_false(tok, tmp_path):
    unsaid = _copy_with_proto_suffix(tmp_path, b"")  # tokenizer_config.json without add_prefix_space
    spaced = ha.AutoTokenizer.from_pretrained(unsaid, add_prefix_space=True)
    non_legacy = ha.AutoTokenizer.from_pretrained(unsaid, legacy=False)
    unspaced = ha.AutoTokenizer.from_pretrained(unsaid, legacy=False, add_prefix_space=False)
    assert ha.AutoTokenizer.from_pretrained(PYCODE, legacy=False).encode("string") == tok.encode("string"), (
        "the shipped file's add_prefix_space=false holds under legacy=False"
    )
    for text in TEXTS:
        assert non_legacy.encode(text) == spaced.encode(text), f"legacy=False, {text!r}"
        assert unspaced.encode(text) == tok.encode(text), f"legacy=False, add_prefix_space=False, {text!r}"


def test_a_dummy_prefix_model_with_and_without_add_prefix_space(tok, tmp_path):
    """The same pieces with sentencepiece's dummy prefix on: unset or add_prefix_space=True is the shipped model
    with add_prefix_space=True; add_prefix_space=False turns the dummy prefix off, giving the shipped model."""
    directory = _copy_with_proto_suffix(tmp_path, DUMMY_PREFIX_ON)
    spaced = ha.AutoTokenizer.from_pretrained(PYCODE, add_prefix_space=True)
    dummy = ha.AutoTokenizer.from_pretrained(directory)
    dummy_true = ha.AutoTokenizer.from_pretrained(directory, add_prefix_space=True)
    dummy_false = ha.AutoTokenizer.from_pretrained(directory, add_prefix_space=False)
    assert dummy.encode("string") != tok.encode("string"), "the appended spec should turn the dummy prefix on"
    for text in TEXTS:
        assert dummy.encode(text) == dummy_true.encode(text) == spaced.encode(text), text
        assert dummy_false.encode(text) == tok.encode(text), text
        assert dummy_false.decode(tok.encode(text)) == tok.decode(tok.encode(text)), text
    dummy_false.save_pretrained(tmp_path / "saved")
    with open(tmp_path / "saved" / "tokenizer.model", "rb") as f, open(directory / "tokenizer.model", "rb") as g:
        assert f.read() == g.read(), "save_pretrained writes the model file as loaded"
    assert ha.AutoTokenizer.from_pretrained(tmp_path / "saved").encode("string") == tok.encode("string")


def test_add_prefix_space_is_refused_where_the_normalizer_removes_whitespace(tmp_path):
    (tmp_path / "a").mkdir()
    directory = _copy_with_proto_suffix(tmp_path / "a", EXTRA_WHITESPACES_ON)
    with pytest.raises(InvalidInputError, match="add_prefix_space=True changes where .* remove_extra_whitespaces=True"):
        ha.AutoTokenizer.from_pretrained(directory, add_prefix_space=True)
    ha.AutoTokenizer.from_pretrained(directory, add_prefix_space=False)  # nothing to change: accepted
    (tmp_path / "b").mkdir()
    in_file = _copy_with_proto_suffix(tmp_path / "b", EXTRA_WHITESPACES_ON, {"legacy": False})
    with pytest.raises(CheckpointError, match="tokenizer_config.json: legacy=False changes where"):
        ha.AutoTokenizer.from_pretrained(in_file)
