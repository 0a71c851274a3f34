# Transformers docs: internal/generation_utils.md, TypicalLogitsWarper example.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])

inputs = tokenizer("1, 2, 3", return_tensors="pt")

# We can see that greedy decoding produces a sequence of numbers
outputs = model.generate(**inputs)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# For this particular seed, we can see that sampling produces nearly the same low-information (= low entropy)
# sequence
set_seed(18)
outputs = model.generate(**inputs, do_sample=True)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# With `typical_p` set, the most obvious sequence is no longer produced, which may be good for your problem
set_seed(18)
outputs = model.generate(**inputs, do_sample=True, typical_p=0.1, return_dict_in_generate=True, output_scores=True)
print(tokenizer.batch_decode(outputs.sequences, skip_special_tokens=True)[0])
greedy_second = model.generate(**inputs, max_new_tokens=2)[0, -1].item()
print(outputs.scores[1][0, greedy_second])

# Checks: one (batch, vocab) torch scores tensor per new token; the scores are the processed ones, so the typical
# set leaves few finite entries (at most the default top_k=50), and each sampled token is among them.
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
sequences = outputs.sequences
assert len(outputs.scores) == sequences.shape[1] - prompt_len, (len(outputs.scores), sequences.shape)
for step, scores in enumerate(outputs.scores):
    assert isinstance(scores, torch.Tensor) and scores.shape == (1, model.config.vocab_size), scores.shape
    finite = torch.isfinite(scores[0])
    assert 1 <= int(finite.sum()) <= 50, (step, int(finite.sum()))
    assert finite[sequences[0, prompt_len + step]], (step, "the sampled token was filtered out")
