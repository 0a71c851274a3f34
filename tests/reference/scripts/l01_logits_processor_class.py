# A LogitsProcessor of one's own (ban even token ids) in a LogitsProcessorList, greedy, with its scores.
import os

import torch
from transformers import AutoModelForCausalLM, LogitsProcessor, LogitsProcessorList


class BanEven(LogitsProcessor):
    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, ::2] = float("-inf")
        return scores


model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
ids = torch.tensor([[1, 500, 501, 502]])
out = model.generate(
    ids,
    max_new_tokens=6,
    do_sample=False,
    logits_processor=LogitsProcessorList([BanEven()]),
    return_dict_in_generate=True,
    output_scores=True,
)
print(out.sequences.tolist())
result = {"ids": out.sequences, "scores": torch.stack(out.scores)}
