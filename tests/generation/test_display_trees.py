"""The notebook view of a token-tree call (assistant_tree_width > 1): under each row, one line per target pass with
its accepted path and every branch it tried and did not take, struck through, each node the recorded one
(result.token_trees); the summary says the nodes verified and the tokens accepted per pass; every element of the box
readable in a light and a dark page (headless chromium, tests/fixtures/browser.py). A chain's view has no such box
(tests/generation/test_display.py holds the rest of the view, the same for trees and chains).
"""

import os
from html.parser import HTMLParser

import browser
import pytest

import habana_assist as ha
from habana_assist.generation import display
from habana_assist.generation.display import token_texts, tree_branches

PROMPTS = ["class Stack:\n    def push(self, item):\n        self.items", "import os\n\n\ndef walk(root):\n"]


class TreeBoxes(HTMLParser):
    """The trees' boxes of a view's HTML: rows (one per box) of rounds (one per line: its data attributes and its
    nodes, each {attrs, text, branch: the data-position of the branch it is in, or None on the path})."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.rows, self.stack, self.node, self.branch = [], [], None, None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "")
        self.stack.append(cls)
        if cls == "ha-trees":
            self.rows.append([])
        elif cls == "ha-tree":
            self.rows[-1].append({"attrs": a, "nodes": []})
        elif cls == "ha-branch":
            self.branch = int(a["data-position"])
        elif cls.startswith("ha-node-"):
            self.node = {"attrs": a, "text": "", "branch": self.branch, "cls": cls}
            self.rows[-1][-1]["nodes"].append(self.node)

    def handle_endtag(self, tag):
        cls = self.stack.pop()
        if cls.startswith("ha-node-"):
            self.node = None
        elif cls == "ha-branch":
            self.branch = None

    def handle_data(self, data):
        if self.node is not None:
            self.node["text"] += data


@pytest.fixture(scope="module")
def trees_result():
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    inputs = tok(PROMPTS, return_tensors="np", padding=True)
    res = model.generate(
        **inputs,
        max_new_tokens=24,
        assistant_model=draft,
        assistant_tree_width=3,
        num_assistant_tokens=3,
        num_assistant_tokens_schedule="constant",
        return_dict_in_generate=True,
        tokenizer=tok,
    )
    return tok, model, draft, inputs, res


def test_the_view_draws_each_pass_its_accepted_path_and_the_branches_it_tried(trees_result):
    tok, _, _, inputs, res = trees_result
    n_prompt = inputs["input_ids"].shape[1]
    rows = TreeBoxes(res._repr_html_()).rows
    assert len(rows) == 2, f"expected a box of trees under each of the 2 rows, found {len(rows)}"
    rejected_seen = 0
    for b, lines in enumerate(rows):
        trees = [(r, t) for r, t in enumerate(res.token_trees[b], 1) if t.num_drafted]  # a pass of K = 0: no tree
        assert len(lines) == len(trees), f"row {b}: {len(lines)} lines for {len(trees)} trees"
        new = res.sequences[b, n_prompt:].tolist()
        texts = token_texts(tok, res.sequences[b, :n_prompt].tolist(), new)
        for line, (r, tree) in zip(lines, trees):
            where = f"row {b}, round {r}"
            assert line["attrs"]["data-round"] == str(r), where
            assert line["attrs"]["data-nodes"] == str(len(tree.tokens)), where
            assert line["attrs"]["data-accepted"] == str(tree.num_accepted), where
            nodes = {int(n["attrs"]["data-node"]): n for n in line["nodes"]}
            assert sorted(nodes) == list(range(len(tree.tokens))), f"{where}: nodes drawn {sorted(nodes)}"
            depths = tree.depths
            for i, node in nodes.items():
                a = node["attrs"]
                assert int(a["data-token"]) == tree.tokens[i] and int(a["data-parent"]) == tree.parents[i], where
                assert int(a["data-depth"]) == depths[i], where
                if tree.accepted[i]:  # on the path: drawn as the row's token at its column, with its text
                    column = tree.position + depths[i]
                    kind = display.STYLES[ha.TokenSource(int(res.token_sources[b, column]))][0][3:]
                    assert node["branch"] is None and node["cls"] == f"ha-node-{kind}", (where, node)
                    want = texts[column].replace("\n", "\u21b5") or "\u200b"
                    if not texts[column].strip():
                        want = want.replace(" ", "\u00b7").replace("\t", "\u2192")
                    assert node["text"] == want, f"{where}: node {i} shows {node['text']!r}, the text {want!r}"
                else:  # tried and not taken: struck through, in a branch labelled with its draft position
                    assert node["cls"] == "ha-node-rejected" and "line-through" in a["style"], (where, node)
                    assert node["branch"] is not None, f"{where}: rejected node {i} outside any branch"
                    rejected_seen += 1
            # the branches, in order, each led by its first node's draft position
            branches = tree_branches(tree)
            drawn = [int(n["attrs"]["data-node"]) for n in line["nodes"] if n["branch"] is not None]
            assert drawn == [i for branch in branches for i in branch], f"{where}: branches drawn {drawn}"
            heads = [n["branch"] for n in line["nodes"] if n["branch"] is not None]
            want_heads = [int(depths[branch[0]]) - tree.catch_up + 1 for branch in branches for _ in branch]
            assert heads == want_heads, f"{where}: branch positions {heads}, expected {want_heads}"
            assert sum(len(branch) for branch in branches) == len(tree.tokens) - int(tree.accepted.sum()), where
    assert rejected_seen > 0, "no branch was drawn: the struck-through nodes went untested"


def test_the_summary_says_the_nodes_verified_and_the_tokens_accepted_per_pass(trees_result):
    _, _, _, _, res = trees_result
    page = res._repr_html_()
    passes = res.num_target_passes
    want = (
        f"token trees: {res.num_draft_tokens / passes:.2f} nodes verified and {res.num_accepted_tokens / passes:.2f} "
        f"accepted per pass ({res.num_sibling_tokens} siblings, {res.num_sibling_accepted} accepted)"
    )
    assert want in page, f"expected the summary to say {want!r}; it begins {page[:600]!r}"
    for b, row in enumerate(res.token_trees):  # each row's box: its trees, their nodes, their accepted drafts
        trees = [t for t in row if t.num_drafted]
        nodes, accepted = sum(len(t.tokens) for t in trees), sum(t.num_accepted for t in trees)
        label = f"branches tried: {len(trees)} trees of {nodes} nodes, {accepted} drafted tokens accepted"
        assert label in res.to_html(row=b), f"row {b}: expected its box labelled {label!r}"


def _box_open(page):
    (box,) = [part.split(">", 1)[0] for part in page.split('<details class="ha-trees"')[1:]]
    return " open" in box


def test_a_long_row_starts_its_box_closed_and_a_chain_has_none(trees_result, monkeypatch):
    tok, model, draft, inputs, res = trees_result
    n = sum(1 for t in res.token_trees[0] if t.num_drafted)
    assert n <= display.TREE_ROUNDS_OPEN and _box_open(res.to_html(row=0)), f"{n} trees: expected the box open"
    monkeypatch.setattr(display, "TREE_ROUNDS_OPEN", n - 1)
    assert not _box_open(res.to_html(row=0)), f"{n} trees, more than {n - 1}: expected the box closed"
    chain = model.generate(
        **inputs, max_new_tokens=12, assistant_model=draft, return_dict_in_generate=True, tokenizer=tok
    )
    page = chain._repr_html_()
    assert "ha-trees" not in page and "ha-node-" not in page and "token trees" not in page, page[:400]
    assert not TreeBoxes(page).rows
    pinned = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")  # its costs pinned, the module's kept
    pinned.set_assisted_costs(ha.AssistedCosts(draft_step=1.0, target=(1e-3, 2e-3)), assistant_model=draft)
    plain = pinned.generate(  # a draft step costing as much as 1000 target steps: no pass drafts, verifies a tree
        **inputs,
        max_new_tokens=6,
        assistant_model=draft,
        assistant_tree_width=2,
        num_assistant_tokens_schedule="cost",
        return_dict_in_generate=True,
    )
    assert all(t.num_drafted == 0 for row in plain.token_trees for t in row), plain.token_trees
    assert "ha-trees" not in plain._repr_html_(), "passes that drafted nothing drew a box of trees"


@pytest.mark.skipif(browser.CHROMIUM is None, reason=browser.SKIP_REASON)
@pytest.mark.parametrize("theme", sorted(browser.THEMES))
def test_the_branches_are_readable_in_a_light_and_a_dark_page(trees_result, theme, tmp_path):
    """Every element of the trees' boxes at WCAG AA contrast as the browser computes it, and the rows' text still
    what a reader copies (the boxes are no part of it). HA_VIEW_SCREENSHOTS=DIR also writes
    DIR/token-trees-THEME.png of row 0's view (docs/generation.md's picture of a verified tree)."""
    tok, _, _, inputs, res = trees_result
    page = res._repr_html_()
    measured = browser.measure(page, theme, str(tmp_path))
    kinds = {e["cls"] for e in measured["elements"]}
    for cls in ("ha-trees-label", "ha-tree-label", "ha-branch-label", "ha-node-rejected", "ha-node-accepted"):
        assert cls in kinds, f"{cls} was not measured in the {theme} page; measured {sorted(kinds)}"
    bad = browser.unreadable(measured)
    assert not bad, f"below {browser.AA}:1 in the {theme} page:\n" + "\n".join(bad)
    n_prompt = inputs["input_ids"].shape[1]
    for b, row in enumerate(measured["rows"]):
        n = int((res.token_sources[b] != 0).sum())
        text = tok.decode(res.sequences[b, n_prompt : n_prompt + n].tolist())
        assert row["copied"] == text, f"row {b}: copying gave {row['copied']!r}; the text is {text!r}"
    if os.environ.get("HA_VIEW_SCREENSHOTS"):
        out = os.path.join(os.environ["HA_VIEW_SCREENSHOTS"], f"token-trees-{theme}.png")
        browser.screenshot(res.to_html(row=0), theme, str(tmp_path), os.path.abspath(out), size=(860, 480))
