"""The supported families, each one module of data (llama.py, mistral.py, qwen2.py, qwen3.py, phi3.py, gemma2.py,
gemma3.py, smollm3.py, gpt2.py), collected here into the one registry that configuration_utils.py (reading and
validating config.json), checkpoints/loading.py (expected_weights) and checkpoints/saving.py (state_dict_names)
all read; and the Auto classes (auto.py: the architecture classes, registered with modeling_utils).

FAMILIES: model_type -> Family; ARCHITECTURES: architecture -> Family (family.py says what a row holds).

Adding a family (Transformers' FooForCausalLM, model_type "foo"):
1. models/foo.py: FAMILY = Family(...) with every field by keyword: its architecture and model_type, the shape
   fields config.json must give, FooConfig's defaults of the fields read, the norm kind and its epsilon's field,
   the activation's field, the bias, qk-norm, window and rotary rules, aliases where its field names are its own,
   and its tensors: Tensor entries in Transformers' state_dict order (FooForCausalLM's module registration
   order), each with its name ("{i}": the layer), its stored shape in dims, its role in the core, and a
   condition where the checkpoint holds it only for some configs. Import what it shares with the family it
   builds on (llama.py's tensor groups and LLAMA_LIKE defaults, gemma2.py's GEMMA_LIKE...) rather than spelling
   it again. Import only family.py and sibling family modules here: configuration_utils imports this package.
2. Add it to _ROWS below: SUPPORTED_ARCHITECTURES, the Auto classes and every message listing the supported
   families follow.
3. What the rows cannot say yet is code: a new value of a rule (windows, rotary, attention_bias...) or a new rope
   type in configuration_utils.py, whose family-specific checks (Phi-3's and Gemma 3's rope types, GPT-2's
   fields) are there too; a new role (a tensor the core does not take yet) in family.py's LAYER_ROLES or
   MODEL_ROLES, csrc/bindings/model.c's keys, csrc/ha.h and the forward.
4. The tests keep their own copies, so that they check the package rather than repeat it; add the family to
   each (under tests/): the float64 reference forward in family_reference.py (its config reading and forward),
   the random checkpoint writer in family_checkpoints.py (names, shapes, Transformers' order), the expected
   names, shapes, defaults and layer rules in test_family_configs.py, and the family list of
   test_model_families.py.
"""

from . import gemma2, gemma3, gpt2, llama, mistral, phi3, qwen2, qwen3, smollm3
from .family import Family, Tensor, layer_tensors

__all__ = ["FAMILIES", "ARCHITECTURES", "Family", "Tensor", "layer_tensors"]

# The order of every list of the supported families (SUPPORTED_ARCHITECTURES, messages).
_ROWS = (
    llama.FAMILY,
    mistral.FAMILY,
    qwen2.FAMILY,
    qwen3.FAMILY,
    phi3.FAMILY,
    gemma2.FAMILY,
    gemma3.FAMILY,
    smollm3.FAMILY,
    gpt2.FAMILY,
)
FAMILIES = {row.model_type: row for row in _ROWS}
ARCHITECTURES = {row.architecture: row for row in _ROWS}
