# Transformers docs: internal/generation_utils.md, LogitNormalization example.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])

inputs = tokenizer("A sequence: 1, 2, 3", return_tensors="pt")

# By default, the scores are not normalized -- the sum of their exponentials is NOT a normalized probability
# distribution, summing to 1
outputs = model.generate(**inputs, return_dict_in_generate=True, output_scores=True)
print(torch.allclose(torch.sum(torch.exp(outputs.scores[-1])), torch.Tensor((1.000,)), rtol=1e-4))
unnormalized = torch.allclose(torch.sum(torch.exp(outputs.scores[-1])), torch.Tensor((1.000,)), rtol=1e-4)

# Normalizing them may have a positive impact on beam methods, or when using the scores on your application
outputs = model.generate(**inputs, renormalize_logits=True, return_dict_in_generate=True, output_scores=True)
print(torch.allclose(torch.sum(torch.exp(outputs.scores[-1])), torch.Tensor((1.000,)), rtol=1e-4))

# Checks: False then True, as the doc prints; every step's scores are log-probabilities once renormalized.
assert unnormalized is False
for scores in outputs.scores:
    assert torch.allclose(torch.sum(torch.exp(scores)), torch.Tensor((1.000,)), rtol=1e-4), torch.exp(scores).sum()
    assert (scores <= 0).all()
