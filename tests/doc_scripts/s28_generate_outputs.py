# Transformers docs: internal/generation_utils.md, "Generate Outputs".
# Changed from the doc: the import line (habana_assist for transformers; this checkpoint's Llama classes for the
# GPT-2 ones) and the checkpoint name (os.environ["HA_MODEL"]). What follows "# Checks" is ours.
import os

from habana_assist import LlamaForCausalLM, LlamaTokenizer

tokenizer = LlamaTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = LlamaForCausalLM.from_pretrained(os.environ["HA_MODEL"])

inputs = tokenizer("Hello, my dog is cute and ", return_tensors="pt")
generation_output = model.generate(**inputs, return_dict_in_generate=True, output_scores=True)

print(generation_output[:2])

# Checks: a GenerateDecoderOnlyOutput with sequences and one (batch, vocab) scores tensor per new token;
# hidden_states and attentions None; as a tuple and as a dict it keeps only what is not None; greedy picks each
# step's best score; output_logits adds the raw logits, equal to the scores when nothing processes them.
import torch  # noqa: E402 - where Transformers' documentation imports it

from habana_assist import GenerateDecoderOnlyOutput  # noqa: E402 - where Transformers' documentation imports it

assert isinstance(generation_output, GenerateDecoderOnlyOutput), type(generation_output)
sequences, scores = generation_output.sequences, generation_output.scores
prompt_len = inputs["input_ids"].shape[1]
assert isinstance(sequences, torch.Tensor) and isinstance(scores, tuple)
assert len(scores) == sequences.shape[1] - prompt_len
assert all(isinstance(s, torch.Tensor) and s.shape == (1, model.config.vocab_size) for s in scores)
assert generation_output.hidden_states is None and generation_output.attentions is None
first_two = generation_output[:2]
assert torch.equal(first_two[0], sequences) and first_two[1] is scores, first_two
# Transformers' _sample fills the cache too (with use_cache): the field `cache` in Transformers 5.24, whose older name
# past_key_values reads it as well
assert list(generation_output.keys()) == ["sequences", "scores", "cache"], list(generation_output.keys())
assert generation_output.past_key_values is generation_output.cache
assert generation_output.past_key_values.get_seq_length() == sequences.shape[1] - 1
assert generation_output["sequences"] is sequences
for step, s in enumerate(scores):
    assert int(s[0].argmax()) == sequences[0, prompt_len + step].item(), step
both = model.generate(**inputs, return_dict_in_generate=True, output_scores=True, output_logits=True)
assert len(both.logits) == len(both.scores) and all(torch.equal(a, b) for a, b in zip(both.logits, both.scores))
assert torch.equal(both.sequences, sequences)
