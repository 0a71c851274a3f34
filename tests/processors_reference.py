"""A float64 numpy reference of Transformers' logits processors and warpers, one row at a time.

Written from the semantics of transformers/generation/logits_process.py and the order in which
GenerationMixin._get_logits_processor builds its list; each function is named after the Transformers class
it stands for and takes one row of scores (V,) float64, returning a new row (V,) float64.  The package's
C sampler computes the same thing in float32 (csrc/generation/sampling.c), so the tests compare the two to float32
rounding.

Positions (how the tests call process()):
  history       the row's tokens before the scored position: its prompt WITHOUT padding, then what it
                generated so far.  The processors that look at tokens (sequence bias, repetition penalty,
                n-grams, bad words, the caller's processors) see this; Transformers would see the padded row,
                and this package decided that padding is no part of a row's text (csrc/ha.h, "sampling").
  step          the index of the new token being chosen: 0 for the first token after the prompt.
  prompt_width  the width of the (padded) prompt matrix: Transformers' input_ids_seq_length.  The processors
                that count length (min_length, forced BOS/EOS, exponential decay, begin suppression) use
                cur_len = prompt_width + step, Transformers' input_ids.shape[-1].

Cut-off warpers keep or drop a token by comparing two computed numbers (a probability with a threshold, a
cumulative sum with top_p).  A float32 implementation can decide the other way where the two are equal to
float32 rounding; process(..., borderline=mask) marks those tokens in mask (the decision flips when the
warper's parameter moves by a relative 1e-4, or the token's score ties the cut-off token's), so that tests
forgive exactly those flips and nothing else.
"""

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)  # InfNanRemoveLogitsProcessor uses the scores' dtype: float32
PARAM_TOLERANCE = 1e-4                          # relative move of a cut-off's parameter that marks borderline
TIE_TOLERANCE = 1e-6                            # relative distance at which two scores count as tied

# Transformers' GenerationConfig defaults for every field process() reads.
DEFAULTS = dict(
    do_sample=False, temperature=1.0, top_k=50, top_p=1.0, min_p=None, typical_p=1.0, epsilon_cutoff=0.0,
    eta_cutoff=0.0, repetition_penalty=1.0, no_repeat_ngram_size=0, bad_words_ids=None, min_length=0,
    min_new_tokens=None, forced_bos_token_id=None, forced_eos_token_id=None, remove_invalid_values=False,
    exponential_decay_length_penalty=None, suppress_tokens=None, begin_suppress_tokens=None,
    renormalize_logits=False, sequence_bias=None,
)


# ------------------------------------------------------------------------------------------------ helpers


def _row(scores):
    return np.array(scores, dtype=np.float64).reshape(-1)


def _ids(tokens):
    """An int or a list of ints -> list of ints (Transformers accepts both for eos-like ids)."""
    if tokens is None:
        return []
    if isinstance(tokens, (int, np.integer)):
        return [int(tokens)]
    return [int(t) for t in tokens]


def log_softmax(scores):
    """(V,) -> (V,) log-probabilities; -inf stays -inf."""
    s = _row(scores)
    m = s[np.isfinite(s)].max() if np.isfinite(s).any() else 0.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shifted = s - m
        return shifted - np.log(np.exp(shifted).sum())


def softmax(scores):
    """(V,) -> (V,) probabilities; -inf gets 0."""
    return np.exp(log_softmax(scores))


def _entropy(scores):
    """Entropy of softmax(scores) in nats; removed tokens (-inf) contribute 0, as in torch's nansum and in
    Categorical(logits=...).entropy(), which clamps -inf logits to the dtype's minimum before p * log p."""
    logp = log_softmax(scores)
    p = np.exp(logp)
    keep = p > 0
    return float(-(p[keep] * logp[keep]).sum())


def _flips(warper, scores, param, more_removes_with_larger_param):
    """Tokens whose removal by warper(scores, param) changes when param moves by a relative PARAM_TOLERANCE."""
    lo, hi = param * (1.0 - PARAM_TOLERANCE), param * (1.0 + PARAM_TOLERANCE)
    if not more_removes_with_larger_param:
        lo, hi = hi, lo
    return np.isneginf(warper(scores, hi)) & ~np.isneginf(warper(scores, lo)) & ~np.isneginf(scores)


def _tied(values, tie):
    """(V,) bool: which finite values equal tie to TIE_TOLERANCE."""
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.isfinite(v) & (np.abs(v - tie) <= TIE_TOLERANCE * np.maximum(np.maximum(np.abs(v), abs(tie)), 1.0))


# --------------------------------------------------------------------------- processors (in Transformers' order)


def SequenceBiasLogitsProcessor(scores, history, sequence_bias):
    """sequence_bias: {tuple of ids: float} or [[list of ids, float], ...].  A one-token sequence's bias is always
    added to its token; a longer one's is added to its last token when the row ends with the rest of it, and
    only if the sequence is no longer than the row.  Biases of sequences that end in the same token add up."""
    items = sequence_bias.items() if isinstance(sequence_bias, dict) else [(tuple(s), b) for s, b in sequence_bias]
    s = _row(scores)
    bias = np.zeros_like(s)
    n = len(history)
    for seq, value in items:
        seq = tuple(int(t) for t in seq)
        if len(seq) == 1:
            bias[seq[0]] = float(value)  # assigned, not added: Transformers' length-1 bias table
    for seq, value in items:
        seq = tuple(int(t) for t in seq)
        if len(seq) == 1 or len(seq) > n:
            continue
        if tuple(int(t) for t in history[n - len(seq) + 1:]) == seq[:-1]:
            bias[seq[-1]] += float(value)
    with np.errstate(invalid="ignore"):
        return s + bias


def RepetitionPenaltyLogitsProcessor(scores, history, penalty):
    """Each distinct token of the history, once: score < 0 ? score * penalty : score / penalty."""
    s = _row(scores)
    idx = np.unique(np.asarray(history, dtype=np.int64))
    v = s[idx]
    s[idx] = np.where(v < 0, v * penalty, v / penalty)
    return s


def NoRepeatNGramLogitsProcessor(scores, history, ngram_size):
    """-inf for every token that would complete an n-gram already in the history: the tokens that follow an
    earlier occurrence of the history's last n - 1 tokens (for n = 1, every token of the history)."""
    s = _row(scores)
    h = [int(t) for t in history]
    n = int(ngram_size)
    if len(h) < n:
        return s
    prefix = h[len(h) - (n - 1):] if n > 1 else []
    for i in range(len(h) - n + 1):
        if h[i:i + n - 1] == prefix:
            s[h[i + n - 1]] = -np.inf
    return s


def NoBadWordsLogitsProcessor(scores, history, bad_words_ids, eos):
    """A sequence bias of -inf for every bad sequence, after dropping the one-token sequences that are an eos
    id (Transformers would rather let generation end).  If nothing is left Transformers raises (its
    SequenceBiasLogitsProcessor refuses an empty bias); so does this."""
    eos = _ids(eos)
    kept = [list(seq) for seq in bad_words_ids if not any(list(seq) == [e] for e in eos)]
    if not kept:
        raise ValueError(f"bad_words_ids={bad_words_ids} holds only eos ids {eos}: Transformers refuses it")
    return SequenceBiasLogitsProcessor(scores, history, {tuple(seq): -np.inf for seq in kept})


def MinLengthLogitsProcessor(scores, cur_len, min_length, eos):
    """eos ids -inf while cur_len (prompt width + step) < min_length."""
    s = _row(scores)
    if cur_len < min_length:
        s[_ids(eos)] = -np.inf
    return s


def MinNewTokensLengthLogitsProcessor(scores, step, min_new_tokens, eos):
    """eos ids -inf while fewer than min_new_tokens tokens were generated (step of them)."""
    s = _row(scores)
    if step < min_new_tokens:
        s[_ids(eos)] = -np.inf
    return s


def ForcedBOSTokenLogitsProcessor(scores, cur_len, bos_token_id):
    """At cur_len == 1 (a one-token prompt, first step): every score -inf but the forced token's, which is 0."""
    s = _row(scores)
    if cur_len == 1:
        s[:] = -np.inf
        s[int(bos_token_id)] = 0.0
    return s


def ForcedEOSTokenLogitsProcessor(scores, cur_len, max_length, eos_token_id):
    """At cur_len == max_length - 1 (the last step): every score -inf but the forced ids', which are 0."""
    s = _row(scores)
    if cur_len == max_length - 1:
        s[:] = -np.inf
        s[_ids(eos_token_id)] = 0.0
    return s


def InfNanRemoveLogitsProcessor(scores):
    """NaN -> 0, +inf -> float32 max, -inf -> float32 min (the scores' dtype in Transformers is float32)."""
    s = _row(scores)
    out = np.where(np.isnan(s), 0.0, s)
    out = np.where(s == np.inf, FLOAT32_MAX, out)
    return np.where(s == -np.inf, -FLOAT32_MAX, out)


def ExponentialDecayLengthPenalty(scores, cur_len, exponential_decay_length_penalty, eos, input_ids_seq_length):
    """(start_index, decay_factor): once cur_len > start_index + prompt width, each eos score s becomes
    s + |s| * (decay_factor ** (cur_len - start_index - prompt width) - 1)."""
    start, factor = exponential_decay_length_penalty
    regulation_start = int(start) + int(input_ids_seq_length)
    s = _row(scores)
    if cur_len > regulation_start:
        idx = _ids(eos)
        with np.errstate(invalid="ignore"):
            s[idx] = s[idx] + np.abs(s[idx]) * (float(factor) ** (cur_len - regulation_start) - 1.0)
    return s


def SuppressTokensLogitsProcessor(scores, suppress_tokens):
    s = _row(scores)
    s[_ids(suppress_tokens)] = -np.inf
    return s


def SuppressTokensAtBeginLogitsProcessor(scores, cur_len, begin_suppress_tokens, begin_index):
    """-inf for the tokens at cur_len == begin_index only."""
    s = _row(scores)
    if cur_len == begin_index:
        s[_ids(begin_suppress_tokens)] = -np.inf
    return s


# ------------------------------------------------------------------------------------ warpers (do_sample only)


def TemperatureLogitsWarper(scores, temperature):
    return _row(scores) / float(temperature)


def TopKLogitsWarper(scores, top_k, borderline=None):
    """Keep the scores >= the k-th largest (ties with it kept)."""
    s = _row(scores)
    k = min(int(top_k), s.size)
    kth = np.sort(s)[::-1][k - 1]
    if borderline is not None and np.isfinite(kth):
        borderline |= _tied(s, float(kth)) & (s < kth)
    s[s < kth] = -np.inf
    return s


def TopPLogitsWarper(scores, top_p, borderline=None):
    """Sort ascending; drop the tokens whose cumulative probability is <= 1 - top_p; the largest is always kept."""
    s = _row(scores)
    order = np.argsort(s, kind="stable")
    cumulative = np.cumsum(softmax(s[order]))
    remove = cumulative <= 1.0 - float(top_p)
    remove[-1] = False
    out = s.copy()
    out[order[remove]] = -np.inf
    if borderline is not None:
        borderline |= _flips(lambda x, p: TopPLogitsWarper(x, min(p, 1.0)), s, float(top_p), False)
        removed, kept = s[order[remove]], s[order[~remove]]
        removed, kept = removed[np.isfinite(removed)], kept[np.isfinite(kept)]
        if removed.size and kept.size and _tied([removed.max()], float(kept.min()))[0]:
            borderline |= _tied(s, float(kept.min()))
    return out


def MinPLogitsWarper(scores, min_p, borderline=None):
    """Drop the tokens whose probability is below min_p * the top probability (the top token always stays)."""
    s = _row(scores)
    p = softmax(s)
    remove = p < float(min_p) * p.max()
    remove[int(np.argmax(p))] = False
    out = s.copy()
    out[remove] = -np.inf
    if borderline is not None and min_p > 0:
        borderline |= _flips(MinPLogitsWarper, s, float(min_p), True)
    return out


def TypicalLogitsWarper(scores, mass, borderline=None):
    """Locally typical sampling: sort tokens by |-log p - entropy| ascending; keep those up to and including the
    first at which the cumulative probability (in that order) reaches mass (the first one always)."""
    s = _row(scores)
    logp = log_softmax(s)
    with np.errstate(invalid="ignore"):
        shifted = np.abs(-logp - _entropy(s))
    order = np.argsort(shifted, kind="stable")
    sorted_shifted = shifted[order]
    cumulative = np.cumsum(softmax(s[order]))
    last = min(int((cumulative < float(mass)).sum()), s.size - 1)
    cutoff = sorted_shifted[last]
    remove_sorted = sorted_shifted > cutoff
    remove_sorted[0] = False
    out = s.copy()
    out[order[remove_sorted]] = -np.inf
    if borderline is not None:
        borderline |= _flips(lambda x, m: TypicalLogitsWarper(x, min(m, 1.0 - 1e-12)), s, float(mass), False)
        if np.isfinite(cutoff):
            borderline |= (shifted > cutoff) & _tied(shifted, float(cutoff))
    return out


def EpsilonLogitsWarper(scores, epsilon, borderline=None):
    """Drop the tokens of probability < epsilon, keeping the top one."""
    s = _row(scores)
    p = softmax(s)
    remove = (p < float(epsilon)) & (s < s.max())
    out = s.copy()
    out[remove] = -np.inf
    if borderline is not None:
        borderline |= _flips(EpsilonLogitsWarper, s, float(epsilon), True)
    return out


def EtaLogitsWarper(scores, epsilon, borderline=None):
    """Drop the tokens of probability < eta = min(epsilon, sqrt(epsilon) * exp(-entropy)), keeping the top one."""
    s = _row(scores)
    p = softmax(s)
    eta = min(float(epsilon), np.sqrt(float(epsilon)) * np.exp(-_entropy(s)))
    remove = (p < eta) & (s < s.max())
    out = s.copy()
    out[remove] = -np.inf
    if borderline is not None:
        borderline |= _flips(EtaLogitsWarper, s, float(epsilon), True)
    return out


def LogitNormalization(scores):
    """renormalize_logits: log_softmax, last of all."""
    return log_softmax(scores)


# ------------------------------------------------------------------------------------------------ the chain


def process(raw_logits, history, step, gc_like_kwargs, prompt_width, max_new_tokens, eos, logits_processor=(),
            borderline=None):
    """The processed scores (V,) float64 of one row at one step, as Transformers' generate() computes them.

    raw_logits (V,): the model's logits for the position; history (n,): the row's tokens before it (prompt
    without padding, then generated); step: index of the new token (0 first); gc_like_kwargs: GenerationConfig
    fields by Transformers' names (missing ones take Transformers' defaults); prompt_width: the padded prompt's
    width; max_new_tokens: so that max_length = prompt_width + max_new_tokens; eos: the eos id(s) (int, list
    or None).  logits_processor: callables f(input_ids (1, n) int64, scores (1, V) float64) -> (1, V), applied
    after the built-in processors and before the warpers.  borderline: None, or a (V,) bool array in which the
    warpers mark the tokens whose removal depends on rounding (see the module docstring)."""
    gc = dict(DEFAULTS)
    unknown = set(gc_like_kwargs) - set(DEFAULTS)
    if unknown:
        raise KeyError(f"process() does not model {sorted(unknown)}")
    gc.update(gc_like_kwargs)
    eos = _ids(eos)
    history = [int(t) for t in history]
    cur_len = int(prompt_width) + int(step)
    max_length = int(prompt_width) + int(max_new_tokens)
    s = _row(raw_logits)

    if gc["sequence_bias"] is not None:
        s = SequenceBiasLogitsProcessor(s, history, gc["sequence_bias"])
    if gc["repetition_penalty"] is not None and gc["repetition_penalty"] != 1.0:
        s = RepetitionPenaltyLogitsProcessor(s, history, gc["repetition_penalty"])
    if gc["no_repeat_ngram_size"] is not None and gc["no_repeat_ngram_size"] > 0:
        s = NoRepeatNGramLogitsProcessor(s, history, gc["no_repeat_ngram_size"])
    if gc["bad_words_ids"] is not None:
        s = NoBadWordsLogitsProcessor(s, history, gc["bad_words_ids"], eos)
    if gc["min_length"] is not None and gc["min_length"] > 0 and eos:
        s = MinLengthLogitsProcessor(s, cur_len, gc["min_length"], eos)
    if gc["min_new_tokens"] is not None and gc["min_new_tokens"] > 0 and eos:
        s = MinNewTokensLengthLogitsProcessor(s, step, gc["min_new_tokens"], eos)
    if gc["forced_bos_token_id"] is not None:
        s = ForcedBOSTokenLogitsProcessor(s, cur_len, gc["forced_bos_token_id"])
    if gc["forced_eos_token_id"] is not None:
        s = ForcedEOSTokenLogitsProcessor(s, cur_len, max_length, gc["forced_eos_token_id"])
    if gc["remove_invalid_values"] is True:
        s = InfNanRemoveLogitsProcessor(s)
    if gc["exponential_decay_length_penalty"] is not None:
        s = ExponentialDecayLengthPenalty(s, cur_len, gc["exponential_decay_length_penalty"], eos, prompt_width)
    if gc["suppress_tokens"] is not None:
        s = SuppressTokensLogitsProcessor(s, gc["suppress_tokens"])
    if gc["begin_suppress_tokens"] is not None:
        # the first generated position, one later when a forced BOS takes the first of a one-token prompt
        begin_index = prompt_width if (prompt_width > 1 or gc["forced_bos_token_id"] is None) else prompt_width + 1
        s = SuppressTokensAtBeginLogitsProcessor(s, cur_len, gc["begin_suppress_tokens"], begin_index)
    for f in logits_processor or ():
        s = _row(f(np.asarray(history, dtype=np.int64)[None, :], s[None, :].copy()))

    if gc["do_sample"]:
        if gc["temperature"] is not None and gc["temperature"] != 1.0:
            s = TemperatureLogitsWarper(s, gc["temperature"])
        if gc["top_k"] is not None and gc["top_k"] != 0:
            s = TopKLogitsWarper(s, gc["top_k"], borderline)
        if gc["top_p"] is not None and gc["top_p"] < 1.0:
            s = TopPLogitsWarper(s, gc["top_p"], borderline)
        if gc["min_p"] is not None:
            s = MinPLogitsWarper(s, gc["min_p"], borderline)
        if gc["typical_p"] is not None and gc["typical_p"] < 1.0:
            s = TypicalLogitsWarper(s, gc["typical_p"], borderline)
        if gc["epsilon_cutoff"] is not None and 0.0 < gc["epsilon_cutoff"] < 1.0:
            s = EpsilonLogitsWarper(s, gc["epsilon_cutoff"], borderline)
        if gc["eta_cutoff"] is not None and 0.0 < gc["eta_cutoff"] < 1.0:
            s = EtaLogitsWarper(s, gc["eta_cutoff"], borderline)
    if gc["renormalize_logits"] is True:
        s = LogitNormalization(s)
    return s
