"""What a result shows: token_sources (how each new token was decided) against the call's own counts, the HTML
view's markings and text, the short repr, plot_acceptance's data, and the progress bars shown by the size of
the work (never its duration).
"""

import html
import re
import sys

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.generation import display
from habana_assist.generation.display import rounds_of
from habana_assist.utils import progress as _progress

S = ha.TokenSource
# a token's span -> (kind, round, draft position, style, title, inner HTML: its text, whitespace wrapped for glyphs)
TOKEN = re.compile(
    r'<span class="ha-(\w+)" data-round="(\d+)" data-position="(\d+)" style="([^"]*)" '
    r'title="([^"]*)">((?:[^<]|<span class="ha-(?:nl|sp|tab)">[^<]*</span>)*)</span>'
)
CLASSES = {"accepted": S.ACCEPTED, "corrected": S.CORRECTED, "bonus": S.BONUS, "plain": S.PLAIN}


@pytest.fixture(scope="module")
def pair():
    return (
        ha.AutoTokenizer.from_pretrained("habana-assist/pycode"),
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode"),
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft"),
    )


PROMPTS = ["import os\n\n\ndef walk(root):\n", "class Stack:\n    def push(self, item):\n        self.items"]
MODES = {
    "heuristic": dict(),
    "constant": dict(num_assistant_tokens=3, num_assistant_tokens_schedule="constant"),
    "cost": dict(num_assistant_tokens_schedule="cost"),
    "threshold": dict(assistant_confidence_threshold=0.4, num_assistant_tokens_schedule="constant"),
    "rejection": dict(do_sample=True, temperature=0.8, top_k=0, seed=3),
    "coupled": dict(do_sample=True, temperature=0.8, top_k=0, seed=3, assisted_sampling="coupled"),
    "prompt_lookup": dict(prompt_lookup_num_tokens=4),
}


def _check_sources(result, n_prompt):
    """token_sources against the call's counts; -> the rows' rounds."""
    src = np.asarray(result.token_sources)
    new = result.sequences[:, n_prompt:]
    assert src.shape == new.shape and src.dtype == np.uint8
    assert set(np.unique(src)) <= set(S)
    assert int(np.sum(src == S.ACCEPTED)) == result.num_accepted_tokens
    accepted_at = np.zeros(max(len(result.accepted_per_position), 1), dtype=np.int64)
    rounds = []
    for row in src:
        n = int(np.count_nonzero(row))
        assert (row[n:] == S.NONE).all() and (row[:n] != S.NONE).all(), "NONE only after the row's last token"
        for r in rounds_of(row):
            rounds.append(r)
        j = 0
        for r in rounds_of(row):  # a round's accepted tokens sit at draft positions 0, 1, ...
            a = int(np.sum(row[j : j + r] == S.ACCEPTED))
            assert (row[j : j + a] == S.ACCEPTED).all()
            accepted_at[:a] += 1
            j += r
    np.testing.assert_array_equal(accepted_at[: len(result.accepted_per_position)], result.accepted_per_position)
    assert len(rounds) == result.num_target_passes  # one verifying append per row per round
    return rounds


def spans(page):
    """The token spans of a view's HTML -> list of (kind, id, text, round, draft position, ends its round, title)."""
    out = []
    for kind, r, position, style, title, inner in TOKEN.findall(page):
        title = html.unescape(title)
        token_id = int(re.search(r", id (\d+)\n", title).group(1))
        out.append(
            (
                kind,
                token_id,
                html.unescape(re.sub(r"<[^>]+>", "", inner)),
                int(r),
                int(position),
                "border-right:2px" in style,
                title,
            )
        )
    return out


# a draft step 5% of a target step, each verified token 8% more: the shipped pair's usual proportions
PINNED_COSTS = ha.AssistedCosts(draft_step=0.05, target=tuple(1.0 + 0.08 * t for t in range(16)))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_token_sources_agree_with_the_counts_of_the_call(pair, mode):
    tok, model, draft = pair
    kw = dict(MODES[mode])
    assistant = None if "prompt_lookup_num_tokens" in kw else draft
    if mode == "cost":  # pinned, so that K does not depend on a measurement (under load one made it draft ~nothing)
        model.set_assisted_costs(PINNED_COSTS, assistant_model=draft)
    try:
        _sources_agree(tok, model, assistant, mode, kw)
    finally:
        if mode == "cost":
            model.assisted_costs(draft, remeasure=True)


def _sources_agree(tok, model, assistant, mode, kw):
    for prompts in (PROMPTS[:1], PROMPTS):
        inputs = tok(prompts, return_tensors="np", padding=True)
        # eos at a token the first row produces early, so rows end at different times in the batch
        result = model.generate(
            **inputs,
            max_new_tokens=40,
            assistant_model=assistant,
            return_dict_in_generate=True,
            eos_token_id=[tok.convert_tokens_to_ids(")")],
            pad_token_id=0,
            **kw,
        )
        rounds = _check_sources(result, inputs["input_ids"].shape[1])
        if len(prompts) == 1:
            assert len(rounds) == result.num_rounds
        kinds = set(np.unique(result.token_sources))
        assert S.ACCEPTED in kinds and kinds & {S.CORRECTED, S.BONUS}, kinds
        if mode not in ("cost", "prompt_lookup"):  # (or where no n-gram matched) rounds draft nothing only where
            # no room is left: for the last of max_new_tokens
            assert set(np.nonzero(np.asarray(result.token_sources) == S.PLAIN)[1]) <= {39}


def test_rounds_that_draft_nothing_are_plain_and_plain_generation_is_plain(pair):
    tok, model, draft = pair
    inputs = tok(PROMPTS[:1], return_tensors="np")
    model.set_assisted_costs(ha.AssistedCosts(draft_step=1.0, target=(1e-3, 2e-3)), assistant_model=draft)
    try:  # a draft step costing as much as 1000 target steps: every round is plain decoding
        result = model.generate(
            **inputs,
            max_new_tokens=12,
            assistant_model=draft,
            return_dict_in_generate=True,
            num_assistant_tokens_schedule="cost",
        )
    finally:
        model.assisted_costs(draft, remeasure=True)
    assert (np.asarray(result.token_sources) == S.PLAIN).all() and result.num_draft_tokens == 0
    assert "12 plain tokens: rounds that drafted nothing" in result._repr_html_()  # the summary says why
    plain = model.generate(**inputs, max_new_tokens=12, return_dict_in_generate=True)
    assert (plain.token_sources == S.PLAIN).all() and plain.num_accepted_tokens is None
    np.testing.assert_array_equal(plain.sequences, result.sequences)
    stop = int(plain.sequences[0, inputs["input_ids"].shape[1] + 4])  # ends the row after its 5th new token
    ended = model.generate(**inputs, max_new_tokens=12, return_dict_in_generate=True, eos_token_id=stop)
    first = int(np.argmax(ended.sequences[0, inputs["input_ids"].shape[1] :] == stop))
    np.testing.assert_array_equal(ended.token_sources[0], [S.PLAIN] * (first + 1))  # no column past the last step


def test_the_view_marks_each_token_by_its_source_and_reads_as_the_text(pair):
    tok, model, draft = pair
    inputs = tok(PROMPTS, return_tensors="np", padding=True)
    n = inputs["input_ids"].shape[1]
    result = model.generate(
        **inputs, max_new_tokens=48, assistant_model=draft, return_dict_in_generate=True, output_scores=True
    )
    for row in range(2):
        found = spans(result.to_html(row=row))
        src = result.token_sources[row]
        ids = result.sequences[row, n : n + len(found)].tolist()
        assert [CLASSES[f[0]] for f in found] == [S(int(s)) for s in src if s != S.NONE]
        assert [f[1] for f in found] == ids
        assert "".join(f[2] for f in found) == tok.decode(ids)  # the glyph wrappers leave the text as it is
        rounds = rounds_of(src)
        assert [f[3] for f in found] == [r for r, length in enumerate(rounds, 1) for _ in range(length)]
        assert [f[5] for f in found] == [j == length - 1 for length in rounds for j in range(length)]
        for kind, token_id, text, r, position, _, title in found:  # the tooltip: text, id, round, draft position
            expected = f"round {r}, draft position {position}" if position else f"round {r}, nothing drafted"
            assert title.startswith(f"{text!r}, id {token_id}\n{expected}\n"), title
        for length, start in zip(rounds, np.cumsum([0] + rounds)):  # accepted at 1, 2, ..; the target's token next
            positions = [f[4] for f in found[start : start + length]]
            assert positions == [0] if found[start][0] == "plain" else positions == list(range(1, length + 1))
    page = result._repr_html_()  # the notebook's view: every row, and the summary line of the call
    assert len(spans(page)) == int(np.count_nonzero(result.token_sources))
    assert page.count('class="ha-accepted"') == result.num_accepted_tokens
    assert f"acceptance {result.num_accepted_tokens} of {result.num_draft_tokens} drafted" in page
    assert f"{result.num_target_passes} target passes" in page
    assert '<span class="ha-nl">\n</span>' in page  # newlines marked for their glyph
    assert ("plain token" in page) == bool(np.any(result.token_sources == S.PLAIN))  # explained where there are
    assert inputs["input_ids"][0, 0] == tok.pad_token_id  # row 0 is left-padded: the padding is not its prompt
    assert "&lt;pad&gt;" not in page and ">PAD<" not in page and page.count(": prompt</div>") == 2
    for row, prompt in enumerate(PROMPTS):  # each row's box: labelled, BOS named, then the prompt's text
        assert re.search(
            f'row {row}: prompt</div><pre[^>]*><span class="ha-special"[^>]*>BOS</span>'
            f"{re.escape(html.escape(prompt))}</pre>",
            page,
        ), f"row {row}'s prompt box"
    with pytest.raises(ha.InvalidInputError, match="row=2 is outside the batch of 2"):
        result.to_html(row=2)
    short = repr(result)  # the plain repr stays short whatever the arrays hold
    assert len(short) < 600 and "scores=<48 steps>" in short and "token_sources=<uint8 (2, 48)>" in short


def test_the_view_shows_ids_where_no_tokenizer_is_known(pair, tmp_path):
    tok, model, draft = pair
    model.save_pretrained(str(tmp_path))
    bare = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path))
    ids = tok(PROMPTS[:1], return_tensors="np")["input_ids"]
    result = bare.generate(ids, max_new_tokens=6, return_dict_in_generate=True)
    found = spans(result.to_html())
    assert [f[2] for f in found] == [f"[{int(i)}]" for i in result.sequences[0, ids.shape[1] :]]
    assert [f[0] for f in found] == ["plain"] * 6 and "plain decoding" in result.to_html()
    assert 'class="ha-prompt"' not in result.to_html()  # no tokenizer: no prompt text to show
    named = spans(result.to_html(tokenizer=tok))  # a tokenizer passed to the view decodes
    assert "".join(f[2] for f in named) == tok.decode(result.sequences[0, ids.shape[1] :].tolist())


# Machado, Oliveira and Fernandes (2009) at full severity, on linear RGB: what a protanope, deuteranope, tritanope sees
VISION = {
    "normal": np.eye(3),
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "tritanopia": np.array(
        [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]
    ),
}


def _linear(colour):  # "#rrggbb" -> linear RGB (3,)
    c = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear):  # linear RGB (3,) -> CIELAB (3,), D65
    srgb_to_xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = srgb_to_xyz @ np.clip(linear, 0, 1)
    f = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(f > 216 / 24389, np.cbrt(f), (24389 / 27 * f + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest_pair(colours, vision):  # -> the smallest CIELAB distance between two of colours as `vision` sees them
    labs = [_lab(VISION[vision] @ _linear(c)) for c in colours]
    return min(np.linalg.norm(a - b) for i, a in enumerate(labs) for b in labs[i + 1 :])


def _contrast(a, b):  # WCAG 2 contrast ratio of two "#rrggbb"
    la, lb = (float(np.array([0.2126, 0.7152, 0.0722]) @ _linear(c)) for c in (a, b))
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


@pytest.mark.parametrize("vision", sorted(VISION))
def test_the_kinds_stay_apart_for_colour_blind_readers_and_carry_a_second_cue(vision):
    backgrounds = [bg for _, bg, _, _ in display.STYLES.values()]
    # the palette (accepted #c8f0c8, corrected #f8c8c0) was one colour to a deuteranope: the measure sees it
    assert _closest_pair(["#c8f0c8", "#f8c8c0"], "deuteranopia") < 6
    closest = _closest_pair(backgrounds, vision)
    assert closest >= 10, f"two kinds' backgrounds are {closest:.1f} CIELAB units apart under {vision}; want >= 10"
    assert len({decoration for _, _, decoration, _ in display.STYLES.values()}) == len(display.STYLES)
    for source, (_, bg, _, label) in display.STYLES.items():
        assert _contrast(display.TEXT, bg) >= 4.5, f"{label}: text {display.TEXT} on {bg}"


def test_the_prompt_is_a_labelled_box_cut_at_a_line_with_special_tokens_named(pair):
    tok, model, _ = pair
    lines = [f"    value_{i} = compute(value_{i - 1}, {i})" for i in range(1, 12)]
    prompt = "def run(value_0):\n" + "\n".join(lines) + "\n    return"
    inputs = tok([prompt], return_tensors="np")
    assert inputs["input_ids"][0, 0] == tok.bos_token_id  # the checkpoint's tokenizer adds BOS
    result = model.generate(**inputs, max_new_tokens=4, return_dict_in_generate=True, tokenizer=tok)
    page = result._repr_html_()
    box = re.search(
        r'<div class="ha-prompt"[^>]*><div class="ha-prompt-label"[^>]*>([^<]*)</div><pre[^>]*>(.*?)'
        r"</pre></div>",
        page,
        re.S,
    )
    assert box, page[:2000]
    shown = html.unescape(box.group(2))
    whole = tok.decode(inputs["input_ids"][0].tolist(), skip_special_tokens=True)
    assert len(whole) > display.PROMPT_TAIL and whole.endswith(shown) and whole[-len(shown) - 1] == "\n", (
        f"the box must show the prompt's last whole lines; it shows {shown!r}"
    )
    assert box.group(1) == f"prompt, its last {shown.count(chr(10)) + 1} of {whole.count(chr(10)) + 1} lines"
    assert 'class="ha-legend-prompt"' in page
    short = model.generate(
        **tok(["import os\n"], return_tensors="np"), max_new_tokens=2, return_dict_in_generate=True, tokenizer=tok
    )._repr_html_()
    assert re.search(r'<span class="ha-special" [^>]*title="special token &lt;s&gt;">BOS</span>import os', short)
    assert "&lt;s&gt;import" not in short  # the token's name, not its text


def test_plot_acceptance_draws_the_rates_by_position_and_the_tokens_per_pass(pair):
    tok, model, draft = pair
    inputs = tok(PROMPTS[:1], return_tensors="np")
    for max_new_tokens in (64, 6):  # few rounds: counts of 1 and 2, where a default axis ticks 0.25, 0.5, ...
        result = model.generate(
            **inputs, max_new_tokens=max_new_tokens, assistant_model=draft, return_dict_in_generate=True
        )
        fig = ha.plot_acceptance(result)
        from matplotlib.figure import Figure

        assert isinstance(fig, Figure) and len(fig.axes) == 2
        ax, bx = fig.axes
        positions = np.flatnonzero(result.proposed_per_position) + 1  # only where something was proposed
        assert [p.get_x() + p.get_width() / 2 for p in ax.patches] == positions.tolist()
        np.testing.assert_allclose(
            [p.get_height() for p in ax.patches],
            (result.accepted_per_position / result.proposed_per_position)[positions - 1],
        )
        assert ax.get_xticks().tolist() == positions.tolist()
        assert [t.get_text() for t in ax.texts] == [str(n) for n in result.proposed_per_position[positions - 1]]
        assert "tokens proposed" in ax.get_xlabel()  # the numbers over the bars, explained
        rounds = rounds_of(result.token_sources[0])
        sizes = sorted(set(rounds))
        assert [p.get_x() + p.get_width() / 2 for p in bx.patches] == sizes and bx.get_xticks().tolist() == sizes
        assert [p.get_height() for p in bx.patches] == [rounds.count(k) for k in sizes]
        assert sum(p.get_height() for p in bx.patches) == result.num_rounds
        ticks = bx.get_yticks()
        assert len(ticks) >= 2 and all(t == int(t) for t in ticks), f"a count axis ticks {ticks}"
        png, size = fig._repr_png_()  # twice the pixels, shown at the figure's size: sharp on HiDPI screens
        assert png.startswith(b"\x89PNG") and size == {"width": 900, "height": 320}
        assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (1800, 640)
    with pytest.raises(ha.InvalidInputError, match="assisted generation"):
        ha.plot_acceptance(model.generate(**inputs, max_new_tokens=4, return_dict_in_generate=True))


def test_plot_acceptance_names_the_package_when_matplotlib_is_missing(pair, monkeypatch):
    tok, model, draft = pair
    result = model.generate(
        **tok(PROMPTS[:1], return_tensors="np"), max_new_tokens=8, assistant_model=draft, return_dict_in_generate=True
    )
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails, as without the package
    with pytest.raises(ImportError, match="python3-matplotlib"):
        ha.plot_acceptance(result)


def _bar_shown(capsys, what):
    return what in capsys.readouterr().err


def test_generation_shows_a_progress_bar_from_a_size_never_below_it(pair, capsys, monkeypatch):
    tok, model, draft = pair
    monkeypatch.delenv("HA_PROGRESS", raising=False)
    two = tok(PROMPTS, return_tensors="np", padding=True)
    one = tok(PROMPTS[:1], return_tensors="np")
    assert _progress.MIN_TOKENS == 1024
    out = model.generate(**two, max_new_tokens=512, eos_token_id=None, pad_token_id=0)  # 2 x 512 = 1024
    err = capsys.readouterr().err
    assert "generating: 100%" in err and "1024/1024" in err, err[-300:]
    model.generate(**one, max_new_tokens=1000)  # below the size
    assert not _bar_shown(capsys, "generating")
    model.generate(**one, max_new_tokens=8, assistant_model=draft, progress=True)
    assert _bar_shown(capsys, "generating")
    again = model.generate(**two, max_new_tokens=512, eos_token_id=None, pad_token_id=0, progress=False)
    assert not _bar_shown(capsys, "generating")
    np.testing.assert_array_equal(out, again)  # the bar changes nothing
    monkeypatch.setattr(_progress, "MIN_TOKENS", 8)
    model.generate(**one, max_new_tokens=16, streamer=ha.TextIteratorStreamer(tok))  # streamed: its own progress
    assert not _bar_shown(capsys, "generating")
    monkeypatch.setattr(_progress, "MIN_TOKENS", 1024)
    monkeypatch.setenv("HA_PROGRESS", "0")
    model.generate(**two, max_new_tokens=512)
    assert not _bar_shown(capsys, "generating")
    monkeypatch.setenv("HA_PROGRESS", "1")
    model.generate(**one, max_new_tokens=4)
    assert _bar_shown(capsys, "generating")
    monkeypatch.setenv("HA_PROGRESS", "maybe")
    with pytest.raises(ha.InvalidInputError, match="HA_PROGRESS='maybe'"):
        model.generate(**one, max_new_tokens=4)
    monkeypatch.delenv("HA_PROGRESS")
    with pytest.raises(ha.InvalidInputError, match="progress='yes' must be True, False or None"):
        model.generate(**one, max_new_tokens=4, progress="yes")


def test_loading_shows_a_progress_bar_over_the_bytes_from_a_size(capsys, monkeypatch):
    monkeypatch.delenv("HA_PROGRESS", raising=False)
    assert _progress.MIN_BYTES == 512 << 20
    ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")  # about 51 MB: no bar
    assert not _bar_shown(capsys, "loading")
    ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", progress=True, dtype="int8")
    err = capsys.readouterr().err
    assert "loading pycode: 100%" in err, err[-300:]
    monkeypatch.setattr(_progress, "MIN_BYTES", 1 << 20)  # a smaller size: the same checkpoint is above it
    ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    assert _bar_shown(capsys, "loading pycode-draft: 100%")
    ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft", progress=False)
    assert not _bar_shown(capsys, "loading")


def test_without_tqdm_the_default_is_silent_and_progress_true_names_the_package(pair, capsys, monkeypatch):
    tok, model, draft = pair
    monkeypatch.setitem(sys.modules, "tqdm.std", None)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setenv("HA_PROGRESS", "1")
    model.generate(**tok(PROMPTS[:1], return_tensors="np"), max_new_tokens=4)
    assert capsys.readouterr().err == ""
    with pytest.raises(ImportError, match="python3-tqdm"):
        model.generate(**tok(PROMPTS[:1], return_tensors="np"), max_new_tokens=4, progress=True)
