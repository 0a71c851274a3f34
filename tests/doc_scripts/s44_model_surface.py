# Transformers docs: main_classes/model.md (PreTrainedModel: eval, to, num_parameters, can_generate, config) and
# quicktour.md "AutoModel" (a forward under torch.no_grad(), softmax over the logits).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

import torch

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model.eval()
model = model.to("cpu")
print(f"{model.num_parameters():,} parameters; can generate: {model.can_generate()}")
print(model.config.hidden_size, model.config.num_hidden_layers, model.config.vocab_size)

inputs = tokenizer("def fibonacci(n):", return_tensors="pt").to(model.device)
with torch.no_grad():
    outputs = model(**inputs)
predictions = torch.nn.functional.softmax(outputs.logits, dim=-1)

# Checks: num_parameters counts every weight of the config's shape (untied embedding and head); the model can
# generate; the forward gives torch float32 logits (batch, seq, vocab) whose softmax rows sum to 1.
c = model.config
head_dim = c.hidden_size // c.num_attention_heads
per_layer = (
    c.hidden_size * head_dim * (c.num_attention_heads * 2 + c.num_key_value_heads * 2)
    + 3 * c.hidden_size * c.intermediate_size
    + 2 * c.hidden_size
)
expected = c.num_hidden_layers * per_layer + 2 * c.vocab_size * c.hidden_size + c.hidden_size
assert model.num_parameters() == expected, (model.num_parameters(), expected)
assert model.can_generate() is True
assert c.model_type == "llama" and c.tie_word_embeddings is False and c.is_encoder_decoder is False
assert isinstance(outputs.logits, torch.Tensor) and outputs.logits.dtype == torch.float32
assert outputs.logits.shape == (1, inputs["input_ids"].shape[1], c.vocab_size), outputs.logits.shape
assert torch.allclose(predictions.sum(-1), torch.ones(1, inputs["input_ids"].shape[1]), atol=1e-5)
assert str(model.device) == "cpu"
