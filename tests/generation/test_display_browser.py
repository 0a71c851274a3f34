"""The notebook view as a browser draws it (headless chromium, tests/fixtures/browser.py), in a light and in a dark
page: every token and legend element readable (WCAG AA contrast, from the browser's computed colours), the
whitespace glyphs drawn, and the text a reader copies the generated text itself, glyphs not included.
"""

import browser
import numpy as np
import pytest

import habana_assist as ha
from habana_assist.generation.display import token_texts

pytestmark = pytest.mark.skipif(browser.CHROMIUM is None, reason=browser.SKIP_REASON)

# a prompt with the tokenizer's BOS and whitespace-only tokens to come (indentation, blank lines)
PROMPT = "import os\n\n\nclass Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"


@pytest.fixture(scope="module")
def result():
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    inputs = tok([PROMPT], return_tensors="np")
    res = model.generate(
        **inputs, max_new_tokens=48, assistant_model=draft, return_dict_in_generate=True, tokenizer=tok
    )
    return tok, res, tok.decode(res.sequences[0, inputs["input_ids"].shape[1] :].tolist())


@pytest.mark.parametrize("theme", sorted(browser.THEMES))
def test_every_token_and_legend_element_is_readable_in_a_light_and_a_dark_page(result, theme, tmp_path):
    tok, res, text = result
    measured = browser.measure(res._repr_html_(), theme, str(tmp_path))
    kinds = {e["cls"] for e in measured["elements"]}
    tokens = [e for e in measured["elements"] if e["cls"] in ("ha-accepted", "ha-corrected", "ha-bonus", "ha-plain")]
    n_prompt = res.sequences.shape[1] - res.token_sources.shape[1]
    n = int(np.count_nonzero(res.token_sources[0]))
    texts = token_texts(tok, res.sequences[0, :n_prompt].tolist(), res.sequences[0, n_prompt : n_prompt + n].tolist())
    visible = sum(1 for t in texts if t.strip())  # whitespace-only tokens show glyphs, not text
    assert len(tokens) == visible > 0, f"measured {len(tokens)} tokens, {visible} show text: the script missed some"
    for legend in (
        "ha-legend-accepted",
        "ha-legend-corrected",
        "ha-legend-bonus",
        "ha-legend-plain",
        "ha-legend-end",
        "ha-legend-prompt",
        "ha-legend-special",
        "ha-prompt-label",
        "ha-special",
    ):
        assert legend in kinds, f"{legend} was not measured in the {theme} page; measured {sorted(kinds)}"
    bad = browser.unreadable(measured)
    assert not bad, f"below {browser.AA}:1 in the {theme} page:\n" + "\n".join(bad)
    (row,) = measured["rows"]
    assert row["copied"] == text, f"copying the row gave {row['copied']!r}; the text is {text!r}"
    assert row["glyphs"]["ha-nl"]["content"] == '"\u21b5"', row["glyphs"]
    if "ha-sp" in row["glyphs"]:
        assert row["glyphs"]["ha-sp"]["content"] == '"\u00b7"', row["glyphs"]
