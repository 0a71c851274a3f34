"""Stopping criteria and logits processor lists with Transformers' semantics.

StopStringCriteria is checked against a reference written here from Transformers' definition: take the text
of the last max(len(S)) tokens, each token's text being what it yields after other text (decode of "abcdef"'s
ids plus the token, "abcdef" cut off; a byte-fallback piece "<0xNN>" is that byte, and the shipped vocabulary
has such pieces, so texts are UTF-8 bytes); S counts iff it occurs in that text taking at least one byte of
the final token. The reference searches the text; the criterion walks precomputed tables, as Transformers'.
"""

import os
import re
import time

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.errors import InvalidInputError
from habana_assist.generation.logits_process import LogitsProcessor, LogitsProcessorList
from habana_assist.generation.stopping_criteria import (
    EosTokenCriteria,
    MaxLengthCriteria,
    MaxTimeCriteria,
    StoppingCriteria,
    StoppingCriteriaList,
    StopStringCriteria,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.path.join(ROOT, "habana_assist", "pretrained", "pycode")

SNIPPETS = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "import os\nimport sys\n\nclass Stack:\n    def __init__(self):\n        self.items = []\n",
    "for i in range(10):\n\tprint(i, end=', ')\n# caf\u00e9 \u2192 na\u00efve \u4e2d\u6587 \U0001f600\n",
    "x = {'a': 1, \"b\": [2, 3]}  # done.\n\n\nwhile True:\n    break\n",
    "s = '\u00fc\u00df\u2192\u00e9' + \"\\n\" + r'\\t'\nreturn s[::-1]\n",
]
UNICODE_STOPS = ["\u2192", "\u00e9", "\u4e2d\u6587", "\U0001f600", "na\u00efve", "1 \u2192", "\u00fc\u00df"]


@pytest.fixture(scope="module")
def tok():
    return ha.AutoTokenizer.from_pretrained(TARGET)


@pytest.fixture(scope="module")
def texts(tok):
    """Each id's text, as bytes, derived here independently of the criterion."""
    prefix = tok.encode("abcdef", add_special_tokens=False)
    out = []
    for i, piece in enumerate(tok.convert_ids_to_tokens(list(range(len(tok))))):
        m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
        if m:
            out.append(bytes([int(m.group(1), 16)]))
        else:
            text = tok.decode(prefix + [i])
            out.append(text[text.index("abcdef") + 6 :].encode("utf-8"))
    return out


def reference(ids, stops, texts):
    """Transformers' rule on one row of ids (a list), in plain Python."""
    stops = [s.encode("utf-8") for s in stops]
    window = list(ids[max(0, len(ids) - max(len(s) for s in stops)) :])
    for k in range(len(window) - 1, -1, -1):  # an id outside the vocabulary breaks every match through it
        if not 0 <= window[k] < len(texts):
            window = window[k + 1 :]
            break
    if not window:
        return False
    parts = [texts[i] for i in window]
    whole = b"".join(parts)
    final_start = len(whole) - len(parts[-1])
    for s in stops:
        at = whole.find(s)
        while at >= 0:
            if at + len(s) > final_start:
                return True
            at = whole.find(s, at + 1)
    return False


def check_all_prefixes(criterion, ids, stops, texts):
    """The criterion on every prefix of ids (as generate() calls it after each token) equals the reference."""
    got = [bool(criterion(np.array([ids[:n]], dtype=np.int64), None)[0]) for n in range(1, len(ids) + 1)]
    want = [reference(ids[:n], stops, texts) for n in range(1, len(ids) + 1)]
    assert got == want, f"stops {stops!r}, ids {ids}: criterion {got}, reference {want}"
    return sum(want)


# ---- token texts --------------------------------------------------------------------------------------------


def test_token_texts_concatenate_to_the_decoded_text(tok, texts):
    """The per-token texts the reference uses are what decode gives for whole sequences."""
    prefix = tok.encode("abcdef", add_special_tokens=False)
    for snippet in SNIPPETS:
        ids = tok.encode(snippet, add_special_tokens=False)
        decoded = tok.decode(prefix + ids)
        assert b"".join(texts[i] for i in ids) == decoded[6:].encode("utf-8") == snippet.encode("utf-8")


def test_newline_has_two_tokens_in_this_vocabulary(tok, texts):
    """A newline is both a piece of its own ("\\n") and the byte-fallback piece <0x0A>: both end the stop string."""
    newline_ids = [i for i, t in enumerate(texts) if t == b"\n"]
    pieces = tok.convert_ids_to_tokens(newline_ids)
    assert "<0x0A>" in pieces and len(newline_ids) == 2, pieces
    crit = StopStringCriteria(tok, "\n")
    body = tok.encode("x = 1", add_special_tokens=False)
    for nl in newline_ids:
        assert crit(np.array([body + [nl]]), None).tolist() == [True]
        assert crit(np.array([body + [nl] + body]), None).tolist() == [False]


# ---- StopStringCriteria against the reference ---------------------------------------------------------------


def test_stop_strings_spanning_and_ending_inside_tokens(tok, texts):
    """Stop strings cut from the snippets' text at random: many span token boundaries or end mid-token."""
    rng = np.random.default_rng(0)
    matches = spanning = 0
    for snippet in SNIPPETS:
        ids = tok.encode(snippet)
        whole = snippet
        for _ in range(40):
            n = int(rng.integers(1, 9))
            start = int(rng.integers(0, len(whole) - n))
            stop = whole[start : start + n]
            crit = StopStringCriteria(tok, stop)
            matches += check_all_prefixes(crit, ids, [stop], texts)
            spanning += not any(stop.encode() in texts[i] for i in ids)
    assert matches > 100 and spanning > 50, (matches, spanning)


def test_stop_string_lists_and_unicode(tok, texts):
    rng = np.random.default_rng(1)
    pool = ["\n", "\n\n", "return", " n", "):", "'", "\t", "# ", "self.", "fib(n", "  "] + UNICODE_STOPS
    matches = 0
    for trial in range(60):
        stops = [pool[int(i)] for i in rng.choice(len(pool), size=int(rng.integers(1, 4)), replace=False)]
        crit = StopStringCriteria(tok, stops)
        for snippet in SNIPPETS:
            matches += check_all_prefixes(crit, tok.encode(snippet), stops, texts)
    assert matches > 200, matches


def test_unicode_stop_strings_end_on_their_last_byte_piece(tok):
    """A character spelt in byte-fallback pieces completes on its last byte, not before."""
    crit = StopStringCriteria(tok, "\u2192")
    ids = tok.encode("a \u2192 b", add_special_tokens=False)
    pieces = tok.convert_ids_to_tokens(ids)
    last = pieces.index("<0x92>")
    assert pieces[last - 2 : last + 1] == ["<0xE2>", "<0x86>", "<0x92>"] and last < len(ids) - 1, pieces
    got = [bool(crit(np.array([ids[:n]]), None)[0]) for n in range(1, len(ids) + 1)]
    assert got == [n == last + 1 for n in range(1, len(ids) + 1)], (pieces, got)


def test_random_token_sequences(tok, texts):
    """Random ids (special, byte and ordinary pieces, and ids outside the vocabulary) mixed with real text."""
    rng = np.random.default_rng(2)
    vocab = len(tok)
    matches = 0
    for trial in range(150):
        parts = []
        for _ in range(int(rng.integers(1, 5))):
            if rng.random() < 0.5:
                snippet = SNIPPETS[int(rng.integers(len(SNIPPETS)))]
                a = int(rng.integers(0, len(snippet) - 1))
                parts += tok.encode(snippet[a : a + int(rng.integers(1, 30))], add_special_tokens=False)
            else:
                parts += [int(i) for i in rng.integers(0, vocab + (3 if rng.random() < 0.2 else 0), size=4)]
        text = b"".join(texts[i] for i in parts if i < vocab).decode("utf-8", "ignore")
        stops = []
        for _ in range(int(rng.integers(1, 3))):
            if text and rng.random() < 0.8:
                a = int(rng.integers(0, len(text)))
                stops.append(text[a : a + int(rng.integers(1, 6))] or "x")
            else:
                stops.append(UNICODE_STOPS[int(rng.integers(len(UNICODE_STOPS)))])
        matches += check_all_prefixes(StopStringCriteria(tok, stops), parts, stops, texts)
    assert matches > 100, matches


def test_stop_string_only_in_the_prompt_does_not_stop(tok, texts):
    crit = StopStringCriteria(tok, "return")
    prompt = tok.encode("def f():\n    return 1\n")
    assert crit(np.array([prompt[: prompt.index(tok.encode("return", add_special_tokens=False)[0]) + 1]]), None)[0]
    for tail in ("x", "    pass\n", " retur"):
        ids = prompt + tok.encode(tail, add_special_tokens=False)
        assert not crit(np.array([ids]), None)[0], tail
        check_all_prefixes(crit, ids, ["return"], texts)


def test_batch_rows_and_torch_input(tok, texts):
    torch = pytest.importorskip("torch")
    stops = ["):", "\u00e9", "\n"]
    crit = StopStringCriteria(tok, stops)
    rows = [tok.encode(s)[:12] for s in SNIPPETS] + [tok.encode("caf\u00e9 x = f(a):")[:12]]
    width = min(len(r) for r in rows)
    for n in range(1, width + 1):
        batch = np.array([r[:n] for r in rows], dtype=np.int64)
        want = [reference(r[:n], stops, texts) for r in rows]
        got = crit(batch, None)
        assert got.dtype == bool and got.shape == (len(rows),)
        assert got.tolist() == want
        assert crit(torch.from_numpy(batch), torch.zeros(len(rows), len(tok))).tolist() == want
        assert crit(batch.astype(np.int32), None).tolist() == want


def test_ids_outside_the_vocabulary_never_match(tok):
    crit = StopStringCriteria(tok, ["ab", "\n"])
    a, b = tok.encode("a", add_special_tokens=False)[-1], tok.encode("b", add_special_tokens=False)[-1]
    assert crit(np.array([[a, b]]), None).tolist() == [True]
    assert crit(np.array([[a, len(tok) + 5]]), None).tolist() == [False]
    assert crit(np.array([[a, len(tok), b]]), None).tolist() == [False]
    assert crit(np.array([[-1, a, b]]), None).tolist() == [True]
    assert crit(np.zeros((2, 0), dtype=np.int64), None).tolist() == [False, False]


def test_stop_string_tables_are_cached(tok):
    first = StopStringCriteria(tok, ["\n", "return"])
    second = StopStringCriteria(tok, ["\n", "return"])
    assert second._tables is first._tables and second._vocab is first._vocab
    assert StopStringCriteria(tok, ["return", "\n"])._tables is not first._tables
    other = ha.AutoTokenizer.from_pretrained(TARGET)  # another object: its own texts, equal to the first's
    third = StopStringCriteria(other, ["\n", "return"])
    assert third._vocab is not first._vocab and third._vocab.values == first._vocab.values


def test_bad_stop_strings_are_refused(tok):
    for bad in ("", [], [""], ["a", ""], [1], None, ("a", None), b"\n"):
        with pytest.raises(InvalidInputError, match="stop"):
            StopStringCriteria(tok, bad)
    with pytest.raises(InvalidInputError, match="tokenizer"):
        StopStringCriteria(None, "\n")
    with pytest.raises(InvalidInputError, match="surrogate"):
        StopStringCriteria(tok, "\ud800")
    with pytest.raises(InvalidInputError, match="shape"):
        StopStringCriteria(tok, "\n")(np.array([1, 2, 3]), None)


# ---- any tokenizer with encode and decode: string mode, Transformers' own examples ---------------------------


class WordTokenizer:
    """A tokenizer with only encode / decode / len: longest match over a small vocabulary."""

    def __init__(self, vocab):
        self.vocab = list(vocab)

    def __len__(self):
        return len(self.vocab)

    def encode(self, text, add_special_tokens=False):
        ids = []
        while text:
            best = max(
                (i for i, v in enumerate(self.vocab) if v and text.startswith(v)), key=lambda i: len(self.vocab[i])
            )
            ids.append(best)
            text = text[len(self.vocab[best]) :]
        return ids

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)


def test_transformers_docstring_examples():
    """The stop string "stop": matched by tokens that end in it or overhang it, but only when the final token
    takes part (Transformers' StopStringCriteria docstring lists these cases)."""
    words = ["st", "op", "stop", "opera", "sto", "pper", "las", "topper", "s", "to", "pped", "at", "tion", "", "\u00e9"]
    tok = WordTokenizer(list("abcdefghijklmnopqrstuvwxyz") + words)
    crit = StopStringCriteria(tok, "stop")
    ids = {w: tok.vocab.index(w) for w in tok.vocab}
    positive = [
        ["st", "op"],
        ["stop"],
        ["st", "opera"],
        ["sto", "pper"],
        ["las", "topper"],
        ["s", "to", "pped"],
        ["s", "to", "", "pped"],
        ["s", "t", "o", "p"],
    ]
    # an empty final token takes no part; only the last len("stop") = 4 tokens are read, empty ones included
    negative = [
        ["stop", "at"],
        ["st", "op", "at"],
        ["st", "opera", "tion"],
        ["st", "op", ""],
        ["s", "t", "o"],
        ["s", "t", "", "o", "p"],
    ]
    for seq in positive + negative:
        got = bool(crit(np.array([[ids[w] for w in seq]]), None)[0])
        assert got == (seq in positive), seq
    assert not crit._vocab.byte_mode
    with pytest.raises(InvalidInputError, match="no token"):
        StopStringCriteria(tok, "\u4e2d")


# ---- StoppingCriteriaList and the simple criteria -----------------------------------------------------------


def test_criteria_list_is_an_or_over_bools_and_arrays():
    torch = pytest.importorskip("torch")
    ids = np.zeros((3, 4), dtype=np.int64)
    lst = StoppingCriteriaList(
        [
            lambda i, s: False,
            lambda i, s: np.array([False, True, False]),
            lambda i, s, **kw: torch.tensor([False, False, True]),
        ]
    )
    out = lst(ids, None)
    assert out.dtype == bool and out.tolist() == [False, True, True]
    assert StoppingCriteriaList([lambda i, s: True])(ids, None).tolist() == [True] * 3
    assert StoppingCriteriaList([lambda i, s: np.array([[1], [0], [0]])])(ids, None).tolist() == [True, False, False]
    assert StoppingCriteriaList([lambda i, s: torch.tensor([True])])(torch.from_numpy(ids), None).tolist() == [True] * 3
    assert StoppingCriteriaList()(ids, None).tolist() == [False] * 3
    seen = {}
    StoppingCriteriaList([lambda i, s, **kw: seen.update(kw) or False])(ids, None, extra=5)
    assert seen == {"extra": 5}
    for bad in (None, "yes", np.array([True, False]), np.array([0.5, 0.5, 0.5])):
        with pytest.raises(InvalidInputError, match="stopping criterion"):
            StoppingCriteriaList([lambda i, s, bad=bad: bad])(ids, None)


def test_max_length_and_eos_criteria():
    ids = np.array([[5, 6, 2], [5, 2, 7]])
    assert MaxLengthCriteria(3)(ids, None).tolist() == [True, True]
    assert MaxLengthCriteria(4)(ids, None).tolist() == [False, False]
    assert StoppingCriteriaList([EosTokenCriteria(9), MaxLengthCriteria(10)]).max_length == 10
    assert EosTokenCriteria(2)(ids, None).tolist() == [True, False]
    assert EosTokenCriteria([7, 2])(ids, None).tolist() == [True, True]
    assert EosTokenCriteria(np.array([7]))(ids, None).tolist() == [False, True]
    for bad in (True, -1, [], [1.5], "2"):
        with pytest.raises(InvalidInputError, match="eos_token_id"):
            EosTokenCriteria(bad)
    with pytest.raises(InvalidInputError, match="max_length"):
        MaxLengthCriteria(2.5)


def test_max_time_criteria():
    ids = np.zeros((2, 1), dtype=np.int64)
    assert MaxTimeCriteria(1.0, initial_timestamp=time.time() - 10)(ids, None).tolist() == [True, True]
    assert MaxTimeCriteria(1e6)(ids, None).tolist() == [False, False]
    with pytest.raises(InvalidInputError, match="max_time"):
        MaxTimeCriteria(float("nan"))


def test_base_classes_name_the_subclass():
    class MyCriterion(StoppingCriteria):
        pass

    class MyProcessor(LogitsProcessor):
        pass

    with pytest.raises(NotImplementedError, match="MyCriterion"):
        MyCriterion()(np.zeros((1, 1)), None)
    with pytest.raises(NotImplementedError, match="MyProcessor"):
        MyProcessor()(np.zeros((1, 1)), np.zeros((1, 4)))


# ---- LogitsProcessorList ------------------------------------------------------------------------------------


def test_logits_processor_list_applies_in_order_to_numpy_and_torch():
    torch = pytest.importorskip("torch")

    class Add(LogitsProcessor):
        def __init__(self, v):
            self.v = v

        def __call__(self, input_ids, scores):
            return scores + self.v

    lst = LogitsProcessorList([Add(1.0), lambda ids, s: s * 2, Add(-0.5)])
    scores = np.arange(4, dtype=np.float32)[None]
    out = lst(np.zeros((1, 3), dtype=np.int64), scores)
    assert isinstance(out, np.ndarray) and out.tolist() == [[1.5, 3.5, 5.5, 7.5]]
    tout = lst(torch.zeros(1, 3, dtype=torch.int64), torch.from_numpy(scores))
    assert isinstance(tout, torch.Tensor) and tout.tolist() == [[1.5, 3.5, 5.5, 7.5]]
    assert LogitsProcessorList()(None, scores) is scores


def test_logits_processor_list_passes_keyword_arguments_as_transformers():
    seen = []

    def with_cur_len(input_ids, scores, cur_len):
        seen.append(cur_len)
        return scores

    class WithKwargs:
        def __call__(self, input_ids, scores, **kwargs):
            seen.append(dict(kwargs))
            return scores

    lst = LogitsProcessorList([with_cur_len, WithKwargs(), lambda i, s: s])
    lst(None, np.zeros((1, 2)), cur_len=7, other=1)
    assert seen == [7, {"cur_len": 7, "other": 1}]
    with pytest.raises(InvalidInputError, match="cur_len"):
        lst(None, np.zeros((1, 2)))


# ---- generate(): stop_strings and stopping_criteria end to end ----------------------------------------------

DRAFT = os.path.join(ROOT, "habana_assist", "pretrained", "pycode-draft")
GEN_PROMPTS = ["def fib(n):", "class Stack:\n    def", 'name = "caf\u00e9"\ndef']
NEW = 40


@pytest.fixture(scope="module")
def target():
    return ha.AutoModelForCausalLM.from_pretrained(TARGET)


@pytest.fixture(scope="module")
def draft():
    return ha.AutoModelForCausalLM.from_pretrained(DRAFT)


@pytest.fixture(scope="module")
def unstopped(target, tok):
    """prompt -> (prompt ids, greedy output ids) with nothing but max_new_tokens to stop it."""
    out = {}
    for prompt in GEN_PROMPTS:
        ids = tok([prompt], return_tensors="np")["input_ids"]
        out[prompt] = (ids, target.generate(input_ids=ids, max_new_tokens=NEW)[0].tolist())
    return out


def _ascii(b):
    return b.isascii() and b.strip() != b""


def stop_strings_from(full, n0, texts):
    """Stop strings cut from the generated text: one spanning two tokens, one ending inside a token, one
    spanning three tokens (each taken a few tokens in, so that the generation stops early)."""
    t = [texts[i] for i in full]
    picks = []
    for k in range(n0 + 3, len(full) - 2):
        a, b, c = t[k], t[k + 1], t[k + 2]
        if not (_ascii(a) and _ascii(b) and _ascii(c)):
            continue
        if len(picks) == 0:
            picks.append((a[-2:] + b[:1]).decode())
        elif len(picks) == 1 and len(b) >= 3:
            picks.append((a[-1:] + b[:2]).decode())
        elif len(picks) == 2:
            picks.append((a[-1:] + b + c[:1]).decode())
            break
    assert len(picks) == 3, (full, picks)
    return picks


def first_stop(full, n0, stops, texts):
    """The length at which Transformers' rule first holds after the prompt, or None."""
    for j in range(n0 + 1, len(full) + 1):
        if reference(full[:j], stops, texts):
            return j
    return None


def test_generation_stops_right_after_the_completing_token(target, tok, texts, unstopped):
    stopped_early = 0
    for prompt, (ids, full) in unstopped.items():
        n0 = ids.shape[1]
        span, mid, three = stop_strings_from(full, n0, texts)
        for stops in (["\n"], span, [mid], [three], [three, span, "\n"], ["\u00e9"], ["zzzq", "\U0001f600"]):
            want = first_stop(full, n0, [stops] if isinstance(stops, str) else stops, texts)
            got = target.generate(input_ids=ids, max_new_tokens=NEW, stop_strings=stops, tokenizer=tok)[0].tolist()
            assert got == (full[:want] if want else full), (prompt, stops, want)
            stopped_early += want is not None and want < len(full)
            if want is None:
                continue
            prompt_text = tok.decode(full[:n0])
            for s in [stops] if isinstance(stops, str) else stops:
                if s in prompt_text:
                    continue
                # the output holds a stop string and no shorter output does: the decoded text says so too
                prefixes = [s in tok.decode(got[:k]) for k in range(n0, len(got) + 1)]
                assert not any(prefixes[:-1]), (prompt, s)
            assert any(s in tok.decode(got) for s in ([stops] if isinstance(stops, str) else stops))
    assert stopped_early >= 12, stopped_early


def test_stop_string_only_in_the_prompt_leaves_generation_whole(target, tok, texts, unstopped):
    """The third prompt holds "é" (as byte pieces), "caf" and "é\"\\n"; none of them may stop the generation."""
    ids, full = unstopped[GEN_PROMPTS[2]]
    stops = ["\u00e9", "caf", '\u00e9"\n']
    assert all(s in tok.decode(ids[0]) for s in stops) and first_stop(full, ids.shape[1], stops, texts) is None
    got = target.generate(input_ids=ids, max_new_tokens=NEW, stop_strings=stops, tokenizer=tok)
    assert got[0].tolist() == full


def test_batched_rows_stop_on_their_own(target, tok, texts, unstopped):
    enc = tok(GEN_PROMPTS, return_tensors="np", padding=True)
    stops = ["\n", "):"]
    got = target.generate(**enc, max_new_tokens=NEW, stop_strings=stops, tokenizer=tok)
    pad = target.generation_config.pad_token_id
    for r, prompt in enumerate(GEN_PROMPTS):
        ids, full = unstopped[prompt]
        n0 = ids.shape[1]
        want = full[: first_stop(full, n0, stops, texts) or len(full)]
        row = got[r].tolist()[enc["input_ids"].shape[1] - n0 :]  # drop the left padding
        assert row[: len(want)] == want and set(row[len(want) :]) <= {pad}, (prompt, row, want)


@pytest.mark.parametrize("mode", ["greedy", "coupled_sampling"])
def test_assisted_generation_equals_plain_with_stop_strings(target, draft, tok, unstopped, texts, mode):
    kw = dict(max_new_tokens=NEW, tokenizer=tok)
    if mode == "coupled_sampling":
        kw.update(do_sample=True, seed=11, temperature=0.8, assisted_sampling="coupled", max_new_tokens=20)
    stopped = 0
    for prompt, (ids, full) in unstopped.items():
        span, mid, three = stop_strings_from(full, ids.shape[1], texts)
        for stops in (["\n"], span, [mid, three], ["self", "("])[:: 1 if mode == "greedy" else 3]:
            plain = target.generate(input_ids=ids, stop_strings=stops, **kw)
            stopped += plain.shape[1] < ids.shape[1] + kw["max_new_tokens"]
            for extra in (
                dict(assistant_model=draft, num_assistant_tokens=5),
                dict(assistant_model=draft),
                dict(prompt_lookup_num_tokens=3),
            ):
                assisted = target.generate(input_ids=ids, stop_strings=stops, **kw, **extra)
                assert assisted.tolist() == plain.tolist(), (mode, prompt, stops, sorted(extra))
    assert stopped >= 3, stopped


def test_assisted_generation_equals_plain_with_a_stopping_criterion(target, draft, tok, unstopped):
    """A criterion sees every decided token once, in order, in assisted generation as in plain; the row ends
    right after the token it stops on, even inside an accepted draft."""
    for prompt, (ids, full) in unstopped.items():
        n0 = ids.shape[1]
        for stop_len in (n0 + 1, n0 + 11):
            runs = []
            for extra in ({}, dict(assistant_model=draft, num_assistant_tokens=6), dict(prompt_lookup_num_tokens=3)):
                seen = []

                def criterion(input_ids, scores, seen=seen):
                    seen.append(input_ids[0].tolist())
                    return input_ids.shape[1] >= stop_len

                out = target.generate(input_ids=ids, max_new_tokens=NEW, stopping_criteria=[criterion], **extra)
                runs.append((out[0].tolist(), seen))
            assert runs[0][0] == full[:stop_len]
            assert runs[0][1] == [full[:k] for k in range(n0 + 1, stop_len + 1)]
            for run in runs[1:]:
                assert run == runs[0], (prompt, stop_len)


def test_stopping_criteria_returning_arrays_and_tensors(target, tok, unstopped):
    torch = pytest.importorskip("torch")
    ids, full = unstopped[GEN_PROMPTS[0]]
    n0 = ids.shape[1]
    newline = full.index(4, n0) + 1 if 4 in full[n0:] else None
    cases = {
        "numpy bool array": ([lambda i, s: np.array([i.shape[1] >= n0 + 5])], n0 + 5),
        "torch bool tensor": ([lambda i, s: torch.tensor([i.shape[1] >= n0 + 6])], n0 + 6),
        "StoppingCriteriaList": (ha.StoppingCriteriaList([ha.MaxLengthCriteria(n0 + 4)]), n0 + 4),
        "MaxLengthCriteria": ([ha.MaxLengthCriteria(n0 + 3)], n0 + 3),
        "EosTokenCriteria on newline": ([ha.EosTokenCriteria([4, 9999])], newline),
        "StopStringCriteria object": ([ha.StopStringCriteria(tok, ["\n"])], newline),
    }
    for name, (criteria, length) in cases.items():
        assert length is not None
        got = target.generate(input_ids=ids, max_new_tokens=NEW, stopping_criteria=criteria)
        assert got[0].tolist() == full[:length], name
    # torch in: the criterion gets torch tensors and the result is torch
    kinds = []

    def torch_criterion(input_ids, scores):
        kinds.append((type(input_ids), type(scores), input_ids.dtype, tuple(scores.shape)))
        return torch.tensor([input_ids.shape[1] >= n0 + 2])

    got = target.generate(input_ids=torch.from_numpy(ids), max_new_tokens=NEW, stopping_criteria=[torch_criterion])
    assert isinstance(got, torch.Tensor) and got[0].tolist() == full[: n0 + 2]
    assert kinds == [(torch.Tensor, torch.Tensor, torch.int64, (1, len(tok)))] * 2


def test_stop_strings_read_each_tokens_text_without_decodes_clean_up(tmp_path):
    # Llama 3's tokenizer_config.json turns clean_up_tokenization_spaces on, which makes decode() write " ." as
    # "."; a stop string " ." must still be found after the token " ." (Transformers reads tokens, not cleaned text).
    import shutil

    import tokenizer_data as td

    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(os.path.dirname(td.tokenizer_path("llama3")), name), tmp_path / name)
    tok = ha.AutoTokenizer.from_pretrained(str(tmp_path))
    assert tok.decode(tok.encode("fine .", add_special_tokens=False)) == "fine.", "the config's clean-up is on"
    ids = np.array([tok.encode("It is fine .", add_special_tokens=False)])
    assert StopStringCriteria(tok, [" ."])(ids, None).tolist() == [True]
    assert StopStringCriteria(tok, ["e."])(ids, None).tolist() == [False]
