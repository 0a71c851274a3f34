#!/usr/bin/python3
"""Decode speed against the memory roofline, verification cost, prefill, memory, a PyTorch peer, and int8 and
int4 accuracy, for a random checkpoint with TinyLlama-1.1B's shape; every comparison measured in this one run.

Writes (once, then reuses) a bfloat16 checkpoint with TinyLlama-1.1B's shape (22 layers, hidden 2048,
32 heads, 4 KV heads, intermediate 5632, vocab 32000) and random weights, then prints:
  - this machine's read bandwidth (all threads streaming a buffer far larger than the caches, each four blocks
    side by side; the best of 3 passes over 1 GB), which drifts from minute to minute with the neighbours'
    load: each format's roofline is the best of the readings taken just before and after its run and three
    inside it (8 passes each), each right after 24 decode steps timed one by one, whose best is what the
    roofline is compared with (a neighbour's load can only lower a reading or slow a step, so best against
    best, on like time scales and sample counts);
    and the kernels' peak multiply-add rate (the best of several spread over the run; float32 FMAs, and for
    int8 and int4 weights the int16 products their kernel runs), which with it bounds the verification cost
    from below;
  - for bfloat16 (as stored, repacked into panels), int8 and int4 (quantized at load), each in a process of its
    own: decode ms/token generating, and the best decode step as a fraction of the roofline (weight bytes per
    token / bandwidth / time per token); the verification
    cost t(T)/t(1) for T = 1..16 (one append of T tokens to a 16-token cache, the best of rounds that each
    time every T once); prefill tokens/s of a 128-token prompt, with the batch-invariant kernels
    (blas_prefill=False) and with OpenBLAS (blas_prefill=True), and of a 512-token prompt with the kernels; peak
    RSS against weight bytes plus KV cache bytes; with w8a8 and int8 both measured, w8a8's prefill over int8's
    beside the ratio of their kernels' peak multiply-add rates (the most a prefill bound by its products gains);
  - when Debian's python3-torch is installed: the same checkpoint decoded by a plain PyTorch Llama with a
    KV cache (benchmarks/torch_llama.py) at the same precision (bfloat16, int8; it has no int4), in its own
    process, and our speed over its;
  - int8 and int4 against float: top-1 agreement and relative logit error, on this checkpoint (against
    bfloat16) and on small test checkpoints (against the float64 reference of tests/fixtures/reference.py).
  - the model families at real shapes (Qwen3-0.6B, Gemma-3-1B and GPT-2-large in bfloat16, Phi-4-mini in int8:
    its bfloat16 weights are written to disk, 7.7 GB, and quantized at load), random weights under each family's
    own tensor names: decode ms/token and the best step against the bandwidth roofline.
With --busy, instead: the thread pool on a shared machine. The shipped target (habana-assist/pycode, bfloat16 as
stored and int8), plain greedy decoding (tokens/s of decode alone: a 1-token generate's time taken from a
(1 + --tokens)-token one's), with the default threads and with 1 thread (ha.set_num_threads) in turn, round
after round; first with nothing of ours beside it, then beside one busy process (a Python busy loop, on no core in
particular). Each figure is the median of the rounds (a stalled round is what a user sees, so not the best), and
default / 1 thread is the median of each round's own ratio. --baseline DIR measures another checkout's built
package too (e.g. the tree before a change), in children interleaved with this one's, beside the same busy
process; the load average before and after says how busy the neighbours were.
Usage: /usr/bin/python3 benchmarks/bench_decode.py [--dtypes bfloat16,int8,int4] [--no-torch] [--json]
       [--families qwen3-0.6b,gemma-3-1b,phi-4-mini,gpt2-large] [--families-only]
       /usr/bin/python3 benchmarks/bench_decode.py --busy [--dtypes bfloat16,int8] [--repeats 5] [--tokens 64]
       [--baseline /path/to/other/checkout] [--json]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The package of this checkout, or (the --busy children of --baseline) the checkout the parent names.
sys.path.insert(0, os.environ.get("HA_BENCH_PACKAGE_ROOT") or os.path.join(HERE, ".."))
import habana_assist as ha  # noqa: E402 - found through the sys.path entry above

os.environ.setdefault("HA_PROGRESS", "0")  # tables only: no progress bars for the large calls
from habana_assist.checkpoints.safetensors import save_file  # noqa: E402 - found through the sys.path entry above

TINYLLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "vocab_size": 32000,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
}
DEFAULT_DIR = os.path.join(tempfile.gettempdir(), "habana_assist_bench", "tinyllama-1.1b-random-bf16")
PREFILL_LONG = 512  # the long prompt's tokens (prefill with the kernels only)
CACHE_LEN = PREFILL_LONG + 8  # positions: the long prompt + decode room
VERIFY_T = tuple(range(1, 17))
WEIGHTS_PER_BYTE = {
    "float32": 1 / 4,
    "bfloat16": 1 / 2,
    "float16": 1 / 2,
    "bfloat16-pairs": 1 / 2,
    "int8": 64 / 68,
    "w8a8": 64 / 68,
    "int4": 32 / 20,
}  # per block


def random_bf16(rng, shape, exponent):
    """Random bfloat16 bits: random sign and mantissa, magnitudes in [2**exponent, 2**(exponent+1))."""
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    return (bits & np.uint16(0x807F)) | np.uint16((127 + exponent) << 7)


def write_checkpoint(directory, config=TINYLLAMA, seed=0, exponent=-6):
    """Writes config.json + model.safetensors with random bfloat16 weights (magnitudes about 2**exponent)
    unless already there; TinyLlama's shape by default (about 2.2 GB)."""
    weights_path = os.path.join(directory, "model.safetensors")
    if os.path.exists(weights_path) and os.path.exists(os.path.join(directory, "config.json")):
        return
    os.makedirs(directory, exist_ok=True)
    c = config
    d, f, hd = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    rng = np.random.default_rng(seed)
    ones = (np.full(d, 0x3F80, dtype=np.uint16), "BF16")  # 1.0 in bfloat16
    t = {
        "model.embed_tokens.weight": (random_bf16(rng, (c["vocab_size"], d), exponent), "BF16"),
        "model.norm.weight": ones,
    }
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = (random_bf16(rng, (c["vocab_size"], d), exponent), "BF16")
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = t[p + "post_attention_layernorm.weight"] = ones
        for name, shape in (
            ("self_attn.q_proj", (d, d)),
            ("self_attn.k_proj", (kv, d)),
            ("self_attn.v_proj", (kv, d)),
            ("self_attn.o_proj", (d, d)),
            ("mlp.gate_proj", (f, d)),
            ("mlp.up_proj", (f, d)),
            ("mlp.down_proj", (d, f)),
        ):
            t[p + name + ".weight"] = (random_bf16(rng, shape, exponent), "BF16")
    save_file(t, weights_path, metadata={"format": "pt"})
    with open(os.path.join(directory, "config.json"), "w") as fh:
        json.dump(c, fh, indent=2)


def timed(fn, repeats):
    """Best wall time of `repeats` calls (the least disturbed by the shared machine)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def peak_rss_bytes():
    """This process's peak RSS: VmHWM, the high-water mark of its own address space. (getrusage's ru_maxrss
    is kept across exec, so a child started by a parent that had touched 1 GB for the bandwidth measurement
    reported the parent's peak, not its own.)"""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure_bw():
    """Read bandwidth, the best of 3 passes over 1 GB (each about as long as one decode step)."""
    return ha._core.measure_read_bandwidth(1 << 30, 3)


# ---- children: one process per measurement, so each peak RSS is its own ----------------------------------


def child_ours(directory, dtype, repeats):
    model = ha.AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, max_cache_len=CACHE_LEN)
    V = model.vocab_size
    rng = np.random.default_rng(1)
    prompt = rng.integers(3, V, size=(1, PREFILL_LONG))
    model.generate(prompt[:, :8], max_new_tokens=2)  # warm-up: pages, thread pool

    def gen(ids, n):
        return model.generate(ids, max_new_tokens=n)

    def decode():  # seconds per decode step: 33 new tokens less 1, over 32 steps
        return (timed(lambda: gen(prompt[:, :8], 33), repeats) - timed(lambda: gen(prompt[:, :8], 1), repeats)) / 32

    decode_s = [decode()]
    model.blas_prefill = False  # the batch-invariant kernels
    t_prefill = timed(lambda: gen(prompt[:, :128], 1), repeats)
    t_prefill_long = timed(lambda: gen(prompt, 1), repeats)
    model.blas_prefill = True  # OpenBLAS (blas_prefill=True)
    t_prefill_blas = timed(lambda: gen(prompt[:, :128], 1), repeats)
    cache = model.create_cache(1, CACHE_LEN)
    model(prompt[:, :16], past_key_values=cache)
    ctx, seq0 = cache._ctx, np.zeros(16, dtype=np.int32)
    # Rounds that each time every T once, so that every t(T) is the best over the same stretch of time: this
    # machine's speed drifts within minutes, and T after T in turn made t(T)/t(1) carry that drift.
    verify = {T: float("inf") for T in VERIFY_T}
    for _ in range(repeats + 2):
        for T in VERIFY_T:
            toks, out = np.arange(100, 100 + T, dtype=np.int32), np.empty((T, V), dtype=np.float32)
            t0 = time.perf_counter()
            ctx.append(seq0[:T], toks, None, out)
            verify[T] = min(verify[T], time.perf_counter() - t0)
            ctx.crop(0, 16)
    c = model.config
    kv_bytes = c.num_hidden_layers * CACHE_LEN * c.num_key_value_heads * c.head_dim * 4 * 2
    peak_rss = peak_rss_bytes()  # before the bandwidth readings' buffer
    # Decode steps one at a time, each as long as a bandwidth pass, side by side in time with bandwidth
    # readings, so that the best of each (what a neighbour's load did not slow) are comparable.
    bandwidth, steps = [], []
    for _ in range(3):
        decode_s.append(decode())
        cache = model.create_cache(1, CACHE_LEN)
        model(prompt[:, :16], past_key_values=cache)
        ctx, out = cache._ctx, np.empty((1, V), dtype=np.float32)
        for i in range(24):
            t0 = time.perf_counter()
            ctx.append(np.zeros(1, dtype=np.int32), np.array([100 + i], dtype=np.int32), None, out)
            steps.append(time.perf_counter() - t0)
        bandwidth.append(ha._core.measure_read_bandwidth(1 << 30, 8))  # 8 passes: samples as many as the steps'
    return {
        "dtype": model.weight_dtype,
        "weight_bytes": model.weight_bytes,
        "decode_s": min(decode_s),
        "step_s": min(steps),
        "bandwidth": bandwidth,
        "prefill_tps": 128 / t_prefill,
        "prefill_blas_tps": 128 / t_prefill_blas,
        "prefill_long_tps": PREFILL_LONG / t_prefill_long,
        "verify_s": verify,
        "kv_bytes": kv_bytes,
        "peak_rss": peak_rss,
    }


def child_torch(directory, dtype, repeats):
    import torch

    sys.path.insert(0, HERE)
    from torch_llama import TorchLlama

    torch.set_num_threads(ha.get_num_threads())
    with open(os.path.join(directory, "config.json")) as fh:
        config = json.load(fh)
    model = TorchLlama(directory, config, max_len=64, int8=dtype == "int8")

    def run(n):
        model.n = 0
        token = 5
        for _ in range(n):
            token = int(model.step(token).argmax())

    run(2)
    t = (timed(lambda: run(17), repeats) - timed(lambda: run(1), repeats)) / 16
    return {"decode_s": t, "torch": torch.__version__, "peak_rss": peak_rss_bytes()}


def run_child(kind, directory, dtype, repeats):
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        kind,
        "--dir",
        directory,
        "--dtypes",
        dtype,
        "--repeats",
        str(repeats),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{kind} {dtype} run failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- the thread pool on a shared machine (--busy) ----------------------------------------------------------

SHIPPED = "habana-assist/pycode"


def child_threads(dtype, repeats, tokens):
    """Decode tokens/s of the shipped target with the default threads and with 1 thread, alternating, round after
    round, with a 1-token generate's time (prompt and first token) taken out."""
    default = ha.get_num_threads()
    kwargs = {} if dtype == "bfloat16" else {"dtype": dtype}
    model = ha.AutoModelForCausalLM.from_pretrained(SHIPPED, **kwargs)
    prompt = np.random.default_rng(1).integers(5, model.vocab_size, size=(1, 8))
    runs, alone = {default: [], 1: []}, []
    for i in range(repeats + 1):  # the first round warms pages, caches and each pool up, and is not kept
        for n in (default, 1) if i % 2 == 0 else (1, default):
            ha.set_num_threads(n)  # a pool of its own, whose counts start at zero
            t0 = time.perf_counter()
            model.generate(prompt, max_new_tokens=1)
            t1 = time.perf_counter()
            out = model.generate(prompt, max_new_tokens=1 + tokens)
            t2 = time.perf_counter()
            if out.shape[1] != prompt.shape[1] + 1 + tokens:
                raise RuntimeError(f"generate stopped after {out.shape[1] - prompt.shape[1]} of {1 + tokens} tokens")
            if i:
                runs[n].append(tokens / max((t2 - t1) - (t1 - t0), 1e-9))
                if n == default:
                    alone.append(pool_alone_share())
    ha.set_num_threads(default)
    ratios = [a / b for a, b in zip(runs[default], runs[1])]
    return {
        "threads": default,
        "default_tps": float(np.median(runs[default])),
        "one_tps": float(np.median(runs[1])),
        "ratio": float(np.median(ratios)),
        "ratios": ratios,
        "alone": alone,
    }


def pool_alone_share():
    """The share of the current pool's jobs that its caller ran alone: to time them (one in 64), or while the pool
    backed off because its jobs stopped paying (csrc/core/threadpool.c); near 1 means the round ran on one thread.
    None for a --baseline checkout from before the core counted them."""
    if not hasattr(ha._core, "pool_stats"):
        return None
    st = ha._core.pool_stats()
    jobs = st["jobs_pooled"] + st["jobs_alone"]
    return st["jobs_alone"] / jobs if jobs else 0.0


def run_threads_child(dtype, repeats, tokens, root):
    env = dict(os.environ)
    if root:
        env["HA_BENCH_PACKAGE_ROOT"] = root
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        "threads",
        "--dtypes",
        dtype,
        "--repeats",
        str(repeats),
        "--tokens",
        str(tokens),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"threads {dtype} run failed{' for ' + root if root else ''}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def busy_table(dtypes, repeats, tokens, baseline):
    """{phase: {package: {dtype: child_threads' figures}}} for phase "alone" then "busy" (beside one busy loop
    process); package "this" is this checkout, "baseline" the --baseline one."""
    packages = {"this": None} if not baseline else {"this": None, "baseline": os.path.abspath(baseline)}
    rows = {"load_before": os.getloadavg()[0]}
    for phase in ("alone", "busy"):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if phase == "busy" else None
        try:
            rows[phase] = {name: {} for name in packages}
            for d in dtypes:
                for name, root in packages.items():
                    rows[phase][name][d] = run_threads_child(d, repeats, tokens, root)
        finally:
            if hog:
                hog.kill()
                hog.wait()
    rows["load_after"] = os.getloadavg()[0]
    return rows


def print_busy(rows, repeats, tokens):
    threads = rows["alone"]["this"][next(iter(rows["alone"]["this"]))]["threads"]
    print(
        f"habana_assist thread pool on a shared machine: {SHIPPED}, plain greedy decode of {tokens} tokens, "
        f"kernels={ha.kernels_name()}, default threads={threads}; the median of {repeats} rounds; load average "
        f"{rows['load_before']:.2f} before, {rows['load_after']:.2f} after"
    )
    print(
        f"    {'phase':6s} {'package':9s} {'dtype':9s} {'default tok/s':>13s} {'1 thread tok/s':>14s} "
        f"{'default/1':>9s}  {'(each round; the share of its default-thread jobs run alone)':s}"
    )
    for phase in ("alone", "busy"):
        for name, by_dtype in rows[phase].items():
            for d, r in by_dtype.items():
                shares = r.get("alone") or [None] * len(r["ratios"])
                print(
                    f"    {phase:6s} {name:9s} {d:9s} {r['default_tps']:13.1f} {r['one_tps']:14.1f} "
                    f"{r['ratio']:9.2f}  "
                    + " ".join(f"{x:.2f}" + ("" if a is None else f" ({a:.0%})") for x, a in zip(r["ratios"], shares))
                )
    if "baseline" in rows["alone"]:
        for d in rows["alone"]["this"]:
            now, then = rows["alone"]["this"][d], rows["alone"]["baseline"][d]
            print(
                f"    alone, {d}: this checkout's default threads at {now['default_tps'] / then['default_tps']:.2f}x "
                f"the baseline's"
            )


# ---- the model families at real sizes ---------------------------------------------------------------------

# config.json of each family at a real checkpoint's shape (random weights): the published configs' shape and
# math fields. Phi-4-mini (3.8B) is measured in int8: its float32 weights (15 GB) would not leave this 24 GB
# machine room, and bfloat16 (7.7 GB) is written to disk once and quantized at load.
FAMILIES = {
    "qwen3-0.6b": (
        "bfloat16",
        {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "vocab_size": 151936,
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "num_hidden_layers": 28,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": True,
            "hidden_act": "silu",
            "attention_bias": False,
            "torch_dtype": "bfloat16",
        },
    ),
    "gemma-3-1b": (
        "bfloat16",
        {
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            "vocab_size": 262144,
            "hidden_size": 1152,
            "intermediate_size": 6912,
            "num_hidden_layers": 26,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 256,
            "query_pre_attn_scalar": 256,
            "sliding_window": 512,
            "sliding_window_pattern": 6,
            "rope_local_base_freq": 10000.0,
            "rope_theta": 1000000.0,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
        },
    ),
    "phi-4-mini": (
        "int8",
        {
            "architectures": ["Phi3ForCausalLM"],
            "model_type": "phi3",
            "vocab_size": 200064,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "num_hidden_layers": 32,
            "num_attention_heads": 24,
            "num_key_value_heads": 8,
            "partial_rotary_factor": 0.75,
            "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096,
            "rope_scaling": {
                "type": "longrope",
                "long_factor": [1.0 + i / 8 for i in range(48)],
                "short_factor": [1.0] * 48,
            },
            "rope_theta": 10000.0,
            "rms_norm_eps": 1e-5,
            "sliding_window": 262144,
            "tie_word_embeddings": True,
            "hidden_act": "silu",
            "torch_dtype": "bfloat16",
        },
    ),
    "gpt2-large": (
        "bfloat16",
        {
            "architectures": ["GPT2LMHeadModel"],
            "model_type": "gpt2",
            "vocab_size": 50257,
            "n_embd": 1280,
            "n_layer": 36,
            "n_head": 20,
            "n_positions": 1024,
            "n_inner": None,
            "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5,
            "torch_dtype": "bfloat16",
        },
    ),
}


def write_family_checkpoint(directory, config, seed=0):
    """config.json + model.safetensors of random bfloat16 weights under the family's own tensor names and
    stored shapes (the loader's expected_weights), unless already there."""
    from habana_assist.checkpoints.loading import expected_weights
    from habana_assist.configuration_utils import LlamaConfig

    weights_path = os.path.join(directory, "model.safetensors")
    if os.path.exists(weights_path) and os.path.exists(os.path.join(directory, "config.json")):
        return
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {}
    for spec in expected_weights(LlamaConfig.from_dict(config)):
        shape = tuple(size for size, _ in spec.dims)
        tensors[spec.name] = (random_bf16(rng, shape, -6 if spec.is_matrix else -1), "BF16")
    save_file(tensors, weights_path, metadata={"format": "pt"})
    with open(os.path.join(directory, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)


def child_family(directory, dtype, repeats):
    """Decode steps of a family's checkpoint, one token appended at a time to a 16-token cache, with bandwidth
    readings between them (as child_ours does for the roofline)."""
    model = ha.AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, max_cache_len=CACHE_LEN)
    V = model.vocab_size
    prompt = np.random.default_rng(1).integers(3, V, size=(1, 16))
    model.generate(prompt[:, :8], max_new_tokens=2)  # warm-up: pages, thread pool

    def gen(n):
        return model.generate(prompt, max_new_tokens=n)

    decode_s = (timed(lambda: gen(33), repeats) - timed(lambda: gen(1), repeats)) / 32
    bandwidth, steps = [], []
    for _ in range(3):
        cache = model.create_cache(1, CACHE_LEN)
        model(prompt, past_key_values=cache)
        ctx, out = cache._ctx, np.empty((1, V), dtype=np.float32)
        for i in range(24):
            t0 = time.perf_counter()
            ctx.append(np.zeros(1, dtype=np.int32), np.array([100 + i], dtype=np.int32), None, out)
            steps.append(time.perf_counter() - t0)
        bandwidth.append(ha._core.measure_read_bandwidth(1 << 30, 8))
    return {
        "architecture": type(model).__name__,
        "dtype": model.weight_dtype,
        "weight_bytes": model.weight_bytes,
        "decode_s": decode_s,
        "step_s": min(steps),
        "bandwidth": bandwidth,
        "peak_rss": peak_rss_bytes(),
    }


def families_table(names, root, repeats):
    """{name: child_family's figures} for each family, the bandwidth around each run included."""
    rows = {}
    for name in names:
        dtype, config = FAMILIES[name]
        directory = os.path.join(root, name + "-random-bf16")
        t0 = time.perf_counter()
        write_family_checkpoint(directory, config)
        write_s = time.perf_counter() - t0
        before = measure_bw()
        r = run_child("family", directory, dtype, repeats)
        r["bandwidth"] += [before, measure_bw()]
        r["write_s"] = write_s
        rows[name] = r
    return rows


def print_families(rows):
    print("\n  model families at real shapes (random weights): decode against the bandwidth roofline")
    print(
        f"    {'checkpoint':12s} {'architecture':19s} {'dtype':9s} {'weights GB':>10s} {'ms/token':>9s} "
        f"{'roofline ms':>11s} {'best step / roofline':>21s}"
    )
    for name, r in rows.items():
        roof = r["weight_bytes"] / max(r["bandwidth"])
        print(
            f"    {name:12s} {r['architecture']:19s} {r['dtype']:9s} {r['weight_bytes'] / 1e9:10.3f} "
            f"{r['decode_s'] * 1e3:9.1f} {roof * 1e3:11.1f} {roof / r['step_s']:21.3f}"
        )


# ---- int8 and int4 accuracy --------------------------------------------------------------------------------


def agreement(got, ref):
    """(top-1 agreement, max |got - ref| / max |ref|) over positions (seq, vocab)."""
    return float((got.argmax(-1) == ref.argmax(-1)).mean()), float(np.abs(got - ref).max() / np.abs(ref).max())


def integer_accuracy(directory, dtype):
    rows = []
    ids = np.random.default_rng(2).integers(3, 32000, size=64)
    f = ha.AutoModelForCausalLM.from_pretrained(directory, max_cache_len=64)(ids).logits[0]
    q = ha.AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, max_cache_len=64)(ids).logits[0]
    rows.append((f"{dtype}, TinyLlama-1.1B shape, vs bfloat16",) + agreement(q, f))
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
    from checkpoints import write_random_checkpoint
    from reference import reference_logits

    for name, kw in (
        ("test checkpoint F32", dict(dtype="F32")),
        ("test checkpoint BF16 GQA", dict(dtype="BF16")),
        ("test checkpoint Qwen2", dict(arch="Qwen2ForCausalLM", dtype="F32")),
    ):
        with tempfile.TemporaryDirectory() as d:
            cfg, t64 = write_random_checkpoint(
                d, vocab_size=256, hidden_size=128, intermediate_size=256, num_heads=4, num_kv_heads=2, **kw
            )
            small = np.arange(1, 33)
            got = ha.AutoModelForCausalLM.from_pretrained(d, dtype=dtype)(small).logits[0]
            rows.append((f"{dtype}, {name}, vs float64 reference",) + agreement(got, reference_logits(cfg, t64, small)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=DEFAULT_DIR, help="where the random checkpoint is written (reused if present)")
    ap.add_argument("--dtypes", default="bfloat16,w8a8,int8,int4", help="weight formats to measure, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per figure (the best is kept)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch peer even if torch is installed")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a report")
    ap.add_argument(
        "--families",
        default=",".join(FAMILIES),
        help=f"family checkpoints to measure at real shapes, comma-separated (of {', '.join(FAMILIES)}; '' for none)",
    )
    ap.add_argument("--families-only", action="store_true", help="measure only the families' table")
    ap.add_argument(
        "--busy",
        action="store_true",
        help="measure only the thread pool on a shared machine: the "
        "shipped target with the default threads and 1 thread, alone and beside a busy process",
    )
    ap.add_argument("--tokens", type=int, default=64, help="--busy: tokens decoded per timed generate")
    ap.add_argument("--baseline", help="--busy: another checkout (with its extension built) to measure alongside")
    ap.add_argument("--child", choices=("ours", "torch", "family", "threads"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "threads":
        print(json.dumps(child_threads(args.dtypes, args.repeats, args.tokens)))
        return
    if args.child:
        fn = {"ours": child_ours, "torch": child_torch, "family": child_family}[args.child]
        print(json.dumps(fn(args.dir, args.dtypes, args.repeats)))
        return
    if args.busy:
        dtypes = [
            d for d in (args.dtypes if args.dtypes != ap.get_default("dtypes") else "bfloat16,int8").split(",") if d
        ]
        rows = busy_table(dtypes, args.repeats, args.tokens, args.baseline)
        if args.json:
            print(json.dumps(rows))
        else:
            print_busy(rows, args.repeats, args.tokens)
        return
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    if args.families_only:
        rows = families_table(families, os.path.dirname(args.dir), args.repeats)
        if args.json:
            print(json.dumps(rows))
        else:
            print(f"habana_assist decode benchmark: kernels={ha.kernels_name()}, threads={ha.get_num_threads()}")
            print_families(rows)
        return

    t0 = time.perf_counter()
    write_checkpoint(args.dir)
    t_write = time.perf_counter() - t0
    try:
        import torch

        del torch  # only whether it imports
        have_torch = not args.no_torch
    except ImportError:
        have_torch = False
    dtypes = [d for d in args.dtypes.split(",") if d]
    bw_before = measure_bw()
    # The peak rate is the hardware's: a neighbour's load can only lower a measurement, so take the best of
    # several, spread over the run (one taken while another VM ran FMAs on a core read half the peak).
    macs, macs_q8, macs_w8a8 = [], [], []

    def measure_macs():
        macs.append(ha._core.measure_mac_rate(3))
        macs_q8.append(ha._core.measure_mac_rate(3, int8=True))
        macs_w8a8.append(ha._core.measure_mac_rate(3, w8a8=True))

    measure_macs()
    ours, bws = {}, {}
    for d in dtypes:  # each run's roofline uses the bandwidth measured just before and after it
        before = measure_bw()
        ours[d] = run_child("ours", args.dir, d, args.repeats)
        ours[d]["bandwidth"] += [before, measure_bw()]
        bws[d] = max(ours[d]["bandwidth"])
        measure_macs()
    peer = {d: run_child("torch", args.dir, d, 2) for d in dtypes if d != "int4"} if have_torch else {}
    bw_after = measure_bw()
    measure_macs()
    mac_rate, mac_rate_q8, mac_rate_w8a8 = max(macs), max(macs_q8), max(macs_w8a8)
    accuracy = [row for d in ("int8", "int4") if d in dtypes for row in integer_accuracy(args.dir, d)]
    family_rows = families_table(families, os.path.dirname(args.dir), args.repeats)

    report = {
        "kernels": ha.kernels_name(),
        "threads": ha.get_num_threads(),
        "checkpoint_write_s": t_write,
        "mac_rate": mac_rate,
        "mac_rate_integer_weights": mac_rate_q8,
        "mac_rate_w8a8": mac_rate_w8a8,
        "bandwidth_before": bw_before,
        "bandwidth_after": bw_after,
        "bandwidth_per_run": bws,
        "ours": ours,
        "torch": peer,
        "integer_accuracy": accuracy,
        "families": family_rows,
    }
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"habana_assist decode benchmark: TinyLlama-1.1B shape, random weights; kernels={report['kernels']}, "
        f"threads={report['threads']}"
    )
    print(
        f"  read bandwidth {bw_before / 1e9:.1f} GB/s at the start, {bw_after / 1e9:.1f} GB/s at the end; "
        f"the kernels' peak multiply-add rate {mac_rate / 1e9:.1f} G/s (all threads, from registers, the best of "
        f"{len(macs)} spread over the run; {mac_rate_q8 / 1e9:.1f} G/s of the int16 products the integer weights' "
        f"kernel runs, {mac_rate_w8a8 / 1e9:.1f} G/s of the int8 products of w8a8's; bfloat16-pairs is bounded "
        f"here by the float32 rate)"
    )
    for d, r in ours.items():
        t1 = r["verify_s"]["1"]
        roof = r["weight_bytes"] / bws[d]
        print(
            f"\n  {d}: weights read per token {r['weight_bytes'] / 1e9:.3f} GB; bandwidth around this run "
            f"{bws[d] / 1e9:.1f} GB/s (the best of readings from "
            f"{min(r['bandwidth']) / 1e9:.1f} GB/s up), so the roofline is {roof * 1e3:.1f} ms/token"
        )
        print(
            f"    decode   {r['decode_s'] * 1e3:7.1f} ms/token generating ({1 / r['decode_s']:.2f} tokens/s); "
            f"the best step {r['step_s'] * 1e3:.1f} ms, {roof / r['step_s']:.3f} of the roofline (best against "
            f"best: a step that read faster than any bandwidth pass gives above 1)"
        )
        print("    verify   t(T)/t(1): " + " ".join(f"{T}:{r['verify_s'][str(T)] / t1:.2f}" for T in VERIFY_T))
        # No kernel verifies T tokens faster than it reads the weights once or does T x weights multiply-adds.
        token_macs = r["weight_bytes"] * WEIGHTS_PER_BYTE[d]
        rate = mac_rate_q8 if d in ("int8", "int4") else mac_rate_w8a8 if d == "w8a8" else mac_rate
        best = {T: max(roof, T * token_macs / rate) for T in (4, 8, 16)}
        print(
            "             at both rooflines t(T)/t(1) would be "
            + " ".join(f"{T}:{b / roof:.2f}" for T, b in best.items())
            + f" (T x {token_macs / 1e9:.2f} G multiply-adds at the peak rate, or one read of the weights); our "
            f"t(8) is {r['verify_s']['8'] / best[8]:.2f}x that bound"
        )
        print(
            f"    prefill  {r['prefill_blas_tps']:7.1f} tokens/s (128-token prompt, OpenBLAS); with the "
            f"kernels only (blas_prefill=False) {r['prefill_tps']:.1f} tokens/s, so OpenBLAS is "
            f"{r['prefill_blas_tps'] / r['prefill_tps']:.2f}x; a {PREFILL_LONG}-token prompt with the kernels "
            f"{r['prefill_long_tps']:.1f} tokens/s"
        )
        need = r["weight_bytes"] + r["kv_bytes"]
        print(
            f"    memory   peak RSS {r['peak_rss'] / 1e9:.3f} GB = {r['peak_rss'] / need:.3f} x (weights "
            f"{r['weight_bytes'] / 1e9:.3f} GB + KV cache {r['kv_bytes'] / 1e6:.1f} MB)"
        )
        if d in peer:
            p = peer[d]
            print(
                f"    PyTorch {p['torch']} (same checkpoint, {d}): {p['decode_s'] * 1e3:.1f} ms/token; "
                f"ours is {p['decode_s'] / r['decode_s']:.2f}x faster"
            )
        elif peer:
            print(f"    PyTorch  not measured for {d} (benchmarks/torch_llama.py holds bfloat16 or int8 weights)")
    if "w8a8" in ours and "int8" in ours:
        w8, i8 = ours["w8a8"], ours["int8"]
        print(
            f"\n  w8a8 over int8 (int8 weights times int16 activations), the kernels' prefill: "
            f"{w8['prefill_long_tps'] / i8['prefill_long_tps']:.2f}x at {PREFILL_LONG} tokens "
            f"({w8['prefill_tps'] / i8['prefill_tps']:.2f}x at 128); their kernels' peak multiply-add rates "
            f"differ {mac_rate_w8a8 / mac_rate_q8:.2f}x here, the most a prefill bound by its products could gain"
        )
    if not peer:
        print("\n  PyTorch peer: not measured (python3-torch is not installed, or --no-torch)")
    if accuracy:
        print("\n  int8 and int4 against float: top-1 agreement, max |logit error| / max |logit|")
        for name, agree, err in accuracy:
            print(f"    {name:54s} {agree:6.3f}  {err:.4f}")
    if family_rows:
        print_families(family_rows)


if __name__ == "__main__":
    main()
