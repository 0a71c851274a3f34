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
from habana_assist.utils import progress as _progress
from habana_assist.generation.display import rounds_of

S = ha.TokenSource
SPAN = re.compile(r'<span class="ha-(\w+)" style="[^"]*" title="(\d+): [^"]*">(.*?)</span>', re.S)
CLASSES = {"accepted": S.ACCEPTED, "corrected": S.CORRECTED, "bonus": S.BONUS, "plain": S.PLAIN}


@pytest.fixture(scope="module")
def pair():
    return (ha.AutoTokenizer.from_pretrained("habana-assist/pycode"),
            ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode"),
            ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft"))


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
            a = int(np.sum(row[j:j + r] == S.ACCEPTED))
            assert (row[j:j + a] == S.ACCEPTED).all()
            accepted_at[:a] += 1
            j += r
    np.testing.assert_array_equal(accepted_at[:len(result.accepted_per_position)], result.accepted_per_position)
    assert len(rounds) == result.num_target_passes  # one verifying append per row per round
    return rounds


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
        result = model.generate(**inputs, max_new_tokens=40, assistant_model=assistant, return_dict_in_generate=True,
                                eos_token_id=[tok.convert_tokens_to_ids(")")], pad_token_id=0, **kw)
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
        result = model.generate(**inputs, max_new_tokens=12, assistant_model=draft, return_dict_in_generate=True,
                                num_assistant_tokens_schedule="cost")
    finally:
        model.assisted_costs(draft, remeasure=True)
    assert (np.asarray(result.token_sources) == S.PLAIN).all() and result.num_draft_tokens == 0
    plain = model.generate(**inputs, max_new_tokens=12, return_dict_in_generate=True)
    assert (plain.token_sources == S.PLAIN).all() and plain.num_accepted_tokens is None
    np.testing.assert_array_equal(plain.sequences, result.sequences)
    stop = int(plain.sequences[0, inputs["input_ids"].shape[1] + 4])  # ends the row after its 5th new token
    ended = model.generate(**inputs, max_new_tokens=12, return_dict_in_generate=True, eos_token_id=stop)
    first = int(np.argmax(ended.sequences[0, inputs["input_ids"].shape[1]:] == stop))
    np.testing.assert_array_equal(ended.token_sources[0], [S.PLAIN] * (first + 1))  # no column past the last step


def test_the_view_marks_each_token_by_its_source_and_reads_as_the_text(pair):
    tok, model, draft = pair
    inputs = tok(PROMPTS, return_tensors="np", padding=True)
    n = inputs["input_ids"].shape[1]
    result = model.generate(**inputs, max_new_tokens=48, assistant_model=draft, return_dict_in_generate=True,
                            output_scores=True)
    for row in range(2):
        page = result.to_html(row=row)
        spans = SPAN.findall(page)
        src = result.token_sources[row]
        assert [CLASSES[c] for c, _, _ in spans] == [S(int(s)) for s in src if s != S.NONE]
        assert [int(i) for _, i, _ in spans] == result.sequences[row, n:n + len(spans)].tolist()
        text = "".join(html.unescape(t) for _, _, t in spans)
        assert text == tok.decode(result.sequences[row, n:n + len(spans)].tolist())
    page = result._repr_html_()  # the notebook's view: every row, and the summary line of the call
    assert len(SPAN.findall(page)) == int(np.count_nonzero(result.token_sources))
    assert page.count('class="ha-accepted"') == result.num_accepted_tokens
    assert f"acceptance {result.num_accepted_tokens} of {result.num_draft_tokens} drafted" in page
    assert f"{result.num_target_passes} target passes" in page
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
    spans = SPAN.findall(result.to_html())
    assert [t for _, _, t in spans] == [f"[{int(i)}]" for i in result.sequences[0, ids.shape[1]:]]
    assert [c for c, _, _ in spans] == ["plain"] * 6 and "plain decoding" in result.to_html()
    named = SPAN.findall(result.to_html(tokenizer=tok))  # a tokenizer passed to the view decodes
    assert "".join(html.unescape(t) for _, _, t in named) == tok.decode(result.sequences[0, ids.shape[1]:].tolist())


def test_plot_acceptance_draws_the_rates_by_position_and_the_tokens_per_pass(pair):
    tok, model, draft = pair
    inputs = tok(PROMPTS[:1], return_tensors="np")
    result = model.generate(**inputs, max_new_tokens=64, assistant_model=draft, return_dict_in_generate=True)
    fig = ha.plot_acceptance(result)
    from matplotlib.figure import Figure
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    rates = [p.get_height() for p in fig.axes[0].patches]
    np.testing.assert_allclose(rates, result.accepted_per_position / result.proposed_per_position)
    counts = [p.get_height() for p in fig.axes[1].patches]
    rounds = rounds_of(result.token_sources[0])
    assert counts == [rounds.count(k) for k in range(1, len(counts) + 1)] and sum(counts) == result.num_rounds
    assert fig._repr_png_().startswith(b"\x89PNG")
    with pytest.raises(ha.InvalidInputError, match="assisted generation"):
        ha.plot_acceptance(model.generate(**inputs, max_new_tokens=4, return_dict_in_generate=True))


def test_plot_acceptance_names_the_package_when_matplotlib_is_missing(pair, monkeypatch):
    tok, model, draft = pair
    result = model.generate(**tok(PROMPTS[:1], return_tensors="np"), max_new_tokens=8, assistant_model=draft,
                            return_dict_in_generate=True)
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
