"""The forward's keywords and caches with Transformers' contract: labels, return_dict,
output_hidden_states, logits_to_keep, position_ids / cache_position, use_cache -> past_key_values, DynamicCache
and StaticCache, legacy tuples, refusals. References: a float64 numpy forward written from Transformers
(tests/fixtures/reference.py), torch's cross_entropy for the loss (Transformers' ForCausalLMLoss calls it), and
the package's own one-shot forward (a cache must give bit for bit what one forward of the whole sequence gives).
"""

import numpy as np
import pytest
from checkpoints import write_random_checkpoint
from reference import ReferenceCache, reference_forward

import habana_assist as ha
from habana_assist.errors import CacheCapacityError, InvalidInputError

IDS = np.random.default_rng(7).integers(0, 64, size=(2, 9)).astype(np.int64)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("forward_surface")
    config, tensors = write_random_checkpoint(path, num_layers=3, max_position_embeddings=512)
    return str(path), config, tensors


@pytest.fixture(scope="module")
def model(ckpt):
    return ha.AutoModelForCausalLM.from_pretrained(ckpt[0])


def _close(got, ref, what):
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(np.asarray(got, dtype=np.float64) - ref).max())
    assert err <= tol, f"{what}: max error {err:.3g} > {tol:.3g}"


# ---- labels -------------------------------------------------------------------------------------------------


def test_labels_give_transformers_loss(model):
    torch = pytest.importorskip("torch")
    labels = IDS.copy()
    labels[0, 3] = -100
    out = model(IDS, labels=labels)
    logits = torch.from_numpy(out.logits)
    expected = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).double(),
        torch.from_numpy(labels[:, 1:]).reshape(-1),
        ignore_index=-100,
    )
    assert out.loss.shape == () and out.loss.dtype == np.float32
    assert abs(float(out.loss) - float(expected)) <= 1e-6 * max(1.0, abs(float(expected))), (out.loss, expected)
    t_out = model(torch.from_numpy(IDS), labels=torch.from_numpy(labels))
    assert isinstance(t_out.loss, torch.Tensor) and float(t_out.loss) == float(out.loss)
    assert np.isnan(model(IDS, labels=np.full_like(IDS, -100)).loss), "no counted token: NaN, as torch gives"


def test_labels_after_padding_must_be_ignored(model):
    mask = np.ones_like(IDS)
    mask[1, :3] = 0
    with pytest.raises(InvalidInputError, match="-100"):
        model(IDS, attention_mask=mask, labels=IDS)
    labels = np.where(mask == 1, IDS, -100)
    labels[1, 3] = -100  # follows the last padded position
    loss = model(IDS, attention_mask=mask, labels=labels).loss
    assert np.isfinite(loss)
    with pytest.raises(InvalidInputError, match="labels"):
        model(IDS, labels=IDS[:, :4])


# ---- outputs -------------------------------------------------------------------------------------------------


def test_return_dict_false_gives_the_filled_fields_as_a_tuple(model):
    out = model(IDS, labels=IDS, return_dict=False)
    assert isinstance(out, tuple) and len(out) == 3, [type(x) for x in out]
    loss, logits, cache = out
    assert loss.shape == () and logits.shape == (2, 9, 64) and isinstance(cache, ha.DynamicCache)
    assert len(model(IDS, use_cache=False, return_dict=False)) == 1


def test_hidden_states_are_transformers_and_match_the_reference(ckpt, model):
    _, config, tensors = ckpt
    out = model(IDS, output_hidden_states=True)
    assert len(out.hidden_states) == 3 + 1 and all(h.shape == (2, 9, 32) for h in out.hidden_states)
    for row in range(2):
        ref = []
        reference_forward(config, tensors, IDS[row], hidden=ref)
        for layer, (got, want) in enumerate(zip(out.hidden_states, ref)):
            _close(got[row], want, f"row {row} hidden state {layer}")
    mask = np.ones_like(IDS)
    mask[0, :4] = 0
    padded = model(IDS, attention_mask=mask, output_hidden_states=True).hidden_states
    alone = model(IDS[:1, 4:], output_hidden_states=True).hidden_states
    for got, want in zip(padded, alone):
        assert not got[0, :4].any(), "padded positions hold zeros"
        assert np.array_equal(got[0, 4:], want[0]), "a padded row's hidden states are its own, bit for bit"


def test_logits_to_keep(model):
    full = model(IDS).logits
    assert np.array_equal(model(IDS, logits_to_keep=1).logits, full[:, -1:])
    assert np.array_equal(model(IDS, num_logits_to_keep=3).logits, full[:, -3:])
    assert np.array_equal(model(IDS, logits_to_keep=0).logits, full)
    assert np.array_equal(model(IDS, logits_to_keep=np.array([0, 4])).logits, full[:, [0, 4]])
    with pytest.raises(InvalidInputError, match="logits_to_keep"):
        model(IDS, logits_to_keep=-1)


def test_positions_are_accepted_where_they_agree_and_refused_where_not(model):
    full = model(IDS).logits
    positions = np.broadcast_to(np.arange(9), (2, 9))
    assert np.array_equal(model(IDS, position_ids=positions, cache_position=np.arange(9)).logits, full)
    with pytest.raises(InvalidInputError, match="position_ids"):
        model(IDS, position_ids=positions + 1)
    with pytest.raises(InvalidInputError, match="cache_position"):
        model(IDS, cache_position=np.arange(1, 10))
    mask = np.ones_like(IDS)
    mask[1, :2] = 0
    generate_style = np.clip(mask.cumsum(-1) - 1, 0, None)  # what generate() passes for left padding
    model(IDS, attention_mask=mask, position_ids=generate_style)


def test_arguments_that_are_not_supported_are_refused_by_name(model):
    for kwargs, needle in (
        (dict(output_attentions=True), "output_attentions"),
        (dict(inputs_embeds=np.zeros((1, 2, 32), np.float32)), "inputs_embeds"),
        (dict(head_mask=None, foo=1), "foo"),
    ):
        with pytest.raises(InvalidInputError, match=needle):
            model(IDS, **kwargs)


def test_an_unknown_keyword_is_refused_listing_every_argument_forward_takes(model):
    import inspect

    named = [p for p in inspect.signature(type(model).forward).parameters if p not in ("self", "kwargs")]
    with pytest.raises(InvalidInputError, match="foo") as e:
        model(IDS, foo=1)
    listed = str(e.value).split("it takes ", 1)[1]
    assert [name.strip(" )") for name in listed.split(",")] == named, f"expected the list {named}, got: {e.value}"


# ---- caches ----------------------------------------------------------------------------------------------------


def test_the_manual_decoding_loop_gives_generates_tokens(model):
    """The loop of Transformers' docs: feed out.past_key_values back with the next token."""
    prompt = IDS[:1]
    expected = model.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None)
    out = model(prompt, use_cache=True)
    assert isinstance(out.past_key_values, ha.DynamicCache) and out.past_key_values.get_seq_length() == 9
    tokens = [prompt]
    for _ in range(12):
        nxt = out.logits[:, -1].argmax(-1)[:, None]
        tokens.append(nxt)
        out = model(nxt, past_key_values=out.past_key_values, use_cache=True)
    assert np.array_equal(np.concatenate(tokens, axis=1), expected)


def test_a_dynamic_cache_grows_and_gives_one_forwards_bits(model):
    rng = np.random.default_rng(3)
    seq = rng.integers(0, 64, size=(2, 150))
    whole = model(seq).logits
    cache = ha.DynamicCache()
    assert cache.get_seq_length() == 0 and cache.get_max_cache_shape() == -1
    parts, at = [], 0
    for step in (5, 60, 1, 70, 14):  # past the first room (64) and its doubling
        parts.append(model(seq[:, at : at + step], past_key_values=cache).logits)
        at += step
    assert cache.get_seq_length() == 150 and cache._ctx.capacity >= 150
    assert np.array_equal(np.concatenate(parts, axis=1), whole)


def test_a_static_cache_holds_its_size_only(model):
    cache = ha.StaticCache(config=model.config, max_batch_size=1, max_cache_len=10)
    model(IDS[:1], past_key_values=cache)
    assert cache.get_max_cache_shape() == 10
    with pytest.raises(CacheCapacityError):
        model(IDS[:1, :2], past_key_values=cache)
    assert cache.get_seq_length() == 9, "a refused append leaves the cache as it was"


def test_a_cache_belongs_to_one_model(ckpt, model, tmp_path):
    write_random_checkpoint(tmp_path, num_layers=3, seed=9)
    other = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    cache = model(IDS).past_key_values
    with pytest.raises(InvalidInputError, match="another model"):
        other(IDS[:, :1], past_key_values=cache)


def test_crop_and_reset(model):
    seq = IDS[:1]
    cache = model(seq).past_key_values
    cache.crop(5)
    assert cache.get_seq_length() == 5
    assert np.array_equal(model(seq[:, 5:], past_key_values=cache).logits, model(seq).logits[:, 5:])
    cache.reset()
    assert cache.get_seq_length() == 0


def test_legacy_tuples_round_trip_and_match_the_reference_keys(ckpt, model):
    _, config, tensors = ckpt
    cache = model(IDS).past_key_values
    legacy = cache.to_legacy_cache()
    assert len(legacy) == 3 and all(k.shape == (2, 2, 9, 8) and v.shape == k.shape for k, v in legacy)
    ref = ReferenceCache(3)
    reference_forward(config, tensors, IDS[1], cache=ref)
    for layer in range(3):
        _close(legacy[layer][0][1], ref.keys[layer], f"layer {layer} keys")
        _close(legacy[layer][1][1], ref.values[layer], f"layer {layer} values")
    nxt = np.array([[3], [5]])
    again = ha.DynamicCache.from_legacy_cache(legacy)
    assert again.get_seq_length() == 9
    assert np.array_equal(model(nxt, past_key_values=again).logits, model(nxt, past_key_values=cache).logits)
    assert np.array_equal(
        model(nxt, past_key_values=legacy).logits, model(np.concatenate([IDS, nxt], axis=1)).logits[:, -1:]
    )
    torch = pytest.importorskip("torch")
    t_legacy = model(torch.from_numpy(IDS)).past_key_values.to_legacy_cache()
    assert isinstance(t_legacy[0][0], torch.Tensor)


# ---- generate() and caches ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def eos_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("eos_model")
    write_random_checkpoint(path, num_layers=2, max_position_embeddings=512)
    return ha.AutoModelForCausalLM.from_pretrained(str(path))


@pytest.mark.parametrize("assisted", (False, True), ids=("plain", "assisted"))
def test_generate_returns_a_cache_that_continues_bit_for_bit(eos_model, assisted):
    model = eos_model
    ids = np.array([[1, 2, 3, 4], [0, 7, 8, 9]])
    mask = np.array([[1, 1, 1, 1], [0, 1, 1, 1]])
    draft = {"assistant_model": model} if assisted else {}
    plain = model.generate(ids, attention_mask=mask, max_new_tokens=12, eos_token_id=None, pad_token_id=63)
    # an end for one row only, decided before the last column
    end = int(plain[0, 6])
    out = model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=12,
        eos_token_id=end,
        pad_token_id=63,
        return_dict_in_generate=True,
        **draft,
    )
    cache, seq = out.past_key_values, out.sequences
    assert isinstance(cache, ha.DynamicCache) and cache.get_seq_length() == seq.shape[1] - 1
    # the cache holds what one forward of the sequences (but the last column) holds: compare the next logits
    full_mask = np.concatenate([mask, cache._mask[:, 4:]], axis=1)
    last = seq[:, -1:]
    one_shot = model(seq[:, :-1], attention_mask=full_mask)
    fresh_cache = one_shot.past_key_values
    want = model(
        last, attention_mask=np.concatenate([full_mask, np.ones((2, 1), int)], axis=1), past_key_values=fresh_cache
    ).logits
    got = model(
        last, attention_mask=np.concatenate([full_mask, np.ones((2, 1), int)], axis=1), past_key_values=cache
    ).logits
    assert np.array_equal(got, want)


def test_generate_takes_past_key_values_and_fills_it(model):
    prompt = IDS[:1, :6]
    cache = ha.DynamicCache()
    model(prompt[:, :4], past_key_values=cache)
    expected = model.generate(prompt, max_new_tokens=5, eos_token_id=None)
    got = model.generate(prompt, past_key_values=cache, max_new_tokens=5, eos_token_id=None)
    assert np.array_equal(got, expected)
    assert cache.get_seq_length() == got.shape[1] - 1, "the cache passed is filled with the generation"
    again = model.generate(got, past_key_values=cache, max_new_tokens=3, eos_token_id=None)
    assert np.array_equal(again, model.generate(got, max_new_tokens=3, eos_token_id=None))
    wrong = model(IDS[1:, :4]).past_key_values
    with pytest.raises(InvalidInputError, match="does not hold"):
        model.generate(prompt, past_key_values=wrong, max_new_tokens=2)
    static = ha.StaticCache(max_cache_len=64)
    out = model.generate(prompt, past_key_values=static, max_new_tokens=4, return_dict_in_generate=True)
    assert out.past_key_values is static and static.get_seq_length() == out.sequences.shape[1] - 1
    legacy = model.generate(prompt, max_new_tokens=4, return_dict_in_generate=True, return_legacy_cache=True)
    assert isinstance(legacy.past_key_values, tuple) and legacy.past_key_values[0][0].shape[2] == 6 + 4 - 1


def test_cache_is_the_argument_and_field_past_key_values_its_older_name():
    """Transformers 5.24 renamed past_key_values to cache, keeping the older name as an alias: both are taken as
    the argument (not both at once), the output's field is `cache`, and the older name reads it."""
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
    ids = np.array([[1, 300, 301, 302]])
    first = model(ids[:, :3], cache=ha.DynamicCache())
    assert "cache" in first.keys() and "past_key_values" not in first.keys()
    assert first.past_key_values is first.cache is first["past_key_values"] and "past_key_values" in first
    by_new = model(ids[:, 3:], cache=first.cache).logits
    again = model(ids[:, :3])
    by_old = model(ids[:, 3:], past_key_values=again.past_key_values).logits
    assert np.array_equal(by_new, by_old)
    with pytest.raises(ha.InvalidInputError, match="cache and past_key_values are one argument"):
        model(ids, cache=ha.DynamicCache(), past_key_values=ha.DynamicCache())
    out = model.generate(ids, max_new_tokens=2, cache=ha.DynamicCache(), return_dict_in_generate=True)
    assert out.cache is out.past_key_values and out.cache.get_seq_length() == 5
    with pytest.raises(ha.InvalidInputError, match="cache and past_key_values are one argument"):
        model.generate(ids, max_new_tokens=2, cache=ha.DynamicCache(), past_key_values=ha.DynamicCache())
