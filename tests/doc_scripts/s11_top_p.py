# Transformers docs: internal/generation_utils.md, TopPLogitsWarper example.
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

# With `top_p` sampling, the output gets restricted to high-probability tokens.
# Pro tip: In practice, LLMs use `top_p` in the 0.9-0.95 range.
outputs = model.generate(**inputs, do_sample=True, top_p=0.1)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# Checks: each sampled token lies in the nucleus: after the default top_k=50, the tokens more likely than it
# hold less than top_p of the (renormalized) probability.
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
logits = model(outputs).logits[0].double()
for pos in range(prompt_len, outputs.shape[1]):
    row = logits[pos - 1]
    kept = torch.topk(row, 50).indices
    probs = torch.full_like(row, 0.0)
    probs[kept] = torch.softmax(row[kept], dim=-1)
    token = outputs[0, pos].item()
    assert probs[token] > 0, (pos, token, "outside top_k=50")
    above = probs[probs > probs[token]].sum().item()
    assert above < 0.1 + 1e-6, (pos, token, above)
