# Scores of a batch in which one row stops after its first token (its first token made eos): the row still
# running, and the row that stopped.
import os

import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 50, 60, 70, 80], [1, 90, 91, 92, 93]])
first = model.generate(ids, max_new_tokens=1, do_sample=False)[:, -1]
out = model.generate(
    ids,
    max_new_tokens=4,
    do_sample=False,
    eos_token_id=int(first[0]),
    pad_token_id=0,
    return_dict_in_generate=True,
    output_scores=True,
)
scores = torch.stack(out.scores)  # (steps, batch, vocab)
print(out.sequences.tolist())
result = {
    "sequences": out.sequences,
    "running_row": scores[:, 1],
    "first_step": scores[0],
    "stopped_row_later_steps": scores[1:, 0],
}
