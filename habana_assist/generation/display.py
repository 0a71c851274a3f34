"""What a generation looks like in a notebook: the HTML view of a GenerateDecoderOnlyOutput (its text, each token
marked by how it was decided; with token trees, the branches each target pass tried) and plot_acceptance
(acceptance by draft position, tokens per target pass).

Both read only the result: token_sources (TokenSource per generated token), token_trees (token_tree.py: the trees
verified, with assistant_tree_width > 1), the counts of assisted generation, and the tokenizer generate() was given
(or the checkpoint's, loaded when the view is first asked for).
"""

from __future__ import annotations

import html
import io
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidInputError
from ..tokenization.tokenization_utils import AutoTokenizer
from ..utils.tensors import to_numpy
from .token_source import TokenSource

if TYPE_CHECKING:
    from .outputs import GenerateDecoderOnlyOutput

# TokenSource -> (CSS class, background, text decoration, legend); NONE is never drawn (padding after a row stopped).
# Blue and orange families, one text colour: every pair of backgrounds stays >= 10 CIELAB units apart under
# protanopia, deuteranopia and tritanopia simulations, and the decoration is a second cue beside the colour
# (tests/generation/test_display.py checks both; tests/generation/test_display_browser.py the contrast in a browser).
STYLES = {
    TokenSource.ACCEPTED: ("ha-accepted", "#cfe2f7", "none", "draft token accepted"),
    TokenSource.CORRECTED: ("ha-corrected", "#f9c891", "underline wavy", "target's token after a rejection"),
    TokenSource.BONUS: ("ha-bonus", "#9ec5f0", "underline double", "target's token after a fully accepted draft"),
    TokenSource.PLAIN: ("ha-plain", "#e4e4e4", "underline dotted", "plain decoding (nothing drafted)"),
}
TEXT = "#1a1a1a"  # text on every token background: contrast >= 9:1 on each (WCAG AA asks 4.5)
EDGE = "rgba(0,0,0,0.28)"  # the thin boundary drawn inside each token's right edge
# after the last token of each target pass: a dark bar with a white one outside it, one of them seen on any page
ROUND_END = f"border-right:2px solid {TEXT};margin-right:3px"
ROUND_END_SHADOW = "2px 0 0 #ffffff"
PROMPT_BOX = "color:#303030;background:#f3f3f3;border:1px dashed #707070"
SPECIAL = "color:#ffffff;background:#505050;border-radius:3px;padding:0 2px;font-size:0.85em"
# Glyphs for whitespace, drawn by CSS generated content: shown, never part of the text a reader copies (a page
# that drops <style> shows the tokens without them). ha-sp overlays a space, ha-nl precedes a newline.
CSS = (
    ".ha-generation .ha-sp{position:relative}"
    ".ha-generation .ha-sp::after{content:'\\00b7';position:absolute;left:0;right:0;text-align:center;"
    "opacity:0.6}"
    ".ha-generation .ha-tab::before{content:'\\2192';position:absolute;opacity:0.6}"
    ".ha-generation .ha-tab{position:relative}"
    ".ha-generation .ha-nl::before{content:'\\21b5';opacity:0.6}"
)
# Token trees: under each row, a box of its target passes' trees, one line per pass: the accepted path (its nodes drawn
# as the row's tokens are) and each branch tried and not taken, struck through, after the draft position it began at.
# Explicit colours throughout, as the tokens': text >= 4.5:1 on the box in any page (test_display_browser.py).
TREE_BOX = "color:#1a1a1a;background:#fafafa;border:1px solid #b0b0b0"
TREE_LABEL = "color:#404040;font-size:0.85em"  # round numbers and draft positions: 9.9:1 on the box
# a node tried and not taken: 6.1:1, struck through as a second cue beside the grey
REJECTED = (
    "color:#595959;background:#efefef;text-decoration:line-through #595959;border:1px dotted #8c8c8c;padding:0 1px"
)
TREE_ROUNDS_OPEN = 12  # a row's box of trees starts open up to this many passes (a click opens a longer one)
SPECIAL_NAMES = {"bos_token": "BOS", "eos_token": "EOS", "unk_token": "UNK", "pad_token": "PAD"}
MAX_ROWS = 8  # rows the notebook view shows of a batch (to_html(row=i) shows any one)
PROMPT_TAIL = 160  # characters of the prompt shown before the generated text (whole lines where possible)
WINDOW = 8  # tokens decoded before a token to find its own text (see token_texts)


def _token_style(source, round_end):
    """The inline style of one token span: explicit colours (never inherited from the page's theme)."""
    _, background, decoration, _ = STYLES[source]
    style = f"color:{TEXT};background:{background};box-shadow:inset -1px 0 0 {EDGE}"
    if round_end:
        style += f",{ROUND_END_SHADOW};{ROUND_END}"
    if decoration != "none":
        style += f";text-decoration:{decoration} {TEXT}"
    return style


def _sources(result):
    if getattr(result, "token_sources", None) is None:
        raise InvalidInputError("this result has no token_sources: pass return_dict_in_generate=True to generate()")
    return to_numpy(result.token_sources, "token_sources")[0]


def rounds_of(sources):
    """Tokens per target pass of one row's token_sources (n,): a round is a run of ACCEPTED tokens and the
    target's own token after it (PLAIN, CORRECTED, BONUS); a trailing run without one is a round that eos or
    max_new_tokens cut. -> list of ints, one per round, in order."""
    rounds, run = [], 0
    for s in sources:
        if s == TokenSource.NONE:
            break
        run += 1
        if s != TokenSource.ACCEPTED:
            rounds.append(run)
            run = 0
    if run:
        rounds.append(run)
    return rounds


def token_rounds(sources):
    """Per token of one row's token_sources (n,): (round, draft position, last of its round), rounds counted from
    1 as rounds_of counts them; the draft position is 1-based (ACCEPTED: its place in the draft; CORRECTED: the
    place the draft was rejected at; BONUS: the place after the whole draft; PLAIN: 0, nothing drafted).
    -> list of (int, int, bool), one per token before the first NONE."""
    out, start = [], 0
    for r, length in enumerate(rounds_of(sources), 1):
        for j in range(length):
            s = sources[start + j]
            out.append((r, 0 if s == TokenSource.PLAIN else j + 1, j == length - 1))
        start += length
    return out


def _tokenizer(result, tokenizer):
    """The tokenizer to decode with, or None (ids are shown): the argument, else what generate() left on the result
    (a tokenizer, or a checkpoint path loaded here once and kept)."""
    if tokenizer is not None:
        return tokenizer
    tok = getattr(result, "_tokenizer", None)
    if isinstance(tok, str):
        try:
            tok = AutoTokenizer.from_pretrained(tok)
        except Exception:  # a checkpoint without tokenizer files: the view shows ids
            tok = None
        result._tokenizer = tok
    return tok


def token_texts(tokenizer, prompt, new):
    """The text each of `new` token ids adds after `prompt` (ids), decoded with the WINDOW tokens before it so that
    word-initial spaces and multi-byte characters come out as in the whole text: a token that ends inside a
    UTF-8 character adds nothing, the one that completes it adds the character. -> list of str."""
    ids = [int(t) for t in prompt[-WINDOW:]] + [int(t) for t in new]
    base = len(ids) - len(new)
    texts = []
    for i in range(base, len(ids)):
        lo = max(0, i - WINDOW)
        before = tokenizer.decode(ids[lo:i]).rstrip("\ufffd") if i > lo else ""
        after = tokenizer.decode(ids[lo : i + 1]).rstrip("\ufffd")
        texts.append(after[len(before) :] if after.startswith(before) else tokenizer.decode([ids[i]]))
    return texts


def _summary(result, n_rows):
    """The summary line of the whole call, from the result's counts."""
    src = _sources(result)
    new = int(np.count_nonzero(src))
    rounds = sum(len(rounds_of(row)) for row in src)
    parts = [f"{new} new token{'s' if new != 1 else ''}" + (f" in {n_rows} rows" if n_rows > 1 else "")]
    if getattr(result, "num_target_passes", None) is not None:
        parts.append(f"{result.num_target_passes} target passes")
        parts.append(f"{new / max(rounds, 1):.2f} tokens per pass")
        drafted, accepted = result.num_draft_tokens, result.num_accepted_tokens
        rate = f" ({accepted / drafted:.0%})" if drafted else ""
        parts.append(f"acceptance {accepted} of {drafted} drafted{rate}")
        if getattr(result, "num_sibling_tokens", None) is not None:  # token trees: the nodes are the drafts
            passes = max(result.num_target_passes, 1)
            parts.append(
                f"token trees: {drafted / passes:.2f} nodes verified and {accepted / passes:.2f} accepted per pass "
                f"({result.num_sibling_tokens} siblings, {result.num_sibling_accepted} accepted)"
            )
    else:
        parts.append("plain decoding: one token per target pass")
    return ", ".join(parts)


def _plain_note(result, sources):
    """The line under the summary that says why an assisted run (its token_sources, (B, n)) has plain tokens, or
    ""."""
    plain = int(np.count_nonzero(sources == TokenSource.PLAIN))
    if not plain or getattr(result, "num_target_passes", None) is None:
        return ""
    return (
        f"{plain} plain token{'s' if plain != 1 else ''}: {'a round' if plain == 1 else 'rounds'} that drafted "
        "nothing (no room left before max_new_tokens, K = 0 under the cost schedule, or no prompt-lookup match)"
    )


def _special_names(tok):
    """{id: name} of the tokenizer's special tokens: BOS, EOS, UNK, PAD, or an additional token's own text."""
    names = {}
    try:
        for attr, value in tok.special_tokens_map.items():
            for text in value if isinstance(value, (list, tuple)) else [value]:
                ids = tok.convert_tokens_to_ids([text])
                if ids and ids[0] is not None:
                    names.setdefault(int(ids[0]), SPECIAL_NAMES.get(attr, text))
    except (AttributeError, TypeError):  # a tokenizer-like object without the special-token API
        pass
    return names


def prompt_pieces(tok, prompt):
    """The prompt (ids) as the view shows it: its last lines, about PROMPT_TAIL characters cut at a line boundary
    where one is near, each special token apart as its name, left padding dropped. -> (pieces: list of (text, None)
    or (name, the special token's own text), lines shown, lines in all, cut mid-line)."""
    names = _special_names(tok)
    ids = [int(t) for t in prompt]
    pad = getattr(tok, "pad_token_id", None)
    while ids and pad is not None and ids[0] == pad:  # a batch's left padding is no part of the row's prompt
        ids.pop(0)
    pieces, run = [], []
    for t in ids + [None]:
        if t is None or t in names:
            if run:
                pieces.append((tok.decode(run), None))
                run = []
            if t is not None:
                pieces.append((names[t], tok.convert_ids_to_tokens([t])[0]))
        else:
            run.append(t)
    text = "".join(p for p, _ in pieces)
    start, mid_line = 0, False
    if len(text) > PROMPT_TAIL:
        start = len(text) - PROMPT_TAIL
        back = text.rfind("\n", 0, start) + 1  # the beginning of the line the cut falls in
        ahead = text.find("\n", start, len(text) - 1) + 1  # the next line's, if the prompt has one after it
        if start - back <= PROMPT_TAIL // 2:
            start = back
        elif ahead:
            start = ahead
        else:
            mid_line = True
    shown, at = [], 0
    for piece, own in pieces:  # pieces after `start`; a special token is kept or dropped whole
        if at + len(piece) > start:
            shown.append((piece if own is not None or at >= start else piece[start - at :], own))
        at += len(piece)
    return shown, text[start:].count("\n") + 1, text.count("\n") + 1, mid_line


def _whitespace_marked(text):
    """A token's text, HTML-escaped, its newlines (and, in a token of whitespace only, its spaces and tabs) wrapped
    for the CSS glyphs: the text inside stays the same characters."""
    blank = text.strip() == ""
    out = []
    for ch in text:
        if ch == "\n":
            out.append('<span class="ha-nl">\n</span>')
        elif blank and ch == " ":
            out.append('<span class="ha-sp"> </span>')
        elif blank and ch == "\t":
            out.append('<span class="ha-tab">\t</span>')
        else:
            out.append(html.escape(ch))
    return "".join(out)


def _prompt_html(tok, prompt, row=None):
    """The prompt's labelled box (a block above the generated text; `row` named in the label where given), or ""
    without a tokenizer."""
    if tok is None or len(prompt) == 0:
        return ""
    pieces, shown, lines, mid_line = prompt_pieces(tok, prompt)
    label = (
        ("" if row is None else f"row {row}: ")
        + "prompt"
        + (f", its last {shown} of {lines} lines" if shown < lines else "")
    )
    body = "".join(
        f'<span class="ha-special" style="{SPECIAL}" title="special token {html.escape(own)}">'
        f"{html.escape(text)}</span>"
        if own is not None
        else html.escape(text)
        for text, own in pieces
    )
    return (
        f'<div class="ha-prompt" style="{PROMPT_BOX};margin:4px 0 0 0;padding:2px 4px">'
        f'<div class="ha-prompt-label" style="font-size:0.85em;font-style:italic">{html.escape(label)}</div>'
        f'<pre style="white-space:pre-wrap;margin:0;color:inherit;background:inherit">'
        f"{'…' if mid_line else ''}{body}</pre></div>"
    )


def _legend():
    """One sample per kind, drawn as the tokens are, then the round's end and the prompt's box."""
    items = [
        f'<span class="ha-legend-{cls[3:]}" style="{_token_style(source, False)};padding:0 3px">'
        f"{html.escape(label)}</span>"
        for source, (cls, _, _, label) in STYLES.items()
    ]
    items.append(
        f'<span class="ha-legend-end" style="{_token_style(TokenSource.ACCEPTED, True)};padding:0 3px">'
        "end of a target pass</span>"
    )
    items.append(f'<span class="ha-legend-prompt" style="{PROMPT_BOX};padding:0 3px">prompt</span>')
    items.append(f'<span class="ha-legend-special" style="{SPECIAL}">special token</span>')
    return " ".join(items)


def tree_branches(tree):
    """The branches one TokenTree tried and did not take, each a chain of its rejected nodes: a branch begins at a
    rejected node whose parent is on the accepted path (or that is a root), or at a rejected node that is not the
    first rejected child of its rejected parent, and goes on down the first rejected child. -> list of lists of
    node indices, in the order the pass took their first nodes."""
    parents = tree.parents.tolist()
    accepted = tree.accepted.tolist()
    first_child = {}
    for i, p in enumerate(parents):
        if not accepted[i] and p >= 0 and not accepted[p]:
            first_child.setdefault(p, i)
    branches = []
    for i, p in enumerate(parents):
        if accepted[i] or (p >= 0 and not accepted[p] and first_child[p] == i):
            continue
        branch = [i]
        while branch[-1] in first_child:
            branch.append(first_child[branch[-1]])
        branches.append(branch)
    return branches


def _node_texts(tok, context, tree):
    """The text of each node of tree after `context` (the row's ids before the tree's depth 0), decoded after its
    own ancestors. -> list of str."""
    if tok is None:
        return [f"[{int(t)}]" for t in tree.tokens]
    tokens, parents = tree.tokens.tolist(), tree.parents.tolist()
    texts = []
    for i in range(len(tokens)):
        ancestors, p = [], parents[i]
        while p >= 0 and len(ancestors) < WINDOW:
            ancestors.append(tokens[p])
            p = parents[p]
        texts.append(token_texts(tok, list(context[-WINDOW:]) + ancestors[::-1], [tokens[i]])[0])
    return texts


def _node_text(text):
    """A node's text for the trees' box, HTML-escaped, on one line: a newline, a tab and (in a token of whitespace
    only) a space shown as the glyphs the row's text draws for them (the box is no text to copy); an empty text (a
    token ending inside a UTF-8 character) as a zero-width space, so that its span keeps its place."""
    if not text:
        return "&#8203;"
    blank = text.strip() == ""
    glyphs = {"\n": "\u21b5", "\t": "\u2192"} if not blank else {"\n": "\u21b5", "\t": "\u2192", " ": "\u00b7"}
    return html.escape("".join(glyphs.get(ch, ch) for ch in text))


def _node_span(cls, style, i, tree, depths, text, title):
    """One node of a tree as a span: its index, depth, parent and token id as data attributes, its text shown."""
    return (
        f'<span class="{cls}" data-node="{i}" data-depth="{int(depths[i])}" data-parent="{int(tree.parents[i])}" '
        f'data-token="{int(tree.tokens[i])}" style="{style};white-space:pre" title="{html.escape(title)}">'
        f"{_node_text(text)}</span>"
    )


def _trees_html(tok, prompt, new, sources, trees):
    """The box of one row's trees (TokenTree per target pass): a line per pass that drafted, its accepted path then
    its branches tried and not taken (a pass that drafted nothing verified no tree: its token is the row's PLAIN one);
    "" where no pass drafted."""
    drafted = [(r, tree) for r, tree in enumerate(trees, 1) if tree.num_drafted]
    if not drafted:
        return ""
    lines = []
    for r, tree in drafted:
        depths = tree.depths
        context = [int(t) for t in prompt] + [int(t) for t in new[: tree.position]]
        texts = _node_texts(tok, context, tree)
        path = []
        for i in tree.path.tolist():  # node d of the path is the row's token at column position + d
            column = tree.position + int(depths[i])
            source = TokenSource(int(sources[column]))
            where = (
                "the round before's token, which this round caught up on"
                if i < tree.catch_up
                else f"accepted at draft position {column - tree.position - tree.catch_up + 1}"
            )
            title = f"{texts[i]!r}, id {int(tree.tokens[i])}\n{where}"
            style = _token_style(source, False)
            path.append(_node_span(f"ha-node-{STYLES[source][0][3:]}", style, i, tree, depths, texts[i], title))
        branches = []
        for branch in tree_branches(tree):
            head = branch[0]
            position = int(depths[head]) - tree.catch_up + 1
            parent = int(tree.parents[head])
            after = f"after {texts[parent]!r}" if parent >= 0 else "at the round's first position"
            # a branch off the accepted path says its draft position; one off another branch, the node it follows
            label = f"{position}:" if parent < 0 or tree.accepted[parent] else f"{position} after {texts[parent]!r}:"
            nodes = []
            for i in branch:
                title = (
                    f"{texts[i]!r}, id {int(tree.tokens[i])}\ntried at draft position "
                    f"{int(depths[i]) - tree.catch_up + 1} ({after if i == head else 'after the node before'}), "
                    "not taken"
                )
                nodes.append(_node_span("ha-node-rejected", REJECTED, i, tree, depths, texts[i], title))
            branches.append(
                f'<span class="ha-branch" data-position="{position}" style="margin-left:6px;white-space:nowrap">'
                f'<span class="ha-branch-label" style="{TREE_LABEL}">{html.escape(label)}</span>{"".join(nodes)}</span>'
            )
        lines.append(
            f'<div class="ha-tree" data-round="{r}" data-nodes="{len(tree.tokens)}" '
            f'data-accepted="{tree.num_accepted}" style="margin:1px 0;white-space:normal;line-height:1.6">'
            f'<span class="ha-tree-label" style="{TREE_LABEL}">round {r}, {len(tree.tokens)} '
            f"node{'s' if len(tree.tokens) != 1 else ''}: </span>"
            f"{''.join(path)}{''.join(branches)}</div>"
        )
    nodes = sum(len(t.tokens) for _, t in drafted)
    accepted = sum(t.num_accepted for _, t in drafted)
    label = (
        f"branches tried: {len(drafted)} trees of {nodes} nodes, {accepted} drafted tokens accepted "
        "(the accepted path drawn as the text, each branch not taken struck through after its draft position)"
    )
    return (
        f'<details class="ha-trees"{" open" if len(drafted) <= TREE_ROUNDS_OPEN else ""} '
        f'style="{TREE_BOX};margin:0 0 6px 0;padding:2px 4px;font-size:0.9em">'
        f'<summary class="ha-trees-label" style="cursor:pointer">{html.escape(label)}</summary>'
        f"{''.join(lines)}</details>"
    )


def result_html(result, tokenizer=None, row=None):
    """HTML of a result: row `row`, or (None) the first MAX_ROWS rows; see GenerateDecoderOnlyOutput.to_html.
    Each token is <span class="ha-KIND" data-round=R data-position=P style=... title=...>its text</span>, KIND
    one of STYLES' classes; the spans' text, joined, is the decoded text."""
    src = _sources(result)
    seq = to_numpy(result.sequences, "sequences")[0]  # torch where the call's input was
    B, n_new = src.shape
    if row is not None and not 0 <= row < B:
        raise InvalidInputError(f"row={row} is outside the batch of {B}; pass 0..{B - 1}")
    tok = _tokenizer(result, tokenizer)
    out = [
        f'<div class="ha-generation" style="font-size:0.9em"><style>{CSS}</style>',
        f'<div class="ha-summary"><b>{html.escape(_summary(result, B))}</b></div>',
        f'<div class="ha-legend" style="margin:2px 0;line-height:1.8">{_legend()}</div>',
    ]
    note = _plain_note(result, src)
    if note:
        out.insert(2, f'<div class="ha-note" style="font-size:0.9em">{html.escape(note)}</div>')
    rows = [row] if row is not None else range(min(B, MAX_ROWS))
    for b in rows:
        prompt, new = seq[b, : seq.shape[1] - n_new], seq[b, seq.shape[1] - n_new :]
        n = int(np.count_nonzero(src[b]))
        texts = token_texts(tok, prompt, new[:n]) if tok is not None else [f"[{int(t)}]" for t in new[:n]]
        spans = []
        for j, (r, position, last) in enumerate(token_rounds(src[b, :n])):
            source = TokenSource(int(src[b, j]))
            cls, _, _, label = STYLES[source]
            where = f"round {r}, draft position {position}" if position else f"round {r}, nothing drafted"
            title = f"{texts[j]!r}, id {int(new[j])}\n{where}\n{label}"
            spans.append(
                f'<span class="{cls}" data-round="{r}" data-position="{position}" '
                f'style="{_token_style(source, last)}" title="{html.escape(title)}">'
                f"{_whitespace_marked(texts[j])}</span>"
            )
        out.append(_prompt_html(tok, prompt, b if B > 1 else None))
        out.append(
            f'<pre class="ha-row" style="white-space:pre-wrap;margin:2px 0 6px 0;line-height:1.5">'
            f"{''.join(spans)}</pre>"
        )
        trees = getattr(result, "token_trees", None)
        if trees is not None:
            out.append(_trees_html(tok, prompt, new, src[b], trees[b]))
    if row is None and B > MAX_ROWS:
        out.append(f"<div>… {B - MAX_ROWS} more rows (result.to_html(row=i) shows row i)</div>")
    out.append("</div>")
    return "\n".join(out)


def plot_acceptance(result: GenerateDecoderOnlyOutput) -> Any:
    """A matplotlib Figure of an assisted generation's result (return_dict_in_generate=True): left, the acceptance
    rate by draft position (accepted_per_position / proposed_per_position, the count proposed over each bar; only
    positions something was proposed at); right, how many tokens each target pass gave (a histogram over the rounds
    of every row, from token_sources; only counts that occurred). Shown in a notebook as a PNG at twice its pixel
    size (sharp on HiDPI screens). Needs Debian's python3-matplotlib."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise ImportError(
            "plot_acceptance needs matplotlib: apt-get install python3-matplotlib (Debian's package), "
            "or pip install matplotlib"
        ) from None

    class AcceptanceFigure(Figure):
        """A Figure that shows itself in a notebook without pyplot (which would also draw it a second time)."""

        def _repr_png_(self):
            """-> (PNG bytes at 2 x dpi, {"width", "height"}: the size to show it at, in CSS pixels)."""
            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=2 * self.dpi)
            width, height = self.get_size_inches() * self.dpi
            return buffer.getvalue(), {"width": int(round(width)), "height": int(round(height))}

    proposed = getattr(result, "proposed_per_position", None)
    if proposed is None:
        raise InvalidInputError(
            "plot_acceptance needs the result of an assisted generation (assistant_model= or "
            "prompt_lookup_num_tokens=) with return_dict_in_generate=True"
        )
    proposed = to_numpy(proposed, "proposed_per_position")[0].astype(np.int64)
    accepted = to_numpy(result.accepted_per_position, "accepted_per_position")[0].astype(np.int64)
    rounds = [n for row in _sources(result) for n in rounds_of(row)]
    fig = AcceptanceFigure(figsize=(9, 3.2), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    positions = np.flatnonzero(proposed > 0) + 1  # 1-based draft positions with a bar
    rate = accepted[positions - 1] / proposed[positions - 1]
    bars = ax.bar(positions, rate, color=STYLES[TokenSource.ACCEPTED][1], edgecolor="#3a6ea5")
    for bar, n in zip(bars, proposed[positions - 1]):
        ax.annotate(
            str(int(n)), (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=7
        )
    ax.set(
        xlabel="draft position (over each bar: tokens proposed there)",
        ylabel="accepted / proposed",
        ylim=(0, 1.1),
        title="Acceptance by draft position",
    )
    ax.set_xticks(positions)
    counts = np.bincount(rounds) if rounds else np.zeros(1, dtype=np.int64)  # counts[k]: passes that gave k
    sizes = np.flatnonzero(counts)
    bx.bar(sizes, counts[sizes], color=STYLES[TokenSource.BONUS][1], edgecolor="#2a5a90")
    mean = sum(rounds) / len(rounds) if rounds else 0.0
    bx.set(
        xlabel="tokens given by one target pass",
        ylabel="target passes",
        title=f"Tokens per target pass (mean {mean:.2f})",
    )
    bx.set_xticks(sizes)
    bx.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count axis: no fractional ticks
    return fig
