# compute_transition_scores of a greedy run: each chosen token's log-probability.
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained(os.environ["PYCODE"])
model = AutoModelForCausalLM.from_pretrained(os.environ["PYCODE"], dtype=torch.float32)
inputs = tok(["def add(a, b):"], return_tensors="pt")
out = model.generate(**inputs, max_new_tokens=5, do_sample=False, return_dict_in_generate=True, output_scores=True)
scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
for token, score in zip(out.sequences[0, inputs.input_ids.shape[1] :], scores[0]):
    print(f"| {token:5d} | {tok.decode(token):8s} |")
result = {"transition_scores": scores, "probabilities": torch.exp(scores), "scores": torch.stack(out.scores)}
