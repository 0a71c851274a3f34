"""Bad input at the model / generate level raises a clear Python exception, never a crash, never a hang.

The "Safe" promise (docs/design.md): every bad token id, array, mask, cache or generation argument raises an
exception of the package's hierarchy (habana_assist.errors) or the ValueError Transformers raises for the
same mistake, with a message that names the problem. And nothing is left half-done: after each error the
model (and any cache involved) still gives exactly what it gave before.
"""

import re

import numpy as np
import pytest
from checkpoints import write_random_checkpoint

import habana_assist as ha
from habana_assist.errors import CacheCapacityError, CheckpointNotFoundError, HabanaAssistError, InvalidInputError

VOCAB = 64
CAPACITY = 8
PROMPT = np.array([[3, 4, 5]], dtype=np.int64)
NEW = 5  # PROMPT + NEW == CAPACITY: the largest valid generation


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("input_errors")
    write_random_checkpoint(path, vocab_size=VOCAB, seed=11, bos_token_id=1, eos_token_id=2)
    return str(path)


@pytest.fixture(scope="module")
def model(checkpoint):
    return ha.AutoModelForCausalLM.from_pretrained(checkpoint, max_cache_len=CAPACITY)


@pytest.fixture(scope="module")
def baseline(model):
    """What a valid greedy generate and a valid forward give before any error."""
    return {
        "tokens": model.generate(PROMPT, max_new_tokens=NEW),
        "sampled": model.generate(PROMPT, max_new_tokens=NEW, do_sample=True, seed=7),
        "logits": model(PROMPT).logits,
    }


@pytest.fixture(autouse=True)
def model_still_works(model, baseline):
    """After every test (each provokes an error), the model gives bitwise what it gave before."""
    threads = ha.get_num_threads()
    yield
    assert ha.get_num_threads() == threads, (
        f"expected the thread count to stay {threads} after the error, got {ha.get_num_threads()}"
    )
    got = model.generate(PROMPT, max_new_tokens=NEW)
    assert np.array_equal(got, baseline["tokens"]), (
        f"after the error a greedy generate gave {got.tolist()}, expected {baseline['tokens'].tolist()} as before"
    )
    got = model.generate(PROMPT, max_new_tokens=NEW, do_sample=True, seed=7)
    assert np.array_equal(got, baseline["sampled"]), (
        f"after the error a seeded sampled generate gave {got.tolist()}, expected {baseline['sampled'].tolist()}"
    )
    logits = model(PROMPT).logits
    assert np.array_equal(logits, baseline["logits"]), "after the error a forward gave different logits than before"


def raises(exc_type, fn, *needles):
    """Calls fn, expects exc_type; every needle (a regex, case-insensitive) must occur in the message."""
    with pytest.raises(Exception) as info:
        fn()
    err = info.value
    assert isinstance(err, exc_type), f"expected {exc_type.__name__}, got {type(err).__name__}: {err}"
    msg = str(err)
    for needle in needles:
        assert re.search(needle, msg, re.IGNORECASE), (
            f"expected the {type(err).__name__} message to mention {needle!r}; it says: {msg!r}"
        )
    return err


# ---- token ids -------------------------------------------------------------------------------------------


def test_model_rejects_negative_token_id(model):
    raises(InvalidInputError, lambda: model(np.array([[3, -1, 4]])), "input_ids", "-1", f"\\[0, {VOCAB}\\)")


def test_model_rejects_token_id_equal_to_vocab_size(model):
    raises(InvalidInputError, lambda: model(np.array([[3, VOCAB]])), "input_ids", str(VOCAB), "vocab_size")


def test_model_rejects_huge_unsigned_token_id(model):
    raises(InvalidInputError, lambda: model(np.array([[2**63]], dtype=np.uint64)), "input_ids", "vocab_size")


def test_generate_rejects_negative_token_id(model):
    raises(
        InvalidInputError,
        lambda: model.generate(np.array([[-5, 3]]), max_new_tokens=2),
        "input_ids",
        "-5",
        "vocab_size",
    )


def test_generate_rejects_token_id_beyond_vocab(model):
    raises(
        InvalidInputError,
        lambda: model.generate(np.array([[3, VOCAB + 100]]), max_new_tokens=2),
        "input_ids",
        str(VOCAB + 100),
        "vocab_size",
    )


def test_out_of_range_token_leaves_the_cache_unchanged(model):
    cache = model.create_cache(max_cache_len=CAPACITY)
    model(PROMPT, past_key_values=cache)
    raises(InvalidInputError, lambda: model(np.array([[VOCAB]]), past_key_values=cache), "input_ids")
    assert cache.get_seq_length() == PROMPT.shape[1], (
        f"expected the cache to still hold {PROMPT.shape[1]} columns, got {cache.get_seq_length()}"
    )


# ---- non-integer input_ids -------------------------------------------------------------------------------


def test_model_rejects_float_input_ids(model):
    raises(InvalidInputError, lambda: model(np.array([[1.0, 2.0]])), "input_ids", "integers", "float64")


def test_generate_rejects_float_input_ids(model):
    raises(InvalidInputError, lambda: model.generate(np.array([[1.5, 2.0]]), max_new_tokens=2), "input_ids", "integers")


def test_model_rejects_string_input_ids(model):
    raises(InvalidInputError, lambda: model(["hello", "world"]), "input_ids", "integers", "tokeniz")


def test_model_rejects_object_array_input_ids(model):
    raises(InvalidInputError, lambda: model(np.array([[1, 2]], dtype=object)), "input_ids", "integers", "object")


def test_model_rejects_bool_input_ids(model):
    raises(InvalidInputError, lambda: model(np.array([[True, False]])), "input_ids", "integers")


def test_model_rejects_none_input_ids(model):
    raises(InvalidInputError, lambda: model(None), "input_ids", "required")


def test_generate_rejects_missing_input_ids(model):
    raises(InvalidInputError, lambda: model.generate(max_new_tokens=2), "input_ids", "required")


def test_generate_refuses_inputs_and_input_ids_together(model):
    """inputs= is Transformers' name of the prompt: passed with input_ids (by position or by name) it is refused,
    as Transformers refuses it, whether or not the two are the same array."""
    for call in (
        lambda: model.generate(PROMPT, inputs=PROMPT, max_new_tokens=2),
        lambda: model.generate(input_ids=PROMPT, inputs=PROMPT[:, :2], max_new_tokens=2),
    ):
        raises(InvalidInputError, call, "`inputs`", "`input_ids`", "once")


def test_model_rejects_ragged_input_ids(model):
    raises(ValueError, lambda: model([[1, 2], [3]]), "shape")


# ---- shapes ----------------------------------------------------------------------------------------------


def test_model_rejects_3d_input_ids(model):
    raises(
        InvalidInputError,
        lambda: model(np.zeros((1, 2, 3), dtype=np.int64)),
        "input_ids",
        "shape",
        r"\(batch, seq\)",
        r"\(1, 2, 3\)",
    )


def test_generate_rejects_3d_input_ids(model):
    raises(
        InvalidInputError,
        lambda: model.generate(np.zeros((1, 2, 3), dtype=np.int64), max_new_tokens=2),
        "input_ids",
        "shape",
        r"\(1, 2, 3\)",
    )


def test_model_rejects_empty_input_ids(model):
    raises(InvalidInputError, lambda: model(np.array([], dtype=np.int64)), "input_ids", "shape", r"\(0,\)")


def test_model_rejects_zero_length_row(model):
    raises(InvalidInputError, lambda: model(np.zeros((1, 0), dtype=np.int64)), "input_ids", "shape", r"\(1, 0\)")


def test_model_rejects_zero_row_batch(model):
    raises(InvalidInputError, lambda: model(np.zeros((0, 3), dtype=np.int64)), "input_ids", "shape", r"\(0, 3\)")


def test_generate_rejects_zero_length_row(model):
    raises(
        InvalidInputError,
        lambda: model.generate(np.zeros((1, 0), dtype=np.int64), max_new_tokens=2),
        "input_ids",
        "shape",
        r"\(1, 0\)",
    )


def test_model_rejects_scalar_input_ids(model):
    raises(InvalidInputError, lambda: model(np.int64(3)), "input_ids", "shape")


# ---- attention_mask --------------------------------------------------------------------------------------


def test_model_rejects_mask_of_wrong_shape(model):
    raises(
        InvalidInputError,
        lambda: model(PROMPT, attention_mask=np.ones((1, 2), dtype=np.int64)),
        "attention_mask",
        "shape",
        r"\(1, 2\)",
        r"\(1, 3\)",
    )


def test_generate_rejects_mask_of_wrong_shape(model):
    raises(
        InvalidInputError,
        lambda: model.generate(PROMPT, attention_mask=np.ones((2, 3), dtype=np.int64), max_new_tokens=2),
        "attention_mask",
        "shape",
        r"\(2, 3\)",
    )


def test_model_rejects_mask_value_two(model):
    raises(InvalidInputError, lambda: model(PROMPT, attention_mask=np.array([[1, 2, 1]])), "attention_mask", "0 and 1")


def test_model_rejects_negative_mask_value(model):
    raises(InvalidInputError, lambda: model(PROMPT, attention_mask=np.array([[1, -1, 1]])), "attention_mask", "0 and 1")


def test_generate_rejects_fractional_mask(model):
    raises(
        InvalidInputError,
        lambda: model.generate(PROMPT, attention_mask=np.array([[1.0, 0.5, 1.0]]), max_new_tokens=2),
        "attention_mask",
        "0 and 1",
    )


def test_float_mask_of_ones_is_accepted_or_rejected_naming_its_dtype(model, baseline):
    """A float mask holding only 0.0 and 1.0 (what some pipelines build) has valid values: either it works
    like the integer mask, or the error says its dtype is the problem, not its values."""
    try:
        logits = model(PROMPT, attention_mask=np.ones((1, 3), dtype=np.float32)).logits
    except InvalidInputError as e:
        assert re.search("dtype|float|integer|bool", str(e), re.IGNORECASE), (
            f"expected the error for a float32 mask of ones to name its dtype; it says {str(e)!r} although the "
            "values are 0 and 1"
        )
        return
    assert np.array_equal(logits, baseline["logits"]), "a float mask of ones gave logits different from no mask"


def test_generate_rejects_right_padded_mask(model):
    raises(
        InvalidInputError,
        lambda: model.generate(PROMPT, attention_mask=np.array([[1, 1, 0]]), max_new_tokens=2),
        "attention_mask",
        "left",
        "padding_side",
    )


def test_generate_rejects_mask_with_a_hole(model):
    raises(
        InvalidInputError,
        lambda: model.generate(PROMPT, attention_mask=np.array([[1, 0, 1]]), max_new_tokens=2),
        "attention_mask",
        "left",
    )


def test_generate_rejects_a_row_with_no_real_token(model):
    ids = np.array([[3, 4], [5, 6]])
    raises(
        InvalidInputError,
        lambda: model.generate(ids, attention_mask=np.array([[1, 1], [0, 0]]), max_new_tokens=2),
        "row 1",
        "no real token",
    )


# ---- cache capacity --------------------------------------------------------------------------------------


def test_largest_generation_that_fits_the_cache_works(model, baseline):
    out = model.generate(PROMPT, max_new_tokens=CAPACITY - PROMPT.shape[1])
    assert out.shape[1] <= CAPACITY, f"expected at most {CAPACITY} tokens, got shape {out.shape}"


def test_generate_beyond_cache_capacity_raises(model):
    raises(
        CacheCapacityError,
        lambda: model.generate(PROMPT, max_new_tokens=CAPACITY - PROMPT.shape[1] + 1),
        "max_cache_len=8",
        "max_new_tokens",
        "9",
    )


def test_generate_with_prompt_longer_than_capacity_raises(model):
    ids = np.arange(3, 3 + CAPACITY + 1)[None]
    raises(CacheCapacityError, lambda: model.generate(ids, max_new_tokens=1), "max_cache_len")


def test_forward_without_cache_is_not_bounded_by_max_cache_len(model):
    ids = np.arange(3, 3 + 2 * CAPACITY)[None]
    logits = model(ids).logits
    assert logits.shape == (1, 2 * CAPACITY, VOCAB), f"expected logits (1, 16, {VOCAB}), got {logits.shape}"


def test_append_past_cache_capacity_raises_and_leaves_the_cache_usable(model):
    first, too_many, rest = np.array([[3, 4, 5, 6, 7]]), np.array([[8, 9, 10, 11]]), np.array([[8, 9, 10]])
    cache = model.create_cache()
    assert cache.max_cache_len == CAPACITY, f"expected max_cache_len {CAPACITY}, got {cache.max_cache_len}"
    model(first, past_key_values=cache)
    raises(
        CacheCapacityError, lambda: model(too_many, past_key_values=cache), "capacity", "5", "4", "8", "max_cache_len"
    )
    assert cache.get_seq_length() == 5, f"expected the cache to still hold 5 columns, got {cache.get_seq_length()}"
    assert cache._ctx.length(0) == 5, f"expected the core cache to still hold 5 positions, got {cache._ctx.length(0)}"
    got = model(rest, past_key_values=cache).logits

    fresh = model.create_cache()
    model(first, past_key_values=fresh)
    expected = model(rest, past_key_values=fresh).logits
    assert np.array_equal(got, expected), (
        "after the failed append, 3 more tokens gave logits different from a fresh cache fed the same tokens"
    )
    assert cache.get_seq_length() == CAPACITY, f"expected a full cache of {CAPACITY}, got {cache.get_seq_length()}"
    raises(CacheCapacityError, lambda: model(np.array([[1]]), past_key_values=cache), "capacity")


def test_cache_append_past_capacity_in_a_batch_names_the_row(model):
    cache = model.create_cache(batch_size=2, max_cache_len=4)
    model(np.array([[3, 4], [5, 6]]), past_key_values=cache)
    raises(
        CacheCapacityError,
        lambda: model(np.array([[3, 4, 5], [6, 7, 8]]), past_key_values=cache),
        "sequence 0",
        "capacity",
    )
    assert cache.get_seq_length() == 2, f"expected 2 columns after the failed append, got {cache.get_seq_length()}"


# ---- past_key_values -------------------------------------------------------------------------------------


def test_model_rejects_past_key_values_of_wrong_type(model):
    raises(
        InvalidInputError,
        lambda: model(PROMPT, past_key_values={"layers": 1}),
        "past_key_values",
        "Cache",
        "create_cache",
    )
    # Transformers' legacy tuples are read, and checked
    raises(
        InvalidInputError,
        lambda: model(PROMPT, past_key_values=((np.zeros(3), np.zeros(3)),)),
        "from_legacy_cache",
        "batch, n_kv_heads",
    )


def test_model_rejects_past_key_values_of_wrong_batch_size(model):
    cache = model.create_cache(batch_size=2)
    raises(
        InvalidInputError, lambda: model(PROMPT, past_key_values=cache), "past_key_values", "2 rows", "1", "batch_size"
    )
    assert cache.get_seq_length() == 0, f"expected the cache to stay empty, got {cache.get_seq_length()} columns"


def test_create_cache_rejects_non_positive_sizes(model):
    raises(InvalidInputError, lambda: model.create_cache(batch_size=0), "batch_size=0", "positive")
    raises(InvalidInputError, lambda: model.create_cache(max_cache_len=0), "max_cache_len=0", "positive")


def test_model_rejects_cache_of_a_model_with_a_smaller_vocab(model, tmp_path):
    """A cache is bound to the model that made it; the other model's cache must not be run silently."""
    write_random_checkpoint(tmp_path, vocab_size=VOCAB // 2, seed=3)
    other = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    foreign = other.create_cache()
    try:
        out = model(np.array([[3, 4]]), past_key_values=foreign)
    except InvalidInputError as e:
        assert re.search("cache|past_key_values", str(e), re.IGNORECASE), (
            f"expected the message to name the cache / past_key_values; it says {str(e)!r}"
        )
        return
    pytest.fail(
        f"expected InvalidInputError for a cache created by a model with vocab_size {VOCAB // 2}; "
        f"the call returned logits {out.logits.shape} whose second row is "
        f"{out.logits[0, 1, :4].tolist()}... (not this model's logits)"
    )


def test_model_rejects_cache_of_a_model_with_a_larger_vocab(model, tmp_path):
    write_random_checkpoint(tmp_path, vocab_size=VOCAB * 2, seed=3)
    other = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    raises(
        InvalidInputError,
        lambda: model(np.array([[3, 4]]), past_key_values=other.create_cache()),
        "cache|past_key_values",
    )


def test_model_rejects_cache_of_another_model_with_the_same_shapes(model, checkpoint, tmp_path):
    write_random_checkpoint(tmp_path, vocab_size=VOCAB, seed=99)
    other = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    foreign = other.create_cache()
    try:
        out = model(PROMPT, past_key_values=foreign)
    except InvalidInputError as e:
        assert re.search("cache|past_key_values", str(e), re.IGNORECASE), (
            f"expected the message to name the cache / past_key_values; it says {str(e)!r}"
        )
        return
    own = model(PROMPT).logits
    pytest.fail(
        "expected InvalidInputError for a cache created by another model; the call ran the other "
        f"model's weights instead (logits equal this model's: {np.array_equal(out.logits, own)})"
    )


# ---- generation arguments --------------------------------------------------------------------------------


def gen(model, **kwargs):
    kwargs.setdefault("max_new_tokens", 2)
    return lambda: model.generate(PROMPT, **kwargs)


def test_generate_rejects_top_p_zero(model):
    raises(ValueError, gen(model, do_sample=True, top_p=0), "`top_p`", r"\(=0\)", r"\(0, 1\]", "pass")


def test_generate_rejects_top_p_above_one(model):
    raises(ValueError, gen(model, do_sample=True, top_p=1.5), "`top_p`", "1.5", r"\(0, 1\]")


def test_generate_rejects_negative_temperature(model):
    raises(ValueError, gen(model, do_sample=True, temperature=-0.5), "`temperature`", "-0.5", "non-negative")


def test_generate_rejects_nan_temperature(model):
    raises(ValueError, gen(model, do_sample=True, temperature=float("nan")), "`temperature`", "nan", "finite")


def test_generate_rejects_zero_temperature_when_sampling(model):
    raises(
        ValueError, gen(model, do_sample=True, temperature=0.0), "`temperature`", "strictly positive", "do_sample=False"
    )


def test_generate_rejects_max_new_tokens_zero(model):
    raises(ValueError, gen(model, max_new_tokens=0), "`max_new_tokens`", r"\(=0\)", "positive")


def test_generate_rejects_negative_max_new_tokens(model):
    raises(ValueError, gen(model, max_new_tokens=-1), "`max_new_tokens`", "-1", "positive")


def test_generate_rejects_float_max_new_tokens(model):
    raises(ValueError, gen(model, max_new_tokens=2.5), "`max_new_tokens`", "2.5")


def test_generate_rejects_negative_min_new_tokens(model):
    raises(ValueError, gen(model, min_new_tokens=-1), "`min_new_tokens`", "-1", "non-negative")


def test_generate_rejects_negative_top_k(model):
    raises(ValueError, gen(model, do_sample=True, top_k=-1), "`top_k`", "-1", "non-negative")


def test_generate_rejects_zero_repetition_penalty(model):
    raises(ValueError, gen(model, repetition_penalty=0), "`repetition_penalty`", r"\(=0\)", "strictly positive")


def test_generate_rejects_beam_search(model):
    raises(ValueError, gen(model, num_beams=2), "`num_beams`", r"\(=2\)", "num_beams=1")


def test_generate_rejects_negative_eos_token_id(model):
    raises(ValueError, gen(model, eos_token_id=-1), "`eos_token_id`", "-1", "non-negative")


def test_generate_rejects_eos_token_id_beyond_vocab(model):
    raises(ValueError, gen(model, eos_token_id=VOCAB), "eos_token_id", str(VOCAB), "vocab")


def test_generate_rejects_eos_list_with_an_id_beyond_vocab(model):
    raises(ValueError, gen(model, eos_token_id=[2, VOCAB + 1]), "eos_token_id", str(VOCAB + 1), "vocab")


def test_generate_pads_with_a_pad_token_id_beyond_vocab_as_transformers(model):
    """Transformers only writes pad_token_id into the rows that stopped early (a config's class default may lie
    outside a small vocabulary); one beyond 32 bits is refused."""
    prompts = np.array([[3, 4, 5], [9, 8, 7]])
    plain = model.generate(prompts, max_new_tokens=4)[:, 3:]
    row = 0 if plain[0, 0] not in plain[1] else 1  # a row whose first token the other row never generates
    assert plain[row, 0] not in plain[1 - row], f"no row stops alone: {plain}"
    out = model.generate(prompts, max_new_tokens=4, eos_token_id=int(plain[row, 0]), pad_token_id=VOCAB + 5)
    assert (out[row, 4:] == VOCAB + 5).all() and (out[1 - row, 3:] == plain[1 - row]).all(), out
    raises(ValueError, gen(model, pad_token_id=2**31), "pad_token_id", "32 bits")


def test_generate_rejects_negative_seed(model):
    raises(ValueError, gen(model, do_sample=True, seed=-1), "`seed`", "-1", "2\\*\\*64")


def test_generate_rejects_a_misspelled_argument(model):
    raises(ValueError, lambda: model.generate(PROMPT, max_new_token=5), "max_new_token", "not used", "spelling")


def test_generate_rejects_an_unknown_argument_and_names_all_of_them(model):
    raises(
        ValueError,
        lambda: model.generate(PROMPT, max_new_tokens=2, tempreature=0.5, beam_width=3),
        "tempreature",
        "beam_width",
    )


def test_generate_rejects_past_key_values_it_cannot_use(model):
    """generate() continues a cache that holds the prompt's beginning (tests/models/test_forward_surface.py); one
    that holds nothing less than the whole prompt, or is no cache, must not be silently ignored."""
    full = model.create_cache()
    model(PROMPT, past_key_values=full)
    raises(
        ValueError,
        lambda: model.generate(PROMPT, max_new_tokens=2, past_key_values=full),
        "past_key_values",
        "at least one new token",
    )
    raises(
        ValueError,
        lambda: model.generate(PROMPT, max_new_tokens=2, past_key_values="cache"),
        "past_key_values",
        "Cache",
    )


def test_generate_rejects_max_length_equal_to_prompt(model):
    raises(
        ValueError,
        lambda: model.generate(PROMPT, max_length=PROMPT.shape[1]),
        "`max_length`",
        r"\(=3\)",
        "prompt of 3",
        "max_new_tokens",
    )


def test_generate_rejects_max_length_shorter_than_prompt(model):
    raises(ValueError, lambda: model.generate(PROMPT, max_length=1), "`max_length`", r"\(=1\)", "prompt")


def test_generate_rejects_non_bool_do_sample(model):
    raises(ValueError, gen(model, do_sample="yes"), "`do_sample`", "yes", "True or False")


# ---- cache crop, threads, loading ------------------------------------------------------------------------


def test_crop_beyond_the_cache_length_raises_and_changes_nothing(model):
    cache = model.create_cache()
    model(PROMPT, past_key_values=cache)
    raises(InvalidInputError, lambda: cache.crop(4), r"crop\(4\)", "3 columns")
    raises(InvalidInputError, lambda: cache.crop(-4), r"crop\(-4\)", "3 columns")
    assert cache.get_seq_length() == 3, f"expected 3 columns after failed crops, got {cache.get_seq_length()}"
    got = model(np.array([[6]]), past_key_values=cache).logits[0, 0]
    expected = model(np.array([[3, 4, 5, 6]])).logits[0, 3]
    assert np.array_equal(got, expected), "after failed crops the cache no longer gives the logits of its tokens"


def test_crop_to_a_fractional_length_raises_naming_crop(model):
    cache = model.create_cache()
    model(PROMPT, past_key_values=cache)
    raises(InvalidInputError, lambda: cache.crop(1.5), r"crop\(1\.5\)")
    assert cache.get_seq_length() == 3, f"expected 3 columns after the failed crop, got {cache.get_seq_length()}"


def test_set_num_threads_rejects_zero():
    raises(InvalidInputError, lambda: ha.set_num_threads(0), "num_threads=0", "positive")


def test_set_num_threads_rejects_negative_float_and_bool():
    raises(InvalidInputError, lambda: ha.set_num_threads(-2), "num_threads=-2")
    raises(InvalidInputError, lambda: ha.set_num_threads(1.5), "num_threads=1.5")
    raises(InvalidInputError, lambda: ha.set_num_threads(True), "num_threads=True")


def test_from_pretrained_rejects_zero_max_cache_len(checkpoint):
    raises(
        ValueError,
        lambda: ha.AutoModelForCausalLM.from_pretrained(checkpoint, max_cache_len=0),
        "max_cache_len=0",
        "positive",
    )


def test_from_pretrained_rejects_negative_max_cache_len(checkpoint):
    raises(
        ValueError,
        lambda: ha.AutoModelForCausalLM.from_pretrained(checkpoint, max_cache_len=-3),
        "max_cache_len=-3",
        "positive",
    )


def test_from_pretrained_rejects_int2_and_names_the_allowed_dtypes(checkpoint):
    raises(
        InvalidInputError,
        lambda: ha.AutoModelForCausalLM.from_pretrained(checkpoint, dtype="int2"),
        "int2",
        "not supported",
        "float32",
        "bfloat16",
        "float16",
        "int8",
        "int4",
    )


@pytest.mark.parametrize(
    "kw, needles",
    [
        (dict(load_in_8bit=True, load_in_4bit=True), ("load_in_8bit", "load_in_4bit", "disagree")),
        (dict(load_in_4bit=True, dtype="int8"), ("load_in_4bit", "int8", "disagree")),
        (dict(load_in_8bit=True, dtype="float32"), ("load_in_8bit", "float32", "disagree")),
        (dict(load_in_4bit=True, torch_dtype="bfloat16"), ("load_in_4bit", "torch_dtype", "bfloat16", "disagree")),
    ],
)
def test_from_pretrained_rejects_load_in_bits_disagreeing_with_dtype(checkpoint, kw, needles):
    raises(InvalidInputError, lambda: ha.AutoModelForCausalLM.from_pretrained(checkpoint, **kw), *needles)


def test_load_in_4bit_is_dtype_int4(checkpoint):
    a = ha.AutoModelForCausalLM.from_pretrained(checkpoint, load_in_4bit=True)
    b = ha.AutoModelForCausalLM.from_pretrained(checkpoint, dtype="int4")
    c = ha.AutoModelForCausalLM.from_pretrained(checkpoint, load_in_4bit=True, torch_dtype="int4")  # agreeing
    assert a.weight_dtype == b.weight_dtype == c.weight_dtype == "int4" and a.is_loaded_in_4bit
    assert np.array_equal(a(PROMPT).logits, b(PROMPT).logits) and np.array_equal(a(PROMPT).logits, c(PROMPT).logits)


def test_from_pretrained_rejects_disagreeing_dtype_and_torch_dtype(checkpoint):
    raises(
        ValueError,
        lambda: ha.AutoModelForCausalLM.from_pretrained(checkpoint, dtype="float32", torch_dtype="bfloat16"),
        "dtype",
        "torch_dtype",
        "disagree",
    )


# ---- one hierarchy ---------------------------------------------------------------------------------------


def test_every_deliberate_error_is_a_habana_assist_error(model, checkpoint, tmp_path):
    """errors.py: "Every error raised on purpose by the package is a HabanaAssistError" (each also a
    ValueError / FileNotFoundError, so Transformers-style `except ValueError` keeps working)."""
    cases = {
        "generate(top_p=0)": gen(model, do_sample=True, top_p=0),
        "generate(num_beams=2)": gen(model, num_beams=2),
        "generate(max_new_tokens=0)": gen(model, max_new_tokens=0),
        "generate(eos_token_id=vocab_size)": gen(model, eos_token_id=VOCAB),
        "generate(max_new_token=5) (typo)": lambda: model.generate(PROMPT, max_new_token=5),
        "generate(max_length=len(prompt))": lambda: model.generate(PROMPT, max_length=3),
        "from_pretrained(max_cache_len=0)": lambda: ha.AutoModelForCausalLM.from_pretrained(
            checkpoint, max_cache_len=0
        ),
        "GenerationConfig.from_pretrained(directory without the file)": lambda: ha.GenerationConfig.from_pretrained(
            str(tmp_path)
        ),
    }
    outside = []
    for what, fn in cases.items():
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - sorting, not handling
            if not isinstance(e, HabanaAssistError):
                outside.append(f"{what} raised {type(e).__name__}")
        else:
            outside.append(f"{what} raised nothing")
    assert not outside, (
        "expected every deliberate error to be a habana_assist.errors.HabanaAssistError (e.g. "
        "InvalidInputError, which is also a ValueError; CheckpointNotFoundError for a missing "
        "file); got: " + "; ".join(outside)
    )


def test_missing_checkpoint_directory_is_checkpoint_not_found(tmp_path):
    raises(
        CheckpointNotFoundError,
        lambda: ha.AutoModelForCausalLM.from_pretrained(str(tmp_path / "nope")),
        "nope",
        "no such",
    )
