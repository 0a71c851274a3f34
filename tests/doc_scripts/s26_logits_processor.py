# Transformers docs: internal/generation_utils.md, "LogitsProcessor" (a LogitsProcessor subclass in a
# LogitsProcessorList, passed as generate(logits_processor=...)), with assisted generation from
# generation_strategies.md "Speculative decoding".
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint names
# (os.environ["HA_MODEL"], os.environ["HA_DRAFT"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList


class SuppressTokenLogitsProcessor(LogitsProcessor):
    """Sets the score of one token to -inf, and records the shapes it is called with."""

    def __init__(self, token_id):
        self.token_id = token_id
        self.calls = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.calls.append((input_ids.shape[-1], type(input_ids), type(scores), tuple(scores.shape)))
        scores_processed = scores.clone()
        scores_processed[:, self.token_id] = -float("inf")
        return scores_processed


tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
assistant_model = AutoModelForCausalLM.from_pretrained(os.environ["HA_DRAFT"])
inputs = tokenizer("def fibonacci(n):", return_tensors="pt")

plain = model.generate(**inputs, max_new_tokens=20)
prompt_len = inputs["input_ids"].shape[1]
first_token = plain[0, prompt_len].item()

processor = SuppressTokenLogitsProcessor(first_token)
outputs = model.generate(**inputs, max_new_tokens=20, logits_processor=LogitsProcessorList([processor]))
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

assisted = model.generate(
    **inputs,
    max_new_tokens=20,
    assistant_model=assistant_model,
    logits_processor=LogitsProcessorList([SuppressTokenLogitsProcessor(first_token)]),
)
print(tokenizer.batch_decode(assisted, skip_special_tokens=True)[0])

# Checks: the processor runs once per new token, on torch tensors, with the tokens so far (prompt first) and the
# (batch, vocab) scores; the suppressed token never appears; each token is the argmax of the processed logits;
# greedy assisted generation gives the same tokens as plain with the same processor.
new = outputs[0, prompt_len:]
assert first_token not in new.tolist(), new
assert len(processor.calls) == len(new), (len(processor.calls), len(new))
for i, (length, ids_type, scores_type, shape) in enumerate(processor.calls):
    assert length == prompt_len + i, (i, length)
    assert ids_type is torch.Tensor and scores_type is torch.Tensor, (ids_type, scores_type)
    assert shape == (1, model.config.vocab_size), shape
logits = model(outputs).logits[0]
for pos in range(prompt_len, outputs.shape[1]):
    row = logits[pos - 1].clone()
    row[first_token] = -float("inf")
    assert outputs[0, pos].item() == int(row.argmax()), pos
assert torch.equal(assisted, outputs), (assisted, outputs)
