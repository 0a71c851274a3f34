"""Streamers, as in Transformers: generate(..., streamer=s) calls s.put(prompt ids) once, then s.put(new ids)
for each chunk of tokens as soon as it is decided (one token per step in plain generation, a whole accepted
draft at once in assisted generation), then s.end().

TextStreamer prints the text as it becomes final (up to the last space or newline); TextIteratorStreamer
hands it to another thread (or a notebook cell) through a queue: `for text in streamer: ...`.
"""

import queue

import numpy as np

from .errors import InvalidInputError


class BaseStreamer:
    def put(self, value):
        raise NotImplementedError

    def end(self):
        raise NotImplementedError


class TextStreamer(BaseStreamer):
    """Decodes the tokens it is given and prints the text as soon as it cannot change any more.

    skip_prompt: leave the prompt out. decode_kwargs go to tokenizer.decode (e.g. skip_special_tokens=True)."""

    def __init__(self, tokenizer, skip_prompt=False, **decode_kwargs):
        self.tokenizer, self.skip_prompt, self.decode_kwargs = tokenizer, skip_prompt, decode_kwargs
        self.token_cache, self.print_len, self.next_tokens_are_prompt = [], 0, True

    def put(self, value):
        value = np.asarray(value)
        if value.ndim > 1 and value.shape[0] > 1:
            raise InvalidInputError("streamers take one sequence at a time (batch size 1)")
        if self.skip_prompt and self.next_tokens_are_prompt:
            self.next_tokens_are_prompt = False
            return
        self.next_tokens_are_prompt = False
        self.token_cache.extend(int(t) for t in value.reshape(-1))
        text = self.tokenizer.decode(self.token_cache, **self.decode_kwargs)
        if text.endswith("\n"):  # a finished line: flush it and start a new cache
            printable = text[self.print_len:]
            self.token_cache, self.print_len = [], 0
        else:  # up to the last space; a trailing partial UTF-8 sequence (U+FFFD) may still change
            cut = text.rfind(" ") + 1
            if text.endswith("\ufffd"):
                cut = min(cut, len(text.rstrip("\ufffd")))
            printable = text[self.print_len:cut] if cut > self.print_len else ""
            self.print_len += len(printable)
        self.on_finalized_text(printable)

    def end(self):
        text = self.tokenizer.decode(self.token_cache, **self.decode_kwargs) if self.token_cache else ""
        printable = text[self.print_len:]
        self.token_cache, self.print_len, self.next_tokens_are_prompt = [], 0, True
        self.on_finalized_text(printable, stream_end=True)

    def on_finalized_text(self, text, stream_end=False):
        print(text, flush=True, end="" if not stream_end else None)


class TextIteratorStreamer(TextStreamer):
    """TextStreamer whose text goes into a queue: iterate over it from another thread. timeout (seconds) bounds
    each wait; queue.Empty is raised when it passes."""

    def __init__(self, tokenizer, skip_prompt=False, timeout=None, **decode_kwargs):
        super().__init__(tokenizer, skip_prompt, **decode_kwargs)
        self.text_queue, self.stop_signal, self.timeout = queue.Queue(), None, timeout

    def on_finalized_text(self, text, stream_end=False):
        if text:
            self.text_queue.put(text, timeout=self.timeout)
        if stream_end:
            self.text_queue.put(self.stop_signal, timeout=self.timeout)

    def __iter__(self):
        return self

    def __next__(self):
        value = self.text_queue.get(timeout=self.timeout)
        if value is self.stop_signal:
            raise StopIteration()
        return value
