# Transformers docs: generation_strategies.md (v4.4x), "Save a custom decoding strategy with your model".
# Changed from the doc: the import lines (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]), directories under the working directory (no hub: push_to_hub left out), and in the
# named configuration decoder-only greedy flags for T5's beam-search ones. What follows "# Checks" is ours.
import os

from habana_assist import AutoModelForCausalLM, GenerationConfig

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
generation_config = GenerationConfig(
    max_new_tokens=50, do_sample=True, top_k=50, eos_token_id=model.config.eos_token_id
)
generation_config.save_pretrained("my_account/my_model")

from habana_assist import AutoTokenizer  # noqa: E402 - where Transformers' documentation imports it

tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])

translation_generation_config = GenerationConfig(
    max_new_tokens=12,
    no_repeat_ngram_size=2,
    eos_token_id=model.config.eos_token_id,
    pad_token=model.config.pad_token_id,
)

# Tip: add `push_to_hub=True` to push to the Hub
translation_generation_config.save_pretrained("./tmp", "translation_generation_config.json")

# You could then use the named generation config file to parameterize generation
generation_config = GenerationConfig.from_pretrained("./tmp", "translation_generation_config.json")
inputs = tokenizer("translate English to French: Configuration files are easy to use!", return_tensors="pt")
outputs = model.generate(**inputs, generation_config=generation_config)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True))

# Checks: the files were written; the named configuration drives generate(): 12 new tokens at most, no 2-gram
# repeated; the sampling one loads back as saved.
import json  # noqa: E402 - where Transformers' documentation imports it

with open("my_account/my_model/generation_config.json") as f:
    saved = json.load(f)
assert saved["max_new_tokens"] == 50 and saved["do_sample"] is True, saved  # top_k=50 is the default: not written
loaded = GenerationConfig.from_pretrained("my_account/my_model")
assert loaded.do_sample is True and loaded.top_k == 50 and loaded.max_new_tokens == 50
assert os.path.exists("./tmp/translation_generation_config.json")
assert generation_config.max_new_tokens == 12 and generation_config.no_repeat_ngram_size == 2
prompt_len = inputs["input_ids"].shape[1]
assert prompt_len < outputs.shape[1] <= prompt_len + 12, outputs.shape
tokens = outputs[0].tolist()
grams = [tuple(tokens[i : i + 2]) for i in range(len(tokens) - 1)]
assert len(grams) == len(set(grams)), "a 2-gram repeats"
