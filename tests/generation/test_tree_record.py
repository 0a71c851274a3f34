"""The record of the token trees (result.token_trees: the core's ha_tree_record, one TokenTree per row and target
pass): every tree it holds is the one the pass verified and accepted from, in agreement with the output and the
call's counts; chains carry none, and the binding refuses a record it cannot fill.

Each TokenTree's accepted path is a chain of parent links down from a root, its tokens are the row's output at the
recorded columns, its nodes add up to num_draft_tokens (plus the catch-up, the tokens a pass starts from), its
accepted drafts to num_accepted_tokens, and a row has one tree per target pass, in order.
"""

import numpy as np
import pytest
from family_checkpoints import write_family_checkpoint
from test_assisted_trees import PROMPT, VOCAB  # the trees' tests' prompt and vocabulary
from test_assisted_trees import tree as tree_call  # generate() with a draft, assistant_tree_width, the dict output

import habana_assist as ha
from habana_assist import _core
from habana_assist.generation.display import rounds_of

BATCH = np.array([[0, 0, 0, 33, 7, 19, 50, 4], [17, 3, 42, 8, 29, 11, 56, 2]], dtype=np.int64)
BATCH_MASK = np.array([[0, 0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]], dtype=np.int64)
LOOKUP_PROMPT = np.array([[5, 9, 3, 5, 7, 3, 5, 9, 4, 5, 7, 3, 5, 9, 3, 5]], dtype=np.int64)


@pytest.fixture(autouse=True)
def one_thread_unless_told(one_core_thread):
    yield


def perturbed_pair(root):
    """(target, draft) written under root: a random llama target and the same weights with noise, a draft that
    agrees often but not always, so that rounds accept siblings, chains and nothing."""
    write_family_checkpoint(str(root / "target"), "llama", vocab_size=VOCAB, seed=11)
    write_family_checkpoint(str(root / "draft"), "llama", vocab_size=VOCAB, seed=11, perturb=(2, 0.25))
    return (
        ha.AutoModelForCausalLM.from_pretrained(str(root / "target")),
        ha.AutoModelForCausalLM.from_pretrained(str(root / "draft")),
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return perturbed_pair(tmp_path_factory.mktemp("tree-record"))


def check_record(res, label):
    """Every invariant of res.token_trees against res's output and counts; -> (siblings accepted, rounds cut)."""
    trees, sources = res.token_trees, np.asarray(res.token_sources)
    B, n_new = sources.shape
    new = np.asarray(res.sequences)[:, -n_new:] if n_new else np.zeros((B, 0), dtype=np.int64)
    assert isinstance(trees, list) and len(trees) == B, f"{label}: expected a list of {B} rows, got {type(trees)}"
    nodes = catch_up = accepted = siblings_taken = cut = 0
    for b in range(B):
        rounds = rounds_of(sources[b])
        assert len(trees[b]) == len(rounds), (
            f"{label}, row {b}: {len(trees[b])} trees recorded, expected one per target pass ({len(rounds)})"
        )
        start = 0
        for r, (tree, length) in enumerate(zip(trees[b], rounds), 1):
            where = f"{label}, row {b}, round {r}"
            n = len(tree.tokens)
            assert tree.tokens.shape == tree.parents.shape == tree.accepted.shape == (n,), where
            assert tree.tokens.dtype == tree.parents.dtype == np.int64 and tree.accepted.dtype == bool, where
            assert 1 <= n <= 64 or (n == 0 and r == 1), f"{where}: {n} nodes, expected 1..64 (ha_lm.max_tree)"
            assert ((tree.tokens >= 0) & (tree.tokens < VOCAB)).all(), f"{where}: tokens {tree.tokens.tolist()}"
            assert all(-1 <= p < i for i, p in enumerate(tree.parents.tolist())), (
                f"{where}: parents {tree.parents.tolist()}, expected each -1 or an earlier node"
            )
            path = tree.path.tolist()
            assert path[: tree.catch_up] == list(range(tree.catch_up)), (
                f"{where}: the path {path} must start with the {tree.catch_up} catch-up nodes"
            )
            assert not path or tree.parents[path[0]] == -1, f"{where}: the path {path} does not start at a root"
            links = [int(tree.parents[path[d]]) for d in range(1, len(path))]
            assert links == path[:-1], f"{where}: path {path} is no chain of parent links (parents {links})"
            # the round's own tokens start where the row's earlier rounds ended; the catch-up ends the round before
            assert tree.position + tree.catch_up == start, (
                f"{where}: position {tree.position} + catch-up {tree.catch_up}, expected the round's first column "
                f"{start}"
            )
            columns = tree.position + np.arange(len(path))
            assert (columns < start + length).all(), f"{where}: path {path} runs past the round's {length} tokens"
            assert tree.tokens[path].tolist() == new[b, columns].tolist(), (
                f"{where}: accepted path tokens {tree.tokens[path].tolist()}, output at columns {columns.tolist()} "
                f"is {new[b, columns].tolist()}"
            )
            drafted = columns[tree.catch_up :]
            assert (sources[b, drafted] == ha.TokenSource.ACCEPTED).all(), (
                f"{where}: the accepted drafts' columns {drafted.tolist()} are marked "
                f"{sources[b, drafted].tolist()}, expected ACCEPTED"
            )
            last = r == len(rounds)  # only an eos or a stopping criterion cuts a round before the target's token
            assert tree.num_accepted == length - 1 or (tree.num_accepted == length and last), (
                f"{where}: {tree.num_accepted} accepted drafts in a round of {length} tokens"
            )
            cut += tree.num_accepted == length
            first_child = {}  # a chain with siblings: each parent's first child is the chain's candidate
            for i, p in enumerate(tree.parents.tolist()):
                first_child.setdefault(p, i)
            siblings_taken += any(first_child[int(tree.parents[x])] != x for x in path[tree.catch_up :])
            nodes += n
            catch_up += tree.catch_up
            accepted += tree.num_accepted
            start += length
    assert nodes == res.num_draft_tokens + catch_up, (
        f"{label}: {nodes} nodes recorded, expected num_draft_tokens {res.num_draft_tokens} + {catch_up} catch-up"
    )
    assert accepted == res.num_accepted_tokens, (
        f"{label}: {accepted} accepted drafts recorded, expected num_accepted_tokens {res.num_accepted_tokens}"
    )
    assert sum(len(row) for row in trees) == res.num_target_passes, label
    return siblings_taken, cut


def test_every_recorded_tree_is_the_one_its_pass_verified_and_accepted_from(pair):
    target, draft = pair
    siblings = 0
    for width, kw in (
        (2, dict(num_assistant_tokens=4, num_assistant_tokens_schedule="constant")),
        (3, dict(num_assistant_tokens=2)),
        (3, dict(num_assistant_tokens=3, do_sample=True, seed=5, temperature=0.9)),
        (2, dict(num_assistant_tokens=3, do_sample=True, seed=6, assisted_sampling="coupled")),
    ):
        res = tree_call(target, draft, PROMPT, width, **kw)
        taken, _ = check_record(res, f"width {width}, {kw}")
        siblings += taken
        assert taken == res.num_sibling_accepted, (
            f"width {width}, {kw}: {taken} recorded paths through a sibling, num_sibling_accepted "
            f"{res.num_sibling_accepted}"
        )
    assert siblings > 0, "no recorded path went through a sibling: the path off the chain went untested"


def test_dynamic_trees_are_recorded_with_their_branches_off_branches(pair):
    """assistant_tree_shape="dynamic": the same invariants; each node's first child in the record is its chosen one
    (the exactness rule), and some recorded tree expands a node off that chain (a branch of a branch, which a sibling
    tree never has)."""
    target, draft = pair
    expanded_off_chain = 0
    for width, kw in (
        (2, dict(num_assistant_tokens=4, num_assistant_tokens_schedule="constant")),
        (3, dict(num_assistant_tokens=3, do_sample=True, seed=5, temperature=0.9)),
        (2, dict(num_assistant_tokens=3, do_sample=True, seed=6, assisted_sampling="coupled")),
    ):
        res = tree_call(target, draft, PROMPT, width, assistant_tree_shape="dynamic", **kw)
        label = f"dynamic, width {width}, {kw}"
        taken, _ = check_record(res, label)
        assert taken <= res.num_sibling_accepted, (
            f"{label}: {taken} recorded rounds through a node off the chain, more than the "
            f"{res.num_sibling_accepted} such nodes accepted"
        )
        for tree in res.token_trees[0]:
            parents = tree.parents.tolist()
            first = {}
            for i, p in enumerate(parents):
                first.setdefault(p, i)
            off_chain = {i for i, p in enumerate(parents) if i >= tree.catch_up and first[p] != i}
            expanded_off_chain += any(p in off_chain for p in parents)
    assert expanded_off_chain > 0, "no recorded dynamic tree expanded a node off the chain: it verified sibling trees"


def test_prompt_lookup_and_an_eos_inside_a_round_are_recorded_as_output(pair):
    target, draft = pair
    res = tree_call(target, None, LOOKUP_PROMPT, 3, prompt_lookup_num_tokens=4, max_matching_ngram_size=2)
    check_record(res, "prompt lookup")
    assert res.num_sibling_tokens > 0, "prompt lookup proposed no sibling; the lookup tree went untested"
    # an eos that the draft proposes and the target accepts ends the row inside a round: its accepted drafts after
    # the eos never reach the output and the record leaves them out
    base = tree_call(target, draft, PROMPT, 2, num_assistant_tokens=4, num_assistant_tokens_schedule="constant")
    cuts = 0
    for tree in base.token_trees[0]:
        for d in tree.path.tolist()[tree.catch_up : -1]:  # an accepted draft with another after it
            eos = int(tree.tokens[d])
            res = tree_call(
                target,
                draft,
                PROMPT,
                2,
                num_assistant_tokens=4,
                num_assistant_tokens_schedule="constant",
                eos_token_id=eos,
                pad_token_id=0,
            )
            _, cut = check_record(res, f"eos {eos}")
            cuts += cut
            break
        if cuts:
            break
    assert cuts > 0, "no round was cut by its eos after an accepted draft: the cut record went untested"


def test_each_row_of_a_batch_records_its_own_trees(pair):
    target, draft = pair
    res = tree_call(target, draft, BATCH, 3, BATCH_MASK, num_assistant_tokens=3)
    check_record(res, "batch")
    for i in range(2):
        alone = tree_call(target, draft, BATCH[i : i + 1, 3 * (1 - i) :], 3, num_assistant_tokens=3)
        got = [
            (t.position, t.catch_up, t.tokens.tolist(), t.parents.tolist(), t.path.tolist()) for t in res.token_trees[i]
        ]
        want = [
            (t.position, t.catch_up, t.tokens.tolist(), t.parents.tolist(), t.path.tolist())
            for t in alone.token_trees[0]
        ]
        assert got == want, f"row {i}'s trees in the batch differ from the row's alone:\n{got}\n{want}"


def test_chains_carry_no_record_and_trees_keep_their_keys(pair):
    target, draft = pair
    chain = tree_call(target, draft, PROMPT, 1, num_assistant_tokens=4)
    assert chain.token_trees is None and "token_trees" not in chain.keys(), list(chain.keys())
    res = tree_call(target, draft, PROMPT, 2, num_assistant_tokens=4)
    assert "token_trees" not in res.keys() and "token_trees=<" in repr(res), (list(res.keys()), repr(res))
    assert set(res.keys()) == set(chain.keys()) | {"num_sibling_tokens", "num_sibling_accepted"}, list(res.keys())
    plain = target.generate(PROMPT, attention_mask=np.ones_like(PROMPT), max_new_tokens=4, return_dict_in_generate=True)
    assert plain.token_trees is None


def _options(model, draft, monkeypatch):
    """The options dict generate() hands _core.generate_assisted for a greedy tree call of 4 tokens (read as it goes
    by), its record's buffers and draft dropped: prompt lookup over fresh contexts."""
    seen = []

    def spy(target_ctx, draft_ctx, options):
        seen.append(dict(options))
        return real(target_ctx, draft_ctx, options)

    real = _core.generate_assisted
    monkeypatch.setattr(_core, "generate_assisted", spy)
    tree_call(model, draft, PROMPT, 2, num_assistant_tokens=2, num_assistant_tokens_schedule="constant")
    monkeypatch.setattr(_core, "generate_assisted", real)
    (options,) = seen
    assert options["tree_nodes"] is not None and options["tree_width"] == 2, sorted(options)
    return dict(options, tree_counts=None, tree_rounds=None, tree_nodes=None, prompt_lookup_num_tokens=2)


def test_the_binding_refuses_a_record_it_cannot_fill(pair, monkeypatch):
    target, draft = pair
    options = _options(target, draft, monkeypatch)
    max_new = options["max_new_tokens"]
    target_ctx = _core.Context(target._core, 1, 64)
    assert target_ctx.max_tree == 64, f"expected a native context's max_tree of 64, got {target_ctx.max_tree}"
    fields = len(_core.TREE_FIELDS)
    assert _core.TREE_FIELDS == ("start", "catch_up", "nodes", "path"), _core.TREE_FIELDS
    whole = dict(
        tree_counts=np.zeros(1, np.int64),
        tree_rounds=np.zeros((1, max_new, fields), np.int64),
        tree_nodes=np.zeros((1, max_new, 3, 64), np.int32),
    )
    for record, words in (
        (dict(tree_counts=whole["tree_counts"]), ("tree_counts", "all three None")),
        (dict(whole, tree_rounds=np.zeros((1, max_new, fields + 1), np.int64)), ("tree_rounds", "go together")),
        (dict(whole, tree_nodes=np.zeros((1, max_new, 3, 63), np.int32)), ("tree_record", "room for 64 nodes")),
    ):
        target_ctx = _core.Context(target._core, 1, 64)
        with pytest.raises(ha.InvalidInputError) as err:
            _core.generate_assisted(target_ctx, None, dict(options, **record))
        assert all(w in str(err.value) for w in words), f"expected {words} in the message, got: {err.value}"
    target_ctx = _core.Context(target._core, 1, 64)
    with pytest.raises(ha.InvalidInputError, match="assistant_tree_width > 1"):
        _core.generate_assisted(target_ctx, None, dict(options, tree_width=1, **whole))
    target_ctx = _core.Context(target._core, 1, 64)
    stats = _core.generate_assisted(target_ctx, None, dict(options, **whole))
    assert whole["tree_counts"][0] == stats.num_target_passes, (whole["tree_counts"], stats)
