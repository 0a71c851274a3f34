# Transformers docs: internal/generation_utils.md, SequenceBiasLogitsProcessor example (the greedy calls; the
# num_beams=4 call is beam search, refused here).
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]), the prompt and the biased word ("list" for "Trump": what this code model writes).
# What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer(["In a word, the cake is a"], return_tensors="pt")

summary_ids = model.generate(inputs["input_ids"], max_new_tokens=4, do_sample=False)
print(tokenizer.batch_decode(summary_ids, skip_special_tokens=True)[0])


def get_tokens(word):
    return tokenizer([word], add_special_tokens=False).input_ids[0]


# IMPORTANT: Remember our tip about adding spaces before words to bias them correctly.
sequence_bias = [
    [get_tokens("list"), -10.0],
]  # will fail to apply bias
biased_ids = model.generate(inputs["input_ids"], max_new_tokens=4, do_sample=False, sequence_bias=sequence_bias)
print(tokenizer.batch_decode(biased_ids, skip_special_tokens=True)[0])
unchanged_ids = biased_ids

sequence_bias = [
    [get_tokens(" list"), -10.0],
]  # will work
biased_ids = model.generate(inputs["input_ids"], max_new_tokens=4, do_sample=False, sequence_bias=sequence_bias)
print(tokenizer.batch_decode(biased_ids, skip_special_tokens=True)[0])

# Checks: the bias on "list" (no space) changes nothing; on " list" each greedy token is the argmax of the
# logits with -10 added to that token, and " list" no longer comes first.
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
assert torch.equal(unchanged_ids, summary_ids), (unchanged_ids, summary_ids)
(token,) = get_tokens(" list")
assert summary_ids[0, prompt_len].item() == token, summary_ids
logits = model(biased_ids).logits[0]
for pos in range(prompt_len, biased_ids.shape[1]):
    row = logits[pos - 1].clone()
    row[token] -= 10.0
    assert biased_ids[0, pos].item() == int(row.argmax()), (pos, biased_ids[0, pos].item(), int(row.argmax()))
assert biased_ids[0, prompt_len].item() != token
