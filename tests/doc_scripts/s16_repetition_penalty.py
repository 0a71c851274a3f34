# Transformers docs: internal/generation_utils.md, RepetitionPenaltyLogitsProcessor example (the generate()
# calls; the processor-class variant needs RepetitionPenaltyLogitsProcessor, which this package does not export).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

# Initializing the model and tokenizer for it
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer(["I'm not going to"], return_tensors="pt")

# This shows a normal generate without any specific parameters
summary_ids = model.generate(**inputs)
print(tokenizer.batch_decode(summary_ids, skip_special_tokens=True)[0])

# This generates a penalty for repeated tokens
penalized_ids = model.generate(**inputs, repetition_penalty=1.1)
print(tokenizer.batch_decode(penalized_ids, skip_special_tokens=True)[0])

# Checks: each penalized greedy token is the argmax of the logits after the penalty: every token already in the
# sequence (prompt included) has its logit divided by 1.1 if positive, multiplied by 1.1 if negative.
import torch  # noqa: E402 - where Transformers' documentation imports it

prompt_len = inputs["input_ids"].shape[1]
logits = model(penalized_ids).logits[0]
for pos in range(prompt_len, penalized_ids.shape[1]):
    row = logits[pos - 1].clone()
    seen = torch.unique(penalized_ids[0, :pos])
    row[seen] = torch.where(row[seen] < 0, row[seen] * 1.1, row[seen] / 1.1)
    token = penalized_ids[0, pos].item()
    assert row[token] >= row.max() - 1e-4, (pos, token, row[token].item(), int(row.argmax()), row.max().item())
assert not torch.equal(penalized_ids, summary_ids), "the penalty changed nothing on a repetitive greedy output"
