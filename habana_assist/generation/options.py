"""generate()'s arguments as the core takes them: the logits processors' parameters (the `procs` options, by name,
of csrc/bindings/generate.c, which ha.h's ha_sampling_params documents) and the Python callbacks that run the
caller's logits_processor and stopping_criteria lists from inside the core's loop.

Transformers' semantics are kept where they are decided here: which processors a GenerationConfig turns on,
at which step the position-dependent ones act (forced_bos at cur_len == 1, forced_eos at cur_len == max_length
- 1, begin_suppress at the first new token, one later after a forced bos), and the bad words that
NoBadWordsLogitsProcessor drops (a single eos token).
"""

import numpy as np

from ..errors import InvalidInputError
from ..utils.tensors import from_numpy, to_numpy


def _ids(value):
    """An int or a list of ints -> list of ints ([] for None)."""
    if value is None:
        return []
    return [int(value)] if isinstance(value, (int, np.integer)) else [int(v) for v in value]


def _sequences(pairs):
    """[(token ids, value)] -> (tokens int32, offsets int64 (n + 1,), values float32 (n,)) for ha_token_seqs."""
    lengths = [len(ids) for ids, _ in pairs]
    tokens = np.array([t for ids, _ in pairs for t in ids], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float32)
    return tokens, offsets, values


def processing_args(gc, prompt_width, max_new, eos, logits_fn, stop_fn, logits_out):
    """The processors' options, a dict by name for _core.generate* and _core.Sampler: gc a validated
    GenerationConfig, prompt_width the padded prompt's columns (Transformers' input_ids_seq_length), eos the eos ids
    (list), logits_fn/stop_fn the callbacks or None, logits_out float32 (max_new, batch, vocab) or None."""
    bias = _sequences(gc.sequence_bias_pairs())
    bad = [tuple(_ids(s)) for s in (gc.bad_words_ids or [])]
    bad = [s for s in dict.fromkeys(bad) if not (len(s) == 1 and s[0] in eos)]  # NoBadWordsLogitsProcessor keeps eos
    bad_tokens, bad_offsets, _ = _sequences([(s, 0.0) for s in bad])
    forced_bos = [gc.forced_bos_token_id] if gc.forced_bos_token_id is not None and prompt_width == 1 else []
    decay = gc.exponential_decay_length_penalty
    decay_start, decay_factor = (int(decay[0]), float(decay[1])) if decay is not None else (0, 0.0)
    # SuppressTokensAtBeginLogitsProcessor's begin_index: the prompt's width, one more after a forced bos
    begin_step = 0 if prompt_width > 1 or gc.forced_bos_token_id is None else 1
    typical_p = gc.effective("typical_p")
    return dict(
        sequence_bias_tokens=bias[0],
        sequence_bias_offsets=bias[1],
        sequence_bias_values=bias[2],
        no_repeat_ngram_size=int(gc.effective("no_repeat_ngram_size")),
        bad_words_tokens=bad_tokens,
        bad_words_offsets=bad_offsets,
        forced_bos_token_id=np.array(forced_bos, dtype=np.int32),
        forced_eos_token_id=np.array(gc.forced_eos_token_ids(), dtype=np.int32),
        forced_eos_step=max_new - 1,
        remove_invalid_values=bool(gc.remove_invalid_values),
        decay_factor=decay_factor,
        decay_start=decay_start,
        suppress_tokens=np.array(_ids(gc.suppress_tokens), dtype=np.int32),
        begin_suppress_tokens=np.array(_ids(gc.begin_suppress_tokens), dtype=np.int32),
        begin_suppress_step=begin_step,
        min_p=float(gc.effective("min_p")),
        typical_p=float(typical_p if typical_p < 1.0 else 0.0),
        epsilon_cutoff=float(gc.effective("epsilon_cutoff")),
        eta_cutoff=float(gc.effective("eta_cutoff")),
        renormalize_logits=bool(gc.renormalize_logits),
        logits_fn=logits_fn,
        stop_fn=stop_fn,
        logits_out=logits_out,
        no_cache=gc.use_cache is False,
    )


def sampling_options(gc, min_new, eos, seed):
    """The token choice's options by name, beside processing_args' (the Sampler's and both generation
    functions'): min_new the new tokens before eos may come, eos the eos ids (list), seed the call's."""
    return dict(
        min_new_tokens=min_new,
        eos_token_id=np.asarray(eos, dtype=np.int32),
        do_sample=bool(gc.do_sample),
        temperature=float(gc.effective("temperature")),
        top_k=int(gc.effective("top_k")),
        top_p=float(gc.effective("top_p")),
        repetition_penalty=float(gc.effective("repetition_penalty")),
        seed=seed,
    )


def reads_argmax_only(gc, procs, min_new):
    """Whether a call with these arguments (procs from processing_args, min_new the new tokens before eos may
    come) reads nothing of a target's logits row but its argmax: greedy, every processor off, no scores or logits
    kept, no callback given the scores. A wrapped model on an accelerator then sends only each row's top two
    (integrations/external.py); the decided tokens are the same either way."""
    p = procs
    return (
        not gc.do_sample
        and not gc.output_scores
        and float(gc.effective("repetition_penalty")) == 1.0
        and min_new == 0
        and p["no_repeat_ngram_size"] == 0
        and not p["remove_invalid_values"]
        and p["decay_factor"] == 0.0
        and p["min_p"] == p["typical_p"] == p["epsilon_cutoff"] == p["eta_cutoff"] == 0.0
        and p["logits_fn"] is None
        and p["stop_fn"] is None
        and p["logits_out"] is None
        and all(
            len(p[k]) == 0
            for k in (
                "sequence_bias_tokens",
                "bad_words_tokens",
                "forced_bos_token_id",
                "forced_eos_token_id",
                "suppress_tokens",
                "begin_suppress_tokens",
            )
        )
    )


def _callables(value, flag):
    """A list (or LogitsProcessorList / StoppingCriteriaList) of callables -> that list; None -> []."""
    if value is None:
        return []
    if callable(value) and not isinstance(value, (list, tuple)):
        return [value]  # a single processor, or a *List object called as a whole
    if not isinstance(value, (list, tuple)) or not all(callable(v) for v in value):
        raise InvalidInputError(
            f"`{flag}` must be a list of callables f(input_ids, scores), got {value!r}; pass e.g. {flag}=[my_function]"
        )
    return list(value)


def _as_numpy(x):
    """A callback's result (numpy, torch of any dtype, a bool...) as a numpy array."""
    return to_numpy(x, "a callback's result")[0] if not isinstance(x, (bool, np.bool_)) else np.asarray(x)


def _arguments(tokens, scores, kind):
    """The core's (tokens int32 bytes, scores float32 buffer) -> Transformers' (input_ids int64 (1, n), scores
    float32 (1, vocab)), torch tensors for kind "torch"; scores view the buffer (writable if it is)."""
    ids = np.frombuffer(tokens, dtype=np.int32).astype(np.int64)[None, :]
    return from_numpy(ids, kind), from_numpy(np.frombuffer(scores, dtype=np.float32)[None, :], kind)


def logits_callback(logits_processor, kind):
    """The core's logits_fn for the caller's processors, or None: called with (row, tokens int32 bytes, scores
    float32 bytearray), it calls each processor with input_ids int64 (1, n) and scores float32 (1, vocab) (torch
    tensors for kind "torch") and returns the processed scores as float32."""
    processors = _callables(logits_processor, "logits_processor")
    if not processors:
        return None

    def run(row, tokens, scores):
        ids, s = _arguments(tokens, scores, kind)
        for processor in processors:
            s = processor(ids, s)
            if s is None:
                raise InvalidInputError(
                    f"the logits processor {processor!r} returned None; it must return the "
                    "scores (input_ids, scores) -> scores"
                )
        return np.ascontiguousarray(_as_numpy(s), dtype=np.float32)

    return run


def stop_callback(stopping_criteria, kind):
    """The core's stop_fn for the caller's criteria, or None: called with (row, tokens int32 bytes, scores float32
    bytes) after each decided token; every criterion is called (a stateful one sees every token, as in
    Transformers' StoppingCriteriaList) and the row stops if any returns True."""
    criteria = _callables(stopping_criteria, "stopping_criteria")
    if not criteria:
        return None

    def run(row, tokens, scores):
        ids, s = _arguments(tokens, scores, kind)
        stop = False
        for criterion in criteria:
            result = _as_numpy(criterion(ids, s))
            if result.dtype != bool or result.size != 1:
                raise InvalidInputError(
                    f"the stopping criterion {criterion!r} returned {result!r}; it must return a "
                    "bool or a bool array of shape (batch,), here (1,)"
                )
            stop |= bool(result.reshape(-1)[0])
        return stop

    return run
