# Transformers docs: quicktour.md, "AutoModel" (a forward on a tokenized batch) and "Save a model".
# Changed from the doc: the import line (habana_assist for transformers; AutoModelForCausalLM for the
# sequence-classification class) and the checkpoint name (os.environ["HA_MODEL"]). What follows "# Checks" is ours.
import os

from torch import nn

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model_name = os.environ["HA_MODEL"]
tokenizer = AutoTokenizer.from_pretrained(model_name)
pt_model = AutoModelForCausalLM.from_pretrained(model_name)

pt_batch = tokenizer(
    ["We are very happy to show you the 🤗 Transformers library.", "We hope you don't hate it."],
    padding=True,
    truncation=True,
    max_length=512,
    return_tensors="pt",
)
pt_outputs = pt_model(**pt_batch)
pt_predictions = nn.functional.softmax(pt_outputs.logits, dim=-1)
print(pt_predictions)

pt_save_directory = "./pt_save_pretrained"
tokenizer.save_pretrained(pt_save_directory)
pt_model.save_pretrained(pt_save_directory)

pt_model = AutoModelForCausalLM.from_pretrained("./pt_save_pretrained")

# Checks: the directory holds config.json, generation_config.json, model.safetensors and the tokenizer's files;
# the reloaded model gives bitwise the same logits and the same generation; the reloaded tokenizer encodes alike.
import torch  # noqa: E402 - where Transformers' documentation imports it

files = set(os.listdir(pt_save_directory))
assert {"config.json", "generation_config.json", "model.safetensors"} <= files, files
assert "tokenizer_config.json" in files and files & {"tokenizer.model", "tokenizer.json"}, files
original = AutoModelForCausalLM.from_pretrained(model_name)
reloaded_tokenizer = AutoTokenizer.from_pretrained(pt_save_directory)
batch_again = reloaded_tokenizer(
    ["We are very happy to show you the 🤗 Transformers library.", "We hope you don't hate it."],
    padding=True,
    truncation=True,
    max_length=512,
    return_tensors="pt",
)
assert all(torch.equal(batch_again[k], pt_batch[k]) for k in ("input_ids", "attention_mask"))
assert pt_predictions.shape == (2, pt_batch["input_ids"].shape[1], pt_model.config.vocab_size)
assert torch.equal(pt_model(**pt_batch).logits, original(**pt_batch).logits)
prompt = tokenizer(["def main():"], return_tensors="pt")
assert torch.equal(pt_model.generate(**prompt, max_new_tokens=16), original.generate(**prompt, max_new_tokens=16))
