"""Our entry points' docstrings name every parameter Transformers' counterparts take (Transformers 5.24 in the
reference environment, asked once for all six signatures): each as an argument of ours, or in the prose that says
how ours takes or refuses it, so that a user coming from Transformers finds each of their arguments answered.
tests/usage/test_docstrings.py holds the docstrings to our own signatures."""

import inspect
import os
import re

import habana_assist as ha
from habana_assist.generation.utils import GenerationMixin
from habana_assist.modeling_utils import PreTrainedCausalLM
from habana_assist.tokenization.tokenization_utils_base import PreTrainedTokenizerBase

RUNNER = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "hf_signatures_runner.py"
)
# ours -> Transformers' counterpart, as a dotted name the runner resolves
COUNTERPARTS = {
    GenerationMixin.generate: "transformers.generation.utils.GenerationMixin.generate",
    PreTrainedCausalLM.forward: "transformers.LlamaForCausalLM.forward",
    PreTrainedCausalLM.from_pretrained: "transformers.modeling_utils.PreTrainedModel.from_pretrained",
    ha.AutoTokenizer.from_pretrained: "transformers.AutoTokenizer.from_pretrained",
    PreTrainedTokenizerBase.from_pretrained: "transformers.tokenization_utils_base.PreTrainedTokenizerBase"
    ".from_pretrained",
    ha.pipeline: "transformers.pipeline",
}


def test_every_transformers_parameter_is_named_in_our_docstring(hf_reference):
    results = hf_reference.run_file(RUNNER, list(COUNTERPARTS.values()))
    unnamed = {}
    for (ours, theirs), result in zip(COUNTERPARTS.items(), results):
        assert "params" in result, f"{theirs}: expected its signature from Transformers, got {result}"
        assert len(result["params"]) >= 2, f"{theirs}: expected a signature with parameters, got {result['params']}"
        doc = inspect.getdoc(ours)
        missing = [
            p
            for p in result["params"]
            if not p.startswith("**")  # every function here takes **kwargs
            and not re.search(r"(?<!\w)" + re.escape(p.lstrip("*")) + r"\b", doc)
        ]
        if missing:
            unnamed[ours.__qualname__] = missing
    assert not unnamed, (
        f"Transformers' parameters that our docstrings do not name (say how ours takes or refuses each): {unnamed}"
    )
