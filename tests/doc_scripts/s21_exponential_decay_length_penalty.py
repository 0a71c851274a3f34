# Transformers docs: internal/generation_utils.md, ExponentialDecayLengthPenalty example.
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and pad_token_id (gpt2's 50256 is outside this vocabulary: the tokenizer's eos).
# What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])

text = "Just wanted to let you know, I"
inputs = tokenizer(text, return_tensors="pt")

# Let's consider that we want short sentences, so we limit `max_length=30`. However, we observe that the answer
# tends to end abruptly.
set_seed(1)
outputs = model.generate(**inputs, do_sample=True, temperature=0.9, max_length=30, pad_token_id=tokenizer.eos_token_id)
print(tokenizer.batch_decode(outputs)[0])
plain = outputs

# To promote the appearance of the EOS token at the right time, we add the `exponential_decay_length_penalty =
# (start_index, decay_factor)`. Instead of cutting at max_tokens, the output comes to an end before and usually
# with more meaning. What happens is that starting from `start_index` the EOS token score will be increased
# by `decay_factor` exponentially. However, if you set a high decay factor, you may also end up with abruptly
# ending sequences.
set_seed(1)
outputs = model.generate(
    **inputs,
    do_sample=True,
    temperature=0.9,
    max_length=30,
    pad_token_id=tokenizer.eos_token_id,
    exponential_decay_length_penalty=(15, 1.6),
)
print(tokenizer.batch_decode(outputs)[0])

# Checks: this checkpoint's generation_config sets max_new_tokens (128), which takes precedence over the max_length
# passed here, as in Transformers (it warns); the decay makes the eos win long before that. The processed eos
# score is the raw logit raised by |logit| * (1.6 ** k - 1) once k = len(sequence) - (prompt length + 15) > 0, then
# divided by the temperature (output_logits gives the raw logits, output_scores the processed ones).
import torch  # noqa: E402 - where Transformers' documentation imports it

eos = tokenizer.eos_token_id
prompt_len = inputs["input_ids"].shape[1]
limit = prompt_len + model.generation_config.max_new_tokens
assert model.generation_config.max_new_tokens == 128
assert prompt_len < plain.shape[1] <= limit and plain.shape[1] > 30, plain.shape
assert outputs[0, -1].item() == eos and outputs.shape[1] < limit, outputs
set_seed(1)
res = model.generate(
    **inputs,
    do_sample=True,
    temperature=0.9,
    max_length=30,
    pad_token_id=eos,
    exponential_decay_length_penalty=(15, 1.6),
    return_dict_in_generate=True,
    output_scores=True,
    output_logits=True,
)
assert torch.equal(res.sequences, outputs), "the same seed gave another sample with output_scores on"
assert len(res.scores) == len(res.logits) == res.sequences.shape[1] - prompt_len
checked = 0
for step, (scores, logits) in enumerate(zip(res.scores, res.logits)):
    raw = logits[0, eos].item()
    k = (prompt_len + step) - (prompt_len + 15)
    expected = (raw + abs(raw) * (1.6**k - 1) if k > 0 else raw) / 0.9
    got = scores[0, eos].item()
    if got != float("-inf"):  # else top_k=50 filtered it out
        assert abs(got - expected) <= 1e-4 * max(1.0, abs(expected)), (step, got, expected)
        checked += 1
assert checked > 0
