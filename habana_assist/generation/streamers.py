"""Streamers, as in Transformers: generate(..., streamer=s) calls s.put(prompt ids) once (1, n), then s.put(new ids)
for each chunk of tokens as soon as it is decided (one token per step in plain generation, (1,), a whole accepted
draft at once in assisted generation, (1, n)), then s.end(). If the generation stops early with an error or an
interrupt (Ctrl-C), it calls s.stop(error) instead where the streamer has it (s.end() where it has not), so
that nobody waits for the rest: TextStreamer prints what it holds, TextIteratorStreamer's consumer raises
GenerationStoppedError.

TextStreamer prints the text as it becomes final (up to the last space or newline); TextIteratorStreamer
hands it to another thread (or a notebook cell) through a queue: `for text in streamer: ...`.
"""

from __future__ import annotations

import queue
from typing import Any, Optional, Union

import numpy as np

from ..errors import GenerationStoppedError, InvalidInputError
from ..utils.types import Decoder, TokenIds


class BaseStreamer:
    """What generate(..., streamer=) calls: put(ids) for the prompt and for each chunk of new tokens, then end()
    (or stop(error) when the generation stops early)."""

    def put(self, value: TokenIds) -> None:
        raise NotImplementedError

    def end(self) -> None:
        raise NotImplementedError

    def stop(self, error: BaseException) -> None:
        """The generation stopped early with `error` (an exception): end the stream with what was put so far."""
        self.end()


def stop_streamer(streamer: Any, error: BaseException) -> None:
    """Tells streamer that its generation stopped with `error`, which the caller goes on raising: stop(error) for
    a BaseStreamer, end() for any other (a user's streamer may have a stop() of its own meaning). What that
    raises in turn is added to error's notes, not raised over it."""
    try:
        if isinstance(streamer, BaseStreamer):
            streamer.stop(error)
        else:
            streamer.end()
    except Exception as e:
        note = f"the streamer also failed to stop: {e!r}"
        if hasattr(error, "add_note"):  # Python 3.11
            error.add_note(note)
        else:
            setattr(error, "__notes__", [*getattr(error, "__notes__", []), note])  # what add_note does


class TextStreamer(BaseStreamer):
    """Decodes the tokens it is given and prints the text as soon as it cannot change any more.

    skip_prompt: leave the prompt out. decode_kwargs go to tokenizer.decode (e.g. skip_special_tokens=True).

    What is final: the text up to its last space (Transformers' rule; all of it after a CJK character), never a
    trailing U+FFFD (a multi-byte character whose other bytes are still to come, in byte-level BPE or byte
    fallback), and, where decode cleans up tokenization spaces, never a trailing space or start of a cleanup
    pattern (" ." would become "."). The streamed pieces join to decode(all tokens): after a finished line the
    cache restarts from the line's last token as context, so that decoders that treat the first token apart
    (Metaspace's leading space) see it in the middle, as in the whole decode."""

    def __init__(self, tokenizer: Decoder, skip_prompt: bool = False, **decode_kwargs: Any) -> None:
        self.tokenizer, self.skip_prompt, self.decode_kwargs = tokenizer, skip_prompt, decode_kwargs
        self.token_cache: list[int] = []
        self.print_len, self.next_tokens_are_prompt = 0, True
        self._context: list[int] = []
        self._context_text = ""  # the token before the cache, and its decoded text

    def _decode_cache(self) -> str:
        """The text of token_cache, decoded after the context token (without the context's own text)."""
        if not self._context:
            return self.tokenizer.decode(self.token_cache, **self.decode_kwargs)
        text = self.tokenizer.decode(self._context + self.token_cache, **self.decode_kwargs)
        if text.startswith(self._context_text):
            return text[len(self._context_text) :]
        return self.tokenizer.decode(self.token_cache, **self.decode_kwargs)

    def _cleans_up(self) -> bool:
        value = self.decode_kwargs.get("clean_up_tokenization_spaces")
        return bool(getattr(self.tokenizer, "clean_up_tokenization_spaces", False) if value is None else value)

    def put(self, value: TokenIds) -> None:
        ids = np.asarray(value)
        if ids.ndim > 1 and ids.shape[0] > 1:
            raise InvalidInputError("streamers take one sequence at a time (batch size 1)")
        if self.skip_prompt and self.next_tokens_are_prompt:
            self.next_tokens_are_prompt = False
            return
        self.next_tokens_are_prompt = False
        self.token_cache.extend(int(t) for t in ids.reshape(-1))
        text = self._decode_cache()
        if text.endswith("\n"):  # a finished line: flush it and start a new cache after its last token
            printable = text[self.print_len :]
            self._context = self.token_cache[-1:]
            self._context_text = self.tokenizer.decode(self._context, **self.decode_kwargs)
            self.token_cache, self.print_len = [], 0
        else:
            cut = len(text) if text and _is_cjk(text[-1]) else text.rfind(" ") + 1
            cut = min(cut, len(text.rstrip("\ufffd")))  # a partial UTF-8 sequence may still change
            if self._cleans_up():
                cut = min(cut, len(text) - _cleanup_hold(text))
            printable = text[self.print_len : cut] if cut > self.print_len else ""
            self.print_len += len(printable)
        self.on_finalized_text(printable)

    def end(self) -> None:
        text = self._decode_cache() if self.token_cache else ""
        printable = text[self.print_len :]
        self.token_cache, self.print_len, self.next_tokens_are_prompt = [], 0, True
        self._context, self._context_text = [], ""
        self.on_finalized_text(printable, stream_end=True)

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        print(text, flush=True, end="" if not stream_end else None)


# Transformers' clean_up_tokenization patterns; a text ending in a proper prefix of one may still lose a space.
_CLEANUP_PATTERNS = (" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're")


def _cleanup_hold(text: str) -> int:
    """How many characters at the end of text a later token could still change through the cleanup: the longest
    suffix that is a proper prefix of a cleanup pattern (each starts with a space)."""
    for n in range(min(len(text), 4), 0, -1):
        tail = text[-n:]
        if any(p.startswith(tail) and p != tail for p in _CLEANUP_PATTERNS):
            return n
    return 0


def _is_cjk(char: str) -> bool:
    """Transformers' TextStreamer._is_chinese_char: the CJK Unified Ideographs blocks, whose characters are words
    of their own (printed without waiting for a space)."""
    cp = ord(char)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


class TextIteratorStreamer(TextStreamer):
    """TextStreamer whose text goes into a queue: iterate over it from another thread. timeout (seconds) bounds
    each wait; queue.Empty is raised when it passes."""

    def __init__(
        self, tokenizer: Decoder, skip_prompt: bool = False, timeout: Optional[float] = None, **decode_kwargs: Any
    ) -> None:
        super().__init__(tokenizer, skip_prompt, **decode_kwargs)
        # SimpleQueue: its put and get are single C calls, so a Ctrl-C (whose handler runs between bytecodes of the
        # main thread, which generates and puts) cannot land inside one holding the queue's lock; queue.Queue's
        # Python-level Condition can be left locked, or with a stale waiter, and the consumer waits forever
        self.text_queue: queue.SimpleQueue[Union[str, None, _Stopped]] = queue.SimpleQueue()
        self.stop_signal, self.timeout = None, timeout
        self._error: Optional[BaseException] = None  # set while stop() ends the stream

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        if text:
            self.text_queue.put(text)
        if stream_end:
            self.text_queue.put(self.stop_signal if self._error is None else _Stopped(self._error))

    def stop(self, error: BaseException) -> None:
        """The consumer gets the text put so far, then GenerationStoppedError (caused by error) instead of the end."""
        self._error = error
        try:
            self.end()
        except BaseException:  # end() failed before queuing its marker (decode): the consumer is released all the same
            self.text_queue.put(_Stopped(error))
            raise
        finally:
            self._error = None

    def __iter__(self) -> TextIteratorStreamer:
        return self

    def __next__(self) -> str:
        value = self.text_queue.get(timeout=self.timeout)
        if value is self.stop_signal:
            raise StopIteration()
        if isinstance(value, _Stopped):
            raise GenerationStoppedError(f"the generation stopped before its end: {value.error!r}") from value.error
        return value


class _Stopped:
    """Queued by TextIteratorStreamer.stop in place of the end of the stream."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
