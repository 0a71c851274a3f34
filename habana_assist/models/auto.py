"""The Auto classes: AutoModelForCausalLM.from_pretrained is PreTrainedCausalLM.from_pretrained (modeling_utils.py),
which loads a checkpoint into the class of its architecture declared here; AutoConfig reads its config.json
(configuration_utils.py)."""

from typing import TYPE_CHECKING

from ..configuration_utils import SUPPORTED_ARCHITECTURES, AutoConfig
from ..modeling_utils import PreTrainedCausalLM

__all__ = ["AutoConfig", "AutoModelForCausalLM", "ARCHITECTURE_CLASSES"]

# One class per supported architecture, named as Transformers names it (LlamaForCausalLM, Qwen3ForCausalLM,
# GPT2LMHeadModel...), so that type(model).__name__ and isinstance checks read as they do with Transformers: each a
# sibling subclass of the neutral PreTrainedCausalLM (one C forward for every family; the differences are data),
# registered as its architecture's class (PreTrainedCausalLM.__init_subclass__).
ARCHITECTURE_CLASSES = {
    name: type(
        name,
        (PreTrainedCausalLM,),
        {"__module__": __name__, "__doc__": f"A {name} checkpoint on the C core (see PreTrainedCausalLM)."},
        architecture=name,
    )
    for name in SUPPORTED_ARCHITECTURES
}


class AutoModelForCausalLM:
    """Transformers-style entry point: from_pretrained(directory) -> the checkpoint architecture's class."""

    def __init__(self) -> None:
        raise TypeError("use AutoModelForCausalLM.from_pretrained(path)")

    # The base class's loading itself (its signature, docstring and warnings' stack levels), not a wrapper of it.
    if TYPE_CHECKING:  # the same method, as the type checker reads it
        from_pretrained = PreTrainedCausalLM.from_pretrained
    else:
        from_pretrained = PreTrainedCausalLM.__dict__["from_pretrained"]
