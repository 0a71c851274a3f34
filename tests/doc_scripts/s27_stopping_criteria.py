# Transformers docs: internal/generation_utils.md, "StoppingCriteria" (a StoppingCriteria subclass in a
# StoppingCriteriaList, passed as generate(stopping_criteria=...)), with assisted generation from
# generation_strategies.md "Speculative decoding".
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint names
# (os.environ["HA_MODEL"], os.environ["HA_DRAFT"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer, StoppingCriteria, StoppingCriteriaList


class StopOnTokenCriteria(StoppingCriteria):
    """Stops a row once its last token is `token_id`."""

    def __init__(self, token_id):
        self.token_id = token_id

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        return input_ids[:, -1] == self.token_id


tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
assistant_model = AutoModelForCausalLM.from_pretrained(os.environ["HA_DRAFT"])
inputs = tokenizer("def fibonacci(n):", return_tensors="pt")
prompt_len = inputs["input_ids"].shape[1]

plain = model.generate(**inputs, max_new_tokens=30)
stop_token = plain[0, prompt_len + 6].item()  # the 7th new token

outputs = model.generate(
    **inputs, max_new_tokens=30, stopping_criteria=StoppingCriteriaList([StopOnTokenCriteria(stop_token)])
)
print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])

assisted = model.generate(
    **inputs,
    max_new_tokens=30,
    assistant_model=assistant_model,
    stopping_criteria=StoppingCriteriaList([StopOnTokenCriteria(stop_token)]),
)

# Checks: generation stops right after the first new occurrence of the token, as the criterion says; the output
# is the plain output up to there; assisted generation stops at the same place with the same tokens.
new_plain = plain[0, prompt_len:].tolist()
first = new_plain.index(stop_token)
assert outputs.shape[1] == prompt_len + first + 1, (outputs.shape, first)
assert torch.equal(outputs[0], plain[0, : outputs.shape[1]])
assert outputs[0, -1].item() == stop_token
assert torch.equal(assisted, outputs), (assisted, outputs)
