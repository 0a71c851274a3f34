# A streamer of one's own: what put() receives (shapes and ids), and end() called once.
import os

import torch
from transformers import AutoModelForCausalLM
from transformers.generation.streamers import BaseStreamer


class Recorder(BaseStreamer):
    def __init__(self):
        self.puts, self.ends = [], 0

    def put(self, value):
        self.puts.append((tuple(value.shape), value.tolist()))

    def end(self):
        self.ends += 1


model = AutoModelForCausalLM.from_pretrained(os.environ["TINY_LLAMA"])
recorder = Recorder()
out = model.generate(torch.tensor([[1, 40, 41, 42]]), max_new_tokens=4, do_sample=False, streamer=recorder)
print(recorder.puts, recorder.ends)
result = {"puts": recorder.puts, "ends": recorder.ends}
