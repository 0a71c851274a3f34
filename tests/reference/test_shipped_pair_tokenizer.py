"""The shipped pair's tokenizer read by Transformers' AutoTokenizer (the reference environment) beside ours: a user
who loads habana_assist/pretrained/pycode with Transformers must get the ids the pair was trained on.

The pair's sentencepiece model has no dummy prefix; Transformers 5's LlamaTokenizer puts a "\u2581" before the text
unless tokenizer_config.json says add_prefix_space=false, so the shipped files say it, and this test holds both
sides to sentencepiece's own ids on the demo's held-out prompts and on short texts.
"""

import os

import pytest

import habana_assist as ha
from habana_assist.cli import demo_prompts

PRETRAINED = os.path.join(os.path.dirname(ha.__file__), "pretrained")
TEXTS = [text for _, text in demo_prompts(6, 30)] + [
    "",
    "x",
    " leading space",
    "def f(x):\n\treturn x\n",
    "caf\u00e9 \u4e2d\u6587",
]


@pytest.mark.parametrize("name", ["pycode", "pycode-draft"])
def test_transformers_reads_the_shipped_tokenizer_as_we_do(hf_reference, name):
    directory = os.path.join(PRETRAINED, name)
    ours = ha.AutoTokenizer.from_pretrained(directory)
    ops = [{"op": "__call__", "args": [t]} for t in TEXTS] + [
        {"op": "decode", "args": [ours(t)["input_ids"]], "kwargs": {"skip_special_tokens": True}} for t in TEXTS
    ]
    (job,) = hf_reference.run([{"kind": "tokenizer", "dir": directory, "ops": ops}])
    values = [r.get("value", r.get("error")) for r in job["results"]]
    for text, value in zip(TEXTS, values):
        assert value["input_ids"] == list(ours(text)["input_ids"]), text[:60]
        assert value["input_ids"][1:] == ours.sp.encode(text)  # sentencepiece's own ids after <s>
    for text, value in zip(TEXTS, values[len(TEXTS) :]):
        assert value == text == ours.decode(ours(text)["input_ids"], skip_special_tokens=True)
