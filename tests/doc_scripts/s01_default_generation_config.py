# Transformers docs: generation_strategies.md, "Default text generation configuration".
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, GenerationConfig

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
print(model.generation_config)

# Checks: a GenerationConfig built from the checkpoint's generation_config.json, whose printout lists only the
# values that differ from the defaults.
generation_config = model.generation_config
assert isinstance(generation_config, GenerationConfig), type(generation_config)
assert generation_config.eos_token_id == model.config.eos_token_id, (
    generation_config.eos_token_id,
    model.config.eos_token_id,
)
assert generation_config.bos_token_id == model.config.bos_token_id
text = repr(generation_config)
assert text.startswith("GenerationConfig"), text
assert '"eos_token_id": 2' in text, text
assert '"temperature"' not in text and '"top_k"' not in text, f"defaults are not printed:\n{text}"
assert generation_config.do_sample is False and generation_config.num_beams == 1  # greedy by default
