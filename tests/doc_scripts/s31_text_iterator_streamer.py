# Transformers docs: internal/generation_utils.md, TextIteratorStreamer example (generation in a Thread).
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os
from threading import Thread

from habana_assist import AutoModelForCausalLM, AutoTokenizer, TextIteratorStreamer

tok = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
inputs = tok(["An increasing sequence: one,"], return_tensors="pt")
streamer = TextIteratorStreamer(tok)

# Run the generation in a separate thread, so that we can fetch the generated text in a non-blocking way.
generation_kwargs = dict(inputs, streamer=streamer, max_new_tokens=20)
thread = Thread(target=model.generate, kwargs=generation_kwargs)
thread.start()
generated_text = ""
for new_text in streamer:
    generated_text += new_text
print(generated_text)

# Checks: the streamed text is the decoded output of the same generation; the thread ends; skip_prompt=True
# streams only the new text.
thread.join(timeout=60)
assert not thread.is_alive()
out = model.generate(**inputs, max_new_tokens=20)
assert generated_text == tok.decode(out[0]), (generated_text, tok.decode(out[0]))
streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)
thread = Thread(target=model.generate, kwargs=dict(inputs, streamer=streamer, max_new_tokens=20))
thread.start()
new_only = "".join(streamer)
thread.join(timeout=60)
prompt_len = inputs["input_ids"].shape[1]
assert new_only == tok.decode(out[0, prompt_len:], skip_special_tokens=True), new_only
