"""GenerationConfig behaves as Transformers' does: its defaults, generation_config.json, kwargs precedence.

A checkpoint's generation_config.json is the model's default for generate(); keyword arguments override it
for one call; without the file the model config's special tokens are used. validate() messages name the
flag, its value and the fix. A malformed file is a CheckpointError naming it.
"""

import json
import os
import re

import numpy as np
import pytest
from checkpoints import write_random_checkpoint

import habana_assist as ha
from habana_assist.errors import CheckpointError

VOCAB = 64
PROMPT = np.array([[3, 4, 5]], dtype=np.int64)

TRANSFORMERS_DEFAULTS = {
    "max_length": 20,
    "max_new_tokens": None,
    "min_length": 0,
    "min_new_tokens": None,
    "do_sample": False,
    "num_beams": 1,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.0,
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
    "output_scores": False,
    "return_dict_in_generate": False,
}


@pytest.fixture(scope="module")
def plain_dir(tmp_path_factory):
    """A checkpoint without generation_config.json; its config.json names bos 1, eos None, pad None."""
    path = tmp_path_factory.mktemp("gc_plain")
    write_random_checkpoint(path, vocab_size=VOCAB, seed=21, bos_token_id=1)
    return str(path)


@pytest.fixture(scope="module")
def plain(plain_dir):
    return ha.AutoModelForCausalLM.from_pretrained(plain_dir)


@pytest.fixture(scope="module")
def greedy(plain):
    """20 new greedy tokens of PROMPT (no eos)."""
    out = plain.generate(PROMPT, max_new_tokens=20, eos_token_id=None)
    assert out.shape == (1, 23), f"expected 20 new tokens without an eos, got shape {out.shape}"
    return out[0, 3:]


def first_new_token_not_seen_before(tokens, start=2):
    """(index, token): a generated token at index >= start that did not occur earlier in the output."""
    for i in range(start, len(tokens)):
        if tokens[i] not in tokens[:i] and tokens[i] not in PROMPT[0]:
            return i, int(tokens[i])
    pytest.skip(f"the greedy output {tokens.tolist()} has no fresh token to use as eos")


def copy_checkpoint(src, dst, generation_config=None, config_updates=None):
    """Links the weights of src into dst, copies config.json (with updates) and writes generation_config.json."""
    os.makedirs(dst, exist_ok=True)
    os.symlink(os.path.join(src, "model.safetensors"), os.path.join(dst, "model.safetensors"))
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config.update(config_updates or {})
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(config, f)
    if generation_config is not None:
        with open(os.path.join(dst, "generation_config.json"), "w") as f:
            if isinstance(generation_config, str):
                f.write(generation_config)
            else:
                json.dump(generation_config, f)
    return str(dst)


# ---- defaults and the file -------------------------------------------------------------------------------


def test_defaults_equal_transformers():
    gc = ha.GenerationConfig()
    for key, value in TRANSFORMERS_DEFAULTS.items():
        got = getattr(gc, key)
        assert got == value and type(got) is type(value), (
            f"GenerationConfig().{key}: expected Transformers' default {value!r}, got {got!r}"
        )
    gc.validate()


def test_from_pretrained_reads_the_file_and_keeps_unknown_keys(tmp_path):
    data = {
        "bos_token_id": 1,
        "eos_token_id": [2, 7],
        "pad_token_id": 0,
        "do_sample": True,
        "temperature": 0.6,
        "top_p": 0.9,
        "max_new_tokens": 11,
        "transformers_version": "4.45.0",
        "_from_model_config": False,
        "custom_flag": {"a": [1, 2]},
    }
    (tmp_path / "generation_config.json").write_text(json.dumps(data))
    gc = ha.GenerationConfig.from_pretrained(str(tmp_path))
    for key, value in data.items():
        assert getattr(gc, key, "<missing>") == value, (
            f"GenerationConfig.from_pretrained: expected {key} = {value!r} from the file, got "
            f"{getattr(gc, key, '<missing>')!r}"
        )
    assert gc.top_k == 50 and gc.num_beams == 1 and gc.max_length == 20, (
        f"expected the defaults for keys the file lacks, got top_k={gc.top_k}, num_beams={gc.num_beams}, "
        f"max_length={gc.max_length}"
    )
    assert gc.eos_token_ids() == [2, 7], f"expected eos_token_ids() [2, 7], got {gc.eos_token_ids()}"
    gc.validate()


def test_from_pretrained_accepts_a_pathlib_path_and_another_file_name(tmp_path):
    (tmp_path / "gen.json").write_text(json.dumps({"top_k": 7}))
    gc = ha.GenerationConfig.from_pretrained(tmp_path, config_file_name="gen.json")
    assert gc.top_k == 7, f"expected top_k 7 from gen.json, got {gc.top_k}"


def test_model_with_generation_config_json_uses_it(plain_dir, plain, greedy, tmp_path):
    stop_at, eos = first_new_token_not_seen_before(greedy)
    path = copy_checkpoint(
        plain_dir, tmp_path / "ck", {"eos_token_id": eos, "max_new_tokens": 15, "transformers_version": "4.45.0"}
    )
    model = ha.AutoModelForCausalLM.from_pretrained(path)
    assert model.generation_config.eos_token_id == eos and model.generation_config.max_new_tokens == 15, (
        f"expected the model's generation_config to hold the file's eos {eos} and max_new_tokens 15, got "
        f"{model.generation_config}"
    )
    out = model.generate(PROMPT)
    expected = np.concatenate([PROMPT[0], greedy[: stop_at + 1]])
    assert out[0].tolist() == expected.tolist(), (
        f"expected generate() with no kwargs to stop at the file's eos_token_id {eos} (new token {stop_at}): "
        f"{expected.tolist()}, got {out[0].tolist()}"
    )

    out = model.generate(PROMPT, eos_token_id=None)
    assert out.shape == (1, 3 + 15), f"expected the file's max_new_tokens=15 -> shape (1, 18), got {out.shape}"
    assert out[0, 3:].tolist() == greedy[:15].tolist(), (
        f"expected 15 greedy tokens {greedy[:15].tolist()}, got {out[0, 3:].tolist()}"
    )


def test_kwargs_override_the_generation_config_json(plain_dir, greedy, tmp_path):
    stop_at, eos = first_new_token_not_seen_before(greedy)
    path = copy_checkpoint(plain_dir, tmp_path / "ck", {"eos_token_id": eos, "max_new_tokens": 15})
    model = ha.AutoModelForCausalLM.from_pretrained(path)
    out = model.generate(PROMPT, max_new_tokens=stop_at, eos_token_id=None)
    assert out[0, 3:].tolist() == greedy[:stop_at].tolist(), (
        f"expected max_new_tokens={stop_at} to override the file's 15: {greedy[:stop_at].tolist()}, "
        f"got {out[0, 3:].tolist()}"
    )
    out = model.generate(PROMPT, max_new_tokens=20, eos_token_id=None)
    assert out.shape == (1, 23), f"expected kwargs max_new_tokens=20 and eos None to give (1, 23), got {out.shape}"
    assert model.generation_config.max_new_tokens == 15 and model.generation_config.eos_token_id == eos, (
        f"expected kwargs not to change model.generation_config, got {model.generation_config}"
    )


def test_do_sample_from_the_file_takes_effect(plain_dir, plain, greedy, tmp_path):
    path = copy_checkpoint(
        plain_dir, tmp_path / "ck", {"do_sample": True, "temperature": 5.0, "top_k": 0, "max_new_tokens": 20}
    )
    model = ha.AutoModelForCausalLM.from_pretrained(path)
    sampled = model.generate(PROMPT, seed=1234)
    explicit = plain.generate(PROMPT, do_sample=True, temperature=5.0, top_k=0, max_new_tokens=20, seed=1234)
    assert sampled.tolist() == explicit.tolist(), (
        f"expected the file's do_sample/temperature/top_k to sample as the same kwargs do: {explicit.tolist()}, "
        f"got {sampled.tolist()}"
    )
    assert sampled[0, 3:].tolist() != greedy.tolist(), (
        f"expected sampling at temperature 5 to differ from greedy {greedy.tolist()}, got the greedy tokens"
    )
    with pytest.warns(UserWarning, match="`temperature` \\(=5.0\\) is only used when sampling"):  # the file's
        overridden = model.generate(PROMPT, do_sample=False, seed=1234)
    assert overridden[0, 3:].tolist() == greedy.tolist(), (
        f"expected do_sample=False to override the file and give greedy {greedy.tolist()}, got "
        f"{overridden[0, 3:].tolist()}"
    )


def test_without_the_file_the_model_config_special_tokens_are_used(plain_dir, greedy, tmp_path):
    stop_at, eos = first_new_token_not_seen_before(greedy)
    path = copy_checkpoint(
        plain_dir, tmp_path / "ck", None, {"bos_token_id": 5, "eos_token_id": eos, "pad_token_id": 6}
    )
    model = ha.AutoModelForCausalLM.from_pretrained(path)
    gc = model.generation_config
    assert (gc.bos_token_id, gc.eos_token_id, gc.pad_token_id) == (5, eos, 6), (
        f"expected bos/eos/pad (5, {eos}, 6) from config.json, got ({gc.bos_token_id}, {gc.eos_token_id}, "
        f"{gc.pad_token_id})"
    )
    assert gc.max_length == 20 and gc.do_sample is False, (
        f"expected Transformers' defaults otherwise, got max_length={gc.max_length}, do_sample={gc.do_sample}"
    )
    batch = np.array([[3, 4, 5], [8, 9, 10]])
    out = model.generate(batch, max_new_tokens=20)
    assert out[0, 3 : stop_at + 4].tolist() == greedy[: stop_at + 1].tolist(), (
        f"expected row 0 to generate {greedy[: stop_at + 1].tolist()} up to config.json's eos {eos}, got "
        f"{out[0, 3:].tolist()}"
    )
    assert (out[0, stop_at + 4 :] == 6).all(), (
        f"expected row 0 padded with config.json's pad_token_id 6 after its eos, got {out[0, stop_at + 4 :].tolist()}"
    )


def test_without_max_new_tokens_max_length_20_bounds_the_output(plain):
    out = plain.generate(PROMPT, eos_token_id=None)
    assert out.shape == (1, 20), f"expected max_length 20 (the default) to give 20 tokens in all, got {out.shape}"


def test_generation_config_json_max_length_bounds_the_output(plain_dir, tmp_path):
    path = copy_checkpoint(plain_dir, tmp_path / "ck", {"max_length": 7})
    out = ha.AutoModelForCausalLM.from_pretrained(path).generate(PROMPT)
    assert out.shape == (1, 7), f"expected the file's max_length 7 to give 7 tokens in all, got {out.shape}"


def test_invalid_value_in_the_file_is_reported_at_generate(plain_dir, tmp_path):
    path = copy_checkpoint(plain_dir, tmp_path / "ck", {"top_p": 3.0})
    model = ha.AutoModelForCausalLM.from_pretrained(path)
    with pytest.raises(ValueError, match=r"`top_p` \(=3\.0\)"):
        model.generate(PROMPT, max_new_tokens=2)
    with pytest.warns(UserWarning, match="`top_p` \\(=0.5\\) is only used when sampling"):
        out = model.generate(PROMPT, max_new_tokens=2, top_p=0.5)
    assert out.shape == (1, 5), f"expected a top_p kwarg to override the file's bad value, got shape {out.shape}"


# ---- generation_config= ----------------------------------------------------------------------------------


def test_generation_config_argument_is_used_and_not_mutated(plain, greedy):
    gc = ha.GenerationConfig(max_new_tokens=4, bos_token_id=1)
    before = gc.to_dict()
    out = plain.generate(PROMPT, generation_config=gc)
    assert out[0, 3:].tolist() == greedy[:4].tolist(), (
        f"expected generation_config max_new_tokens=4 to give {greedy[:4].tolist()}, got {out[0, 3:].tolist()}"
    )
    out = plain.generate(PROMPT, generation_config=gc, max_new_tokens=6, do_sample=True, seed=3, temperature=2.0)
    assert out.shape == (1, 9), f"expected kwargs max_new_tokens=6 over the passed config, got {out.shape}"
    assert gc.to_dict() == before, (
        f"expected generate() not to mutate generation_config; before {before}, after {gc.to_dict()}"
    )


def test_generation_config_argument_of_the_wrong_type_names_it(plain):
    with pytest.raises(Exception) as info:
        plain.generate(PROMPT, generation_config={"max_new_tokens": 2})
    err = info.value
    assert isinstance(err, (TypeError, ValueError)) and "generation_config" in str(err), (
        f"expected a TypeError or ValueError naming generation_config for a dict passed as generation_config "
        f"(pass GenerationConfig(**d)), got {type(err).__name__}: {err}"
    )


def test_generation_config_argument_does_not_touch_the_model_default(plain):
    before = plain.generation_config.to_dict()
    with pytest.warns(UserWarning, match="only used when sampling"):  # greedy: top_k and top_p change nothing
        plain.generate(PROMPT, generation_config=ha.GenerationConfig(max_new_tokens=2, top_k=3), top_p=0.5)
    with pytest.warns(UserWarning, match="`top_k` \\(=9\\)"):
        plain.generate(PROMPT, max_new_tokens=2, top_k=9)
    assert plain.generation_config.to_dict() == before, (
        f"expected model.generation_config unchanged, before {before}, after {plain.generation_config.to_dict()}"
    )


def test_update_returns_the_unknown_kwargs():
    gc = ha.GenerationConfig()
    unused = gc.update(top_k=5, max_new_token=3)
    assert gc.top_k == 5, f"expected update(top_k=5) to set top_k, got {gc.top_k}"
    assert unused == {"max_new_token": 3}, f"expected the misspelled key returned unused, got {unused}"
    assert not hasattr(gc, "max_new_token"), "expected update() not to set the unknown key as an attribute"


def test_copies_compare_equal_and_are_independent():
    gc = ha.GenerationConfig(eos_token_id=[2, 3])
    copy = ha.GenerationConfig(**gc.to_dict())
    assert copy == gc, f"expected a copy through to_dict() to compare equal: {copy} vs {gc}"
    copy.eos_token_id.append(9)
    assert gc.eos_token_id == [2, 3], f"expected to_dict() to deep-copy lists, got {gc.eos_token_id}"


# ---- validate() messages ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag,value,fix",
    [
        ("top_p", 1.5, "top_p=0.9"),
        ("top_p", 0, "top_p=0.9"),
        ("top_k", -1, "top_k >= 1"),
        ("temperature", -0.5, "temperature=0.7"),
        ("repetition_penalty", 0.0, "1.0 for no penalty"),
        ("max_new_tokens", 0, "max_new_tokens >= 1"),
        ("min_new_tokens", -2, "min_new_tokens >= 0"),
        ("max_length", 0, "max_length >= 1"),
        ("eos_token_id", -1, "eos_token_id=2"),
        ("pad_token_id", -3, "token id"),
        ("seed", 2**64, "seed=0"),
        ("do_sample", 1, "do_sample=True"),
        ("output_scores", "yes", "output_scores=True"),
    ],
)
def test_validate_message_names_the_flag_its_value_and_a_fix(flag, value, fix):
    gc = ha.GenerationConfig(**{flag: value})
    with pytest.raises(ValueError) as info:
        gc.validate()
    msg = str(info.value)
    for needle in (f"`{flag}`", f"(={value!r})", fix):
        assert needle in msg, (
            f"validate() with {flag}={value!r}: expected the message to contain {needle!r}, got {msg!r}"
        )


def test_validate_zero_temperature_when_sampling_names_both_fixes():
    gc = ha.GenerationConfig(do_sample=True, temperature=0.0)
    with pytest.raises(ValueError) as info:
        gc.validate()
    msg = str(info.value)
    assert "`temperature`" in msg and "temperature > 0" in msg and "do_sample=False" in msg, (
        f"expected the message to name temperature and both fixes, got {msg!r}"
    )
    with pytest.warns(UserWarning, match="`temperature` \\(=0.0\\) is only used when sampling"):
        ha.GenerationConfig(do_sample=False, temperature=0.0).validate()  # greedy ignores temperature: valid


def test_validate_accepts_valid_sampling_settings():
    ha.GenerationConfig(
        do_sample=True,
        temperature=0.7,
        top_k=0,
        top_p=0.9,
        repetition_penalty=1.2,
        seed=0,
        eos_token_id=[2, 3],
        pad_token_id=0,
        min_new_tokens=1,
        max_new_tokens=5,
    ).validate()


# ---- malformed files -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content,needle",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2, 3]", "JSON object"),
        ('"a string"', "JSON object"),
        ("", "not valid JSON"),
    ],
    ids=["not_json", "json_list", "json_string", "empty"],
)
def test_malformed_file_raises_checkpoint_error_naming_it(tmp_path, content, needle):
    (tmp_path / "generation_config.json").write_text(content)
    with pytest.raises(CheckpointError) as info:
        ha.GenerationConfig.from_pretrained(str(tmp_path))
    msg = str(info.value)
    assert "generation_config.json" in msg and needle in msg, (
        f"expected a CheckpointError naming generation_config.json and {needle!r}, got {msg!r}"
    )


def test_non_utf8_file_raises_checkpoint_error_naming_it(tmp_path):
    (tmp_path / "generation_config.json").write_bytes(b'{"top_k": "\xff\xfe"}')
    with pytest.raises(CheckpointError, match="generation_config.json"):
        ha.GenerationConfig.from_pretrained(str(tmp_path))


@pytest.mark.parametrize("content", ["{oops", "[1, 2]"], ids=["not_json", "json_list"])
def test_model_with_malformed_generation_config_json_raises_checkpoint_error(plain_dir, tmp_path, content):
    path = copy_checkpoint(plain_dir, tmp_path / "ck", content)
    with pytest.raises(CheckpointError) as info:
        ha.AutoModelForCausalLM.from_pretrained(path)
    msg = str(info.value)
    assert os.path.join(path, "generation_config.json") in msg, (
        f"expected the CheckpointError to name {os.path.join(path, 'generation_config.json')}, got {msg!r}"
    )


def test_missing_file_raises_file_not_found_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "generation_config.json"))):
        ha.GenerationConfig.from_pretrained(str(tmp_path))


# ---- model.config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(vocab_size=96, hidden_size=32, num_heads=4, num_kv_heads=1, head_dim=16, tie_word_embeddings=True),
        dict(vocab_size=80, hidden_size=48, num_heads=6, num_kv_heads=3, tie_word_embeddings=False),
    ],
    ids=["mqa_tied_explicit_head_dim", "gqa_untied_derived_head_dim"],
)
def test_model_config_matches_config_json(tmp_path, kwargs):
    written, _ = write_random_checkpoint(tmp_path, seed=4, **kwargs)
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    c = model.config
    head_dim = kwargs.get("head_dim", kwargs["hidden_size"] // kwargs["num_heads"])
    expected = {
        "vocab_size": kwargs["vocab_size"],
        "hidden_size": kwargs["hidden_size"],
        "num_attention_heads": kwargs["num_heads"],
        "num_key_value_heads": kwargs["num_kv_heads"],
        "head_dim": head_dim,
        "tie_word_embeddings": kwargs["tie_word_embeddings"],
        "num_hidden_layers": written["num_hidden_layers"],
        "intermediate_size": written["intermediate_size"],
        "max_position_embeddings": written["max_position_embeddings"],
    }
    for key, value in expected.items():
        assert getattr(c, key) == value, (
            f"model.config.{key}: expected {value!r} from config.json, got {getattr(c, key)!r}"
        )
    assert model.vocab_size == kwargs["vocab_size"], (
        f"expected model.vocab_size {kwargs['vocab_size']}, got {model.vocab_size}"
    )
    assert c.use_cache is True, f"expected the unknown config.json key use_cache kept as True, got {c.use_cache!r}"
    logits = model(PROMPT).logits
    assert logits.shape == (1, 3, kwargs["vocab_size"]), (
        f"expected logits (1, 3, {kwargs['vocab_size']}), got {logits.shape}"
    )


def test_a_generate_argument_naming_a_method_is_reported_unused_not_set():
    gc = ha.GenerationConfig(foo=3)
    assert gc.update(foo=4, validate=1, to_dict=2) == {"validate": 1, "to_dict": 2}, (
        "method names must come back unused"
    )
    assert gc.foo == 4 and callable(gc.validate) and callable(gc.to_dict), "update() must set foo and leave the methods"
