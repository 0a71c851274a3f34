"""Bad tokenizer.json files and bad calls: TokenizerJSON.load raises CheckpointError naming the file, the component
and the problem (never a silently different tokenization, never a crash or a hang); bad arguments raise
InvalidInputError.  The files are small edits of a real family's file (tokenizer_data.variant) or hand-written."""

import json
import os
import random

import pytest
import tokenizer_data as td

from habana_assist.errors import CheckpointError, InvalidInputError
from habana_assist.tokenization.tokenizer_json import TokenizerJSON


def _tiny(**overrides):
    """A small valid byte-fallback-free BPE tokenizer.json (dict): vocab a b c ab abc <unk>, merges a b, ab c."""
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": 0,
                "content": "<unk>",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        ],
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": {"<unk>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "abc": 5},
            "merges": ["a b", "ab c"],
        },
    }
    data.update(overrides)
    return data


def _tiny_model(**model_overrides):
    data = _tiny()
    data["model"] = dict(data["model"], **model_overrides)
    return data


def _load_error(tmp_path, obj, *words):
    """Writes obj, loads it, and asserts a CheckpointError whose message holds the path and every word
    (case-insensitive).  Returns the message."""
    path = td.write_json(str(tmp_path), obj)
    with pytest.raises(CheckpointError) as info:
        TokenizerJSON.load(path)
    message = str(info.value)
    assert "tokenizer.json" in message, message
    for word in words:
        assert word.lower() in message.lower(), f"{word!r} not in the error message: {message}"
    return message


def test_tiny_file_is_valid(tmp_path):
    # The base of the hand-written cases loads and works, so each error below comes from its one edit.
    t = TokenizerJSON.load(td.write_json(str(tmp_path), _tiny()))
    assert t.encode("abcab") == [5, 4]
    assert t.decode([5, 4]) == "abc ab"


def test_truncated_file(tmp_path):
    with open(td.tokenizer_path("llama2"), encoding="utf-8") as f:
        text = f.read()
    _load_error(tmp_path, text[: len(text) // 2], "JSON")


@pytest.mark.parametrize("content", ["", "not json at all", "{'single': 'quotes'}", "\x00\x01\x02"])
def test_not_json(tmp_path, content):
    _load_error(tmp_path, content, "JSON")


@pytest.mark.parametrize("content", [[], "a string", 3, None])
def test_top_level_not_an_object(tmp_path, content):
    _load_error(tmp_path, json.dumps(content), "object")


def test_missing_model(tmp_path):
    data = _tiny()
    del data["model"]
    _load_error(tmp_path, data, "model")


@pytest.mark.parametrize(
    "key,value,words",
    [
        ("model", [], ["model"]),
        ("added_tokens", {"a": 1}, ["added_tokens"]),
        ("normalizer", "NFC", ["normalizer"]),
        ("pre_tokenizer", 7, ["pre_tokenizer"]),
        ("decoder", ["ByteLevel"], ["decoder"]),
    ],
)
def test_wrong_top_level_types(tmp_path, key, value, words):
    _load_error(tmp_path, _tiny(**{key: value}), *words)


@pytest.mark.parametrize("kind", ["normalizer", "pre_tokenizer", "post_processor", "decoder"])
def test_unknown_component_type_is_named(tmp_path, kind):
    _load_error(tmp_path, _tiny(**{kind: {"type": "FancyThing"}}), kind, "FancyThing")


@pytest.mark.parametrize(
    "kind,seq_key", [("normalizer", "normalizers"), ("pre_tokenizer", "pretokenizers"), ("decoder", "decoders")]
)
def test_unknown_component_inside_a_sequence_is_named(tmp_path, kind, seq_key):
    _load_error(tmp_path, _tiny(**{kind: {"type": "Sequence", seq_key: [{"type": "NoSuchPart"}]}}), "NoSuchPart")


def test_unknown_model_type_is_named(tmp_path):
    _load_error(tmp_path, _tiny_model(type="FancyModel"), "model", "FancyModel")


@pytest.mark.parametrize(
    "model",
    [
        {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[UNK]": 0, "a": 1, "##b": 2},
        },
        {"type": "Unigram", "unk_id": 0, "byte_fallback": False, "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -2.0]]},
    ],
)
def test_wordpiece_and_unigram(tmp_path, model):
    # Either supported (then it encodes) or a clear error naming the model type.
    path = td.write_json(str(tmp_path), _tiny(model=model, added_tokens=[]))
    try:
        t = TokenizerJSON.load(path)
    except CheckpointError as e:
        assert model["type"] in str(e), str(e)
    else:
        assert t.encode("a", add_special_tokens=False) == [1]


@pytest.mark.parametrize("dropout", [0.1, 0.5, 1.0])
def test_dropout_not_null(tmp_path, dropout):
    _load_error(tmp_path, _tiny_model(dropout=dropout), "dropout")


def test_merge_naming_a_token_not_in_vocab(tmp_path):
    _load_error(tmp_path, _tiny_model(merges=["a b", "ab zz"]), "merge", "zz")


def test_merge_result_not_in_vocab(tmp_path):
    # "b c" is two vocab tokens whose concatenation "bc" is not in the vocab.
    _load_error(tmp_path, _tiny_model(merges=["a b", "b c"]), "merge", "bc")


def test_merge_naming_a_token_not_in_vocab_on_a_real_file(tmp_path):
    data = td.variant("llama2", model={"merges": td.load_json("llama2")["model"]["merges"][:100] + ["▁zzzq xxy"]})
    _load_error(tmp_path, data, "merge", "zzzq")


@pytest.mark.parametrize("merges", [["a"], ["a b c"], [["a"]], [["a", "b", "c"]], [3]])
def test_malformed_merges_entry(tmp_path, merges):
    _load_error(tmp_path, _tiny_model(merges=merges), "merge")


def _added(content, id, special=True):
    return {
        "id": id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


@pytest.mark.parametrize(
    "added",
    [
        [_added("<unk>", 0), _added("<big>", 10**6)],
        [_added("<unk>", 0), _added("<neg>", -1)],
        [_added("<unk>", 0), _added("<str>", "7")],
    ],
)
def test_added_token_id_out_of_range(tmp_path, added):
    _load_error(tmp_path, _tiny(added_tokens=added), "added")


def test_added_token_duplicate_id(tmp_path):
    _load_error(tmp_path, _tiny(added_tokens=[_added("<unk>", 0), _added("<x>", 6), _added("<y>", 6)]), "added", "6")


def test_added_token_duplicate_content(tmp_path):
    _load_error(tmp_path, _tiny(added_tokens=[_added("<unk>", 0), _added("<x>", 6), _added("<x>", 7)]), "added", "<x>")


def test_added_token_without_content(tmp_path):
    _load_error(tmp_path, _tiny(added_tokens=[{"id": 6, "special": True}]), "added")


@pytest.mark.parametrize("regex", ["(unclosed", "[z-a]", "a{2,1}", "(?<name"])
def test_bad_regex_in_split(tmp_path, regex):
    pre = {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}
    _load_error(tmp_path, _tiny(pre_tokenizer=pre), "Split", "regex")


def test_bad_split_behavior(tmp_path):
    pre = {"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways", "invert": False}
    _load_error(tmp_path, _tiny(pre_tokenizer=pre), "Sideways")


def test_bad_regex_in_replace_normalizer(tmp_path):
    _load_error(tmp_path, _tiny(normalizer={"type": "Replace", "pattern": {"Regex": "(x"}, "content": ""}), "Replace")


def test_template_naming_a_token_not_in_vocab(tmp_path):
    post = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<nope>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {},
    }
    _load_error(tmp_path, _tiny(post_processor=post), "<nope>")


def test_unk_token_not_in_vocab(tmp_path):
    _load_error(tmp_path, _tiny_model(unk_token="<missing>"), "<missing>")


def test_metaspace_prefix_space_contradicting_scheme(tmp_path):
    # tokenizers/src/pre_tokenizers/metaspace.rs refuses add_prefix_space false with a prepend_scheme other than
    # "never" ("add_prefix_space does not match declared prepend_scheme").
    pre = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": False, "prepend_scheme": "always"}
    _load_error(tmp_path, _tiny(pre_tokenizer=pre), "prepend_scheme")


# ---------------------------------------------------------------------------------------------------------------
# Bad calls


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return TokenizerJSON.load(td.write_json(str(tmp_path_factory.mktemp("tiny")), _tiny()))


@pytest.mark.parametrize("ids", [[6], [5, 100], [-1], [2**40]])
def test_decode_ids_out_of_range(tiny, ids):
    with pytest.raises(InvalidInputError) as info:
        tiny.decode(ids)
    bad = [i for i in ids if not 0 <= i < 6][0]
    assert str(bad) in str(info.value), str(info.value)


@pytest.mark.parametrize("text", [None, b"abc", 3, ["a"]])
def test_encode_non_str(tiny, text):
    with pytest.raises(InvalidInputError):
        tiny.encode(text)


def test_load_missing_file(tmp_path):
    with pytest.raises((CheckpointError, FileNotFoundError)) as info:
        TokenizerJSON.load(os.path.join(str(tmp_path), "absent", "tokenizer.json"))
    assert "absent" in str(info.value)


def test_random_bytes_file_fails_cleanly(tmp_path):
    # 4 MB of random bytes (and the same behind a valid-looking opening): a CheckpointError, no crash, no hang.
    rng = random.Random(16)
    blob = bytes(rng.getrandbits(8) for _ in range(4 << 20))
    _load_error(tmp_path, blob, "tokenizer.json")
    _load_error(tmp_path, b'{"model": {"type": "BPE", "vocab": {"' + blob, "tokenizer.json")


# ---- found by the parser fuzzer (tests/fuzz/crashers/tokenizer-json-*, chat-template-*) ---------------------


def test_sparse_vocab_id_is_refused_before_allocating(tmp_path):
    vocab = {"<unk>": 0, "a": 1, "b": 2, "c": 3, "ab": 4, "abc": 200_000_000}
    _load_error(tmp_path, _tiny_model(vocab=vocab), "largest id", "200000000")


@pytest.mark.parametrize(
    "piece, words",
    [
        ({"SpecialToken": {"id": {"x": 1}, "type_id": 0}}, ("not a string",)),
        ({"Sequence": {"id": "A", "type_id": 10**30}}, ("type_id", "2^32")),
        ({"Sequence": {"id": "A", "type_id": -1}}, ("type_id",)),
    ],
)
def test_template_piece_of_the_wrong_kind_is_refused(tmp_path, piece, words):
    post = {"type": "TemplateProcessing", "single": [piece], "pair": [], "special_tokens": {}}
    _load_error(tmp_path, _tiny(post_processor=post), *words)


def test_lone_surrogate_text_is_refused_by_name(tmp_path):
    tok = TokenizerJSON.load(td.write_json(str(tmp_path), _tiny()))
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        tok.encode("ab\ud800c")
    assert tok.encode("abc") == [5], "valid text still encodes"
