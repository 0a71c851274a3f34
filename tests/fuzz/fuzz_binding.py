"""Random-argument fuzzing of the C binding, habana_assist._core (csrc/bindings/).

Every call gets arguments drawn around the valid ones: tuples of the wrong length, option dicts with a key
missing or unknown, wrong types, big and
negative integers, NaN and infinite floats, arrays of the wrong dtype, byte order, ndim or size, non-contiguous
and read-only arrays, bytes, lists and None where a buffer goes, out-of-range token and sequence ids, buffers
that alias one another, and generation callbacks that raise or rewrite the arrays of the running call. Each
call must succeed or raise one of ALLOWED: habana_assist.HabanaAssistError (the binding's own errors) or the
built-ins PyArg_ParseTuple and the core raise for argument types and values (TypeError, ValueError,
OverflowError; MemoryError for the core's HA_ERR_NOMEM). Any other exception (SystemError above all: a C
function that returned NULL without an exception) is a finding; a crash of the interpreter is one too.

    /usr/bin/python3 tests/fuzz/fuzz_binding.py [--iterations N | --seconds S] [--seed S] [--case I]

Case I of seed S is always the same input (its generator is seeded by (S, I)), so --seed S --case I replays
it. The cases run in a worker process: if it dies (a segfault, an abort), this process reports the case and
the call it was in (the worker writes each call to a trace file before making it) and how to replay it.
Exit status: 0 if no finding, 1 otherwise.
"""

import argparse
import collections
import faulthandler
import importlib.util
import math
import operator
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback

if importlib.util.find_spec("habana_assist") is None:  # else the one on the path (the suite's, an installed one)
    # run as a script from a checkout: its package, two folders above tests/fuzz/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np

from habana_assist import _core
from habana_assist.errors import HabanaAssistError


class CallbackStop(Exception):
    """Raised by the fuzz's own generation callbacks; the binding must hand it back unchanged."""


class CallbackInterrupt(KeyboardInterrupt):
    """A BaseException from a callback (as Ctrl-C in a streamer would be); handed back unchanged too."""


ALLOWED = (HabanaAssistError, TypeError, ValueError, OverflowError, MemoryError, CallbackStop, CallbackInterrupt)
DTYPES = ["float32", "bfloat16", "float16", "int8", "int4", "float32-panels", "bfloat16-panels", "float16-panels"]
PANEL = 16
TRACE_BYTES = 1024


class Finding(Exception):
    pass


# ---- the run's bookkeeping ---------------------------------------------------------------------------------


class Run:
    def __init__(self, seed, trace_fd=None):
        self.seed = seed
        self.case = -1
        self.trace_fd = trace_fd
        self.calls = 0
        self.outcomes = collections.Counter()  # "ok", or the exception's class name
        self.ok_calls = collections.Counter()  # calls that returned, by name
        self.findings = []

    def trace(self, text):
        if self.trace_fd is not None:
            data = f"case {self.case} (seed {self.seed}): {text}"[:TRACE_BYTES].encode("utf-8", "replace")
            os.pwrite(self.trace_fd, data.ljust(TRACE_BYTES), 0)

    def call(self, name, fn, *args):
        """fn(*args): its result, or None after an allowed exception; anything else is a finding."""
        self.calls += 1
        self.last_ok = False
        self.trace(f"{name}({', '.join(short(a) for a in args)})")
        try:
            result = fn(*args)
        except ALLOWED as e:
            self.outcomes[type(e).__name__] += 1
            if type(e) in (TypeError, ValueError, OverflowError, MemoryError) and not str(e):
                raise Finding(f"{name} raised {type(e).__name__} with no message")
            return None
        except Finding:
            raise
        except BaseException as e:  # noqa: BLE001 - every other exception is what the fuzz looks for
            raise Finding(
                f"{name}({', '.join(short(a) for a in args)}) raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
            ) from None
        self.outcomes["ok"] += 1
        self.ok_calls[name] += 1
        self.last_ok = True
        return result


def short(a):
    if isinstance(a, np.ndarray):
        flags = ("" if a.flags.c_contiguous else " non-contiguous") + ("" if a.flags.writeable else " read-only")
        return f"ndarray{a.shape} {a.dtype.str}{flags}"
    if isinstance(a, tuple):
        return "(" + ", ".join(short(x) for x in a[:10]) + (", ..." if len(a) > 10 else "") + ")"
    if isinstance(a, (list, bytes, bytearray)):
        return f"{type(a).__name__}[{len(a)}]"
    text = repr(a)
    return text if len(text) <= 40 else text[:37] + "..."


# ---- values around the valid ones --------------------------------------------------------------------------

WILD_INTS = [
    0,
    -1,
    1,
    2,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**32,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    10**30,
    True,
    False,
]
WILD_FLOATS = [0.0, -0.0, 1.0, -1.0, math.nan, math.inf, -math.inf, 1e-45, 1e300, -1e300, 0.5, 2.0]


def wild_scalar(r):
    return r.choice(
        [
            None,
            "3",
            b"x",
            1.5,
            [1],
            (1,),
            object(),
            np.int64(3),
            np.float32(0.5),
            np.uint64(2**64 - 1),
            "\ud800",
            1j,
            np.nan,
        ]
    )


def some_int(r, lo, hi, p_wild=0.08):
    if r.random() < p_wild:
        return r.choice(WILD_INTS) if r.random() < 0.85 else wild_scalar(r)
    return r.randint(lo, hi) if hi >= lo else lo


def some_name(r, names, p_wild=0.08):
    """One of names (the core's enum names), or sometimes a wrong one: another case, an index, anything."""
    if r.random() < p_wild:
        return (
            r.choice([names[0].upper(), names[0] + " ", "", "bogus", 0, len(names)])
            if r.random() < 0.85
            else wild_scalar(r)
        )
    return r.choice(names)


def some_float(r, lo, hi, p_wild=0.08):
    if r.random() < p_wild:
        return r.choice(WILD_FLOATS) if r.random() < 0.85 else wild_scalar(r)
    return r.uniform(lo, hi)


def mutate_array(r, a, writable=False, p=0.08):
    """a, or with probability p one of many ways a buffer argument can be wrong."""
    if r.random() >= p:
        return a
    k = r.randrange(18)
    try:
        if k == 0:
            return a.astype(np.float64)
        if k == 1:
            return a.astype(np.int16)
        if k == 2:
            return a.reshape(-1)
        if k == 3:
            return a.reshape((1,) + a.shape)
        if k == 4 and a.ndim >= 1 and a.shape[-1] > 1:
            return a[..., ::2]  # not contiguous
        if k == 5 and a.ndim == 2:
            return np.asfortranarray(a) if a.shape[0] > 1 and a.shape[1] > 1 else a.T
        if k == 6:
            b = a.copy()
            b.setflags(write=False)
            return b
        if k == 7 and a.ndim >= 1 and a.shape[0] > 0:
            return a[:-1]
        if k == 8:
            return np.concatenate([a.reshape(-1), a.reshape(-1)[:1]]).reshape(-1) if a.size else a
        if k == 9:
            return a.tolist()
        if k == 10:
            return a.tobytes()
        if k == 11:
            return bytearray(a.tobytes())
        if k == 12:
            return memoryview(a).cast("B") if a.flags.c_contiguous else a
        if k == 13:
            return a.astype(a.dtype.newbyteorder(">"))
        if k == 14:
            return np.zeros((0,) + a.shape[1:], a.dtype)
        if k == 15:
            return None
        if k == 16:
            return np.array(a, dtype=[("x", a.dtype)]) if a.dtype.names is None else a
        return wild_scalar(r)
    except (ValueError, TypeError, AttributeError):
        return a


# ---- models --------------------------------------------------------------------------------------------------


def encode(w, dtype):
    """float32 weights w (rows, cols) as the binding's buffer for dtype (valid)."""
    rows, cols = w.shape
    if dtype == "float32":
        return w
    if dtype == "bfloat16":
        return (w.view(np.uint32) >> 16).astype(np.uint16)
    if dtype == "float16":
        return w.astype(np.float16)
    if dtype in ("int8", "int4"):
        out = np.empty((rows, _core.row_bytes(dtype, cols)), np.uint8)
        _core.quantize(w, "float32", out, dtype)
        return out
    el = dtype[: -len("-panels")]
    src = encode(w, el)
    out = np.empty((-(-rows // PANEL) * PANEL, cols), src.dtype)
    _core.pack(src, el, out)
    return out


class Spec:
    """A random model spec: config values and weights, valid or near it."""

    def __init__(self, r, vocab=None):
        self.V = vocab or r.randint(1, 40)
        self.d = r.randint(1, 24)
        self.f = r.randint(1, 32)
        self.L = r.randint(1, 2)
        self.nh = r.randint(1, 4)
        self.nkv = r.choice([k for k in range(1, self.nh + 1) if self.nh % k == 0])
        self.hd = 2 * r.randint(1, 6)
        self.window = r.choice([0, 0, 0, r.randint(1, 6)])
        self.eps = 1e-5
        self.dtype = r.choice(DTYPES)
        self.rng = np.random.default_rng(r.randrange(2**32))
        self.p = r.choice([0.0, 0.0, 0.01, 0.05])  # how often each piece is made wrong: most models are valid

    def mat(self, r, rows, cols, scale):
        dtype = self.dtype if r.random() > self.p else r.choice(DTYPES + ["float64", 3, None])
        w = (self.rng.standard_normal((rows, cols)) * scale).astype(np.float32)
        try:
            arr = encode(w, dtype if dtype in DTYPES else "float32")
        except ALLOWED:
            arr = w
        arr = mutate_array(r, arr, p=self.p)
        # as modeling_utils.py
        spec = (arr, dtype, cols, rows) if str(dtype).endswith("-panels") else (arr, dtype, cols)
        x = r.random() * 14 * max(self.p, 1e-9) / 0.07 if self.p else 1.0
        if x < 0.03:
            spec = (arr, dtype, some_int(r, 0, cols + 1, 0.5))
        elif x < 0.05:
            spec = (arr, dtype, cols, some_int(r, 0, rows + 1, 0.5))
        elif x < 0.06:
            spec = spec[: r.randrange(3)]
        elif x < 0.065:
            spec = [arr, dtype, cols]
        elif x < 0.07:
            spec = wild_scalar(r)
        return spec

    def vec(self, r, n, center, optional=False):
        if optional and r.random() < 0.6:
            return None
        v = (center + 0.2 * self.rng.standard_normal(n)).astype(np.float32)
        return mutate_array(r, v, p=self.p)

    def args(self, r):
        """_core.Model's (config, weights, layers) as modeling_utils.py builds them (dicts of csrc/bindings/model.c's
        keys), each piece sometimes wrong: a value, a key missing or unknown, a type."""
        hd, p = self.hd, self.p
        inv = mutate_array(r, (10000.0 ** (-np.arange(0, hd, 2) / hd)).astype(np.float64), p=p)
        cfg = dict(
            vocab_size=self.V,
            hidden_size=self.d,
            intermediate_size=self.f,
            n_layers=self.L,
            n_heads=self.nh,
            n_kv_heads=self.nkv,
            head_dim=hd,
            norm_eps=self.eps,
            norm="rms",
            act="silu",
            gated_mlp=True,
            rope_dim=hd,
            rope_inv_freq=inv,
        )
        for key in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "rope_dim",
        ):
            if r.random() < p / 2:
                cfg[key] = some_int(r, -2, 2 * cfg[key] + 2, 0.5)
        if r.random() < p:
            cfg["norm_eps"] = some_float(r, 0.0, 1.0, 0.7)
        if r.random() < p:
            cfg[r.choice(["norm", "act"])] = r.choice(["rms_one_plus", "layer", "gelu", "relu", "tanh", 3, None])
        if r.random() < p / 2:
            cfg["gated_mlp"] = r.choice([False, 1, "yes", None])
        if r.random() < p / 2:
            cfg.pop(r.choice(list(cfg))) if r.random() < 0.5 else cfg.update(unknown_key=1)
        qd, kvd = self.nh * hd, self.nkv * hd
        embed = self.mat(r, self.V, self.d, 1.0)
        weights = dict(
            embed=embed,
            final_norm=self.vec(r, self.d, 1.0),
            lm_head=embed if r.random() < 0.3 else self.mat(r, self.V, self.d, 1.0),
        )
        layers = []
        for _ in range(self.L):
            bias = r.random() < 0.3
            layer = dict(
                window=self.window,
                rope="global",
                attn_norm=self.vec(r, self.d, 1.0),
                wq=self.mat(r, qd, self.d, 0.5),
                wk=self.mat(r, kvd, self.d, 0.5),
                wv=self.mat(r, kvd, self.d, 0.5),
                wo=self.mat(r, self.d, qd, 0.3),
                ffn_norm=self.vec(r, self.d, 1.0),
                w_gate=self.mat(r, self.f, self.d, 0.4),
                w_up=self.mat(r, self.f, self.d, 0.4),
                w_down=self.mat(r, self.d, self.f, 0.3),
            )
            for key, n in (
                ("bq", qd),
                ("bk", kvd),
                ("bv", kvd),
                ("bo", self.d),
                ("b_gate", self.f),
                ("b_up", self.f),
                ("b_down", self.d),
            ):
                v = self.vec(r, n, 0.0, not bias)
                if v is not None:
                    layer[key] = v
            if r.random() < p / 2:
                layer.pop(r.choice(list(layer)))
            if r.random() < p / 2:
                layer[r.choice(["window", "rope", "attn_scale"])] = r.choice([-1, 2**40, "sideways", 0.5, None])
            layers.append(layer if r.random() > 0.01 else tuple(layer.values()))
        if r.random() < p / 2:
            layers = layers[:-1] if r.random() < 0.5 else layers + layers[:1]
        if r.random() < p / 5:
            layers = r.choice([None, 5, iter(layers), "layers"])
        if r.random() < p / 5:
            weights.pop(r.choice(list(weights)))
        args = [cfg if r.random() > 0.01 else list(cfg.items()), weights, layers]
        if r.random() < p / 2:
            args = args[: r.randrange(3)]
        return args


# ---- generation -----------------------------------------------------------------------------------------------


def stop_raising(row, ids, scores):
    raise CallbackStop("a stopping criterion raised")  # re-raised by the call, as any callback's exception


# The generation options' names (csrc/bindings/generate.c): the processors' (as generation/options.py's
# processing_args gives them) and the leading ones.
PROCS = (
    "sequence_bias_tokens",
    "sequence_bias_offsets",
    "sequence_bias_values",
    "no_repeat_ngram_size",
    "bad_words_tokens",
    "bad_words_offsets",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "forced_eos_step",
    "remove_invalid_values",
    "decay_factor",
    "decay_start",
    "suppress_tokens",
    "begin_suppress_tokens",
    "begin_suppress_step",
    "min_p",
    "typical_p",
    "epsilon_cutoff",
    "eta_cutoff",
    "renormalize_logits",
    "logits_fn",
    "stop_fn",
    "logits_out",
    "no_cache",
)
LEAD = (
    "prompt",
    "start",
    "max_new_tokens",
    "min_new_tokens",
    "eos_token_id",
    "pad_token_id",
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
    "seed",
    "max_time",
)


def gen_procs(r, N, B, V):
    """The processors' options by name (csrc/bindings/generate.c): mostly all off, else fuzzed values, arrays,
    callbacks and a logits_out buffer (sometimes of the wrong shape or type), sometimes a key missing or unknown."""
    none_i, none_q = np.zeros(0, np.int32), np.zeros(1, np.int64)
    procs = [
        none_i,
        np.zeros(1, np.int64),
        np.zeros(0, np.float32),
        0,
        none_i,
        none_q,
        none_i,
        none_i,
        N - 1,
        False,
        0.0,
        0,
        none_i,
        none_i,
        0,
        0.0,
        0.0,
        0.0,
        0.0,
        False,
        None,
        None,
        None,
        False,
    ]
    if r.random() < 0.5:
        return dict(zip(PROCS, procs))
    toks = np.array([r.randrange(V) for _ in range(4)], np.int32)
    if r.random() < 0.1:
        toks[0] = r.choice([-1, V, 2**31 - 1])
    offs = np.array([0, 1, r.choice([2, 3, 1, 5]), 4], np.int64)
    for i, v in (
        (0, toks),
        (1, offs),
        (2, np.array([r.uniform(-5, 5) for _ in range(3)], np.float32)),
        (4, toks),
        (5, offs),
        (6, toks[:1]),
        (7, toks[:2]),
        (12, toks[:3]),
        (13, toks[1:]),
    ):
        if r.random() < 0.3:
            procs[i] = mutate_array(r, v)
    for i, (lo, hi) in ((3, (0, 4)), (8, (0, N)), (11, (0, 3)), (14, (0, 2))):
        if r.random() < 0.3:
            procs[i] = some_int(r, lo, hi, 0.1)
    for i in (9, 19, 23):
        procs[i] = r.random() < 0.3
    for i, (lo, hi) in ((10, (0.5, 2.0)), (15, (0.0, 1.0)), (16, (0.0, 1.0)), (17, (0.0, 0.5)), (18, (0.0, 0.5))):
        if r.random() < 0.3:
            procs[i] = some_float(r, lo, hi, 0.1)
    if r.random() < 0.3:
        procs[20] = r.choice(
            [
                lambda row, ids, s: None,
                lambda row, ids, s: np.zeros(V, np.float32),
                lambda row, ids, s: np.zeros(V + 1, np.float32),
                lambda row, ids, s: b"xx",
                5,
            ]
        )
    if r.random() < 0.3:
        procs[21] = r.choice([lambda row, ids, s: len(ids) > 3, stop_raising, lambda row, ids, s: None, 7])
    if r.random() < 0.3:
        procs[22] = r.choice(
            [
                np.zeros((N, B, V), np.float32),
                np.zeros((N, B, V + 1), np.float32),
                np.zeros((N, B, V), np.float64),
                "logits",
            ]
        )
    if r.random() < 0.05:
        return dict(zip(PROCS, procs[: r.randrange(len(procs))]))
    if r.random() < 0.03:
        return dict(zip(PROCS, procs), **{r.choice(["top_kk", "logit_fn", "", "eos"]): 0})
    return dict(zip(PROCS, procs))


def gen_args(r, run, ctx_B, V, cap, held):
    """The generation options both functions take, by name, and the out/scores buffers for a context of ctx_B rows;
    held collects arrays a callback may rewrite."""
    B = ctx_B if r.random() > 0.03 else some_int(r, 0, ctx_B + 1, 0.3)
    B = int(B) if type(B) is int and 0 <= B <= 16 else ctx_B
    W = r.randint(1, 8)
    N = r.randint(1, max(1, min(cap, 12)))
    prompt = np.array([[r.randrange(V) for _ in range(W)] for _ in range(B)], np.int32).reshape(B, W)
    if r.random() < 0.05 and prompt.size:
        prompt.flat[r.randrange(prompt.size)] = r.choice([-1, V, 2**31 - 1, -(2**31)])
    start = np.array([r.randrange(W) for _ in range(B)], np.int64)
    if r.random() < 0.05 and B:
        start[r.randrange(B)] = r.choice([-1, W, 2**62, -(2**63)])
    eos = np.array([r.randrange(V) for _ in range(r.randint(0, 2))], np.int32)
    if r.random() < 0.05:
        eos = np.array([r.choice([-1, V, 2**31 - 1])], np.int32)
    out = np.zeros((B, N), np.int32)
    scores = np.zeros((N, B, V), np.float32) if r.random() < 0.4 else None
    held.update(prompt=prompt, start=start, eos=eos, out=out)
    max_new = N if r.random() > 0.05 else some_int(r, -1, cap + 2, 0.5)
    lead = [
        mutate_array(r, prompt),
        mutate_array(r, start),
        max_new,
        some_int(r, 0, 3, 0.05) if r.random() < 0.3 else 0,
        mutate_array(r, eos),
        some_int(r, 0, V - 1),
        r.random() < 0.5,
        some_float(r, 0.2, 2.0) if r.random() < 0.5 else 1.0,
        some_int(r, 0, V + 1) if r.random() < 0.3 else 0,
        some_float(r, 0.05, 1.0) if r.random() < 0.3 else 1.0,
        some_float(r, 0.5, 2.0) if r.random() < 0.3 else 1.0,
        some_int(r, 0, 2**64 - 1),
        some_float(r, 0.0, 1e-4, 0.3) if r.random() < 0.1 else 0.0,
    ]  # max_time
    if r.random() < 0.05:  # alias the written buffer with an input
        which = r.randrange(3)
        if which == 0 and B:
            raw = np.zeros(max(B * N, 2 * B), np.int32)
            out = raw[: B * N].reshape(B, N)
            lead[1] = raw[: 2 * B].view(np.int64)  # start shares out's memory
        elif which == 1:
            lead[0] = out  # prompt is out
        else:
            lead[4] = out.reshape(-1)  # eos is out
    opts = dict(zip(LEAD, lead), **gen_procs(r, N, B, V))
    return opts, mutate_array(r, out), mutate_array(r, scores) if scores is not None else None


def make_callback(r, run, held, ctxs):
    kind = r.randrange(8)
    if kind < 3:
        return None
    limit = r.randint(1, 6)
    calls = [0]

    def cb(row, tokens):
        calls[0] += 1
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise Finding(f"callback got tokens {tokens!r}")
        if kind == 3 and calls[0] >= limit:
            raise CallbackStop("stop")
        if kind == 4:  # rewrite the running call's inputs (the binding holds their buffers, numpy still writes)
            for name in ("start", "prompt", "eos"):
                a = held.get(name)
                if a is not None and a.size and a.flags.writeable:
                    a.flat[r.randrange(a.size)] = r.choice([-1, 2**31 - 1, -(2**31), 7])
        if kind == 5:  # drive a context in use from inside its own call
            c = r.choice(ctxs)
            run.call(
                "callback append",
                c.append,
                np.zeros(1, np.int32),
                np.zeros(1, np.int32),
                None,
                np.zeros((1, c.vocab_size), np.float32),
            )
            run.call("callback crop", c.crop, 0, 0)
        if kind == 6:
            return r.choice([1, None, "x", object()])
        if kind == 7 and calls[0] >= limit:
            raise r.choice([CallbackInterrupt, MemoryError, ValueError])("from the callback")
        return None

    return cb if r.random() > 0.05 else r.choice([5, "cb", object()])


def check_out(out, V, pad):
    """After a successful generation: out holds tokens of the vocabulary or pad_token_id (as the binding took it)."""
    pad = operator.index(pad)  # it was accepted as a C int
    if isinstance(out, np.ndarray) and out.dtype == np.int32 and out.size:
        bad = (out < 0) | (out >= V)
        if (bad & (out != np.int32(pad))).any():
            raise Finding(f"generation returned tokens outside [0, {V}) that are not pad: {out.tolist()}")


def options_of(r, opts):
    """A generation's options dict, or (rarely) one with a key dropped, or not a dict at all."""
    k = r.random()
    if k < 0.02:
        opts = dict(opts)
        del opts[r.choice(sorted(opts))]
    elif k < 0.03:
        opts = r.choice([None, (), 3, tuple(opts.values()), [(key, v) for key, v in opts.items()]])
    return opts


def do_generate(r, run, ctx, V, cap, draft=None, assisted=False):
    held = {}
    for c in (ctx, draft):
        if c is not None and r.random() < 0.9:
            for s in range(c.n_seq):
                run.call("crop", c.crop, s, 0)
    lead, out, scores = gen_args(r, run, ctx.n_seq, V, cap, held)
    cb = make_callback(r, run, held, [c for c in (ctx, draft) if c is not None])
    # each token's source (TokenSource, uint8 (B, max_new)), as return_dict_in_generate asks; sometimes malformed
    src = (
        None
        if r.random() < 0.5
        else mutate_array(r, np.zeros(out.shape if isinstance(out, np.ndarray) else (1, 1), np.uint8))
    )
    # where the call's time went (float64 (4,)), sometimes malformed; from a generator of its own, seeded from the
    # case's, so that the case's own draws stay as they were
    secs = random.Random(hash(r.getstate()[1]) ^ 0x5EC).choice(
        [None] * 20 + [np.zeros(4)] * 20 + [np.zeros(3), np.zeros(4, np.float32), np.zeros((1, 4))]
    )
    if not assisted:
        opts = options_of(r, dict(lead, out=out, scores=scores, sources=src, on_tokens=cb, seconds=secs))
        run.call("generate", _core.generate, *[ctx, opts][: 2 if r.random() > 0.01 else r.randrange(2)])
        if run.last_ok:
            check_out(out, V, lead["pad_token_id"])
        return
    N = lead.get("max_new_tokens")
    N = N if type(N) is int and 1 <= N <= 64 else 1
    prop = mutate_array(r, np.zeros(N, np.int64))
    acc = mutate_array(r, np.zeros(N, np.int64)) if r.random() > 0.02 else prop
    dctx = draft if r.random() > 0.03 else r.choice([ctx, 5, "draft"])
    # the cost schedule's draft and target costs, sometimes malformed
    costs = r.choice(
        [
            (None, None),
            (None, None),
            (mutate_array(r, np.array([0.1, 0.12])), mutate_array(r, np.array([1.0, 1.2, 1.4]))),
            (np.array([0.1]), np.array([np.nan, 1.0])),
            (np.zeros(0), np.zeros(0)),
            (np.array([0.1] * 70), np.array([1.0] * 70)),
            (np.array([0.1]), None),
        ]
    )
    # a round's first draft step, sometimes malformed
    first = r.choice([None, np.array([0.3, 0.35])])
    if r.random() < 0.03:
        first = r.choice([np.array([-np.inf]), np.zeros((1, 2)), np.zeros(65)])
    # the cost schedule's carried acceptance counts (cost_state), sometimes malformed or corrupt
    state = r.choice(
        [
            None,
            None,
            np.zeros(_core.COST_STATE),
            mutate_array(r, np.zeros(_core.COST_STATE)),
            np.full(_core.COST_STATE, np.nan),
            np.zeros(_core.COST_STATE - 1),
            np.zeros(_core.COST_STATE, np.float32),
        ]
    )
    # the record of the token trees (all three buffers or none), sometimes partial, of another shape or too small
    B = ctx.n_seq
    F = len(_core.TREE_FIELDS)
    record = r.choice(
        [
            (None, None, None),
            (None, None, None),
            (np.zeros(B, np.int64), np.zeros((B, N, F), np.int64), np.zeros((B, N, 3, 64), np.int32)),
            (mutate_array(r, np.zeros(B, np.int64)), np.zeros((B, N, F), np.int64), np.zeros((B, N, 3, 64), np.int32)),
            (np.zeros(B, np.int64), mutate_array(r, np.zeros((B, N, F), np.int64)), np.zeros((B, N, 3, 8), np.int32)),
            (np.zeros(B, np.int64), None, None),
        ]
    )
    opts = options_of(
        r,
        dict(
            lead,
            num_assistant_tokens=some_int(r, 1, 6),
            schedule=some_name(r, _core.SCHEDULES),
            confidence_threshold=some_float(r, 0.0, 0.9) if r.random() < 0.3 else 0.0,
            acceptance=some_name(r, _core.ACCEPTANCES),
            prompt_lookup_num_tokens=some_int(r, 1, 5),
            max_matching_ngram_size=some_int(r, 1, 3),
            draft_costs=costs[0],
            target_costs=costs[1],
            draft_first_costs=first,
            out=out,
            scores=scores,
            proposed_at=prop,
            accepted_at=acc,
            sources=src,
            on_tokens=cb,
            seconds=secs,
            overlap=r.random() < 0.3,
            cost_state=state,
            tree_width=r.choice([1, 1, 1, 0, some_int(r, 2, 4), 70, -1]),
            # the shape from a generator of its own, seeded from the case's: the case's own draws stay as they were
            tree_shape=some_name(random.Random(hash(r.getstate()[1])), _core.TREE_SHAPES),
            tree_counts=record[0],
            tree_rounds=record[1],
            tree_nodes=record[2],
        ),
    )
    args = [ctx, dctx, opts][: 3 if r.random() > 0.01 else r.randrange(3)]
    res = run.call("generate_assisted", _core.generate_assisted, *args)
    if run.last_ok:
        if not (isinstance(res, _core.AssistedStats) and len(res) == 11 and all(isinstance(x, int) for x in res)):
            raise Finding(f"generate_assisted returned {res!r}")
        check_out(out, V, lead["pad_token_id"])


def do_append(r, run, ctx, V):
    S = ctx.n_seq
    n = r.randint(0, 40)
    seq = (
        np.array([r.randrange(S) for _ in range(n)], np.int32)
        if r.random() < 0.5
        else np.full(n, r.randrange(S), np.int32)
    )
    tok = np.array([r.randrange(V) for _ in range(n)], np.int32)
    if n and r.random() < 0.1:
        (seq if r.random() < 0.5 else tok)[r.randrange(n)] = r.choice([-1, S, V, 2**31 - 1, -(2**31)])
    want = None if r.random() < 0.4 else np.array([r.random() < 0.5 for _ in range(n)], np.uint8)
    wanted = n if want is None else int(want.sum())
    logits = np.zeros((wanted, V), np.float32) if r.random() > 0.05 else np.zeros((max(0, wanted - 1), V), np.float32)
    before = [ctx.length(s) for s in range(S)]
    run.call(
        "append",
        ctx.append,
        mutate_array(r, seq),
        mutate_array(r, tok),
        mutate_array(r, want) if want is not None else None,
        mutate_array(r, logits) if wanted or r.random() < 0.5 else None,
    )
    ok = run.last_ok
    after = [ctx.length(s) for s in range(S)]
    if not ok and after != before:
        raise Finding(f"a failed append changed lengths {before} -> {after}")


def model_case(r, run):
    spec = Spec(r)
    args = spec.args(r)
    model = run.call("Model", _core.Model, *args)
    if model is None:
        return
    run.call("weight_bytes", getattr, model, "weight_bytes")
    if r.random() < 0.05:
        run.call("Model.__init__ again", model.__init__, *args)
    ctx_args = [model, some_int(r, 1, 3, 0.1), some_int(r, 1, 48, 0.1), r.random() < 0.2]
    if r.random() < 0.03:
        ctx_args[0] = r.choice([None, 5, _core.Model.__new__(_core.Model)])
    if r.random() < 0.03:
        ctx_args = ctx_args[: r.randrange(4)]
    ctx = run.call("Context", _core.Context, *ctx_args)
    if ctx is None:
        return
    for attr in ("n_seq", "capacity", "vocab_size"):
        run.call(attr, getattr, ctx, attr)
    draft = None
    for _ in range(r.randint(1, 6)):
        op = r.randrange(8)
        if op in (0, 1):
            do_append(r, run, ctx, spec.V)
        elif op == 2:
            run.call("crop", ctx.crop, some_int(r, 0, ctx.n_seq, 0.2), some_int(r, 0, ctx.capacity, 0.2))
        elif op == 3:
            run.call("length", ctx.length, some_int(r, 0, ctx.n_seq, 0.3))
        elif op == 4:
            do_generate(r, run, ctx, spec.V, ctx.capacity)
        elif op == 5:
            do_generate(r, run, ctx, spec.V, ctx.capacity, assisted=True)
        else:
            if draft is None:
                if r.random() < 0.5:
                    dspec = Spec(r, vocab=spec.V if r.random() < 0.9 else None)
                    dm = run.call("draft Model", _core.Model, *dspec.args(r))
                else:
                    dm = model
                if dm is not None:
                    draft = run.call(
                        "draft Context",
                        _core.Context,
                        dm,
                        ctx.n_seq if r.random() < 0.9 else some_int(r, 1, 3),
                        some_int(r, 1, 48, 0.05),
                        r.random() < 0.2,
                    )
            do_generate(r, run, ctx, spec.V, ctx.capacity, draft=draft, assisted=True)
        if r.random() < 0.05:
            run.call("Context.__init__ again", ctx.__init__, model, 1, 4)


def convert_case(r, run):
    rows, cols = r.randint(0, 40), r.randint(1, 100)
    src_dt = r.choice(DTYPES[:3] * 3 + DTYPES[3:] + ["float64", 1, None])
    w = np.random.default_rng(r.randrange(2**32)).standard_normal((rows, cols)).astype(np.float32)
    if r.random() < 0.05 and w.size:
        w.flat[r.randrange(w.size)] = r.choice([np.nan, np.inf])
    try:
        src = encode(w, src_dt if src_dt in ("float32", "bfloat16", "float16") else "float32")
    except ALLOWED:
        src = w
    if r.random() < 0.5:
        to = r.choice(["int8", "int4"] * 4 + DTYPES + [None, 5, "int3"])
        nb = _core.row_bytes(to, cols) if to in ("int8", "int4") else cols
        dst = np.zeros((rows, nb), np.uint8)
        if r.random() < 0.05:
            dst = np.zeros((rows, nb + r.choice([-1, 1])), np.uint8)
        args = [mutate_array(r, src), src_dt, mutate_array(r, dst), to]
        if r.random() < 0.02:
            args = args[: r.randrange(4)]
        run.call("quantize", _core.quantize, *args)
    else:
        dst = np.zeros(
            (max(0, -(-rows // PANEL) * PANEL + (r.choice([-1, 1]) if r.random() < 0.05 else 0)), cols), src.dtype
        )
        args = [mutate_array(r, src), src_dt, mutate_array(r, dst)]
        if r.random() < 0.02:
            args = args[: r.randrange(3)]
        run.call("pack", _core.pack, *args)


def misc_case(r, run):
    k = r.randrange(9)
    if k == 0:
        run.call("row_bytes", _core.row_bytes, r.choice(DTYPES + [None, "x", 3]), some_int(r, 1, 1000, 0.3))
    elif k == 1:
        args = [some_int(r, 0, 2**64 - 1, 0.2)] + [some_int(r, 0, 2**32 - 1, 0.1) for _ in range(4)]
        u = run.call("rng_uniform", _core.rng_uniform, *args[: 5 if r.random() > 0.05 else r.randrange(5)])
        if u is not None and not (0.0 < u < 1.0):
            raise Finding(f"rng_uniform{tuple(args)} = {u}")
    elif k == 2:
        n = r.choice([1, 2, 0, -1, 257, 2**31, 2**70, "2", None, 1.5])
        run.call("set_num_threads", _core.set_num_threads, n)
        run.call("set_num_threads back", _core.set_num_threads, 1)
    elif k == 3:
        run.call("get_num_threads", _core.get_num_threads)
        run.call("kernels_name", _core.kernels_name)
    elif k == 4:
        variants = ["scalar", "avx2", "avx-vnni", "avx512", "avx512-emulated", "avx-vnni-evex"]
        name = r.choice([*variants, "", "x" * 100, None, 5, "\ud800", "avx2\0"])
        before = _core.kernels_name()
        run.call("select_kernels", _core.select_kernels, name)
        _core.select_kernels(before)
    elif k == 5:  # cheap arguments only: a valid large measurement takes the memory and time it is asked for
        run.call(
            "measure_read_bandwidth",
            _core.measure_read_bandwidth,
            r.choice([0, 1, 4096, -1, 2**64, "1"]),
            r.choice([0, -1, 1, 2**31, None]),
        )
    elif k == 6:
        run.call("measure_mac_rate", _core.measure_mac_rate, r.choice([0, -1, 2**31, None, "1"]))
    elif k == 7:  # objects made without __init__
        m = _core.Model.__new__(_core.Model)
        c = _core.Context.__new__(_core.Context)
        run.call("Model.weight_bytes uninit", getattr, m, "weight_bytes")
        run.call("Context.n_seq uninit", getattr, c, "n_seq")
        run.call("Context.append uninit", c.append, np.zeros(1, np.int32), np.zeros(1, np.int32), None, None)
        run.call("Context.crop uninit", c.crop, 0, 0)
        run.call("Context.length uninit", c.length, 0)
        run.call("Context uninit model", _core.Context, m, 1, 4)
        lead = dict(
            zip(
                LEAD,
                [
                    np.zeros((1, 1), np.int32),
                    np.zeros(1, np.int64),
                    1,
                    0,
                    np.zeros(0, np.int32),
                    0,
                    False,
                    1.0,
                    0,
                    1.0,
                    1.0,
                    0,
                    0.0,
                ],
            ),
            **gen_procs(r, 1, 1, 4),
        )
        opts = dict(lead, out=np.zeros((1, 1), np.int32), scores=None, sources=None, on_tokens=None, seconds=None)
        run.call("generate uninit", _core.generate, c, opts)
        run.call(
            "generate_assisted uninit",
            _core.generate_assisted,
            c,
            None,
            dict(
                opts,
                num_assistant_tokens=1,
                schedule="constant",
                confidence_threshold=0.0,
                acceptance="rejection",
                prompt_lookup_num_tokens=1,
                max_matching_ngram_size=1,
                draft_costs=None,
                target_costs=None,
                draft_first_costs=None,
                proposed_at=np.zeros(1, np.int64),
                accepted_at=np.zeros(1, np.int64),
                overlap=False,
                cost_state=None,
                tree_width=1,
                tree_shape="siblings",
                tree_counts=None,
                tree_rounds=None,
                tree_nodes=None,
            ),
        )
    else:
        fn = r.choice([_core.generate, _core.generate_assisted, _core.quantize, _core.pack, _core.Model, _core.Context])
        run.call("random args", fn, *[wild_scalar(r) for _ in range(r.randrange(25))])


KINDS = [(model_case, 6), (convert_case, 2), (misc_case, 1)]


SELFTEST = {}  # case -> "abort" | "raise": the harness's own check that it reports a crash and a bad exception


def selftest(r, run):
    if SELFTEST[run.case] == "abort":
        run.trace("os.abort() (self-test)")
        os.abort()

    def bad():
        raise SystemError("self-test: an exception the binding must never raise")

    run.call("self-test", bad)


def one_case(seed, i, run):
    r = random.Random(f"{seed}:{i}")
    run.case = i
    if i in SELFTEST:
        try:
            return selftest(r, run)
        except Finding as f:
            run.findings.append(f"case {i} (seed {seed}, selftest): {f}")
            return
    total = sum(w for _, w in KINDS)
    x = r.randrange(total)
    for fn, w in KINDS:
        if x < w:
            break
        x -= w
    run.trace(fn.__name__)
    try:
        fn(r, run)
    except Finding as f:
        run.findings.append(f"case {i} (seed {seed}, {fn.__name__}): {f}")
    except Exception:  # noqa: BLE001 - the fuzz's own code outside run.call: reported, never hidden
        run.findings.append(
            f"case {i} (seed {seed}, {fn.__name__}): error in the fuzz itself (fix the fuzz):\n{traceback.format_exc()}"
        )


def worker(args):
    faulthandler.enable()
    fd = os.open(args.trace, os.O_RDWR | os.O_CREAT, 0o644) if args.trace else None
    run = Run(args.seed, fd)
    _core.set_num_threads(1)
    t0 = time.monotonic()
    cases = [args.case] if args.case is not None else None
    i = 0
    while True:
        if cases is not None:
            if not cases:
                break
            i = cases.pop()
        elif args.seconds is not None:
            if time.monotonic() - t0 >= args.seconds:
                break
        elif i >= args.iterations:
            break
        one_case(args.seed, i, run)
        i += 1
    done = 1 if args.case is not None else i
    print(
        f"fuzz_binding: seed {args.seed}: {done} cases, {run.calls} calls in {time.monotonic() - t0:.1f} s; "
        f"outcomes: {dict(sorted(run.outcomes.items()))}"
    )
    print(
        f"fuzz_binding: generations that ran: generate {run.ok_calls['generate']}, "
        f"generate_assisted {run.ok_calls['generate_assisted']}"
    )
    for f in run.findings:
        print(f"FINDING {f}")
    print(f"fuzz_binding: {len(run.findings)} finding(s)")
    return 1 if run.findings else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--seconds", type=float, default=None, help="run for this long instead of --iterations cases")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--case", type=int, default=None, help="run only this case (replay)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--trace", default=None, help=argparse.SUPPRESS)
    p.add_argument("--selftest", action="append", default=[], help=argparse.SUPPRESS)  # CASE:abort or CASE:raise
    args = p.parse_args(argv)
    if args.worker:
        for spec in args.selftest:
            case, what = spec.split(":")
            SELFTEST[int(case)] = what
        return worker(args)
    with tempfile.TemporaryDirectory(prefix="fuzz_binding_") as tmp:
        trace = os.path.join(tmp, "trace")
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            "--trace",
            trace,
            "--seed",
            str(args.seed),
            "--iterations",
            str(args.iterations),
        ]
        if args.seconds is not None:
            cmd += ["--seconds", str(args.seconds)]
        if args.case is not None:
            cmd += ["--case", str(args.case)]
        for spec in args.selftest:
            cmd += ["--selftest", spec]
        env = dict(os.environ)
        env.pop("HA_KERNELS", None)
        res = subprocess.run(cmd, env=env)
        if res.returncode in (0, 1):
            return res.returncode
        last = open(trace, encoding="utf-8", errors="replace").read().rstrip() if os.path.exists(trace) else "?"
        case = last.split(" ", 2)[1] if last.startswith("case ") else "?"
        print(
            f"FINDING the worker died (exit {res.returncode}) in {last}\nreplay: {sys.executable} "
            f"{os.path.relpath(os.path.abspath(__file__))} --seed {args.seed} --case {case}",
            flush=True,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
