# renormalize_logits and remove_invalid_values beside repetition_penalty: the processed scores of a greedy run.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 700, 701, 702]])
out = model.generate(
    ids,
    max_new_tokens=3,
    do_sample=False,
    renormalize_logits=True,
    remove_invalid_values=True,
    repetition_penalty=1.3,
    return_dict_in_generate=True,
    output_scores=True,
)
print(len(out.scores), out.scores[0].shape)  # each step renormalized: logsumexp 0 (compared in result)
result = {
    "scores": torch.stack(out.scores),
    "ids": out.sequences,
    "logsumexp": [torch.logsumexp(s, -1) for s in out.scores],
}
