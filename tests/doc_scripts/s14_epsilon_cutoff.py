# Transformers docs: internal/generation_utils.md, EpsilonLogitsWarper example.
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

# With epsilon sampling, the output gets restricted to high-probability tokens. Note that this is similar to
# Top P sampling, which restricts tokens based on their cumulative probability.
# Pro tip: The paper recommends using `epsilon_cutoff` values between 3e-4 and 9e-4
outputs = model.generate(**inputs, do_sample=True, epsilon_cutoff=0.1)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

# Checks: each sampled token has probability >= epsilon (after the default top_k=50, renormalized), or is the
# most likely token (kept when none passes).
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
logits = model(outputs).logits[0].double()
for pos in range(prompt_len, outputs.shape[1]):
    row = logits[pos - 1]
    kept = torch.topk(row, 50).indices
    probs = torch.zeros_like(row)
    probs[kept] = torch.softmax(row[kept], dim=-1)
    token = outputs[0, pos].item()
    assert token == int(row.argmax()) or probs[token] >= 0.1 * (1 - 1e-6), (pos, token, probs[token].item())
