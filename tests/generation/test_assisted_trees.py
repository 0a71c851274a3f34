"""Token trees in assisted generation (assistant_tree_width > 1) keep exactly what plain generation produces.

Each drafted token comes with siblings, the draft's next most probable tokens at its position; the target scores the
chain and the siblings in one pass (each node bitwise as decoding its path token by token: tests/c/test_tree.c),
and a sibling that is the target's own token is accepted. Greedy output is bit for bit plain greedy output for
every family, tree width, K, schedule, batch and logits processor; coupled sampling gives the plain sample for the
seed; the statistics count the siblings; the calls trees cannot serve are refused naming assistant_tree_width.

Dynamic trees (assistant_tree_shape="dynamic", EAGLE-2's shape: the draft expands its most probable nodes depth by
depth and the target verifies the most probable of them) keep the same promises, checked the same way.
"""

import numpy as np
import pytest
from family_checkpoints import FAMILIES, write_family_checkpoint

import habana_assist as ha

VOCAB = 96
NEW = 24
PROMPT = np.array([[17, 3, 42, 8, 29, 11, 56, 2]], dtype=np.int64)
BATCH = np.array([[0, 0, 0, 33, 7, 19, 50, 4], [17, 3, 42, 8, 29, 11, 56, 2]], dtype=np.int64)
BATCH_MASK = np.array([[0, 0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]], dtype=np.int64)
# (width, K, schedule): several tree shapes, every schedule (widths and depths in one combination each)
SHAPES = ((2, 4, "constant"), (3, 2, "heuristic"), (4, 5, "heuristic_transient"), (2, 6, "cost"))


@pytest.fixture(autouse=True)
def one_thread_unless_told(one_core_thread):
    yield


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """{family: (target, draft)}: a random target of each family and the same weights with noise (a draft that
    agrees often but not always, so that siblings are accepted now and then)."""
    root = tmp_path_factory.mktemp("trees")
    out = {}
    for family in FAMILIES:
        t_dir, d_dir = str(root / f"{family}_target"), str(root / f"{family}_draft")
        write_family_checkpoint(t_dir, family, vocab_size=VOCAB, seed=11)
        write_family_checkpoint(d_dir, family, vocab_size=VOCAB, seed=11, perturb=(2, 0.25))
        out[family] = (ha.AutoModelForCausalLM.from_pretrained(t_dir), ha.AutoModelForCausalLM.from_pretrained(d_dir))
    return out


def plain(model, ids, mask=None, **kw):
    return model.generate(ids, attention_mask=np.ones_like(ids) if mask is None else mask, max_new_tokens=NEW, **kw)


def tree(model, draft, ids, width, mask=None, **kw):
    return model.generate(
        ids,
        attention_mask=np.ones_like(ids) if mask is None else mask,
        max_new_tokens=NEW,
        assistant_model=draft,
        assistant_tree_width=width,
        return_dict_in_generate=True,
        **kw,
    )


def check_tree_statistics(res, label):
    """The counts of one tree-assisted call add up."""
    assert 0 <= res.num_sibling_accepted <= res.num_sibling_tokens <= res.num_draft_tokens, (
        f"{label}: expected 0 <= siblings accepted ({res.num_sibling_accepted}) <= siblings proposed "
        f"({res.num_sibling_tokens}) <= nodes verified ({res.num_draft_tokens})"
    )
    assert res.num_accepted_tokens <= res.num_draft_tokens - res.num_sibling_tokens + res.num_sibling_accepted, (
        f"{label}: {res.num_accepted_tokens} accepted, more than the chain's "
        f"{res.num_draft_tokens - res.num_sibling_tokens} tokens and {res.num_sibling_accepted} siblings"
    )
    prop, acc = np.asarray(res.proposed_per_position), np.asarray(res.accepted_per_position)
    assert prop.sum() == res.num_draft_tokens and acc.sum() == res.num_accepted_tokens, (
        f"{label}: by depth {prop.tolist()} proposed and {acc.tolist()} accepted; expected sums "
        f"{res.num_draft_tokens} and {res.num_accepted_tokens}"
    )
    sources = np.asarray(res.token_sources)
    assert (sources == ha.TokenSource.ACCEPTED).sum() == res.num_accepted_tokens, (
        f"{label}: {(sources == ha.TokenSource.ACCEPTED).sum()} tokens marked ACCEPTED, expected "
        f"num_accepted_tokens = {res.num_accepted_tokens}"
    )


def test_tree_greedy_is_bitwise_plain_greedy_in_every_family(pairs):
    siblings_taken = {}
    for family, (target, draft) in pairs.items():
        want = plain(target, PROMPT)
        for width, K, schedule in SHAPES:
            label = f"{family}, width {width}, K={K}, {schedule}"
            res = tree(target, draft, PROMPT, width, num_assistant_tokens=K, num_assistant_tokens_schedule=schedule)
            assert np.array_equal(res.sequences, want), (
                f"{label}: expected plain greedy {want.tolist()}, got {res.sequences.tolist()}"
            )
            check_tree_statistics(res, label)
            # (the cost schedule keeps siblings only where the measured t(T) says width is cheap)
            assert res.num_sibling_tokens > 0 or schedule == "cost", f"{label}: no sibling was proposed"
            siblings_taken[family] = siblings_taken.get(family, 0) + res.num_sibling_accepted
    assert sum(siblings_taken.values()) > 0, (
        f"no sibling was accepted in any family ({siblings_taken}): the path through a sibling went untested"
    )


def test_tree_greedy_batch_each_row_its_own_tree(pairs):
    target, draft = pairs["llama"]
    want = plain(target, BATCH, BATCH_MASK)
    for width, K, schedule in SHAPES[:2]:
        res = tree(
            target, draft, BATCH, width, BATCH_MASK, num_assistant_tokens=K, num_assistant_tokens_schedule=schedule
        )
        assert np.array_equal(res.sequences, want), (
            f"batch, width {width}, K={K}: expected plain {want.tolist()}, got {res.sequences.tolist()}"
        )
        rows = [
            tree(
                target,
                draft,
                BATCH[i : i + 1, 3 * (1 - i) :],
                width,
                num_assistant_tokens=K,
                num_assistant_tokens_schedule=schedule,
            )
            for i in range(2)
        ]
        for i, r in enumerate(rows):
            assert np.array_equal(r.sequences[0], want[i, 3 * (1 - i) :]), f"row {i} alone, width {width}"
        assert res.num_rounds < res.num_target_passes, (
            f"batch, width {width}: {res.num_target_passes} row passes in {res.num_rounds} rounds; expected both rows "
            "verified together, one target pass per round"
        )


@pytest.mark.parametrize("shape", ["siblings", "dynamic"])
def test_tree_leaves_a_cache_that_continues_bitwise(pairs, shape):
    """The cache a tree call returns (keep_path moved each accepted path into place; a dynamic tree's draft kept its
    part of it too) continues as plain's."""
    target, draft = pairs["gemma3_text"]
    res = tree(target, draft, PROMPT, 3, num_assistant_tokens=4, assistant_tree_shape=shape)
    ids = res.sequences
    more = target.generate(ids, attention_mask=np.ones_like(ids), past_key_values=res.cache, max_new_tokens=8)
    want = target.generate(ids, attention_mask=np.ones_like(ids), max_new_tokens=8)
    assert np.array_equal(more, want), (
        f"{shape}: continuing from the tree call's cache: expected plain {want.tolist()}, got {more.tolist()}"
    )


def test_tree_greedy_with_logits_processors_is_bitwise_plain(pairs):
    target, draft = pairs["qwen2"]
    seen = []

    def penalize_multiples_of_five(input_ids, scores):
        seen.append(input_ids.shape[1])
        scores = scores.copy()
        scores[:, ::5] -= 0.5
        return scores

    for kw in (
        dict(repetition_penalty=1.3, no_repeat_ngram_size=2),
        dict(bad_words_ids=[[5], [9, 12]]),
        dict(logits_processor=[penalize_multiples_of_five]),
        dict(min_new_tokens=NEW, suppress_tokens=[1, 2]),
    ):
        want = plain(target, PROMPT, **kw)
        res = tree(target, draft, PROMPT, 3, num_assistant_tokens=4, **kw)
        assert np.array_equal(res.sequences, want), (
            f"processors {sorted(kw)}: expected plain {want.tolist()}, got {res.sequences.tolist()}"
        )
    assert seen, "the logits processor was never called"


@pytest.mark.parametrize("shape", ["siblings", "dynamic"])
def test_tree_coupled_sampling_equals_plain_sampling_for_the_same_seed(pairs, shape):
    for family in ("llama", "gemma2", "gpt2"):
        target, draft = pairs[family]
        for seed, kw in ((3, dict(temperature=0.8)), (4, dict(temperature=1.2, top_k=20, top_p=0.9))):
            want = plain(target, PROMPT, do_sample=True, seed=seed, **kw)
            for width in (2, 4):
                res = tree(
                    target,
                    draft,
                    PROMPT,
                    width,
                    do_sample=True,
                    seed=seed,
                    assisted_sampling="coupled",
                    num_assistant_tokens=4,
                    assistant_tree_shape=shape,
                    **kw,
                )
                assert np.array_equal(res.sequences, want), (
                    f"{shape}, {family}, seed {seed}, width {width}: expected the plain sample {want.tolist()}, got "
                    f"{res.sequences.tolist()}"
                )
                check_tree_statistics(res, f"coupled {shape} {family} width {width}")


@pytest.mark.parametrize("shape", ["siblings", "dynamic"])
def test_tree_with_early_exit_draft_is_bitwise_plain(pairs, shape):
    target, _ = pairs["mistral"]
    want = plain(target, PROMPT)
    res = target.generate(
        PROMPT,
        attention_mask=np.ones_like(PROMPT),
        max_new_tokens=NEW,
        assistant_early_exit=1,
        assistant_tree_width=3,
        assistant_tree_shape=shape,
        num_assistant_tokens=3,
        return_dict_in_generate=True,
    )
    assert np.array_equal(res.sequences, want), (
        f"{shape}, early exit, width 3: expected plain {want.tolist()}, got {res.sequences.tolist()}"
    )
    check_tree_statistics(res, f"{shape} early exit")


def test_chains_keep_their_keys_and_trees_add_theirs(pairs):
    target, draft = pairs["llama"]
    chain = tree(target, draft, PROMPT, 1, num_assistant_tokens=4)
    assert "num_sibling_tokens" not in chain.keys() and chain.num_sibling_tokens is None, (
        f"assistant_tree_width=1 (chains) expected no tree counts among the keys, got {list(chain.keys())}"
    )
    res = tree(target, draft, PROMPT, 2, num_assistant_tokens=4)
    assert {"num_sibling_tokens", "num_sibling_accepted"} <= set(res.keys()), (
        f"a tree call expected num_sibling_tokens and num_sibling_accepted among the keys, got {list(res.keys())}"
    )
    assert ha.GenerationConfig().assistant_tree_width == 1, "expected the default assistant_tree_width=1 (chains)"
    assert ha.GenerationConfig(assistant_tree_width=3).to_diff_dict().get("assistant_tree_width") == 3, (
        "expected assistant_tree_width=3 saved in a generation_config's diff"
    )


@pytest.mark.parametrize("width", (0, -1, 1.5, "2", True, 64))
def test_bad_tree_widths_are_refused_by_name(pairs, width):
    target, draft = pairs["llama"]
    with pytest.raises(ha.InvalidInputError) as err:
        tree(target, draft, PROMPT, width)
    assert "assistant_tree_width" in str(err.value), (
        f"assistant_tree_width={width!r}: expected the message to name the flag, got {err.value}"
    )


def test_prompt_lookup_branches_are_bitwise_plain(pairs):
    """Prompt lookup's trees: the n-gram's later matches branch off the chain as siblings."""
    target, _ = pairs["qwen3"]
    ids = np.array([[5, 9, 3, 5, 7, 3, 5, 9, 4, 5, 7, 3, 5, 9, 3, 5]], dtype=np.int64)
    want = plain(target, ids)
    siblings = 0
    for width, ngram in ((2, 1), (3, 2)):
        res = tree(target, None, ids, width, prompt_lookup_num_tokens=4, max_matching_ngram_size=ngram)
        assert np.array_equal(res.sequences, want), (
            f"prompt lookup, width {width}, n-gram {ngram}: expected plain {want.tolist()}, "
            f"got {res.sequences.tolist()}"
        )
        siblings += res.num_sibling_tokens
    assert siblings > 0, "prompt lookup proposed no sibling from a prompt whose n-grams have several continuations"


# ---- dynamic trees (assistant_tree_shape="dynamic") ------------------------------------------------------------


def dynamic(model, draft, ids, width, mask=None, **kw):
    return tree(model, draft, ids, width, mask, assistant_tree_shape="dynamic", **kw)


def check_dynamic_budget(res, K, width, label):
    """A dynamic tree verifies at most K nodes a round and row (a chain's candidates), at depths up to K; its draft
    makes at most 1 + (K - 1) passes a round (the catch-up, then one a depth)."""
    assert res.num_draft_tokens <= res.num_target_passes * K, (
        f"{label}: {res.num_draft_tokens} nodes verified in {res.num_target_passes} row rounds, more than K = {K} "
        "a round"
    )
    assert res.num_draft_passes <= res.num_target_passes * K, (
        f"{label}: {res.num_draft_passes} draft passes in {res.num_target_passes} row rounds, more than K = {K} a round"
    )
    assert len(res.proposed_per_position) <= K or not any(res.proposed_per_position[K:]), (
        f"{label}: nodes verified deeper than K = {K}: {res.proposed_per_position}"
    )


def test_dynamic_tree_greedy_is_bitwise_plain_greedy_in_every_family(pairs):
    off_chain_taken = 0
    for family, (target, draft) in pairs.items():
        want = plain(target, PROMPT)
        for width, K, schedule in SHAPES:
            label = f"dynamic, {family}, width {width}, K={K}, {schedule}"
            res = dynamic(target, draft, PROMPT, width, num_assistant_tokens=K, num_assistant_tokens_schedule=schedule)
            assert np.array_equal(res.sequences, want), (
                f"{label}: expected plain greedy {want.tolist()}, got {res.sequences.tolist()}"
            )
            check_tree_statistics(res, label)
            if schedule == "constant":  # (the heuristic schedules move K from round to round)
                check_dynamic_budget(res, K, width, label)
            assert res.num_sibling_tokens > 0 or schedule == "cost", f"{label}: no node off the chain was verified"
            off_chain_taken += res.num_sibling_accepted
    assert off_chain_taken > 0, "no node off the chain was accepted in any family: the walk off the chain went untested"


def test_dynamic_tree_grows_deeper_off_the_chain_than_siblings(pairs):
    """Siblings are leaves beside the chain; a dynamic tree expands its most probable nodes wherever they are, so with
    the same K and width it verifies nodes off the chain at depths where a sibling tree has only the chain's next
    token and its siblings, and the two shapes verify different trees."""
    target, draft = pairs["llama"]
    sib = tree(target, draft, PROMPT, 2, num_assistant_tokens=4)
    dyn = dynamic(target, draft, PROMPT, 2, num_assistant_tokens=4)
    assert np.array_equal(sib.sequences, dyn.sequences), "both shapes must give the plain output"
    assert np.asarray(dyn.proposed_per_position).tolist() != np.asarray(sib.proposed_per_position).tolist(), (
        f"the dynamic tree verified the same nodes by depth as the sibling tree ({sib.proposed_per_position}): "
        "assistant_tree_shape='dynamic' had no effect"
    )


def test_dynamic_tree_batch_each_row_its_own_tree(pairs):
    target, draft = pairs["llama"]
    want = plain(target, BATCH, BATCH_MASK)
    for width, K, schedule in SHAPES[:2]:
        res = dynamic(
            target, draft, BATCH, width, BATCH_MASK, num_assistant_tokens=K, num_assistant_tokens_schedule=schedule
        )
        assert np.array_equal(res.sequences, want), (
            f"dynamic batch, width {width}, K={K}: expected plain {want.tolist()}, got {res.sequences.tolist()}"
        )
        for i in range(2):
            alone = dynamic(
                target,
                draft,
                BATCH[i : i + 1, 3 * (1 - i) :],
                width,
                num_assistant_tokens=K,
                num_assistant_tokens_schedule=schedule,
            )
            assert np.array_equal(alone.sequences[0], want[i, 3 * (1 - i) :]), f"dynamic row {i} alone, width {width}"
        assert res.num_rounds < res.num_target_passes, (
            f"dynamic batch, width {width}: {res.num_target_passes} row passes in {res.num_rounds} rounds; expected "
            "both rows verified together, one target pass per round"
        )


def test_dynamic_tree_with_logits_processors_is_bitwise_plain(pairs):
    target, draft = pairs["qwen2"]
    for kw in (dict(repetition_penalty=1.3, no_repeat_ngram_size=2), dict(bad_words_ids=[[5], [9, 12]])):
        want = plain(target, PROMPT, **kw)
        res = dynamic(target, draft, PROMPT, 3, num_assistant_tokens=4, **kw)
        assert np.array_equal(res.sequences, want), (
            f"dynamic, processors {sorted(kw)}: expected plain {want.tolist()}, got {res.sequences.tolist()}"
        )


def test_tree_shape_default_and_saved(pairs):
    assert ha.GenerationConfig().assistant_tree_shape == "siblings", "expected the default tree shape 'siblings'"
    diff = ha.GenerationConfig(assistant_tree_width=3, assistant_tree_shape="dynamic").to_diff_dict()
    assert diff.get("assistant_tree_shape") == "dynamic", (
        f"expected assistant_tree_shape='dynamic' saved in a generation_config's diff, got {diff}"
    )
    target, draft = pairs["llama"]
    one = tree(target, draft, PROMPT, 1, num_assistant_tokens=4, assistant_tree_shape="dynamic")
    assert np.array_equal(one.sequences, plain(target, PROMPT)) and one.num_sibling_tokens is None, (
        "assistant_tree_width=1 with either shape: expected chains and the plain output"
    )


@pytest.mark.parametrize("shape", ("bushy", "Dynamic", None, 1, ""))
def test_bad_tree_shapes_are_refused_by_name(pairs, shape):
    target, draft = pairs["llama"]
    with pytest.raises(ha.InvalidInputError) as err:
        tree(target, draft, PROMPT, 2, assistant_tree_shape=shape)
    msg = str(err.value)
    assert "assistant_tree_shape" in msg and "'dynamic'" in msg and "'siblings'" in msg, (
        f"assistant_tree_shape={shape!r}: expected the message to name the flag and the shapes, got {msg}"
    )


def test_dynamic_tree_with_prompt_lookup_is_refused_by_name(pairs):
    target, _ = pairs["qwen3"]
    ids = np.array([[5, 9, 3, 5, 7, 3, 5, 9, 4, 5, 7, 3, 5, 9, 3, 5]], dtype=np.int64)
    with pytest.raises(ha.InvalidInputError) as err:
        dynamic(target, None, ids, 2, prompt_lookup_num_tokens=4)
    msg = str(err.value)
    assert "assistant_tree_shape='dynamic'" in msg and "assistant_tree_shape='siblings'" in msg, (
        f"dynamic trees with prompt lookup: expected a refusal naming the shape and the fix, got {msg}"
    )
