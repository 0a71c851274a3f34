"""Phi-3's longrope as Transformers computes it, and the exactness promises across its switch.

Transformers (modeling_rope_utils.py: dynamic_rope_update's longrope_frequency_update; _compute_longrope_parameters)
picks the factors once per forward: the long ones for every token of the forward iff seq_len = max(position_ids) + 1
> original_max_position_embeddings, else the short ones; the attention factor scales cos and sin either way. Keys in
the cache keep the rotation of the forward that computed them. Its Phi-3 generate()
(Phi3ForCausalLM.prepare_inputs_for_generation) drops the cache when the sequence first passes
original_max_position_embeddings and runs it again whole, so each new token's logits are one forward of the whole
sequence before it. The checkpoint here switches at 16 (max_position_embeddings 64); the float64 reference is
tests/fixtures/family_reference.py (``pieces`` for forwards over a cache, ``greedy_chain`` for generate()).
"""

import os

import family_reference as R
import numpy as np
import pytest
from family_checkpoints import longrope_scaling, write_family_checkpoint

import habana_assist as ha

VOCAB = 96
REL_TOL = 1e-4
MIN_MARGIN = 2e-3  # relative to the row's max |logit|: float32 error is ~1e-6 of it
SWITCH = 16
PHI3 = dict(max_position_embeddings=64, original_max_position_embeddings=SWITCH)
SEQ = 24


def tokens(seed, n):
    return np.random.default_rng(seed).integers(0, VOCAB, size=n).astype(np.int64)


TOKENS = tokens(1234, SEQ)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> (model, config, float64 tensors): a longrope target (3 layers, a window of 6 as the family tests'), the
    target perturbed, a one-layer model (all switching at 16), and a short-only twin of the target for the checks
    that the long factors matter."""
    root = tmp_path_factory.mktemp("longrope")
    out = {}
    target = dict(PHI3, num_layers=3, sliding_window=6, rope_scaling=longrope_scaling(8, seed=3))
    for name, args in (
        ("target", dict(target, seed=21)),
        ("perturbed", dict(target, seed=21, perturb=(7, 0.1))),
        ("small", dict(target, seed=22, num_layers=1)),
    ):
        config, tensors = write_family_checkpoint(str(root / name), "phi3", vocab_size=VOCAB, **args)
        out[name] = (ha.AutoModelForCausalLM.from_pretrained(str(root / name)), config, tensors)
    return out


def relative_error(got, ref):
    return float(np.abs(np.asarray(got, dtype=np.float64) - ref).max() / np.abs(ref).max())


def assert_close(got, ref, what, tol=REL_TOL):
    got = np.asarray(got)
    assert got.shape == ref.shape, f"{what}: expected shape {ref.shape}, got {got.shape}"
    rel = relative_error(got, ref)
    assert rel <= tol, f"{what}: max |logit - reference| / max |reference| = {rel:.3g}, expected <= {tol}"


def assert_bitwise(got, expected, what):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: expected shape {expected.shape}, got {got.shape}"
    if not np.array_equal(got, expected):
        diff = np.abs(got.astype(np.float64) - expected)
        raise AssertionError(
            f"{what}: expected bitwise equal values; {int((diff > 0).sum())} of {diff.size} differ, "
            f"max |diff| = {diff.max():.3g}"
        )


def assert_tokens(got, expected, what):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and np.array_equal(got, expected), (
        f"{what}:\nexpected {expected.tolist()}\ngot      {got.tolist()}"
    )


def short_only(config):
    """The config with the long factors replaced by the short ones (the attention factor kept)."""
    scaling = config["rope_scaling"]
    return {**config, "rope_scaling": {**scaling, "long_factor": scaling["short_factor"]}}


def generate(model, ids, **kwargs):
    return model.generate(ids, attention_mask=np.ones_like(ids), **kwargs)


def stacked(res):
    return np.stack([np.asarray(x) for x in res.logits])


# ------------------------------------------------------------------------------------------------- forwards


@pytest.mark.parametrize("n", [9, 16, 17, 48])
def test_a_forward_takes_the_long_factors_for_all_its_tokens_iff_it_passes_original_max(models, n):
    """Prompts shorter than 16, of exactly 16 (short: seq_len > 16 is the condition), one past it and far past it match
    the reference; past it every row but position 0 (rotated by angle 0 under either table) moves off the short-only
    logits, the model's first rows off its own 16-token forward's."""
    model, config, tensors = models["target"]
    ids = tokens(4321, 48)[:n]
    ref = R.reference_logits(config, tensors, ids)
    got = model(ids[None]).logits[0]
    assert_close(got, ref, f"a forward of {n} tokens")
    short = R.reference_logits(short_only(config), tensors, ids)
    if n <= SWITCH:
        assert np.array_equal(ref, short), f"a forward of {n} <= {SWITCH} tokens must use the short factors only"
        return
    moved = np.abs(ref - short).max(axis=1)[1:] / np.abs(ref).max()
    assert moved.min() > 30 * REL_TOL, f"a forward of {n} tokens: rows 1.. should all be long; moved by {moved}"
    first = model(ids[None, :SWITCH]).logits[0]
    apart = np.abs(got[1:SWITCH].astype(np.float64) - first[1:]).max(axis=1) / np.abs(first).max()
    assert apart.min() > 30 * REL_TOL, (
        f"rows 1-15 of a forward of {n} tokens must differ from a forward of 16 "
        f"(the long factors cover the whole forward); moved by {apart}"
    )


@pytest.mark.parametrize("pieces", [[14] + [1] * 10, [12, 8, 4], [16, 1, 7], [3, 5, 9, 7]])
def test_over_a_cache_each_forward_rotates_its_own_tokens_and_keeps_the_cached_keys(models, pieces):
    """Forwards over one cache: each rotates its tokens by its own seq_len; the keys cached before it keep theirs (no
    rotation again). Logits match the reference computed in those pieces, which differ from one forward of all."""
    model, config, tensors = models["target"]
    cache = model.create_cache(batch_size=1, max_cache_len=32)
    got, start = [], 0
    for size in pieces:
        got.append(model(TOKENS[None, start : start + size], past_key_values=cache).logits[0])
        start += size
    ref = R.reference_logits(config, tensors, TOKENS, pieces=pieces)
    assert_close(np.concatenate(got), ref, f"forwards of {pieces} over a cache")
    whole = R.reference_logits(config, tensors, TOKENS)
    assert relative_error(ref[SWITCH:], whole[SWITCH:]) > 30 * REL_TOL, (
        f"test setup: the keys cached short by {pieces} should move the logits past {SWITCH}"
    )


# ----------------------------------------------------------------------------------------------- generation


def safe_prompt(config, tensors, length, steps, seed0=100):
    """(prompt, reference greedy chain) with every argmax margin > MIN_MARGIN * max |logit|."""
    for seed in range(seed0, seed0 + 80):
        prompt = tokens(seed, length)
        chain, margins, scales = R.greedy_chain(config, tensors, prompt, steps)
        if np.all(margins > MIN_MARGIN * scales):
            return prompt, chain
    raise AssertionError(f"test setup: no prompt of {length} with a greedy chain of {steps} safe argmaxes")


@pytest.mark.parametrize("prompt_len", [10, 15, 16, 17, 30])
def test_greedy_generation_runs_the_sequence_again_where_it_passes_original_max(models, prompt_len):
    """As Transformers' Phi-3 generate(): each new token's logits are one forward of the sequence before it (the cache
    dropped and the sequence run again the first time it passes 16): the reference's argmax chain, each step's logits
    against the reference, bitwise use_cache=False; a prompt below 16 would get other logits past it by keeping its
    cache of short keys (the logits of decoding token by token over the cache)."""
    model, config, tensors = models["target"]
    prompt, chain = safe_prompt(config, tensors, prompt_len, 10)
    res = generate(model, prompt[None], max_new_tokens=10, output_logits=True, return_dict_in_generate=True)
    assert_tokens(res.sequences, np.concatenate([prompt, chain])[None], f"prompt of {prompt_len}: vs the reference")
    seq = res.sequences[0]
    logits = stacked(res)[:, 0]
    for step in range(10):
        n = prompt_len + step
        assert_close(
            logits[step],
            R.reference_logits(config, tensors, seq[:n])[-1],
            f"prompt of {prompt_len}, step {step} (a forward of {n} tokens)",
        )
    again = generate(
        model, prompt[None], max_new_tokens=10, use_cache=False, output_logits=True, return_dict_in_generate=True
    )
    assert_tokens(again.sequences, res.sequences, f"prompt of {prompt_len}: use_cache=False")
    assert_bitwise(stacked(again), stacked(res), f"prompt of {prompt_len}: logits with the cache vs use_cache=False")
    if prompt_len <= SWITCH:
        cache = model.create_cache(batch_size=1, max_cache_len=64)
        kept = model(seq[None, :prompt_len], past_key_values=cache).logits[0, -1:]
        for t in range(prompt_len, prompt_len + 9):
            kept = np.concatenate([kept, model(seq[None, t : t + 1], past_key_values=cache).logits[0]])
        first = SWITCH + 1 - prompt_len  # step s comes from the forward ending at position prompt_len - 1 + s
        assert_bitwise(logits[:first], kept[:first], f"prompt of {prompt_len}: steps below the switch")
        assert relative_error(kept[first], logits[first].astype(np.float64)) > 30 * REL_TOL, (
            f"prompt of {prompt_len}: the step past {SWITCH} should differ from decoding over the cached short keys"
        )


def test_assisted_generation_is_bitwise_plain_across_the_switch(models, one_core_thread):
    """Greedy assisted generation equals plain generation, tokens and output logits bitwise, with prompts ending short
    of 16, at it and past it, drafts that pass their own switch (16) too, and K that lands rounds on both sides: no
    verification scores positions on both sides of the switch, and the round that passes it runs the sequence again
    as plain generation's step does. Some drafts are accepted, some rejected."""
    target = models["target"][0]
    accepted = proposed = 0
    for prompt_len in (3, 11, 14, 15, 16, 17):
        prompt = tokens(40 + prompt_len, prompt_len)[None]
        plain = generate(target, prompt, max_new_tokens=12, output_logits=True, return_dict_in_generate=True)
        for name in ("perturbed", "small", "target"):
            for k in (1, 3, 5, 8):
                res = generate(
                    target,
                    prompt,
                    max_new_tokens=12,
                    assistant_model=models[name][0],
                    num_assistant_tokens=k,
                    output_logits=True,
                    return_dict_in_generate=True,
                )
                what = f"prompt of {prompt_len}, {name} draft, K={k}"
                assert_tokens(res.sequences, plain.sequences, what)
                assert_bitwise(stacked(res), stacked(plain), f"{what}: output logits")
                if name == "perturbed":
                    accepted += res.num_accepted_tokens
                    proposed += res.num_draft_tokens
        for kwargs in (
            dict(prompt_lookup_num_tokens=4),
            dict(assistant_early_exit=1),
            dict(
                assistant_model=models["perturbed"][0],
                num_assistant_tokens=6,
                num_assistant_tokens_schedule="heuristic",
            ),
        ):
            res = generate(
                target, prompt, max_new_tokens=12, output_logits=True, return_dict_in_generate=True, **kwargs
            )
            assert_tokens(res.sequences, plain.sequences, f"prompt of {prompt_len}, {kwargs}")
            assert_bitwise(stacked(res), stacked(plain), f"prompt of {prompt_len}, {kwargs}: output logits")
    assert 0 < accepted < proposed, f"expected some drafts accepted and some rejected, got {accepted} of {proposed}"


def test_assisted_generation_through_another_tokenizer_is_bitwise_plain_across_the_switch(tmp_path, one_core_thread):
    """The different-tokenizer path (generation/universal.py): target and draft longrope models switching at 16, the
    draft's vocabulary permuted (its proposals reach the target through text, and are often right). Prompts on both
    sides of 16 and several K: tokens and output logits bitwise plain."""
    from test_model_families import ALPHABET, _write_char_tokenizer

    built = {}
    for role, extra in (("target", {}), ("draft", {"perturb": (9, 0.1)})):
        path = str(tmp_path / role)
        os.makedirs(path)
        perm = np.random.default_rng(4).permutation(len(ALPHABET) + 32) if role == "draft" else None
        vocab = _write_char_tokenizer(path, ALPHABET, 32, seed=1, permutation=perm)
        write_family_checkpoint(
            path,
            "phi3",
            seed=21,
            vocab_size=vocab,
            permute_vocab=perm,
            num_layers=2,
            rope_scaling=longrope_scaling(8, seed=3),
            original_max_position_embeddings=SWITCH,
            max_position_embeddings=128,
            **extra,
        )
        built[role] = (ha.AutoModelForCausalLM.from_pretrained(path), ha.AutoTokenizer.from_pretrained(path))
    (target, tok), (draft, draft_tok) = built["target"], built["draft"]
    accepted = 0
    for text in ("a cat.", "the cat sat on the mat", "the cat sat on the mat, a dog sat on the log."):
        ids = np.array([tok.encode(text)], dtype=np.int64)
        plain = generate(target, ids, max_new_tokens=20, output_logits=True, return_dict_in_generate=True)
        for k in (2, 5, 8):
            res = generate(
                target,
                ids,
                max_new_tokens=20,
                assistant_model=draft,
                tokenizer=tok,
                assistant_tokenizer=draft_tok,
                num_assistant_tokens=k,
                output_logits=True,
                return_dict_in_generate=True,
            )
            what = f"{ids.shape[1]} prompt tokens, K={k}"
            assert_tokens(res.sequences, plain.sequences, what)
            assert_bitwise(stacked(res), stacked(plain), f"{what}: output logits")
            accepted += res.num_accepted_tokens
    assert accepted > 0, "test setup: the permuted draft should be accepted sometimes"


def test_coupled_sampling_is_plain_sampling_across_the_switch(models, one_core_thread):
    target = models["target"][0]
    for prompt_len, seed in ((5, 0), (14, 1), (16, 2)):
        prompt = tokens(60 + prompt_len, prompt_len)[None]
        sampling = dict(max_new_tokens=14, do_sample=True, seed=seed, temperature=0.8, top_k=0)
        plain = generate(target, prompt, **sampling)
        for k in (2, 5):
            res = generate(
                target,
                prompt,
                assistant_model=models["perturbed"][0],
                assisted_sampling="coupled",
                num_assistant_tokens=k,
                **sampling,
            )
            assert_tokens(res, plain, f"prompt of {prompt_len}, seed {seed}, K={k}: coupled sampling vs plain")


def test_batch_rows_switch_by_their_own_length(models, one_core_thread):
    """Each row's positions come from the attention mask, and each row switches by its own length: a left-padded
    batch of prompts on both sides of 16 gives each row its logits and its plain and assisted generation alone, the
    rows passing 16 at different steps and rounds. (Transformers takes seq_len from the largest position of the whole
    batch, so its shorter rows switch with the longest: docs/models.md.)"""
    target = models["target"][0]
    lengths = (20, 9, 16, 14)
    width = max(lengths)
    prompts = [tokens(80 + i, n) for i, n in enumerate(lengths)]
    ids, mask = np.zeros((len(lengths), width), dtype=np.int64), np.zeros((len(lengths), width), dtype=np.int64)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :], mask[i, width - len(p) :] = p, 1
    out = target(ids, attention_mask=mask).logits
    for i, p in enumerate(prompts):
        assert_bitwise(out[i, width - len(p) :], target(p[None]).logits[0], f"row {i} ({len(p)} tokens): forward")
    plain = target.generate(ids, attention_mask=mask, max_new_tokens=12)
    for i, p in enumerate(prompts):
        alone = generate(target, p[None], max_new_tokens=12)[0]
        assert_tokens(plain[i, width - len(p) :], alone, f"row {i} ({len(p)} tokens): batch vs alone")
    for k in (3, 6):
        res = target.generate(
            ids, attention_mask=mask, max_new_tokens=12, assistant_model=models["perturbed"][0], num_assistant_tokens=k
        )
        assert_tokens(res, plain, f"batch, K={k}: assisted vs plain")


def test_blas_prefill_runs_the_sequence_again_through_the_same_blocks(tmp_path, one_core_thread):
    """blas_prefill sends a sequence that starts an empty cache through OpenBLAS in blocks of 128: with a switch at
    130, the step that passes it runs 131 tokens again from an empty cache, one block and 3 kernel rows, in plain and
    assisted generation alike (the round's candidates after it appended apart): assisted is plain bitwise, and the
    rerun's logits stay within the reference's tolerance."""
    path = str(tmp_path / "t")
    config, tensors = write_family_checkpoint(
        path,
        "phi3",
        vocab_size=VOCAB,
        seed=5,
        num_layers=2,
        max_position_embeddings=512,
        original_max_position_embeddings=130,
        rope_scaling=longrope_scaling(8, seed=4),
    )
    write_family_checkpoint(
        str(tmp_path / "d"),
        "phi3",
        vocab_size=VOCAB,
        seed=5,
        num_layers=2,
        perturb=(3, 0.1),
        max_position_embeddings=512,
        original_max_position_embeddings=130,
        rope_scaling=longrope_scaling(8, seed=4),
    )
    target = ha.AutoModelForCausalLM.from_pretrained(path, blas_prefill=True)
    draft = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path / "d"), blas_prefill=True)
    prompt = tokens(7, 120)[None]
    plain = generate(target, prompt, max_new_tokens=20, output_logits=True, return_dict_in_generate=True)
    seq = plain.sequences[0]
    step = 131 - 120  # the step whose forward ends at position 130 (119 + step): 131 tokens run again
    assert_close(stacked(plain)[step, 0], R.reference_logits(config, tensors, seq[:131])[-1], "the rerun of 131 tokens")
    for k in (3, 7):
        res = generate(
            target,
            prompt,
            max_new_tokens=20,
            assistant_model=draft,
            num_assistant_tokens=k,
            output_logits=True,
            return_dict_in_generate=True,
        )
        assert_tokens(res.sequences, plain.sequences, f"blas_prefill, K={k}: assisted vs plain")
        assert_bitwise(stacked(res), stacked(plain), f"blas_prefill, K={k}: output logits")


def test_a_wrapped_longrope_model_is_driven_as_transformers_phi3_generate(models, one_core_thread):
    """ha.wrap(model) of a model whose config says longrope (here the native model behind Transformers' calling
    convention, its forward over a cache choosing the factors per forward as Transformers' does): generate() reruns
    the sequence where it passes original_max_position_embeddings and caps the rounds there, so plain and assisted
    generation through the wrapper are the native model's, bitwise. Read without longrope in its config, the wrapper's
    loop keeps the cache of short keys and gets other logits past the switch."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from habana_assist.integrations import external

    class NativeAsTorch(torch.nn.Module):
        def __init__(self, native, config):
            super().__init__()
            self.native, self.config = native, SimpleNamespace(**config)

        def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=True):
            cache = past_key_values if past_key_values is not None else self.native.create_cache(1, 64)
            logits = self.native(input_ids.numpy(), past_key_values=cache).logits
            return SimpleNamespace(logits=torch.from_numpy(logits), past_key_values=cache)

    target, config, _ = models["target"]
    draft = models["perturbed"][0]
    wrapped = ha.wrap(NativeAsTorch(target, config))
    assert external.rope_switch(wrapped.config) == SWITCH, "the wrapper should read the switch from the config"
    blind = ha.wrap(NativeAsTorch(target, {**config, "rope_scaling": None}))
    assert external.rope_switch(blind.config) == 0
    for prompt_len in (10, 16):
        prompt = tokens(90 + prompt_len, prompt_len)[None]
        native = generate(target, prompt, max_new_tokens=12, output_logits=True, return_dict_in_generate=True)
        for what, kwargs in (("plain", {}), ("a native draft", dict(assistant_model=draft, num_assistant_tokens=5))):
            res = generate(
                wrapped, prompt, max_new_tokens=12, output_logits=True, return_dict_in_generate=True, **kwargs
            )
            assert_tokens(res.sequences, native.sequences, f"wrapped, prompt of {prompt_len}, {what}")
            assert_bitwise(stacked(res), stacked(native), f"wrapped, prompt of {prompt_len}, {what}: output logits")
        res = generate(blind, prompt, max_new_tokens=12, output_logits=True, return_dict_in_generate=True)
        first = SWITCH + 1 - prompt_len
        assert relative_error(stacked(res)[first, 0], stacked(native)[first, 0].astype(np.float64)) > 30 * REL_TOL, (
            f"prompt of {prompt_len}: without the switch the wrapper's step past it should keep the short keys"
        )
