"""GenerationConfig holds every field of Transformers' GenerationConfig, checks it as Transformers does, and reads
and writes generation_config.json as Transformers does.

validate() refuses malformed values (naming the flag, its value and the fix) but never a valid config this package
cannot run: a checkpoint's generation_config.json with num_beams=4 loads and saves. check_supported() refuses what
generate() does not implement (beam search, contrastive search, DoLa...), naming what to use instead, and warns
for beam-only knobs that have no effect with num_beams=1. to_json_string / save_pretrained write the fields that
differ from the defaults; from_pretrained reads them back to an equal config.
"""

import json
import os
import warnings
from dataclasses import fields
from types import SimpleNamespace

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.errors import CheckpointError, InvalidInputError
from habana_assist.generation.utils import GenerateDecoderOnlyOutput

# Written from Transformers' src/transformers/generation/configuration_utils.py (GenerationConfig.__init__, 4.x;
# top_h from the later releases that have it).
TRANSFORMERS_DEFAULTS = {
    "max_length": 20,
    "max_new_tokens": None,
    "min_length": 0,
    "min_new_tokens": None,
    "early_stopping": False,
    "max_time": None,
    "stop_strings": None,
    "do_sample": False,
    "num_beams": 1,
    "num_beam_groups": 1,
    "penalty_alpha": None,
    "dola_layers": None,
    "use_cache": True,
    "cache_implementation": None,
    "cache_config": None,
    "return_legacy_cache": None,
    "prefill_chunk_size": None,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "min_p": None,
    "top_h": None,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "diversity_penalty": 0.0,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "length_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "bad_words_ids": None,
    "force_words_ids": None,
    "renormalize_logits": False,
    "constraints": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "remove_invalid_values": False,
    "exponential_decay_length_penalty": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_decoder_ids": None,
    "sequence_bias": None,
    "token_healing": False,
    "guidance_scale": None,
    "low_memory": None,
    "watermarking_config": None,
    "num_return_sequences": 1,
    "output_attentions": False,
    "output_hidden_states": False,
    "output_scores": False,
    "output_logits": None,
    "return_dict_in_generate": False,
    "pad_token_id": None,
    "bos_token_id": None,
    "eos_token_id": None,
    "encoder_no_repeat_ngram_size": 0,
    "decoder_start_token_id": None,
    "is_assistant": False,
    "num_assistant_tokens": 20,
    "num_assistant_tokens_schedule": "constant",
    "assistant_confidence_threshold": 0.4,
    "prompt_lookup_num_tokens": None,
    "max_matching_ngram_size": None,
    "assistant_early_exit": None,
    "assistant_lookbehind": 10,
    "target_lookbehind": 10,
    "compile_config": None,
    "disable_compile": False,
    "generation_kwargs": {},
    "_from_model_config": False,
}


def recorded_warnings(fn):
    """fn()'s UserWarnings, as a list of message strings (every one, repeated or not)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def message_of(fn, exc=InvalidInputError):
    with pytest.raises(exc) as info:
        fn()
    return str(info.value)


def assert_names(msg, needles, what):
    for needle in needles:
        assert needle in msg, f"{what}: expected the message to contain {needle!r}, got {msg!r}"


# ---- defaults --------------------------------------------------------------------------------------------


def test_defaults_equal_transformers_for_every_field():
    gc = ha.GenerationConfig()
    for key, value in TRANSFORMERS_DEFAULTS.items():
        got = getattr(gc, key, "<missing>")
        assert got == value and type(got) is type(value), (
            f"GenerationConfig().{key}: expected Transformers' default {value!r}, got {got!r}"
        )
    assert gc.seed is None and gc.assisted_sampling == "rejection", (
        f"expected our own fields' defaults seed=None, assisted_sampling='rejection', got {gc.seed!r}, "
        f"{gc.assisted_sampling!r}"
    )


def test_default_config_validates_and_is_supported_without_warnings():
    gc = ha.GenerationConfig()
    got = recorded_warnings(lambda: (gc.validate(), gc.check_supported()))
    assert got == [], f"expected no warning for the default config, got {got}"


def test_mutable_defaults_are_not_shared():
    a, b = ha.GenerationConfig(), ha.GenerationConfig()
    a.generation_kwargs["x"] = 1
    assert b.generation_kwargs == {}, f"expected each config its own generation_kwargs dict, got {b.generation_kwargs}"


# ---- validate(): refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag,value,fix",
    [
        ("min_p", 1.5, "min_p=0.1"),
        ("min_p", -0.1, "min_p=0.1"),
        ("min_p", "0.1", "min_p=0.1"),
        ("top_h", 0.0, "top_h=0.4"),
        ("typical_p", 0.0, "typical_p=0.9"),
        ("typical_p", 1.5, "typical_p=0.9"),
        ("epsilon_cutoff", 1.0, "epsilon_cutoff=3e-4"),
        ("epsilon_cutoff", -0.1, "epsilon_cutoff=3e-4"),
        ("eta_cutoff", 1.0, "eta_cutoff=1e-3"),
        ("eta_cutoff", float("nan"), "eta_cutoff=1e-3"),
        ("no_repeat_ngram_size", -1, "no_repeat_ngram_size=3"),
        ("no_repeat_ngram_size", 2.5, "no_repeat_ngram_size=3"),
        ("no_repeat_ngram_size", True, "no_repeat_ngram_size=3"),
        ("bad_words_ids", [], "bad_words_ids=[[5], [7, 8]]"),
        ("bad_words_ids", [[]], "bad_words_ids=[[5], [7, 8]]"),
        ("bad_words_ids", [5, 6], "bad_words_ids=[[5], [7, 8]]"),
        ("bad_words_ids", [[5, -1]], "bad_words_ids=[[5], [7, 8]]"),
        ("bad_words_ids", [[5.0]], "bad_words_ids=[[5], [7, 8]]"),
        ("bad_words_ids", "hello", "bad_words_ids=[[5], [7, 8]]"),
        ("sequence_bias", {}, "sequence_bias={(5,): -10.0"),
        ("sequence_bias", {(5,): "high"}, "sequence_bias={(5,): -10.0"),
        ("sequence_bias", {(): 1.0}, "sequence_bias={(5,): -10.0"),
        ("sequence_bias", {(-1,): 1.0}, "sequence_bias={(5,): -10.0"),
        ("sequence_bias", {(5,): float("nan")}, "sequence_bias={(5,): -10.0"),
        ("sequence_bias", {(5,): float("inf")}, "sequence_bias={(5,): -10.0"),
        ("sequence_bias", {"hello": 1.0}, "sequence_bias={(5,): -10.0"),
        ("sequence_bias", [[5, 1.0]], "[[[5], -10.0]"),
        ("sequence_bias", [[[5], 1.0, 2.0]], "[[[5], -10.0]"),
        ("sequence_bias", 3.0, "sequence_bias={(5,): -10.0"),
        ("suppress_tokens", [-1], "suppress_tokens=[5, 7]"),
        ("suppress_tokens", 5, "suppress_tokens=[5, 7]"),
        ("begin_suppress_tokens", [1.5], "begin_suppress_tokens=[5, 7]"),
        ("forced_bos_token_id", -1, "forced_bos_token_id=1"),
        ("forced_bos_token_id", 2**40, "forced_bos_token_id=1"),
        ("forced_eos_token_id", -1, "forced_eos_token_id=2"),
        ("forced_eos_token_id", [], "forced_eos_token_id=2"),
        ("forced_eos_token_id", [2, -3], "forced_eos_token_id=2"),
        ("exponential_decay_length_penalty", (5,), "exponential_decay_length_penalty=(15, 1.1)"),
        ("exponential_decay_length_penalty", (-1, 1.1), "exponential_decay_length_penalty=(15, 1.1)"),
        ("exponential_decay_length_penalty", (5, 0.0), "exponential_decay_length_penalty=(15, 1.1)"),
        ("exponential_decay_length_penalty", (5.0, 1.1), "exponential_decay_length_penalty=(15, 1.1)"),
        ("exponential_decay_length_penalty", 1.1, "exponential_decay_length_penalty=(15, 1.1)"),
        ("num_return_sequences", 0, "num_return_sequences=2"),
        ("num_return_sequences", 1.5, "num_return_sequences=2"),
        ("stop_strings", "", "stop_strings=["),
        ("stop_strings", [], "stop_strings=["),
        ("stop_strings", [""], "stop_strings=["),
        ("stop_strings", ["a", 3], "stop_strings=["),
        ("stop_strings", 5, "stop_strings=["),
        ("assistant_early_exit", 0, "assistant_early_exit=4"),
        ("assistant_early_exit", 1.5, "assistant_early_exit=4"),
        ("top_k", 1.5, "top_k >= 1"),
        ("top_k", "50", "top_k >= 1"),
        ("use_cache", "yes", "use_cache=True"),
        ("use_cache", None, "use_cache=True"),
        ("renormalize_logits", 1, "renormalize_logits=True"),
        ("remove_invalid_values", "no", "remove_invalid_values=True"),
        ("token_healing", 0, "token_healing=True"),
        ("output_logits", "yes", "output_logits=True"),
        ("output_attentions", None, "output_attentions=True"),
        ("is_assistant", "no", "is_assistant=True"),
        ("low_memory", 1, "low_memory=True"),
        ("early_stopping", "always", "early_stopping=False"),
        ("early_stopping", 1, "early_stopping=False"),
        ("num_beams", 0, "num_beams=1"),
        ("num_beams", 2.0, "num_beams=1"),
        ("num_beam_groups", 0, "num_beam_groups=1"),
        ("diversity_penalty", -1.0, "diversity_penalty=0.0"),
        ("length_penalty", float("inf"), "length_penalty=1.0"),
        ("penalty_alpha", -0.5, "penalty_alpha=None"),
        ("guidance_scale", "high", "guidance_scale=None"),
        ("dola_layers", "middle", "dola_layers=None"),
        ("cache_implementation", "turbo", "static"),
        ("prefill_chunk_size", 0, "prefill_chunk_size=512"),
        ("encoder_repetition_penalty", 0.0, "1.0 for no penalty"),
        ("encoder_no_repeat_ngram_size", -2, "encoder_no_repeat_ngram_size=3"),
        ("decoder_start_token_id", -1, "decoder_start_token_id=None"),
        ("assistant_lookbehind", -1, "assistant_lookbehind=10"),
        ("generation_kwargs", [], "generation_kwargs={}"),
        ("constraints", "word", "constraints=None"),
        ("watermarking_config", 3, "watermarking_config=None"),
        ("cache_config", "big", "cache_config=None"),
        ("compile_config", 3, "compile_config=None"),
    ],
)
def test_validate_refusal_names_the_flag_its_value_and_a_fix(flag, value, fix):
    gc = ha.GenerationConfig(do_sample=True, **{flag: value})
    msg = message_of(gc.validate)
    assert_names(msg, (f"`{flag}`", f"(={value!r})", fix), f"validate() with {flag}={value!r}")


def test_a_long_value_is_cut_in_the_message():
    bad = [[i] for i in range(5000)] + [[-1]]
    msg = message_of(ha.GenerationConfig(bad_words_ids=bad).validate)
    assert "`bad_words_ids`" in msg and "-1 is not a token id" in msg and len(msg) < 1000, (
        f"expected a short message naming bad_words_ids and the bad entry -1, got {len(msg)} characters: {msg[:300]!r}"
    )


def test_num_return_sequences_with_greedy_is_refused_as_in_transformers():
    msg = message_of(ha.GenerationConfig(num_return_sequences=3).validate)
    assert_names(msg, ("`num_return_sequences`", "(=3)", "do_sample=True"), "greedy with num_return_sequences=3")
    ha.GenerationConfig(num_return_sequences=3, do_sample=True).validate()


def test_num_return_sequences_beyond_num_beams_is_refused_as_in_transformers():
    msg = message_of(ha.GenerationConfig(num_beams=2, num_return_sequences=3).validate)
    assert_names(
        msg,
        ("`num_return_sequences`", "(=3)", "num_beams", "num_return_sequences <= 2"),
        "num_beams=2 with num_return_sequences=3",
    )


def test_zero_temperature_when_sampling_is_refused_and_none_is_not():
    msg = message_of(ha.GenerationConfig(do_sample=True, temperature=0).validate)
    assert_names(msg, ("`temperature`", "(=0)", "temperature > 0"), "do_sample=True, temperature=0")
    ha.GenerationConfig(do_sample=True, temperature=None).validate()


@pytest.mark.parametrize(
    "arg", ["logits_processor", "stopping_criteria", "streamer", "assistant_model", "prefix_allowed_tokens_fn"]
)
def test_a_generate_argument_inside_the_config_is_refused(arg):
    msg = message_of(ha.GenerationConfig(**{arg: [print]}).validate)
    assert_names(msg, (f"`{arg}`", "generate()"), f"GenerationConfig({arg}=...)")


# ---- validate(): what it accepts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(top_k=None),
        dict(top_k=0),
        dict(temperature=None),
        dict(top_p=None),
        dict(typical_p=None),
        dict(min_p=0.0),
        dict(min_p=1.0),
        dict(min_p=0.05),
        dict(typical_p=1.0),
        dict(typical_p=0.2),
        dict(epsilon_cutoff=0.0),
        dict(epsilon_cutoff=3e-4),
        dict(eta_cutoff=0.999),
        dict(top_h=1.0),
        dict(repetition_penalty=None),
        dict(no_repeat_ngram_size=None),
        dict(no_repeat_ngram_size=0),
        dict(no_repeat_ngram_size=3),
        dict(bad_words_ids=[[5], [6, 7]]),
        dict(bad_words_ids=((5,), (6, 7))),
        dict(bad_words_ids=[[np.int64(5)]]),
        dict(sequence_bias={(5,): -10.0, (6, 7): 2}),
        dict(sequence_bias=[[[5], -10.0], [[6, 7], 2.5]]),
        dict(sequence_bias={(5,): float("-inf")}),
        dict(sequence_bias={"(5, 6)": 1.5}),
        dict(suppress_tokens=[]),
        dict(suppress_tokens=[0, 5]),
        dict(begin_suppress_tokens=[2]),
        dict(forced_bos_token_id=0),
        dict(forced_eos_token_id=2),
        dict(forced_eos_token_id=[2, 7]),
        dict(exponential_decay_length_penalty=(0, 1.0)),
        dict(exponential_decay_length_penalty=[10, 0.9]),
        dict(remove_invalid_values=True),
        dict(renormalize_logits=True),
        dict(use_cache=False),
        dict(num_return_sequences=4),
        dict(output_logits=True, return_dict_in_generate=True),
        dict(stop_strings="\n"),
        dict(stop_strings=["\n\n", "def "]),
        dict(assistant_early_exit=1),
        dict(early_stopping="never"),
        dict(cache_implementation="static"),
        dict(max_time=1.5),
        dict(eos_token_id=np.int64(2)),
        dict(decoder_start_token_id=0),
        dict(return_legacy_cache=True),
    ],
    ids=lambda kw: ",".join(f"{k}={v!r}" for k, v in kw.items())[:60],
)
def test_validate_accepts_every_valid_setting(kwargs):
    ha.GenerationConfig(do_sample=True, **kwargs).validate()


def test_validate_accepts_what_this_package_does_not_run():
    gc = ha.GenerationConfig(
        num_beams=4,
        num_beam_groups=2,
        diversity_penalty=0.5,
        length_penalty=0.8,
        early_stopping=True,
        penalty_alpha=0.6,
        top_k=4,
        dola_layers="high",
        guidance_scale=1.5,
        constraints=[],
        force_words_ids=[[5]],
        watermarking_config={"bias": 2.0},
        output_attentions=True,
        output_hidden_states=True,
        return_dict_in_generate=True,
        token_healing=True,
        encoder_repetition_penalty=1.2,
        encoder_no_repeat_ngram_size=2,
        low_memory=True,
        cache_implementation="quantized",
        top_h=0.4,
        num_return_sequences=2,
    )
    with pytest.warns(UserWarning, match="`top_h`"):  # greedy: top_h changes nothing, the one warning
        gc.validate()  # all well formed: a checkpoint's file may hold them, and must load and save


# ---- validate(): warnings for knobs without effect -------------------------------------------------------


@pytest.mark.parametrize(
    "flag,value",
    [
        ("temperature", 0.7),
        ("top_p", 0.9),
        ("min_p", 0.1),
        ("typical_p", 0.5),
        ("top_k", 10),
        ("epsilon_cutoff", 1e-3),
        ("eta_cutoff", 1e-3),
    ],
)
def test_a_sampling_knob_with_greedy_decoding_warns_naming_it(flag, value):
    got = recorded_warnings(ha.GenerationConfig(**{flag: value}).validate)
    assert len(got) == 1 and all(s in got[0] for s in (f"`{flag}`", f"(={value!r})", "do_sample=True")), (
        f"expected one UserWarning naming {flag}, its value and do_sample=True, got {got}"
    )
    got = recorded_warnings(ha.GenerationConfig(do_sample=True, **{flag: value}).validate)
    assert got == [], f"expected no warning for {flag}={value!r} with do_sample=True, got {got}"


@pytest.mark.parametrize("flag", ["output_scores", "output_logits"])
def test_an_output_flag_without_return_dict_in_generate_warns(flag):
    got = recorded_warnings(ha.GenerationConfig(**{flag: True}).validate)
    assert len(got) == 1 and f"`{flag}`" in got[0] and "return_dict_in_generate=True" in got[0], (
        f"expected one UserWarning naming {flag} and return_dict_in_generate=True, got {got}"
    )


# ---- check_supported() -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,flag,shown,fix",
    [
        (dict(num_beams=2), "num_beams", "(=2)", ("num_beams=1", "do_sample=True", "num_return_sequences")),
        (dict(num_beams=4, do_sample=True), "num_beams", "(=4)", ("num_beams=1",)),
        (dict(num_beam_groups=2), "num_beam_groups", "(=2)", ("num_beam_groups=1",)),
        (dict(diversity_penalty=0.5), "diversity_penalty", "(=0.5)", ("diversity_penalty=0.0",)),
        (dict(constraints=[]), "constraints", "(=[])", ("constraints=None",)),
        (dict(force_words_ids=[[5]]), "force_words_ids", "(=[[5]])", ("force_words_ids=None",)),
        (dict(penalty_alpha=0.6, top_k=4), "penalty_alpha", "(=0.6)", ("contrastive search", "penalty_alpha=None")),
        (dict(dola_layers="high"), "dola_layers", "(='high')", ("dola_layers=None",)),
        (dict(dola_layers=[0, 2]), "dola_layers", "(=[0, 2])", ("dola_layers=None",)),
        (dict(guidance_scale=1.5), "guidance_scale", "(=1.5)", ("guidance_scale=None",)),
        (dict(guidance_scale=0.5), "guidance_scale", "(=0.5)", ("guidance_scale=None",)),
        (dict(top_h=0.4, do_sample=True), "top_h", "(=0.4)", ("top_p",)),
        (
            dict(watermarking_config={"bias": 2.0}),
            "watermarking_config",
            "(={'bias': 2.0})",
            ("watermarking_config=None",),
        ),
        (
            dict(output_attentions=True, return_dict_in_generate=True),
            "output_attentions",
            "(=True)",
            ("output_attentions=False",),
        ),
        (
            dict(output_hidden_states=True, return_dict_in_generate=True),
            "output_hidden_states",
            "(=True)",
            ("output_hidden_states=False",),
        ),
        (dict(token_healing=True), "token_healing", "(=True)", ("token_healing=False",)),
        (
            dict(encoder_repetition_penalty=1.2),
            "encoder_repetition_penalty",
            "(=1.2)",
            ("encoder_repetition_penalty=1.0",),
        ),
        (
            dict(encoder_no_repeat_ngram_size=2),
            "encoder_no_repeat_ngram_size",
            "(=2)",
            ("encoder_no_repeat_ngram_size=0",),
        ),
        (dict(forced_decoder_ids=[[1, 5]]), "forced_decoder_ids", "(=[[1, 5]])", ("forced_decoder_ids=None",)),
        (dict(low_memory=True), "low_memory", "(=True)", ("low_memory=None",)),
        (
            dict(cache_implementation="quantized"),
            "cache_implementation",
            "(='quantized')",
            ("cache_implementation=None",),
        ),
        (dict(generation_kwargs={"foo": 1}), "generation_kwargs", "(={'foo': 1})", ("generate() directly",)),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_check_supported_refuses_naming_the_flag_and_what_to_use(kwargs, flag, shown, fix):
    gc = ha.GenerationConfig(**kwargs)
    recorded_warnings(gc.validate)  # well formed: the refusal is check_supported()'s
    msg = message_of(gc.check_supported)
    assert_names(msg, (f"`{flag}`", shown) + fix, f"check_supported() with {kwargs}")


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(
            do_sample=True,
            top_k=None,
            min_p=0.1,
            typical_p=0.9,
            epsilon_cutoff=3e-4,
            eta_cutoff=1e-3,
            no_repeat_ngram_size=3,
            bad_words_ids=[[5]],
            suppress_tokens=[6],
            begin_suppress_tokens=[7],
            forced_bos_token_id=1,
            forced_eos_token_id=2,
            sequence_bias={(5,): 1.0},
            remove_invalid_values=True,
            exponential_decay_length_penalty=(5, 1.1),
            renormalize_logits=True,
            num_return_sequences=2,
            output_logits=True,
            output_scores=True,
            return_dict_in_generate=True,
            stop_strings=["\n"],
            use_cache=False,
            assistant_early_exit=2,
            guidance_scale=1.0,
            encoder_repetition_penalty=1.0,
            diversity_penalty=0.0,
            num_beam_groups=1,
            cache_implementation="static",
            low_memory=False,
        ),
        dict(num_beams=None, guidance_scale=None, encoder_repetition_penalty=None, penalty_alpha=0.0, top_k=4),
    ],
    ids=["every_supported_flag", "nones"],
)
def test_check_supported_accepts_what_generate_implements(kwargs):
    gc = ha.GenerationConfig(**kwargs)
    got = recorded_warnings(lambda: (gc.validate(), gc.check_supported()))
    assert got == [], f"expected no warning and no error for {kwargs}, got warnings {got}"


@pytest.mark.parametrize("flag,value", [("length_penalty", 0.8), ("early_stopping", True), ("early_stopping", "never")])
def test_a_beam_only_knob_with_one_beam_warns_naming_it(flag, value):
    gc = ha.GenerationConfig(**{flag: value})
    assert recorded_warnings(gc.validate) == [], "expected validate() to leave beam-only knobs to check_supported()"
    got = recorded_warnings(gc.check_supported)
    assert len(got) == 1 and all(s in got[0] for s in (f"`{flag}`", f"(={value!r})", "num_beams=1")), (
        f"expected one UserWarning naming {flag}, its value {value!r} and num_beams=1, got {got}"
    )


@pytest.mark.parametrize(
    "kwargs",
    [dict(penalty_alpha=0.6, top_k=1), dict(penalty_alpha=0.6, top_k=4, do_sample=True)],
    ids=["top_k_1", "sampling"],
)
def test_penalty_alpha_outside_contrastive_search_warns(kwargs):
    gc = ha.GenerationConfig(**kwargs)
    gc.validate()
    got = recorded_warnings(gc.check_supported)
    assert len(got) == 1 and "`penalty_alpha`" in got[0] and "(=0.6)" in got[0], (
        f"expected one UserWarning naming penalty_alpha=0.6 (no effect without contrastive search), got {got}"
    )


# ---- serialization ---------------------------------------------------------------------------------------


def test_to_diff_dict_of_a_default_config_is_only_the_version():
    got = ha.GenerationConfig().to_diff_dict()
    assert got == {"habana_assist_version": ha.__version__}, (
        f"expected to_diff_dict() of GenerationConfig() to be only the version key, got {got}"
    )


def test_to_diff_dict_holds_exactly_the_changed_fields():
    gc = ha.GenerationConfig(top_k=None, min_p=0.1, temperature=1.0, foo="bar")
    got = gc.to_diff_dict()
    expected = {"top_k": None, "min_p": 0.1, "foo": "bar", "habana_assist_version": ha.__version__}
    assert got == expected, f"expected {expected} (temperature=1.0 is the default), got {got}"


def test_to_dict_is_a_deep_copy_of_every_attribute():
    gc = ha.GenerationConfig(bad_words_ids=[[5]], sequence_bias={(5,): 1.0}, custom={"a": [1]})
    d = gc.to_dict()
    assert set(TRANSFORMERS_DEFAULTS) | {"seed", "assisted_sampling", "custom"} <= set(d), (
        f"expected to_dict() to hold every field, missing {set(TRANSFORMERS_DEFAULTS) - set(d)}"
    )
    d["bad_words_ids"].append([6])
    d["sequence_bias"][(6,)] = 2.0
    d["custom"]["a"].append(2)
    assert gc.bad_words_ids == [[5]] and gc.sequence_bias == {(5,): 1.0} and gc.custom == {"a": [1]}, (
        f"expected to_dict() to deep-copy, the config changed: {gc.bad_words_ids}, {gc.sequence_bias}, {gc.custom}"
    )


def test_to_json_string_is_sorted_indented_and_ends_with_a_newline():
    gc = ha.GenerationConfig(top_p=0.9, do_sample=True, eos_token_id=np.int64(2), bad_words_ids=[[np.int32(5)]])
    text = gc.to_json_string()
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n", (
        f"expected sorted keys, indent 2 and a trailing newline, got {text!r}"
    )
    assert data == {
        "top_p": 0.9,
        "do_sample": True,
        "eos_token_id": 2,
        "bad_words_ids": [[5]],
        "habana_assist_version": ha.__version__,
    }, f"expected the diff with numpy ints as ints, got {data}"
    full = json.loads(gc.to_json_string(use_diff=False))
    assert set(TRANSFORMERS_DEFAULTS) - {"compile_config"} <= set(full), (
        f"expected use_diff=False to write every field, missing {set(TRANSFORMERS_DEFAULTS) - set(full)}"
    )
    assert "habana_assist_version" not in json.loads(gc.to_json_string(ignore_metadata=True)), (
        "expected ignore_metadata=True to leave the version key out"
    )


def test_compile_config_is_not_written_and_not_compared():
    gc = ha.GenerationConfig(compile_config={"fullgraph": True}, top_k=3)
    written = json.loads(gc.to_json_string(use_diff=False))
    assert "compile_config" not in written and written["top_k"] == 3, (
        f"expected compile_config left out of the JSON (a torch.compile setting, as in Transformers), got {written}"
    )
    assert gc == ha.GenerationConfig(top_k=3), "expected equality to ignore compile_config, which a file does not keep"


def test_sequence_bias_with_tuple_keys_is_written_as_pairs():
    gc = ha.GenerationConfig(sequence_bias={(5, 6): -1.5, (7,): 2})
    got = json.loads(gc.to_json_string())["sequence_bias"]
    assert got == [[[5, 6], -1.5], [[7], 2.0]], f"expected the list-of-pairs form with float biases, got {got}"


def test_a_value_json_cannot_hold_is_named_and_repr_still_works():
    gc = ha.GenerationConfig(custom=object())
    msg = message_of(gc.to_json_string)
    assert "custom" in msg, f"expected the error to name the field 'custom', got {msg!r}"
    assert "custom" in repr(gc), f"expected repr() to show the field anyway, got {repr(gc)!r}"


def test_save_pretrained_then_from_pretrained_gives_an_equal_config(tmp_path):
    gc = ha.GenerationConfig(
        do_sample=True,
        temperature=0.7,
        top_k=None,
        min_p=0.05,
        typical_p=0.95,
        no_repeat_ngram_size=3,
        bad_words_ids=[[5], [6, 7]],
        sequence_bias={(8, 9): -2.0, (3,): 1},
        forced_eos_token_id=[2, 4],
        exponential_decay_length_penalty=(10, 1.05),
        suppress_tokens=[11],
        stop_strings=["\n\n"],
        num_return_sequences=2,
        output_logits=True,
        return_dict_in_generate=True,
        eos_token_id=[2, 4],
        seed=7,
        custom_key={"a": 1},
    )
    target = tmp_path / "a" / "b"
    gc.save_pretrained(target)
    path = target / "generation_config.json"
    written = json.loads(path.read_text())
    assert set(written) == set(gc.to_diff_dict()), (
        f"expected the file to hold exactly to_diff_dict()'s keys {sorted(gc.to_diff_dict())}, got {sorted(written)}"
    )
    back = ha.GenerationConfig.from_pretrained(target)
    assert back == gc, f"expected from_pretrained(save_pretrained(gc)) == gc; saved {gc}, loaded {back}"
    assert back.sequence_bias_pairs() == [((8, 9), -2.0), ((3,), 1.0)], (
        f"expected sequence_bias to come back as the same pairs, got {back.sequence_bias_pairs()}"
    )
    assert back.top_k is None and back.exponential_decay_length_penalty == [10, 1.05], (
        f"expected top_k None and the decay pair back, got {back.top_k!r}, {back.exponential_decay_length_penalty!r}"
    )
    back.validate()
    assert back.to_json_string() == gc.to_json_string(), "expected the same JSON text after the round trip"


def test_save_pretrained_with_another_file_name(tmp_path):
    with pytest.warns(UserWarning, match="`top_k` \\(=7\\)"):  # saved all the same
        ha.GenerationConfig(top_k=7).save_pretrained(str(tmp_path), config_file_name="gen.json")
    assert sorted(os.listdir(tmp_path)) == ["gen.json"], f"expected only gen.json, got {os.listdir(tmp_path)}"
    assert ha.GenerationConfig.from_pretrained(tmp_path, "gen.json").top_k == 7, "expected top_k 7 back from gen.json"


def test_save_pretrained_refuses_a_file_path(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    msg = message_of(lambda: ha.GenerationConfig().save_pretrained(f))
    assert_names(msg, (str(f), "is a file", "directory"), "save_pretrained(a file)")
    assert f.read_text() == "x", "expected the file left as it was"


def test_save_pretrained_refuses_an_invalid_config_and_writes_nothing(tmp_path):
    msg = message_of(lambda: ha.GenerationConfig(top_p=3.0).save_pretrained(tmp_path / "out"))
    assert_names(msg, ("`top_p`", "(=3.0)", "top_p=0.9"), "save_pretrained(top_p=3.0)")
    assert not (tmp_path / "out" / "generation_config.json").exists(), "expected no file for a refused config"


def test_a_checkpoint_file_with_beam_search_loads_validates_and_saves(tmp_path):
    data = {
        "num_beams": 4,
        "early_stopping": True,
        "length_penalty": 0.8,
        "no_repeat_ngram_size": 3,
        "num_return_sequences": 2,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "transformers_version": "4.45.0",
    }
    (tmp_path / "generation_config.json").write_text(json.dumps(data))
    gc = ha.GenerationConfig.from_pretrained(tmp_path)
    for key, value in data.items():
        assert getattr(gc, key) == value, f"expected {key}={value!r} from the file, got {getattr(gc, key)!r}"
    gc.validate()
    gc.save_pretrained(tmp_path / "copy")
    back = ha.GenerationConfig.from_pretrained(tmp_path / "copy")
    assert back == gc and back.num_beams == 4, f"expected the beam config to save and load unchanged, got {back}"
    assert json.loads((tmp_path / "copy" / "generation_config.json").read_text())["transformers_version"] == "4.45.0", (
        "expected the file's transformers_version kept"
    )
    msg = message_of(gc.check_supported)
    assert_names(msg, ("`num_beams`", "(=4)", "num_beams=1"), "check_supported() of the beam config")


def test_a_model_whose_generation_config_asks_for_beams_loads(tmp_path):
    from checkpoints import write_random_checkpoint

    write_random_checkpoint(tmp_path, vocab_size=64, seed=3)
    (tmp_path / "generation_config.json").write_text(json.dumps({"num_beams": 4, "max_new_tokens": 3}))
    model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    assert model.generation_config.num_beams == 4, (
        f"expected the model's generation_config to hold num_beams=4, got {model.generation_config.num_beams}"
    )
    out = model.generate(np.array([[3, 4, 5]]), num_beams=1)
    assert out.shape == (1, 6), f"expected num_beams=1 to override the file and give 3 new tokens, got {out.shape}"


def test_a_sequence_bias_key_written_as_a_string_loads(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"sequence_bias": {"(5, 6)": -1.0, "(7,)": 2.0}}))
    gc = ha.GenerationConfig.from_pretrained(tmp_path)
    gc.validate()
    assert gc.sequence_bias_pairs() == [((5, 6), -1.0), ((7,), 2.0)], (
        f"expected str keys '(5, 6)' read as token-id tuples, got {gc.sequence_bias_pairs()}"
    )


def test_a_file_nested_too_deeply_is_a_checkpoint_error(tmp_path):
    (tmp_path / "generation_config.json").write_text('{"custom": ' + "[" * 700 + "]" * 700 + "}")
    msg = message_of(lambda: ha.GenerationConfig.from_pretrained(tmp_path), CheckpointError)
    assert "generation_config.json" in msg, f"expected the error to name the file, got {msg!r}"


def test_from_dict_kwargs_override_and_unused_kwargs_come_back():
    base = {"top_k": 5, "do_sample": True, "bad_words_ids": [[5]]}
    gc = ha.GenerationConfig.from_dict(base, top_k=9, temperature=0.5)
    assert (gc.top_k, gc.temperature, gc.do_sample) == (9, 0.5, True), (
        f"expected kwargs top_k=9, temperature=0.5 over the dict, got {gc.top_k}, {gc.temperature}, {gc.do_sample}"
    )
    gc.bad_words_ids[0].append(6)
    assert base["bad_words_ids"] == [[5]], "expected from_dict not to share the dict's lists"
    gc, unused = ha.GenerationConfig.from_dict(base, top_k=3, foo=False, return_unused_kwargs=True)
    assert gc.top_k == 3 and unused == {"foo": False} and not hasattr(gc, "foo"), (
        f"expected top_k=3 set and foo returned unused (not set), got top_k={gc.top_k}, unused={unused}"
    )
    gc = ha.GenerationConfig.from_dict(base, foo=False)
    assert gc.foo is False, "expected an unknown kwarg kept as an attribute without return_unused_kwargs"


def test_from_pretrained_kwargs_override_the_file(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"top_k": 5, "do_sample": True}))
    gc, unused = ha.GenerationConfig.from_pretrained(
        tmp_path, top_k=1, foo=False, revision="main", return_unused_kwargs=True
    )
    assert gc.top_k == 1 and gc.do_sample is True and unused == {"foo": False}, (
        f"expected top_k=1 over the file's 5, do_sample from the file and foo unused, got {gc.top_k}, "
        f"{gc.do_sample}, {unused}"
    )


def test_from_dict_of_to_dict_is_equal():
    gc = ha.GenerationConfig(sequence_bias=[[[5], 1.0]], min_p=0.2, do_sample=True)
    assert ha.GenerationConfig.from_dict(gc.to_dict()) == gc, "expected from_dict(to_dict()) to be equal"


def test_equality_ignores_metadata_and_the_form_of_sequence_bias():
    a = ha.GenerationConfig(sequence_bias={(5,): 1.0})
    b = ha.GenerationConfig(sequence_bias=[[[5], 1.0]], transformers_version="4.45.0")
    assert a == b and hash(a) == hash(b), "expected configs equal but for metadata and bias form to be equal"
    assert a != ha.GenerationConfig(sequence_bias={(5,): 2.0}), "expected a different bias to compare different"


def test_from_model_config_takes_its_generation_fields():
    cfg = SimpleNamespace(
        bos_token_id=1, eos_token_id=2, pad_token_id=None, max_length=64, output_scores=True, hidden_size=32
    )
    gc = ha.GenerationConfig.from_model_config(cfg)
    assert (gc.bos_token_id, gc.eos_token_id, gc.pad_token_id, gc.max_length) == (1, 2, None, 64), (
        f"expected the model config's tokens and max_length, got {gc}"
    )
    assert gc.return_dict_in_generate is True and gc._from_model_config is True and not hasattr(gc, "hidden_size"), (
        f"expected return_dict_in_generate set by output_scores, _from_model_config True and no model fields, got {gc}"
    )


# ---- normalized views for generate() ---------------------------------------------------------------------


def test_effective_reads_none_as_the_processor_off():
    gc = ha.GenerationConfig(
        top_k=None,
        temperature=None,
        top_p=None,
        typical_p=None,
        repetition_penalty=None,
        no_repeat_ngram_size=None,
        num_beams=None,
    )
    got = {
        f: gc.effective(f)
        for f in (
            "top_k",
            "temperature",
            "top_p",
            "typical_p",
            "repetition_penalty",
            "no_repeat_ngram_size",
            "num_beams",
            "min_p",
            "output_logits",
            "epsilon_cutoff",
        )
    }
    expected = {
        "top_k": 0,
        "temperature": 1.0,
        "top_p": 1.0,
        "typical_p": 1.0,
        "repetition_penalty": 1.0,
        "no_repeat_ngram_size": 0,
        "num_beams": 1,
        "min_p": 0.0,
        "output_logits": False,
        "epsilon_cutoff": 0.0,
    }
    assert got == expected, f"expected {expected}, got {got}"
    assert ha.GenerationConfig(top_k=7).effective("top_k") == 7, "expected a set value returned as it is"


def test_list_views():
    gc = ha.GenerationConfig(forced_eos_token_id=np.int64(3), stop_strings="\n", eos_token_id=[2, 5])
    assert (gc.forced_eos_token_ids(), gc.stop_strings_list(), gc.eos_token_ids()) == ([3], ["\n"], [2, 5]), (
        f"expected [3], ['\\n'], [2, 5], got {gc.forced_eos_token_ids()}, {gc.stop_strings_list()}, "
        f"{gc.eos_token_ids()}"
    )
    empty = ha.GenerationConfig()
    assert (empty.forced_eos_token_ids(), empty.stop_strings_list(), empty.sequence_bias_pairs()) == ([], [], []), (
        "expected empty lists for unset fields"
    )


# ---- the output ------------------------------------------------------------------------------------------


def test_generate_output_has_logits_after_scores():
    names = [f.name for f in fields(GenerateDecoderOnlyOutput)]
    assert names[:3] == ["sequences", "scores", "logits"], f"expected sequences, scores, logits first, got {names}"
    out = GenerateDecoderOnlyOutput(sequences=np.zeros((1, 2), np.int64), logits=(np.zeros((1, 4), np.float32),))
    assert out.keys() == ["sequences", "logits"] and out["logits"][0].shape == (1, 4), (
        f"expected keys() to list the logits set, got {out.keys()}"
    )
