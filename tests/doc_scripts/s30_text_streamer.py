# Transformers docs: generation_strategies.md (v4.4x), "Streaming" (also TextStreamer's docstring).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer, TextStreamer

tok = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
inputs = tok(["An increasing sequence: one,"], return_tensors="pt")
streamer = TextStreamer(tok)

# Despite returning the usual output, the streamer will also print the generated text to stdout.
_ = model.generate(**inputs, streamer=streamer, max_new_tokens=20)

# Checks: what the streamer prints is the decoded output (prompt included, as skip_prompt=False), then a newline;
# the returned output is the one generate() gives without a streamer.
import contextlib  # noqa: E402 - where Transformers' documentation imports it
import io  # noqa: E402 - where Transformers' documentation imports it

import torch  # noqa: E402 - where Transformers' documentation imports it

printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    out = model.generate(**inputs, streamer=TextStreamer(tok), max_new_tokens=20)
assert torch.equal(out, _) and torch.equal(out, model.generate(**inputs, max_new_tokens=20))
assert printed.getvalue() == tok.decode(out[0]) + "\n", (printed.getvalue(), tok.decode(out[0]))
