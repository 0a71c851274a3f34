# Transformers docs: internal/generation_utils.md, TopKLogitsWarper example.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

set_seed(1)
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])

inputs = tokenizer("A sequence: A, B, C, D", return_tensors="pt")

# With sampling, the output is unexpected -- sometimes too unexpected.
outputs = model.generate(**inputs, do_sample=True)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# With `top_k` sampling, the output gets restricted the k most likely tokens.
# Pro tip: In practice, LLMs use `top_k` in the 5-50 range.
outputs = model.generate(**inputs, do_sample=True, top_k=2)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# Checks: every sampled token is one of the 2 most likely after what precedes it (the model's own logits for the
# output sequence, one forward).
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
logits = model(outputs).logits[0]  # (seq, vocab)
for pos in range(prompt_len, outputs.shape[1]):
    top2 = torch.topk(logits[pos - 1], 2).indices.tolist()
    assert outputs[0, pos].item() in top2, (pos, outputs[0, pos].item(), top2)
