# Transformers docs: main_classes/text_generation.md, GenerationMixin.compute_transition_scores example 1
# ("Print the scores for each token generated with Greedy Search").
# Changed from the doc: the import line (habana_assist for transformers; this checkpoint's LlamaTokenizer for
# GPT2Tokenizer) and the checkpoint name (os.environ["HA_MODEL"]). What follows "# Checks" is ours.
import os

import numpy as np

from habana_assist import AutoModelForCausalLM, LlamaTokenizer

tokenizer = LlamaTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer.pad_token_id = tokenizer.eos_token_id
inputs = tokenizer(["Today is"], return_tensors="pt")

# Example 1: Print the scores for each token generated with Greedy Search
outputs = model.generate(**inputs, max_new_tokens=5, return_dict_in_generate=True, output_scores=True)
transition_scores = model.compute_transition_scores(outputs.sequences, outputs.scores, normalize_logits=True)
# input_length is the length of the input prompt for decoder-only models, like the GPT family, and 1 for
# encoder-decoder models, like BART or T5.
input_length = 1 if model.config.is_encoder_decoder else inputs.input_ids.shape[1]
generated_tokens = outputs.sequences[:, input_length:]
for tok, score in zip(generated_tokens[0], transition_scores[0]):
    # | token | token string | log probability | probability
    print(f"| {tok:5d} | {tokenizer.decode(tok):8s} | {score.numpy():.3f} | {np.exp(score.numpy()):.2%}")

# Checks: (batch, new tokens) log-probabilities of the chosen tokens, as log_softmax of each step's scores; greedy
# chose the most likely token, so each is that step's maximum.
import torch  # noqa: E402 - where Transformers' documentation imports it

assert tokenizer.pad_token_id == tokenizer.eos_token_id
assert isinstance(transition_scores, torch.Tensor) and transition_scores.shape == (1, 5), transition_scores.shape
for step in range(5):
    logp = torch.log_softmax(outputs.scores[step][0].float(), dim=-1)
    token = generated_tokens[0, step].item()
    assert abs(transition_scores[0, step].item() - logp[token].item()) < 1e-4, step
    assert abs(transition_scores[0, step].item() - logp.max().item()) < 1e-4, step
assert (transition_scores <= 0).all() and (transition_scores.exp() > 0).all()
