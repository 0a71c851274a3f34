# Transformers docs: main_classes/text_generation.md, GenerationConfig.from_pretrained example.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import GenerationConfig

# Download configuration from huggingface.co and cache.
generation_config = GenerationConfig.from_pretrained(os.environ["HA_MODEL"])

# E.g. config was saved using *save_pretrained('./test/saved_model/')*
generation_config.save_pretrained("./test/saved_model/")
generation_config = GenerationConfig.from_pretrained("./test/saved_model/")

# You can also specify configuration names to your generation configuration file
generation_config.save_pretrained("./test/saved_model/", config_file_name="my_configuration.json")
generation_config = GenerationConfig.from_pretrained("./test/saved_model/", "my_configuration.json")

# If you'd like to try a minor variation to an existing configuration, you can also pass generation
# arguments to `.from_pretrained()`. Be mindful that typos and unused arguments will be ignored
generation_config, unused_kwargs = GenerationConfig.from_pretrained(
    os.environ["HA_MODEL"], top_k=1, foo=False, do_sample=True, return_unused_kwargs=True
)
print(generation_config.top_k)
print(unused_kwargs)

# Checks: both files exist and are JSON; what is loaded back equals what was saved; the variation applies top_k
# and do_sample and returns the unknown argument.
import json  # noqa: E402 - where Transformers' documentation imports it

original = GenerationConfig.from_pretrained(os.environ["HA_MODEL"])
for name in ("generation_config.json", "my_configuration.json"):
    with open(os.path.join("./test/saved_model/", name)) as f:
        saved = json.load(f)
    assert saved["eos_token_id"] == original.eos_token_id and saved["max_new_tokens"] == original.max_new_tokens
assert GenerationConfig.from_pretrained("./test/saved_model/", "my_configuration.json") == original
assert generation_config.top_k == 1 and generation_config.do_sample is True
assert unused_kwargs == {"foo": False}, unused_kwargs
