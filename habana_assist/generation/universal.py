"""Assisted generation with a draft whose tokenizer differs from the target's (Transformers' universal assisted
decoding: generate(assistant_model=draft, tokenizer=tok, assistant_tokenizer=draft_tok)).

The draft works in its own tokens and its proposal reaches the target through text; the target verifies all
candidates in one append and keeps exactly the tokens it would have chosen itself. One round, per row:

  1. Context: the target's tokens decided since the last round are decoded to text and appended to the
     draft's ids, re-encoding a window of the draft's last `assistant_lookbehind` ids with it (so that a word
     split over the boundary is tokenized as the draft's tokenizer would tokenize it); the draft's KV cache
     is cropped only where the ids changed.
  2. Draft: up to K tokens, each the draft's argmax (K, its schedule and the confidence threshold as in the
     same-tokenizer path, counted in draft tokens); it stops at its eos.
  3. Translate: the text of those tokens is appended to the text of a window of the target's last
     `target_lookbehind` tokens (a window that re-encodes to itself) and re-encoded; the candidates are the
     target ids after the window, kept only as far as the window's ids extend exactly and their decoded
     text is the draft's text. Where the target's last token and the new text would merge into other
     tokens, the target's ids cannot change, so fewer (or no) candidates are proposed.
  4. Verify: the target appends the candidates and scores them in one pass (with a rope switch, longrope's
     original_max_position_embeddings S, as the same-tokenizer loop: never candidates whose scores would come from
     forwards on both sides of S, and the round that passes S runs the row's whole sequence again first, as plain
     generation's step there does; csrc/ha.h ha_lm.rope_switch); each position's token is the
     one plain generation chooses (the same processors, argmax or the same position-keyed Gumbel noise), and
     candidates are kept while they equal it. So greedy output is bitwise the target's plain greedy output,
     and sampled output is the target's plain sampled output for the same seed, with either
     assisted_sampling value (no draft distribution exists over the target's vocabulary, so the rejection
     rule has no q: the coupled rule is used, as Transformers does for different tokenizers).

Tokenizer work per round is bounded by the windows (lookbehind + K + new tokens), never by the whole sequence;
the prompt is decoded and encoded once. The target's processors and choice are the C core's own sampler
(_core.Sampler over csrc/generation/sampling.c), which reads the row's history as plain generation does.
"""

import math
import time

import numpy as np

from .. import _core
from ..errors import InvalidInputError, UnsupportedModelError
from .options import sampling_options
from .token_source import TokenSource

_HOLD_BACK = 4  # tokens held back at most while their text ends inside a character (byte-level / byte fallback)

# ---- which path: the check of tokenizer / assistant_tokenizer ---------------------------------------------


def _vocab(tok, name):
    get = getattr(tok, "get_vocab", None)
    if not callable(get) or not callable(getattr(tok, "encode", None)) or not callable(getattr(tok, "decode", None)):
        raise InvalidInputError(
            f"`{name}` must be a tokenizer with encode(), decode() and get_vocab() (e.g. from "
            f"ha.AutoTokenizer.from_pretrained), got {type(tok).__name__}"
        )
    return get()


def different_tokenizers(target, assistant, tokenizer, assistant_tokenizer):
    """Whether assistant drafts through text (True) or in the target's own ids (False); raises Transformers'
    errors (_validate_assistant) where the arguments do not say which: a draft with another vocabulary needs
    both tokenizers. A pair whose tokenizers have the identical vocabulary (token -> id) takes the same-tokenizer
    path even if both are passed."""
    if assistant_tokenizer is None:
        if assistant.vocab_size != target.vocab_size:
            raise InvalidInputError(
                f"the assistant's vocab_size ({assistant.vocab_size}) differs from this model's ({target.vocab_size}): "
                "the main and assistant models have different tokenizers; pass tokenizer= (this model's) and "
                "assistant_tokenizer= (the assistant's) to generate() for universal assisted decoding"
            )
        return False
    if tokenizer is None:
        raise InvalidInputError(
            "`assistant_tokenizer` was passed without `tokenizer`: universal assisted decoding "
            "needs both, pass tokenizer= (the target's tokenizer) too"
        )
    same = _vocab(tokenizer, "tokenizer") == _vocab(assistant_tokenizer, "assistant_tokenizer")
    if same and assistant.vocab_size == target.vocab_size:
        return False
    return True


# ---- the target's token choice: the C core's sampler ----------------------------------------------------------


class TargetChooser:
    """The target's processors and token choice for one generate() call: csrc/generation/sampling.c through
    _core.Sampler, built from generate()'s own sampling arguments, so each position's token is the one plain
    generation chooses (argmax, or the Gumbel draw keyed by seed, row and absolute position)."""

    def __init__(self, gc, procs, eos, min_new, seed, vocab):
        self.core = _core.Sampler(vocab, dict(procs, **sampling_options(gc, min_new, eos, seed)))

    def process(self, scores, row, history, step):
        """scores float32 (V,) raw logits -> processed in place (and returned); history int32 (n,) the row's
        tokens before the scored position; step the index of the new token."""
        self.core.process(scores, row, history, step)
        return scores

    def choose(self, scores, row, position):
        """The token chosen from processed scores at this absolute position; -1 if every score was removed."""
        return self.core.choose(scores, row, position)


# ---- text between the two tokenizers -----------------------------------------------------------------------


def _decode(tok, ids):
    return tok.decode(list(ids), skip_special_tokens=True) if len(ids) else ""


def _encode(tok, text):
    return [int(i) for i in tok.encode(text, add_special_tokens=False)] if text else []


def _text_added(tok, ids, a, b, context=8):
    """The text ids[a:b] add after ids[:a] (decoded with up to `context` ids before a), or None where that is
    not a clean suffix (the decode of the shorter run is not a prefix, or a character is still incomplete)."""
    base = max(0, a - context)
    left, full = _decode(tok, ids[base:a]), _decode(tok, ids[base:b])
    if not full.startswith(left):
        return None
    text = full[len(left) :]
    return None if text.endswith("\ufffd") else text


def _stable_window(tok, ids, lo, hi, width):
    """A start w in [lo, hi) with hi - w <= width (nearest to that first) such that ids[w:hi] re-encodes from its
    own text to exactly itself, and that text; (None, None) if none. Costs O(width) encodes of <= width ids."""
    first = max(lo, hi - width)
    for w in list(range(first, hi)) + list(range(first - 1, max(lo, first - width) - 1, -1)):
        text = _decode(tok, ids[w:hi])
        if _encode(tok, text) == list(ids[w:hi]):
            return w, text
    if hi == lo:
        return hi, ""
    return None, None


class _Row:
    """One row's state between rounds. T: the target's tokens (list); A: the draft's ids for T's text (list);
    cached: the ids in the draft's cache; sent: how many of T have reached A as text. The lists change only at
    their ends (del / extend), so a round's work is bounded by the windows, not by their lengths."""

    def __init__(self, ttok, dtok, prompt, draft_vocab, t_special):
        self.T = [int(t) for t in prompt]
        self.t_floor = 0
        while self.t_floor < len(self.T) - 1 and self.T[self.t_floor] in t_special:
            self.t_floor += 1  # leading special tokens (<s>): never inside a window
        text = _decode(ttok, self.T)
        body = _encode(dtok, text)
        full = [int(i) for i in dtok.encode(text, add_special_tokens=True)]
        lead = full[: len(full) - len(body)] if full[len(full) - len(body) :] == body else []
        self.A = lead + body
        self.a_floor = len(lead)
        bad = [i for i in self.A if not 0 <= i < draft_vocab]
        if bad:
            raise InvalidInputError(
                f"assistant_tokenizer gives token id {bad[0]}, outside the assistant model's "
                f"vocabulary of {draft_vocab}; pass the assistant's own tokenizer"
            )
        self.cached = []  # the ids the draft's cache holds, in order
        self.dirty = 0  # A[:dirty] is unchanged since the draft's cache last caught up on A
        self.sent = len(self.T)


def _sync_draft(row, ttok, dtok, width):
    """Step 1: the text of the target's tokens T[sent:] appended to A, re-encoding A's last `width` ids with it."""
    L = len(row.T)
    for end in range(L, max(row.sent, L - _HOLD_BACK) - 1, -1):
        if end == row.sent:
            return
        new = _text_added(ttok, row.T, row.sent, end)
        if new is not None:
            break
    else:
        return
    row.sent = end
    if not new:
        return
    w, text = _stable_window(dtok, row.A, row.a_floor, len(row.A), width)
    if w is None:
        w, text = len(row.A), ""  # no window re-encodes to itself: the new text alone
    row.dirty = min(row.dirty, w)
    del row.A[w:]
    row.A.extend(_encode(dtok, text + new))


def _candidates(row, ttok, dtok, drafts, draft_eos, target_eos, width):
    """Step 3: the target ids that the draft's tokens `drafts` propose after T (possibly none)."""
    ends_eos = bool(drafts) and drafts[-1] in draft_eos
    if ends_eos:
        drafts = drafts[:-1]
    ctx = row.A[-8:]
    new = None
    while drafts:
        new = _text_added(dtok, ctx + drafts, len(ctx), len(ctx) + len(drafts))
        if new:
            break
        drafts = drafts[:-1]  # a character still incomplete at the end: leave those ids out
    L = len(row.T)
    if not drafts or not new:
        return [target_eos] if ends_eos and not drafts and target_eos is not None else []
    w, text = _stable_window(ttok, row.T, row.t_floor, L, width)
    if w is None:
        return []
    window = row.T[w:L]
    E = _encode(ttok, text + new)
    cands = E[len(window) :] if E[: len(window)] == window else _encode(ttok, new)
    # keep the longest prefix that extends the window's text by a prefix of the draft's text
    goal = text + new
    while cands:
        got = _decode(ttok, window + cands)
        if got.startswith(text) and goal.startswith(got) and len(got) > len(text):
            break
        cands = cands[:-1]
    if cands and ends_eos and target_eos is not None and _decode(ttok, window + cands) == goal:
        cands = cands + [target_eos]
    return cands


# ---- the loop ----------------------------------------------------------------------------------------------


def generate(
    target,
    draft,
    ttok,
    dtok,
    gc,
    procs,
    ids,
    real,
    max_new,
    min_new,
    eos,
    pad,
    seed,
    max_time,
    on_tokens,
    scores_out,
    logits_out,
    sources=None,
):
    """Universal assisted generation of ids int32 (B, S) (left-padded, real tokens per row in `real`), row by
    row; procs the processors' options (options.processing_args), its stop_fn the stopping criteria's callback.
    Writes scores_out / logits_out (max_new, B, V) and sources (B, max_new) (TokenSource) where given. -> (out
    int32 (B, max_new), steps, stats dict of GenerateDecoderOnlyOutput's assisted fields, the final K)."""
    stop_fn = procs["stop_fn"]
    B, S = ids.shape
    V = target.vocab_size
    chooser = TargetChooser(gc, procs, eos, min_new, seed, V)
    eos_set = set(int(e) for e in eos)
    draft_eos = set(draft.generation_config.eos_token_ids()) | (
        {int(dtok.eos_token_id)} if getattr(dtok, "eos_token_id", None) is not None else set()
    )
    t_special = (
        set(int(i) for i in (getattr(ttok, "all_special_ids", None) or getattr(ttok, "special_ids", None) or ()))
        | eos_set
    )
    lookbehind_t = max(int(gc.target_lookbehind if gc.target_lookbehind is not None else 10), 2)
    lookbehind_a = max(int(gc.assistant_lookbehind if gc.assistant_lookbehind is not None else 10), 2)
    adaptive = gc.num_assistant_tokens_schedule != "constant"
    threshold = float(gc.assistant_confidence_threshold or 0.0)
    deadline = time.monotonic() + max_time if max_time > 0 else math.inf
    out = np.full((B, max_new), pad, dtype=np.int32)
    stats = dict(num_draft_tokens=0, num_accepted_tokens=0, num_target_passes=0, num_draft_passes=0)
    proposed, accepted = np.zeros(max_new, dtype=np.int64), np.zeros(max_new, dtype=np.int64)
    generated = np.zeros(B, dtype=np.int64)
    K = int(gc.num_assistant_tokens)
    for b in range(B):
        K = int(gc.num_assistant_tokens)
        prompt = ids[b, S - int(real[b]) :]
        row = _Row(ttok, dtok, prompt, draft.vocab_size, t_special)
        tctx = _core.Context(target._core, 1, len(prompt) + max_new + 1, target.blas_prefill)
        dcap = draft.max_cache_len
        dctx = _core.Context(draft._core, 1, dcap, draft.blas_prefill)
        switch_t, switch_d = tctx.rope_switch, dctx.rope_switch  # 0: none
        Vd = draft.vocab_size
        # 0. The prompt alone, as plain generation appends it; P[0] scores position L of the first round.
        P = np.empty((1, V), dtype=np.float32)
        L0 = len(row.T)
        want = np.zeros(L0, dtype=np.uint8)
        want[-1] = 1
        tctx.append(np.zeros(L0, dtype=np.int32), np.asarray(row.T, dtype=np.int32), want, P)
        target_len, scored = L0, True
        while generated[b] < max_new:
            if generated[b] > 0 and time.monotonic() >= deadline:
                break
            L = len(row.T)
            room = max_new - int(generated[b]) - 1
            # candidates: within max_new_tokens, what a sliding-window ring can take back (Context.max_rollback), and
            # from a row short of the target's rope switch, none whose score would come from a forward past it
            cap = min(room, tctx.max_rollback, switch_t - L if 0 < L <= switch_t else room)
            cands = []
            if cap > 0:
                _sync_draft(row, ttok, dtok, lookbehind_a)
                drafts = []
                if len(row.A) + K <= dcap:
                    # 2. Draft: its cache keeps the ids it holds that A still starts with, catches up on the
                    # rest of A, then up to K argmax tokens (the last one is never appended).
                    keep = min(len(row.cached), row.dirty)
                    while keep < min(len(row.cached), len(row.A)) and row.cached[keep] == row.A[keep]:
                        keep += 1  # over the re-encoded window only
                    keep = min(keep, len(row.A) - 1)
                    try:
                        dctx.crop(0, keep)
                    except UnsupportedModelError:  # a sliding-window ring cannot go back that far: start over
                        keep = 0
                        dctx.crop(0, 0)
                    q = np.empty((1, Vd), dtype=np.float32)
                    pending = row.A[keep:]
                    held = row.A[:keep]  # the ids in the draft's cache
                    while len(drafts) < K:
                        if drafts:
                            pending = [drafts[-1]]
                        if 0 < len(held) <= switch_d < len(held) + len(pending):
                            dctx.crop(0, 0)  # past the draft's rope switch: its whole sequence again
                            pending, held = held + pending, []
                        held = held + pending
                        n = len(pending)
                        w = np.zeros(n, dtype=np.uint8)
                        w[-1] = 1
                        dctx.append(np.zeros(n, dtype=np.int32), np.asarray(pending, dtype=np.int32), w, q)
                        stats["num_draft_passes"] += 1
                        scores_d = np.where(np.isnan(q[0]), -np.inf, q[0])
                        x = int(np.argmax(scores_d))
                        drafts.append(x)
                        if x in draft_eos:
                            break
                        if threshold > 0:
                            p = 1.0 / float(np.sum(np.exp(scores_d.astype(np.float64) - float(scores_d[x]))))
                            if p < threshold:
                                break
                    del row.cached[keep:]
                    row.cached.extend(row.A[keep:])
                    row.cached.extend(drafts[:-1])
                    row.dirty = len(row.A)
                    # 3. Translate into target ids, at most cap of them.
                    cands = _candidates(row, ttok, dtok, drafts, draft_eos, eos[0] if eos else None, lookbehind_t)[:cap]
            # 4. Verify: the target appends T[target_len:L] + candidates, scores positions L .. L + k; a round that
            # takes the row past the target's rope switch from a cache of <= switch_t positions first runs its
            # tokens again from an empty cache (its logits at L - 1 score position L, as after the prefill).
            k = len(cands)
            if 0 < target_len <= switch_t < L + k:
                tctx.crop(0, 0)
                want = np.zeros(L, dtype=np.uint8)
                want[-1] = 1
                tctx.append(np.zeros(L, dtype=np.int32), np.asarray(row.T, dtype=np.int32), want, P)
                target_len, scored = L, True
            logits = np.empty((k + 1, V), dtype=np.float32)
            if scored:
                logits[0] = P[0]
            fresh = row.T[target_len:L] + cands
            if fresh:
                n_want = k + 1 - int(scored)
                want = np.zeros(len(fresh), dtype=np.uint8)
                if n_want:
                    want[len(fresh) - n_want :] = 1
                tctx.append(
                    np.zeros(len(fresh), dtype=np.int32), np.asarray(fresh, dtype=np.int32), want, logits[int(scored) :]
                )
            target_len = L + k
            stats["num_target_passes"] += 1
            raw = logits.copy() if logits_out is not None else None
            hist = np.asarray(row.T + cands, dtype=np.int32)  # the processors' history, as the core passes it
            chosen = []
            for j in range(k + 1):
                s = chooser.process(logits[j], b, hist[: L + j], int(generated[b]) + j)
                t = chooser.choose(s, b, L + j)
                if t < 0:
                    raise InvalidInputError(
                        f"row {b}: every token was removed or NaN; check the weights and the sampling arguments"
                    )
                chosen.append(t)
                if j == k or t != cands[j]:
                    break
            n = len(chosen) - 1
            kept, done = len(chosen), False
            for j in range(kept):
                stop = False
                if stop_fn is not None:  # the criteria's contract: the row's whole sequence, as the core passes it
                    toks = np.asarray(row.T + chosen[: j + 1], dtype=np.int32)
                    stop = bool(stop_fn(b, toks.tobytes(), logits[j].tobytes()))
                if stop or chosen[j] in eos_set:
                    kept, done = j + 1, True
                    break
            for j in range(kept):
                at = int(generated[b]) + j
                out[b, at] = chosen[j]
                if sources is not None:
                    sources[b, at] = (
                        TokenSource.ACCEPTED
                        if j < n
                        else TokenSource.PLAIN
                        if k == 0
                        else TokenSource.BONUS
                        if n == k
                        else TokenSource.CORRECTED
                    )
                if scores_out is not None:
                    scores_out[at, b] = logits[j]
                if logits_out is not None:
                    logits_out[at, b] = raw[j]
            if on_tokens is not None:
                on_tokens(b, chosen[:kept])
            stats["num_draft_tokens"] += k
            stats["num_accepted_tokens"] += min(n, kept)
            proposed[:k] += 1
            accepted[:n] += 1
            row.T.extend(chosen[:kept])
            generated[b] += kept
            # 5. The target's cache keeps decided tokens only; the newest is appended next round.
            target_len = min(target_len, len(row.T) - 1)
            tctx.crop(0, target_len)
            scored = False
            if adaptive and room > 0:
                K = K + 2 if k > 0 and n == k else max(1, K - 1)
            if done:
                break
    steps = int(generated.max()) if B else 0
    for b in range(B):
        for at in range(int(generated[b]), steps):
            if scores_out is not None:
                scores_out[at, b] = -np.inf
            if logits_out is not None:
                logits_out[at, b] = -np.inf
    used = int(np.max(np.nonzero(proposed)[0], initial=-1)) + 1
    # rows run one after another here, each round its own target append
    stats.update(
        num_rounds=stats["num_target_passes"],
        proposed_per_position=proposed[:used],
        accepted_per_position=accepted[:used],
    )
    return out, steps, stats, K
