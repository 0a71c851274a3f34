"""Rejection-mode assisted sampling draws EXACTLY from the target's distribution (docs/design.md, promise 1).

A pair of tiny models over a vocabulary of 8 (target and an unrelated draft, so that many drafts are
rejected), at a temperature that spreads both distributions over several tokens.  The exact target
distribution of the first T generated tokens is enumerated from model(...) logits (softmax of the processed
scores at every prefix); thousands of seeded generate(assistant_model=draft, do_sample=True) calls are
compared with it by a chi-square test over the joint outcomes (cells with expected count < 5 merged),
failing at p < 1e-3.

The test has teeth: numpy simulations of three WRONG speculative samplers on the same exact p and q (every
draft accepted; a residual without the max; the bonus token from q instead of p) must fail the same test
with the same number of draws, while a correct numpy implementation of Chen et al. (2023) passes.
"""

import itertools
import math
import os

import numpy as np
import pytest
import reference as R
from checkpoints import write_random_checkpoint
from stats import chi2_sf, chi_square

import habana_assist as ha

V = 8
TINY = dict(vocab_size=V, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=16)
PROMPT = [1, 2, 3]
DRAWS = 8000  # generate() calls per distribution test (and draws per simulated sampler)
P_CRITICAL = 1e-3  # a sampler fails when the chi-square p-value is below this
TEMPERATURE = 2.0  # logits have a std of ~3; at 2.0 each distribution spreads over several tokens

# name: (K, max_new_tokens, {processors besides temperature}, assistant_confidence_threshold)
CONFIGS = {
    # only temperature matters; one draft a round, the bonus is the second token
    "K1_temperature": (1, 2, dict(top_k=0), 0.4),
    # three drafts a round and top_k=5 of 8: p(x) = 0 for some drafts and q(x) = 0 for some residual tokens,
    # and the draft's q must be processed exactly as the target's p (temperature, then top_k)
    "K3_top_k": (3, 4, dict(top_k=5), 0.0),
    # two drafts a round (and a confidence threshold cutting some rounds short), with the repetition penalty
    # over prompt + drafts and top_p: every processor in Transformers' order, for p and q alike
    "K2_top_p_repetition": (2, 3, dict(top_k=0, top_p=0.9, repetition_penalty=1.5), 0.3),
    # the cost schedule (its costs pinned: COSTS) choosing each round's K: a candidate is verified or not by what the
    # draft gave the candidates before it, never by its own probability
    "K4_cost": (4, 3, dict(top_k=0, num_assistant_tokens_schedule="cost"), 0.0),
    # token trees: two drafts a round, each with up to 3 siblings (the draft's next draws without replacement) tested
    # after a rejection (recursive rejection sampling without replacement), top_k removing some of them
    "K2_tree_width4_top_k": (2, 3, dict(top_k=6, assistant_tree_width=4), 0.0),
    # the same under the cost schedule (COSTS): it keeps a prefix of each depth's siblings, rated by their places
    "K2_tree_cost": (2, 3, dict(top_k=6, assistant_tree_width=4, num_assistant_tokens_schedule="cost"), 0.0),
    # dynamic trees: each node's 3 children drawn without replacement from q, the 3 best-ranked nodes expanded a
    # depth (2 depths: the calls' 3 tokens leave no room for more), the target verifies the K = 6 best-ranked nodes
    # (ranked by their places, never their tokens), and the walk may leave the chain and go on below the child it took
    "K6_dynamic_tree_width3_top_k": (6, 3, dict(top_k=6, assistant_tree_width=3, assistant_tree_shape="dynamic"), 0.0),
    # the same under the cost schedule (its costs pinned: COSTS): the budget keeps a prefix of the ranked nodes and
    # weighs the draft steps planned, so no node's presence depends on its own token there either
    "K6_dynamic_tree_cost": (
        6,
        3,
        dict(top_k=6, assistant_tree_width=3, assistant_tree_shape="dynamic", num_assistant_tokens_schedule="cost"),
        0.0,
    ),
}
# the cost schedule's costs for its configs: a draft step a tenth of a target pass, each node a little dearer than the
# one before, so that some rounds keep every node and others cut the tree; a draft row 0.06 more, so that the dynamic
# tree's frontier keeps the nodes acceptance likely reaches (here its first) and the others go unexpanded
COSTS = ha.AssistedCosts(
    draft_step=0.1, draft_rows=(0.1, 0.16, 0.22, 0.28), target=(1.0, 1.05, 1.1, 1.2, 1.3, 1.45, 1.6, 1.8, 2.0)
)


# ---------------------------------------------------------------------------------------------- statistics


def outcome_counts(tokens, T):
    """tokens (n, T) -> counts over the V**T joint outcomes, in ravel order."""
    return np.bincount(np.ravel_multi_index(tokens.T, (V,) * T), minlength=V**T)


# -------------------------------------------------------------------------------------- exact distributions


def distributions(
    model,
    T,
    top_k=0,
    top_p=1.0,
    repetition_penalty=1.0,
    assistant_tree_width=1,
    assistant_tree_shape="siblings",
    num_assistant_tokens_schedule="constant",
):
    """{prefix of generated tokens (tuple, length < T): the model's processed next-token distribution (V,)}:
    softmax of its logits from model(...) after Transformers' processors (repetition penalty over prompt and
    prefix, then temperature, top_k, top_p; tests/fixtures/reference.py)."""
    del assistant_tree_width, assistant_tree_shape, num_assistant_tokens_schedule  # not processors: for the calls
    table = {}
    for length in range(T):
        prefixes = list(itertools.product(range(V), repeat=length))
        logits = model(np.array([PROMPT + list(p) for p in prefixes], dtype=np.int64)).logits[:, -1]
        for prefix, row in zip(prefixes, logits):
            scores = R.process_scores(
                row,
                previous_tokens=PROMPT + list(prefix),
                do_sample=True,
                temperature_=TEMPERATURE,
                top_k_=top_k,
                top_p_=top_p,
                repetition_penalty_=repetition_penalty,
            )
            table[prefix] = R.softmax(scores)
    return table


def joint(table, T):
    """Exact probabilities of the V**T joint outcomes (ravel order): the product of the next-token
    probabilities along each sequence."""
    probs = np.ones((V,) * T)
    for outcome in itertools.product(range(V), repeat=T):
        for i in range(T):
            probs[outcome] *= table[outcome[:i]][outcome[i]]
    return probs.ravel()


# ------------------------------------------------------------------------------------ numpy samplers

SAMPLERS = ("chen", "accept_every_draft", "residual_without_max", "residual_is_p", "bonus_from_q")


def _draw(probs, u):
    c = np.cumsum(probs)
    return min(int(np.searchsorted(c, u * c[-1], side="right")), V - 1)


def simulate(P, Q, K, T, n, rng, sampler):
    """n sequences of T tokens from speculative sampling on exact tables P (target) and Q (draft), with the
    package's round structure (up to K drafts a round, never more than leaves room for the target's token).
    sampler "chen" is Chen et al. 2023: accept draft x with probability min(1, p(x)/q(x)), else draw from
    max(0, p - q) normalized, and after a fully accepted round a bonus token from p. The others are wrong:
      accept_every_draft:   every draft token is kept (the output follows q);
      residual_without_max: on rejection draw from |p - q| normalized (the negative part not removed);
      residual_is_p:        on rejection draw from p itself (no subtraction at all);
      bonus_from_q:         the bonus token after a fully accepted round is drawn from q."""
    out = np.empty((n, T), dtype=np.int64)
    for i in range(n):
        seq = ()
        while len(seq) < T:
            k = min(K, T - len(seq) - 1)
            drafts, ctx = [], seq
            for _ in range(k):
                x = _draw(Q[ctx], rng.random())
                drafts.append(x)
                ctx += (x,)
            ctx, rejected = seq, False
            for x in drafts:
                p, q = P[ctx], Q[ctx]
                if sampler == "accept_every_draft" or rng.random() * q[x] <= p[x]:
                    ctx += (x,)
                    continue
                if sampler == "residual_without_max":
                    residual = np.abs(p - q)
                elif sampler == "residual_is_p":
                    residual = p
                else:
                    residual = np.maximum(p - q, 0.0)
                ctx += (_draw(residual / residual.sum(), rng.random()),)
                rejected = True
                break
            if not rejected:
                ctx += (_draw((Q if sampler == "bonus_from_q" else P)[ctx], rng.random()),)
            seq = ctx
        out[i] = seq[:T]
    return out


def _draw_without_replacement(q, W, rng):
    """Up to W tokens drawn one after another from q, each from what the ones before left (q > 0 only)."""
    q, out = q.copy(), []
    while len(out) < W and q.sum() > 0:
        out.append(_draw(q / q.sum(), rng.random()))
        q[out[-1]] = 0.0
    return out


def simulate_tree(P, Q, K, W, T, n, rng, sampler):
    """As simulate() with token trees of width W: each draft x comes with W - 1 siblings, its next draws from Q
    without replacement. sampler "rrs" (the package's rule): x by min(1, p/q); after a rejection, recursive
    rejection sampling without replacement over the siblings in the order drawn (each rejection sets p to
    max(0, p - q) normalized and removes the rejected token from q, renormalized; sibling y taken with probability
    min(1, p(y)/q(y))); what no sibling took is drawn from the last p; a taken sibling ends the round with a bonus
    token from P after it. Wrong: "sibling_by_p" takes sibling y with probability p(y), p and q unchanged."""
    out = np.empty((n, T), dtype=np.int64)
    for i in range(n):
        seq = ()
        while len(seq) < T:
            k = min(K, T - len(seq) - 1)
            drafts, ctx = [], seq
            for _ in range(k):
                drafts.append(_draw_without_replacement(Q[ctx], W, rng))
                ctx += (drafts[-1][0],)
            ctx, done = seq, False
            for x, *siblings in drafts:
                p, q = P[ctx].copy(), Q[ctx].copy()
                if rng.random() * q[x] <= p[x]:
                    ctx += (x,)
                    continue
                for y in siblings:
                    residual = np.maximum(p - q / q.sum(), 0.0)
                    if sampler == "rrs":
                        p = residual / residual.sum() if residual.sum() > 0 else p
                        q[x] = 0.0
                    take = min(1.0, p[y] / (q[y] / q.sum())) if sampler == "rrs" else P[ctx][y]
                    if rng.random() < take:
                        ctx += (int(y), _draw(P[ctx + (int(y),)], rng.random()))
                        break
                    x = y
                else:
                    residual = np.maximum(p - q / q.sum(), 0.0) if sampler == "rrs" else np.maximum(p - q, 0.0)
                    ctx += (_draw(residual / residual.sum() if residual.sum() > 0 else p, rng.random()),)
                done = True
                break
            if not done:
                ctx += (_draw(P[ctx], rng.random()),)
            seq = ctx
        out[i] = seq[:T]
    return out


def dynamic_tree(Q, seq, k, budget, W, rng, rule):
    """A dynamic tree of depth k from the table Q after seq, as the package grows it under rejection sampling: each
    expanded node's children are W tokens drawn without replacement from its q; under rule "rrs" the s-th child is
    ranked by q's s-th highest probability, whatever was drawn (the exactness rule: a child's place never depends
    on its own token), a node's cum the product of ranks along its path; at each depth the W nodes of highest cum
    are expanded; the verified tree is the `budget` nodes of highest cum (then lower depth, lower index), chosen
    one at a time among those whose parent is in. Rule "rank_by_own_probability" ranks each child by its own
    token's probability instead (EAGLE-2's cum). Returns (nodes, verified): nodes as dicts of tok, parent, depth,
    cum, ctx, children (in the order drawn)."""
    nodes = [dict(tok=None, parent=-1, depth=-1, cum=1.0, ctx=seq, children=[])]

    def expand(i):
        q = Q[nodes[i]["ctx"]]
        ranks = np.sort(q)[::-1]
        for s, y in enumerate(_draw_without_replacement(q, W, rng)):
            rank = ranks[s] if rule == "rrs" else q[y]
            nodes[i]["children"].append(len(nodes))
            c = dict(tok=y, parent=i, depth=nodes[i]["depth"] + 1, cum=nodes[i]["cum"] * rank, children=[])
            nodes.append(dict(c, ctx=nodes[i]["ctx"] + (y,)))

    expand(0)
    for d in range(1, k):
        level = sorted((j for j in range(1, len(nodes)) if nodes[j]["depth"] == d - 1), key=lambda j: -nodes[j]["cum"])
        for j in level[:W]:
            expand(j)
    verified = []
    while len(verified) < budget:
        ok = [j for j in range(1, len(nodes)) if j not in verified and (nodes[j]["parent"] in verified + [0])]
        if not ok:
            break
        verified.append(min(ok, key=lambda j: (-nodes[j]["cum"], nodes[j]["depth"], j)))
    return nodes, set(verified)


def simulate_dynamic(P, Q, K, W, T, n, rng, sampler):
    """As simulate() with dynamic trees (dynamic_tree). At each node, recursive rejection sampling without
    replacement over its verified children in the order drawn: child y is taken with probability
    min(1, p(y) / q(y)); each rejection of x sets p = max(0, p - q) normalized and removes x from q
    (renormalized); where no child is taken the token is drawn from the last p; at a node without verified
    children, a token from p. sampler "rrs" is the package's rule; "rank_by_own_probability" verifies the nodes
    ranked by their own tokens' probabilities, so a child's presence depends on its own token."""
    out = np.empty((n, T), dtype=np.int64)
    for i in range(n):
        seq = ()
        while len(seq) < T:
            k = min(K, T - len(seq) - 1)
            if k == 0:
                seq += (_draw(P[seq], rng.random()),)
                continue
            nodes, verified = dynamic_tree(Q, seq, k, K, W, rng, sampler)  # K: the budget, k: the depth
            cur, ctx = 0, seq
            while True:
                p, q, to = P[ctx].copy(), Q[ctx].copy(), None
                for c in nodes[cur]["children"]:
                    if c not in verified or q.sum() <= 0:
                        break
                    y = nodes[c]["tok"]
                    if rng.random() * q[y] / q.sum() <= p[y]:
                        to = c
                        break
                    residual = np.maximum(p - q / q.sum(), 0.0)
                    p = residual / residual.sum() if residual.sum() > 0 else p
                    q[y] = 0.0
                if to is None:
                    ctx += (_draw(p, rng.random()),)
                    break
                cur, ctx = to, ctx + (nodes[to]["tok"],)
            seq = ctx
        out[i] = seq[:T]
    return out


# ------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("rejection"))
    write_random_checkpoint(os.path.join(root, "target"), seed=11, **TINY)
    write_random_checkpoint(os.path.join(root, "draft"), seed=12, **TINY)
    return (
        ha.AutoModelForCausalLM.from_pretrained(os.path.join(root, "target")),
        ha.AutoModelForCausalLM.from_pretrained(os.path.join(root, "draft")),
    )


@pytest.fixture(scope="module")
def exact(pair):
    """{config name: (P table, Q table, exact joint target probabilities)}."""
    target, draft = pair
    out = {}
    for name, (K, T, processors, _) in CONFIGS.items():
        P, Q = distributions(target, T, **processors), distributions(draft, T, **processors)
        out[name] = (P, Q, joint(P, T))
    return out


@pytest.fixture(autouse=True)
def one_thread(one_core_thread):
    """Thousands of calls on a tiny model: one thread avoids pool hand-offs (results do not depend on it)."""
    yield


def sample_package(target, draft, K, T, threshold, seeds, **kw):
    """(tokens (n, T), drafted, accepted) from one seeded generate() call per seed."""
    prompt = np.array([PROMPT], dtype=np.int64)
    rows, drafted, accepted, sib_drafted, siblings = [], 0, 0, 0, 0
    for seed in seeds:
        res = target.generate(
            prompt,
            assistant_model=draft,
            do_sample=True,
            seed=seed,
            max_new_tokens=T,
            temperature=TEMPERATURE,
            num_assistant_tokens=K,
            assistant_confidence_threshold=threshold,
            return_dict_in_generate=True,
            **kw,
        )
        rows.append(res.sequences[0, len(PROMPT) :])
        drafted += res.num_draft_tokens
        accepted += res.num_accepted_tokens
        sib_drafted += res.num_sibling_tokens or 0
        siblings += res.num_sibling_accepted or 0
    tokens = np.array(rows, dtype=np.int64)
    assert tokens.shape == (len(seeds), T), f"expected {T} new tokens from every call, got shape {tokens.shape}"
    assert ((tokens >= 0) & (tokens < V)).all(), f"invalid token ids {np.unique(tokens).tolist()} (vocab {V})"
    return tokens, drafted, accepted, sib_drafted, siblings


# ---------------------------------------------------------------------------------------------- tests


def test_chi_square_helper_matches_known_quantiles():
    # 0.999 quantiles of chi-square with 1, 10 and 100 degrees of freedom (standard tables)
    for x, df in ((10.828, 1), (29.588, 10), (149.449, 100)):
        assert abs(chi2_sf(x, df) - 1e-3) < 2e-6, f"chi2_sf({x}, {df}) should be 1e-3, got {chi2_sf(x, df)}"
    assert abs(chi2_sf(2.0, 2) - math.exp(-1.0)) < 1e-12  # df = 2 is exponential: exp(-x/2)


@pytest.mark.parametrize("config", CONFIGS)
def test_rejection_sampling_draws_exactly_the_target_distribution(pair, exact, config):
    target, draft = pair
    K, T, processors, threshold = CONFIGS[config]
    P, Q, probs = exact[config]
    if processors.get("num_assistant_tokens_schedule") == "cost":
        target.set_assisted_costs(COSTS, assistant_model=draft)
    tokens, drafted, accepted, sib_drafted, siblings = sample_package(
        target, draft, K, T, threshold, range(DRAWS), **processors
    )
    counts = outcome_counts(tokens, T)
    impossible = int(counts[probs == 0].sum())
    assert impossible == 0, (
        f"{config}: {impossible} of {DRAWS} sequences have probability 0 under the target "
        f"(a token its processors {processors} remove)"
    )
    stat, df, p = chi_square(counts, probs)
    assert p >= P_CRITICAL, (
        f"{config}: the joint distribution of the first {T} tokens from {DRAWS} rejection-sampled assisted calls "
        f"(K={K}, {processors}) should be the target's; chi-square {stat:.1f} on {df} degrees of freedom, "
        f"p = {p:.3g} < {P_CRITICAL}"
    )
    if "tree" in config:  # nodes verified include the siblings: rarer acceptance per node, yet some accepted
        assert siblings > 0, f"{config}: no sibling was accepted in {DRAWS} calls; the tree's path went untested"
        drafted -= sib_drafted
    assert 0.1 < accepted / drafted < 0.9, (
        f"{config}: a draft this different from the target must be rejected often but not always, accepted "
        f"{accepted} of {drafted}"
    )


@pytest.mark.parametrize("sampler", ("rrs", "rank_by_own_probability"))
def test_chi_square_tells_the_dynamic_tree_rule_from_a_wrong_one(exact, sampler):
    K, T, processors, _ = CONFIGS["K6_dynamic_tree_width3_top_k"]
    P, Q, probs = exact["K6_dynamic_tree_width3_top_k"]
    W = processors["assistant_tree_width"]
    tokens = simulate_dynamic(P, Q, K, W, T, DRAWS, np.random.default_rng(78), sampler)
    stat, df, p = chi_square(outcome_counts(tokens, T), probs)
    if sampler == "rrs":
        assert p >= P_CRITICAL, (
            f"the numpy dynamic tree rule (control) should pass: chi-square {stat:.1f} on {df} degrees of freedom, "
            f"p = {p:.3g}"
        )
    else:
        assert p < P_CRITICAL, (
            f"the wrong dynamic tree rule {sampler!r} should fail with {DRAWS} draws, but got chi-square "
            f"{stat:.1f} on {df} degrees of freedom, p = {p:.3g} >= {P_CRITICAL}"
        )


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("config", [c for c in CONFIGS if "tree" not in c])
def test_chi_square_rejects_wrong_speculative_samplers(exact, config, sampler):
    K, T, _, _ = CONFIGS[config]
    P, Q, probs = exact[config]
    tokens = simulate(P, Q, K, T, DRAWS, np.random.default_rng(1000 + SAMPLERS.index(sampler)), sampler)
    stat, df, p = chi_square(outcome_counts(tokens, T), probs)
    if sampler == "chen":
        assert p >= P_CRITICAL, (
            f"{config}: the correct numpy speculative sampler (control) should pass: "
            f"chi-square {stat:.1f} on {df} degrees of freedom, p = {p:.3g}"
        )
    else:
        assert p < P_CRITICAL, (
            f"{config}: the wrong sampler {sampler!r} should fail the chi-square test with "
            f"{DRAWS} draws, but got chi-square {stat:.1f} on {df} degrees of freedom, "
            f"p = {p:.3g} >= {P_CRITICAL}"
        )


@pytest.mark.parametrize("sampler", ("rrs", "sibling_by_p"))
def test_chi_square_tells_the_tree_rule_from_a_wrong_one(exact, sampler):
    K, T, processors, _ = CONFIGS["K2_tree_width4_top_k"]
    P, Q, probs = exact["K2_tree_width4_top_k"]
    tokens = simulate_tree(P, Q, K, processors["assistant_tree_width"], T, DRAWS, np.random.default_rng(77), sampler)
    stat, df, p = chi_square(outcome_counts(tokens, T), probs)
    if sampler == "rrs":
        assert p >= P_CRITICAL, (
            f"the numpy tree rule (control) should pass: chi-square {stat:.1f} on {df} degrees of freedom, p = {p:.3g}"
        )
    else:
        assert p < P_CRITICAL, (
            f"the wrong tree rule {sampler!r} should fail with {DRAWS} draws, but got chi-square "
            f"{stat:.1f} on {df} degrees of freedom, p = {p:.3g} >= {P_CRITICAL}"
        )


def test_rejection_is_the_default_assisted_sampling(pair):
    target, draft = pair
    for seed in range(40):
        kw = dict(
            do_sample=True,
            seed=seed,
            max_new_tokens=4,
            temperature=TEMPERATURE,
            top_k=0,
            num_assistant_tokens=3,
            assistant_model=draft,
        )
        default = target.generate(np.array([PROMPT]), **kw)
        rejection = target.generate(np.array([PROMPT]), assisted_sampling="rejection", **kw)
        assert np.array_equal(default, rejection), (
            f"seed {seed}: the default assisted sampling should be 'rejection': {default.tolist()} vs "
            f"{rejection.tolist()}"
        )


def test_target_as_its_own_draft_accepts_every_draft_and_draws_the_target_distribution(pair):
    target, _ = pair
    K, T = 3, 3
    P = distributions(target, T)
    tokens, drafted, accepted, _, _ = sample_package(target, target, K, T, 0.0, range(DRAWS), top_k=0)
    assert accepted == drafted > 0, (
        f"with p == q, min(1, p/q) = 1: every draft must be accepted, got {accepted} of {drafted}"
    )
    stat, df, p = chi_square(outcome_counts(tokens, T), joint(P, T))
    assert p >= P_CRITICAL, (
        f"target as its own draft, K={K}: chi-square {stat:.1f} on {df} degrees of freedom, p = {p:.3g} < {P_CRITICAL}"
    )


def test_one_hot_p_and_q_give_the_target_argmax_never_nan_or_invalid(pair):
    """top_k=1: q is one-hot on the draft's argmax and p on the target's. A draft with p(x) = 0 is always
    rejected and the residual max(0, p - q) is p itself (q = 0 there): the output is greedy's, whatever the
    seed; never a NaN-driven invalid token."""
    target, draft = pair
    prompt = np.array([PROMPT])
    greedy = target.generate(prompt, max_new_tokens=6)
    drafted = accepted = 0
    for seed in range(100):
        res = target.generate(
            prompt,
            assistant_model=draft,
            do_sample=True,
            seed=seed,
            max_new_tokens=6,
            top_k=1,
            temperature=TEMPERATURE,
            num_assistant_tokens=1 + seed % 4,
            assistant_confidence_threshold=0.0,
            return_dict_in_generate=True,
        )
        assert np.array_equal(res.sequences, greedy), (
            f"seed {seed}, top_k=1: expected the target's greedy {greedy.tolist()}, got {res.sequences.tolist()}"
        )
        drafted += res.num_draft_tokens
        accepted += res.num_accepted_tokens
    assert accepted < drafted, f"test setup: some one-hot drafts should be rejected, accepted {accepted} of {drafted}"


def test_rejection_never_emits_a_token_the_target_removed(pair):
    """top_k=2 with different models: many drafts have p(x) = 0 and many residual tokens q = 0; every token
    must be valid and inside the target's top 2 at its prefix."""
    target, draft = pair
    K, T = 3, 4
    P = distributions(target, T, top_k=2)
    tokens, drafted, accepted, _, _ = sample_package(target, draft, K, T, 0.0, range(500), top_k=2)
    assert accepted < drafted
    for row in tokens:
        for i in range(T):
            assert P[tuple(row[:i])][row[i]] > 0, (
                f"token {row[i]} at step {i} of {row.tolist()} is outside the target's top_k=2 "
                f"(probabilities {np.round(P[tuple(row[:i])], 3).tolist()})"
            )
