# A checkpoint whose generation_config.json asks for sampling: generate() follows it, and do_sample=False wins.
import os
import shutil

import torch
from transformers import AutoModelForCausalLM, GenerationConfig

shutil.copytree(os.environ["TINY_LLAMA"], "model")
GenerationConfig(
    do_sample=True, top_k=3, max_new_tokens=5, bos_token_id=1, eos_token_id=2, pad_token_id=0
).save_pretrained("model")
model = AutoModelForCausalLM.from_pretrained("model")
ids = torch.tensor([[1, 30, 31]])
torch.manual_seed(0)
out = model.generate(ids, return_dict_in_generate=True, output_scores=True)
greedy = model.generate(ids, do_sample=False)
print(model.generation_config.do_sample, out.sequences.shape, greedy.shape)
result = {"kept": [int(torch.isfinite(s).sum()) for s in out.scores], "greedy": greedy}
