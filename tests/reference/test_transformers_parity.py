"""Every family against Transformers itself (the reference environment, tests/fixtures/hf_reference.py), on tiny
random models that Transformers makes (AutoConfig.for_model, from_config) and saves (save_pretrained in float32
and bfloat16, one file and sharded), loaded here as a user would:

- logits of each of the four saves within LOGIT_TOL of Transformers' on the same file;
- greedy generate() token for token Transformers' (float32 and bfloat16 files);
- assisted generation (a draft model, prompt lookup, early exit) token for token Transformers' assisted output;
- sampling: the processed scores of every step (Transformers' output_scores along its own sampled sequence,
  ours for the same prefixes) alike: the same tokens filtered out, the rest within LOGIT_TOL, so the two
  distributions are the same (the tokens drawn differ: the random generators do);
- the labels' loss and every hidden state equal within tolerance;
- our save_pretrained loaded by Transformers to our logits (its save loaded by us is every check above).

Where we decided to differ (docs/generation.md#where-we-differ-from-transformers, docs/models.md), the tests named
test_difference_* show that the difference is the one the docs describe. The parity table in
docs/transformers-parity.md lists these checks per family.

Tolerance. Both sides compute in float32 (Transformers loads every file with dtype=float32: a bfloat16 file's
weights widened exactly, so both compute on the same numbers). What differs is only the order of float32 sums
(matrix products over 64-128 terms, softmax, norms): each costs a relative error of a few ulp (1e-7) of the
values summed, and two layers and a head of these stay below 1e-5 of the largest logit (measured: about 1e-6).
LOGIT_TOL = 1e-5 of the row's largest |logit| keeps a 10x margin and still fails any real difference of
arithmetic (a wrong norm epsilon, rope factor or softcap moves logits by 1e-3 or more of their scale).
"""

import os

import numpy as np
import pytest

import habana_assist as ha

VOCAB = 512
LOGIT_TOL = 1e-5  # of the largest |value| compared (module docstring)
NEW = 16  # new tokens per generation: prompt 10 + 16 passes longrope's original_max_position_embeddings (16)
STEPS = 6  # sampled steps whose processed scores are compared
PROMPT = [int(t) for t in np.random.default_rng(7).integers(3, VOCAB, 10)]
LONG_PROMPT = [int(t) for t in np.random.default_rng(8).integers(3, VOCAB, 20)]  # forward: past longrope's 16
LOOKUP_PROMPT = [11, 12, 13, 14, 15, 11, 12, 13, 14, 15, 11, 12]  # repeats: prompt lookup finds candidates
COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
    initializer_range=0.1,
)
# Phi-3 longrope: rotary dim 16 -> 8 factors; the long ones stretch low frequencies up to ~8x.
_LONGROPE = {
    "rope_type": "longrope",
    "rope_theta": 10000.0,
    "short_factor": [1.0, 1.02, 1.05, 1.1, 1.15, 1.2, 1.3, 1.4],
    "long_factor": [1.0, 1.2, 1.6, 2.2, 3.0, 4.2, 6.0, 8.0],
}
# name -> (model_type, config keyword arguments): each family with what sets it apart switched on.
FAMILIES = {
    "llama": ("llama", dict(COMMON)),
    "mistral": ("mistral", dict(COMMON, sliding_window=8)),
    "qwen2": ("qwen2", dict(COMMON, use_sliding_window=True, sliding_window=8, max_window_layers=1)),
    "qwen3": ("qwen3", dict(COMMON, head_dim=32)),
    "phi3": ("phi3", dict(COMMON)),
    "phi3_longrope": (
        "phi3",
        dict(COMMON, max_position_embeddings=64, original_max_position_embeddings=16, rope_parameters=_LONGROPE),
    ),
    # Gemma untied: with the tied head and the embedding scaled by sqrt(hidden_size), a random Gemma repeats its
    # last token forever, and a draft could not be wrong (the tied head is checked by SmolLM3 and GPT-2).
    "gemma2": (
        "gemma2",
        dict(
            COMMON,
            head_dim=16,
            sliding_window=8,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=5.0,
            tie_word_embeddings=False,
        ),
    ),
    "gemma3": (
        "gemma3_text",
        dict(
            COMMON,
            head_dim=16,
            sliding_window=8,
            tie_word_embeddings=False,
            layer_types=["sliding_attention", "full_attention"],
        ),
    ),
    "smollm3": ("smollm3", dict(COMMON, no_rope_layer_interval=2)),
    "gpt2": (
        "gpt2",
        dict(
            vocab_size=VOCAB,
            n_embd=64,
            n_layer=2,
            n_head=4,
            n_positions=128,
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
            initializer_range=0.1,
        ),
    ),
}
SAVES = {
    "float32": dict(dtype="float32"),
    "bfloat16": dict(dtype="bfloat16"),
    "float32_sharded": dict(dtype="float32", max_shard_size="150KB"),
    "bfloat16_sharded": dict(dtype="bfloat16", max_shard_size="100KB"),
}
ASSISTED = {
    "draft_model": dict(),
    "prompt_lookup": dict(prompt_lookup_num_tokens=3),
    "early_exit": dict(assistant_early_exit=1),
}
SAMPLING = {
    "temperature_top_k_top_p": dict(temperature=0.7, top_k=20, top_p=0.9),
    "repetition_min_p_no_repeat_ngram": dict(
        temperature=1.3, repetition_penalty=1.4, min_p=0.05, no_repeat_ngram_size=2
    ),
}


def _prompt_of(check):
    return LOOKUP_PROMPT if check == "prompt_lookup" else PROMPT


def _jobs(root):
    """[(key, job)]: every family's models made and saved, then everything Transformers computes on them."""
    keyed = []
    for name, (model_type, config) in FAMILIES.items():
        d = {save: os.path.join(root, name, save) for save in SAVES}
        d["draft"] = os.path.join(root, name, "draft")
        keyed.append(
            (
                (name, "make"),
                dict(
                    kind="make_model",
                    model_type=model_type,
                    config=config,
                    seed=0,
                    saves=[dict(dir=d[s], **SAVES[s]) for s in SAVES],
                ),
            )
        )
        keyed.append(
            (
                (name, "make_draft"),
                dict(
                    kind="make_model",
                    saves=[dict(dir=d["draft"], dtype="float32")],
                    perturb_from=dict(dir=d["float32"], noise=0.15, seed=1),
                ),
            )
        )
        for save in SAVES:
            keyed.append(((name, "logits", save), dict(kind="forward", dir=d[save], input_ids=[LONG_PROMPT])))
        labels = list(LONG_PROMPT)
        labels[5] = -100
        keyed.append(
            (
                (name, "loss_hidden"),
                dict(kind="forward", dir=d["float32"], input_ids=[LONG_PROMPT], labels=[labels], hidden_states=True),
            )
        )
        greedy = dict(do_sample=False, max_new_tokens=NEW, output_logits=True)
        for save in ("float32", "bfloat16"):
            keyed.append(
                ((name, "greedy", save), dict(kind="generate", dir=d[save], input_ids=[PROMPT], kwargs=greedy))
            )
        keyed.append(
            (
                (name, "greedy_lookup_prompt"),
                dict(kind="generate", dir=d["float32"], input_ids=[LOOKUP_PROMPT], kwargs=greedy),
            )
        )
        for check, kwargs in ASSISTED.items():
            keyed.append(
                (
                    (name, "assisted", check),
                    dict(
                        kind="generate",
                        dir=d["float32"],
                        input_ids=[_prompt_of(check)],
                        assistant_dir=d["draft"] if check == "draft_model" else None,
                        kwargs=dict(do_sample=False, max_new_tokens=NEW, **kwargs),
                    ),
                )
            )
        for check, kwargs in SAMPLING.items():
            keyed.append(
                (
                    (name, "sampling", check),
                    dict(
                        kind="generate",
                        dir=d["float32"],
                        input_ids=[PROMPT],
                        seed=0,
                        kwargs=dict(do_sample=True, max_new_tokens=STEPS, output_scores=True, **kwargs),
                    ),
                )
            )
    return keyed


@pytest.fixture(scope="module")
def hf(hf_reference, tmp_path_factory):
    """{key: Transformers' result} for every job of _jobs, computed in one child process; ["dirs"]: the models."""
    root = str(tmp_path_factory.mktemp("hf_models"))
    keyed = _jobs(root)
    results = hf_reference.run([job for _, job in keyed])
    out = dict(zip([key for key, _ in keyed], results))
    for name in FAMILIES:
        for step in ("make", "make_draft"):
            assert "error" not in out[name, step], f"Transformers could not make {name}: {out[name, step]}"
    out["dirs"] = {name: {save: os.path.join(root, name, save) for save in (*SAVES, "draft")} for name in FAMILIES}
    return out


_models = {}


def _load(path, **kwargs):
    """Our model of a directory, loaded once per module (as stored: the bfloat16 ones computed on bfloat16
    weights in float32, the numbers Transformers computes on after widening them)."""
    key = (path, tuple(sorted(kwargs.items())))
    if key not in _models:
        _models[key] = ha.AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return _models[key]


def _ok(result, what):
    assert "error" not in result, f"Transformers failed on {what}: {result.get('error')}"
    return result


def _assert_close(ours, theirs, what, tol=LOGIT_TOL):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape}, Transformers {theirs.shape}"
    scale = float(np.max(np.abs(theirs)))
    err = float(np.max(np.abs(ours - theirs)))
    assert err <= tol * scale, (
        f"{what}: max |ours - Transformers| = {err:.3g}, more than {tol:g} of the largest |value| {scale:.3g}"
    )


def _assert_same_tokens(ours, theirs, what, raw_logits=None, prompt_len=len(PROMPT)):
    """Token for token; on a difference, says where and how far apart Transformers' top two logits were there
    (a near tie would mean float32 noise decided, not a different computation)."""
    ours, theirs = np.asarray(ours).tolist(), np.asarray(theirs).tolist()
    if ours == theirs:
        return
    row_o, row_t = ours[0], theirs[0]
    at = next((i for i, (a, b) in enumerate(zip(row_o, row_t)) if a != b), min(len(row_o), len(row_t)))
    margin = ""
    if raw_logits is not None and prompt_len <= at < prompt_len + len(raw_logits):
        top = np.sort(raw_logits[at - prompt_len][0])[::-1]
        margin = f"; Transformers' top-2 logit margin there: {top[0] - top[1]:.3g} of {abs(top[0]):.3g}"
    pytest.fail(
        f"{what}: first difference at position {at}\n ours:         {row_o}\n Transformers: {row_t}{margin}",
        pytrace=False,
    )


FAMILY_NAMES = list(FAMILIES)


@pytest.mark.parametrize("save", list(SAVES))
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_logits_equal_transformers_for_each_save(hf, family, save):
    ref = _ok(hf[family, "logits", save], f"{family} {save} forward")
    ours = _load(hf["dirs"][family][save])(np.array([LONG_PROMPT])).logits
    _assert_close(ours, ref["logits"], f"{family} {save}: logits")


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_loss_and_hidden_states_equal_transformers(hf, family):
    ref = _ok(hf[family, "loss_hidden"], f"{family} forward with labels")
    labels = np.array([LONG_PROMPT])
    labels[0, 5] = -100
    res = _load(hf["dirs"][family]["float32"])(np.array([LONG_PROMPT]), labels=labels, output_hidden_states=True)
    assert abs(float(res.loss) - ref["loss"]) <= LOGIT_TOL * abs(ref["loss"]), (
        f"{family}: loss {float(res.loss)!r}, Transformers {ref['loss']!r}"
    )
    hidden = ref["hidden_states"]
    assert len(res.hidden_states) == len(hidden), (
        f"{family}: {len(res.hidden_states)} hidden states, Transformers {len(hidden)}"
    )
    for i, (ours, theirs) in enumerate(zip(res.hidden_states, hidden)):
        _assert_close(ours, theirs, f"{family}: hidden state {i}")


@pytest.mark.parametrize("save", ["float32", "bfloat16"])
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_greedy_generate_is_transformers_token_for_token(hf, family, save):
    ref = _ok(hf[family, "greedy", save], f"{family} {save} greedy generate")
    ours = _load(hf["dirs"][family][save]).generate(np.array([PROMPT]), do_sample=False, max_new_tokens=NEW)
    _assert_same_tokens(ours, ref["sequences"], f"{family} {save}: greedy generate()", ref.get("logits"))


@pytest.mark.parametrize(
    "family, check", [(f, c) for f in FAMILY_NAMES for c in ASSISTED if (f, c) != ("gpt2", "early_exit")]
)  # Transformers' fails: below
def test_assisted_generate_is_transformers_assisted_token_for_token(hf, family, check):
    ref = _ok(hf[family, "assisted", check], f"{family} assisted ({check})")
    dirs, prompt = hf["dirs"][family], _prompt_of(check)
    kwargs = dict(ASSISTED[check])
    if check == "draft_model":
        kwargs["assistant_model"] = _load(dirs["draft"])
    model = _load(dirs["float32"])
    res = model.generate(
        np.array([prompt]), do_sample=False, max_new_tokens=NEW, return_dict_in_generate=True, **kwargs
    )
    ours = res.sequences
    if check == "draft_model":  # the draft is right sometimes, not always: both acceptance and rejection ran
        assert 0 < res.num_accepted_tokens < res.num_draft_tokens, (
            f"{family}: the draft had {res.num_accepted_tokens} of {res.num_draft_tokens} tokens accepted"
        )
    plain = hf[(family, "greedy_lookup_prompt") if check == "prompt_lookup" else (family, "greedy", "float32")]
    _assert_same_tokens(
        ours,
        ref["sequences"],
        f"{family}: assisted generate() with {check}",
        plain.get("logits"),
        prompt_len=len(prompt),
    )


@pytest.mark.parametrize("check", list(SAMPLING))
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_sampling_processors_give_transformers_distribution(hf, family, check):
    ref = _ok(hf[family, "sampling", check], f"{family} sampling ({check})")
    sequence, scores = ref["sequences"], ref["scores"]  # (1, P + steps), (steps, 1, V)
    model = _load(hf["dirs"][family]["float32"])
    for step in range(scores.shape[0]):
        prefix = sequence[:, : len(PROMPT) + step]
        res = model.generate(
            prefix,
            do_sample=True,
            max_new_tokens=1,
            seed=0,
            output_scores=True,
            return_dict_in_generate=True,
            **SAMPLING[check],
        )
        ours, theirs = np.asarray(res.scores[0], dtype=np.float64), scores[step].astype(np.float64)
        kept_o, kept_t = np.isfinite(ours), np.isfinite(theirs)
        assert (kept_o == kept_t).all(), (
            f"{family} {check} step {step}: tokens kept differ: ours only {np.flatnonzero(kept_o & ~kept_t)}, "
            f"Transformers only {np.flatnonzero(kept_t & ~kept_o)}"
        )
        _assert_close(ours[kept_o], theirs[kept_t], f"{family} {check} step {step}: processed scores")


@pytest.fixture(scope="module")
def round_trip(hf, hf_reference, tmp_path_factory):
    """Our save_pretrained of each family's float32 model (one file) and bfloat16 model (sharded), read back by
    Transformers: {(family, dtype): (our logits, Transformers' result)}."""
    root = tmp_path_factory.mktemp("ours_saved")
    keyed = []
    for family in FAMILY_NAMES:
        for save, kwargs in (("float32", {}), ("bfloat16", dict(max_shard_size="100KB"))):
            model = _load(hf["dirs"][family][save])
            directory = str(root / f"{family}_{save}")
            model.save_pretrained(directory, **kwargs)
            ours = model(np.array([LONG_PROMPT])).logits
            keyed.append(((family, save), ours, dict(kind="forward", dir=directory, input_ids=[LONG_PROMPT])))
    results = hf_reference.run([job for _, _, job in keyed])
    return {key: (ours, res) for (key, ours, _), res in zip(keyed, results)}


@pytest.mark.parametrize("save", ["float32", "bfloat16"])
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_our_save_pretrained_loads_in_transformers(round_trip, family, save):
    ours, ref = round_trip[family, save]
    _ok(ref, f"Transformers loading our {family} {save} save_pretrained")
    _assert_close(ours, ref["logits"], f"{family} {save}: our save_pretrained read by Transformers")


# Where we decided to differ. Each test shows the difference is what docs/generation.md#where-we-differ-from-
# transformers and docs/models.md say, by a Transformers run beside ours on the same model.

SHORT = PROMPT[:6]  # row 0 of the padded batches: 4 columns of padding (pad_token_id 0) before it
PADDED = [[0] * 4 + SHORT, PROMPT]
PADDED_MASK = [[0] * 4 + [1] * 6, [1] * 10]
RIGHT_PADDED, RIGHT_MASK = [SHORT + [0] * 4, PROMPT], [[1] * 6 + [0] * 4, [1] * 10]
# Phi-3 longrope (original_max_position_embeddings 16): a 12-token row beside a 20-token one.
LR_SHORT = LONG_PROMPT[:12]
LR_PADDED, LR_MASK = [[0] * 8 + LR_SHORT, LONG_PROMPT], [[0] * 8 + [1] * 12, [1] * 20]


def _positions(mask):
    """Positions as generate() derives them from a left-padded mask (Transformers' own recipe)."""
    mask = np.asarray(mask)
    return np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 1).tolist()


@pytest.fixture(scope="module")
def hf_differences(hf, hf_reference):
    dirs = hf["dirs"]
    llama, gpt2, longrope = (dirs[f]["float32"] for f in ("llama", "gpt2", "phi3_longrope"))
    keyed = {
        "padded_forward": dict(kind="forward", dir=gpt2, input_ids=PADDED, attention_mask=PADDED_MASK),
        "padded_forward_positions": dict(
            kind="forward", dir=gpt2, input_ids=PADDED, attention_mask=PADDED_MASK, position_ids=_positions(PADDED_MASK)
        ),
        "short_alone": dict(kind="forward", dir=gpt2, input_ids=[SHORT]),
        **{
            name + "_padded": dict(
                kind="generate",
                dir=llama,
                input_ids=PADDED,
                attention_mask=PADDED_MASK,
                kwargs=dict(do_sample=False, max_new_tokens=1, output_scores=True, output_logits=True, **kwargs),
            )
            for name, kwargs in (
                ("no_repeat_ngram", dict(no_repeat_ngram_size=1)),
                ("repetition", dict(repetition_penalty=1.5)),
            )
        },
        "assisted_num_return_sequences": dict(
            kind="generate",
            dir=llama,
            input_ids=[PROMPT],
            assistant_dir=dirs["llama"]["draft"],
            seed=0,
            kwargs=dict(do_sample=True, num_return_sequences=2, max_new_tokens=4),
        ),
        "assisted_batch": dict(
            kind="generate",
            dir=llama,
            input_ids=PADDED,
            attention_mask=PADDED_MASK,
            assistant_dir=dirs["llama"]["draft"],
            kwargs=dict(do_sample=False, max_new_tokens=4),
        ),
        "right_padded": dict(
            kind="generate",
            dir=llama,
            input_ids=RIGHT_PADDED,
            attention_mask=RIGHT_MASK,
            kwargs=dict(do_sample=False, max_new_tokens=4),
        ),
        "longrope_batch": dict(
            kind="forward", dir=longrope, input_ids=LR_PADDED, attention_mask=LR_MASK, position_ids=_positions(LR_MASK)
        ),
        "longrope_alone": dict(kind="forward", dir=longrope, input_ids=[LR_SHORT]),
    }
    return dict(zip(keyed, hf_reference.run(list(keyed.values()))))


def _differs(a, b, tol=LOGIT_TOL):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b))) > tol * float(np.max(np.abs(b)))


def test_difference_plain_forward_takes_positions_from_the_attention_mask(hf, hf_differences):
    """Ours: a left-padded row's logits are its logits alone (positions from the mask), padded positions 0.
    Transformers' plain forward counts positions from the first column, padding included: with GPT-2's learned
    positions the padded row differs from the row alone unless position_ids are passed, and with them it is ours.
    (Rotary families shift every position of the row alike, which their attention does not see: there the two
    agree within float32 error either way.)"""
    model = _load(hf["dirs"]["gpt2"]["float32"])
    ours = model(np.array(PADDED), attention_mask=np.array(PADDED_MASK)).logits
    alone = model(np.array([SHORT])).logits
    assert np.array_equal(ours[0, 4:], alone[0]), "ours: the padded row is not bitwise the row alone"
    assert not ours[0, :4].any(), f"ours: logits at padded positions are not 0: {ours[0, :4, :4]}"
    hf_plain, hf_positions, hf_alone = (
        _ok(hf_differences[k], k)["logits"] for k in ("padded_forward", "padded_forward_positions", "short_alone")
    )
    assert _differs(hf_plain[0, 4:], hf_alone[0]), (
        "Transformers' plain forward of the padded row now equals the row alone: the documented difference is gone"
    )
    assert hf_plain[0, :4].any(), "Transformers now gives zero logits at padded positions"
    _assert_close(ours[0, 4:], hf_positions[0, 4:], "padded row vs Transformers given the mask's position_ids")
    _assert_close(alone, hf_alone, "the short row alone")


def test_difference_processors_see_each_row_without_its_padding(hf, hf_differences):
    """A left-padded batch's row 0 holds the pad id 0 in its padding only. no_repeat_ngram_size=1 bans every id
    already in the row: Transformers passes its processors the padded batch, so it bans id 0 there; ours gives
    processors each row's real tokens, so id 0 keeps its logit. repetition_penalty agrees: Transformers 5 tells that
    one processor where each row's padding ends."""
    assert 0 not in SHORT
    model = _load(hf["dirs"]["llama"]["float32"])
    for processor, kwargs in (
        ("no_repeat_ngram", dict(no_repeat_ngram_size=1)),
        ("repetition", dict(repetition_penalty=1.5)),
    ):
        ref = _ok(hf_differences[processor + "_padded"], f"{processor} on a padded batch")
        res = model.generate(
            np.array(PADDED),
            attention_mask=np.array(PADDED_MASK),
            do_sample=False,
            max_new_tokens=1,
            output_scores=True,
            output_logits=True,
            return_dict_in_generate=True,
            **kwargs,
        )
        ours, raw = res.scores[0][0, 0], res.logits[0][0, 0]
        assert ours == raw, f"ours: {processor} changed the padded row's score for the pad id: {ours}, raw {raw}"
        _assert_close(res.logits[0][0], ref["logits"][0, 0], f"{processor}: raw logits of the padded row")
        theirs = ref["scores"][0, 0, 0]
        if processor == "no_repeat_ngram":
            assert theirs == -np.inf, f"Transformers no longer bans the pad id in the padded row: {theirs}"
        else:
            _assert_close(res.scores[0][0], ref["scores"][0, 0], "repetition_penalty: the padded row's scores")


def test_difference_assisted_generation_takes_batches_and_num_return_sequences(hf, hf_differences):
    """Transformers refuses an assistant with a batch of rows or with num_return_sequences > 1; ours runs both, and
    each greedy row is the row's plain greedy output."""
    batch_ref, sequences_ref = hf_differences["assisted_batch"], hf_differences["assisted_num_return_sequences"]
    assert "batch" in batch_ref.get("error", "").lower(), (
        f"Transformers now takes a batch with an assistant: {batch_ref}"
    )
    assert "num_return_sequences" in sequences_ref.get("error", ""), (
        f"Transformers now takes num_return_sequences with an assistant: {sequences_ref}"
    )
    model, draft = _load(hf["dirs"]["llama"]["float32"]), _load(hf["dirs"]["llama"]["draft"])
    batch = model.generate(
        np.array(PADDED), attention_mask=np.array(PADDED_MASK), assistant_model=draft, do_sample=False, max_new_tokens=4
    )
    plain = model.generate(np.array(PADDED), attention_mask=np.array(PADDED_MASK), do_sample=False, max_new_tokens=4)
    assert np.array_equal(batch, plain), f"assisted batch {batch.tolist()}, plain {plain.tolist()}"
    res = model.generate(
        np.array([PROMPT]), assistant_model=draft, do_sample=True, num_return_sequences=2, max_new_tokens=4, seed=0
    )
    assert res.shape == (2, len(PROMPT) + 4), f"num_return_sequences=2 with an assistant gave shape {res.shape}"


def test_difference_right_padding_is_an_error_here(hf, hf_differences):
    """Transformers generates from a right-padded batch (with a warning); ours refuses it, naming the fix."""
    assert "sequences" in hf_differences["right_padded"], hf_differences["right_padded"]
    with pytest.raises(ha.InvalidInputError, match="(?i)left"):
        _load(hf["dirs"]["llama"]["float32"]).generate(
            np.array(RIGHT_PADDED), attention_mask=np.array(RIGHT_MASK), do_sample=False, max_new_tokens=4
        )


def test_difference_longrope_batch_rows_switch_by_their_own_length(hf, hf_differences):
    """Phi-3 longrope, a 12-token row padded beside a 20-token one (original_max_position_embeddings 16): ours
    rotates the short row with the short factors, as it is alone; Transformers takes the long factors for the whole
    batch from its longest row, so its short row differs from itself alone."""
    model = _load(hf["dirs"]["phi3_longrope"]["float32"])
    ours = model(np.array(LR_PADDED), attention_mask=np.array(LR_MASK)).logits
    theirs, theirs_alone = (_ok(hf_differences[k], k)["logits"] for k in ("longrope_batch", "longrope_alone"))
    _assert_close(ours[0, 8:], theirs_alone[0], "our short row in the batch vs Transformers' row alone")
    _assert_close(ours[1], theirs[1], "the long row")
    assert _differs(theirs[0, 8:], theirs_alone[0]), (
        "Transformers' short row in the batch now equals the row alone: the documented difference is gone"
    )


def test_difference_gpt2_early_exit_works_here_where_transformers_fails(hf):
    """assistant_early_exit with GPT-2: Transformers' early-exit drafter shortens config.num_hidden_layers, which
    GPT-2's layer loop ignores, and fails (IndexError from its cache); ours drafts with the first layer and gives
    the plain greedy output, Transformers' own."""
    assert "error" in hf["gpt2", "assisted", "early_exit"], (
        f"Transformers' GPT-2 early exit now runs: {hf['gpt2', 'assisted', 'early_exit']}"
    )
    ours = _load(hf["dirs"]["gpt2"]["float32"]).generate(
        np.array([PROMPT]), do_sample=False, max_new_tokens=NEW, assistant_early_exit=1
    )
    ref = hf["gpt2", "greedy", "float32"]
    _assert_same_tokens(ours, ref["sequences"], "gpt2: early exit vs Transformers' plain greedy", ref.get("logits"))
