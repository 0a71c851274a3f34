"""What a generation looks like in a notebook: the HTML view of a GenerateDecoderOnlyOutput (its text, each token
marked by how it was decided) and plot_acceptance (acceptance by draft position, tokens per target pass).

Both read only the result: token_sources (TokenSource per generated token), the counts of assisted generation,
and the tokenizer generate() was given (or the checkpoint's, loaded when the view is first asked for).
"""

import html
import io

import numpy as np

from ..errors import InvalidInputError
from .utils import TokenSource
from ..utils.tensors import to_numpy

# TokenSource -> (CSS class, colour, legend); NONE is never drawn (padding after a row stopped)
STYLES = {
    TokenSource.ACCEPTED: ("ha-accepted", "#c8f0c8", "draft token accepted"),
    TokenSource.CORRECTED: ("ha-corrected", "#f8c8c0", "target's token after a rejection"),
    TokenSource.BONUS: ("ha-bonus", "#c8dcf8", "target's token after a fully accepted draft"),
    TokenSource.PLAIN: ("ha-plain", "#ececec", "plain decoding (nothing drafted)"),
}
MAX_ROWS = 8         # rows the notebook view shows of a batch (to_html(row=i) shows any one)
PROMPT_TAIL = 160    # characters of the prompt shown before the generated text
WINDOW = 8           # tokens decoded before a token to find its own text (see token_texts)


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


def _tokenizer(result, tokenizer):
    """The tokenizer to decode with, or None (ids are shown): the argument, else what generate() left on the result
    (a tokenizer, or a checkpoint path loaded here once and kept)."""
    if tokenizer is not None:
        return tokenizer
    tok = getattr(result, "_tokenizer", None)
    if isinstance(tok, str):
        from ..tokenization.tokenization_utils import AutoTokenizer
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
        after = tokenizer.decode(ids[lo:i + 1]).rstrip("\ufffd")
        texts.append(after[len(before):] if after.startswith(before) else tokenizer.decode([ids[i]]))
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
    else:
        parts.append("plain decoding: one token per target pass")
    return ", ".join(parts)


def result_html(result, tokenizer=None, row=None):
    """HTML of a result: row `row`, or (None) the first MAX_ROWS rows; see GenerateDecoderOnlyOutput.to_html."""
    src = _sources(result)
    seq = to_numpy(result.sequences, "sequences")[0]  # torch where the call's input was
    B, n_new = src.shape
    if row is not None and not 0 <= row < B:
        raise InvalidInputError(f"row={row} is outside the batch of {B}; pass 0..{B - 1}")
    tok = _tokenizer(result, tokenizer)
    legend = " ".join(f'<span style="background:{colour};padding:0 3px">{html.escape(label)}</span>'
                      for _, colour, label in STYLES.values())
    out = ['<div class="ha-generation" style="font-size:0.9em">',
           f'<div class="ha-summary"><b>{html.escape(_summary(result, B))}</b></div>',
           f'<div class="ha-legend" style="margin:2px 0">{legend}</div>']
    rows = [row] if row is not None else range(min(B, MAX_ROWS))
    for b in rows:
        prompt, new = seq[b, :seq.shape[1] - n_new], seq[b, seq.shape[1] - n_new:]
        n = int(np.count_nonzero(src[b]))
        texts = token_texts(tok, prompt, new[:n]) if tok is not None else [f"[{int(t)}]" for t in new[:n]]
        head = ""
        if tok is not None:
            p = tok.decode([int(t) for t in prompt])
            head = ("…" if len(p) > PROMPT_TAIL else "") + p[-PROMPT_TAIL:]
        spans = []
        for j in range(n):
            cls, colour, label = STYLES[TokenSource(int(src[b, j]))]
            spans.append(f'<span class="{cls}" style="background:{colour}" title="{int(new[j])}: {label}">'
                         f'{html.escape(texts[j])}</span>')
        out.append(f'<pre class="ha-row" style="white-space:pre-wrap;margin:4px 0"><span style="color:#888">'
                   f'{html.escape(head)}</span>{"".join(spans)}</pre>')
    if row is None and B > MAX_ROWS:
        out.append(f"<div>… {B - MAX_ROWS} more rows (result.to_html(row=i) shows row i)</div>")
    out.append("</div>")
    return "\n".join(out)


def plot_acceptance(result):
    """A matplotlib Figure of an assisted generation's result (return_dict_in_generate=True): left, the acceptance
    rate by draft position (accepted_per_position / proposed_per_position, the count proposed over each bar);
    right, how many tokens each target pass gave (a histogram over the rounds of every row, from token_sources).
    Needs Debian's python3-matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plot_acceptance needs matplotlib: apt-get install python3-matplotlib (Debian's package), "
                          "or pip install matplotlib") from None

    class AcceptanceFigure(Figure):
        """A Figure that shows itself in a notebook without pyplot (which would also draw it a second time)."""

        def _repr_png_(self):
            buffer = io.BytesIO()
            self.savefig(buffer, format="png")
            return buffer.getvalue()

    proposed = getattr(result, "proposed_per_position", None)
    if proposed is None:
        raise InvalidInputError("plot_acceptance needs the result of an assisted generation (assistant_model= or "
                                "prompt_lookup_num_tokens=) with return_dict_in_generate=True")
    proposed = to_numpy(proposed, "proposed_per_position")[0].astype(np.int64)
    accepted = to_numpy(result.accepted_per_position, "accepted_per_position")[0].astype(np.int64)
    rounds = [n for row in _sources(result) for n in rounds_of(row)]
    fig = AcceptanceFigure(figsize=(9, 3.2), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    positions = np.arange(1, len(proposed) + 1)
    rate = np.divide(accepted, proposed, out=np.zeros(len(proposed)), where=proposed > 0)
    bars = ax.bar(positions, rate, color=STYLES[TokenSource.ACCEPTED][1], edgecolor="#4a4")
    for bar, n in zip(bars, proposed):
        ax.annotate(str(int(n)), (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                    fontsize=7)
    ax.set(xlabel="draft position", ylabel="accepted / proposed", ylim=(0, 1.1),
           title="Acceptance by draft position")
    if len(positions):
        ax.set_xticks(positions)
    counts = np.bincount(rounds, minlength=2)[1:] if rounds else np.zeros(1, dtype=np.int64)
    bx.bar(np.arange(1, len(counts) + 1), counts, color=STYLES[TokenSource.BONUS][1], edgecolor="#46a")
    mean = sum(rounds) / len(rounds) if rounds else 0.0
    bx.set(xlabel="tokens given by one target pass", ylabel="target passes",
           title=f"Tokens per target pass (mean {mean:.2f})")
    bx.set_xticks(np.arange(1, len(counts) + 1))
    return fig
