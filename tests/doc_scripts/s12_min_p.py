# Transformers docs: internal/generation_utils.md, MinPLogitsWarper example.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, set_seed

set_seed(1)
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])

inputs = tokenizer("A sequence: 1, 2", return_tensors="pt")

# With sampling, the output is unexpected -- sometimes too unexpected.
outputs = model.generate(**inputs, do_sample=True)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# With `min_p` sampling, the output gets restricted to high-probability tokens.
# Pro tip: In practice, LLMs use `min_p` in the 0.01-0.2 range.
outputs = model.generate(**inputs, do_sample=True, min_p=0.1)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# Checks: each sampled token has at least min_p times the probability of the most likely token (and is among the
# default top_k=50).
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
logits = model(outputs).logits[0].double()
for pos in range(prompt_len, outputs.shape[1]):
    probs = torch.softmax(logits[pos - 1], dim=-1)
    token = outputs[0, pos].item()
    assert probs[token] >= 0.1 * probs.max() * (1 - 1e-6), (pos, token, probs[token].item(), probs.max().item())
    assert token in torch.topk(probs, 50).indices.tolist(), (pos, token)
