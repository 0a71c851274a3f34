#!/usr/bin/python3
"""Decode and prefill speed of a random checkpoint with TinyLlama-1.1B's shape, against the memory roofline.

Writes (once, then reuses) a bfloat16 checkpoint with TinyLlama-1.1B's shape (22 layers, hidden 2048,
32 heads, 4 KV heads, intermediate 5632, vocab 32000) and random weights, then prints, all measured in
this one run:
  - read bandwidth of this machine (every thread streaming a buffer far larger than the caches),
    measured before and after the decode runs since it drifts from minute to minute;
  - decode tokens/s and time per token (greedy, one token per forward);
  - prefill tokens/s (one prompt of --prompt-tokens tokens);
  - bytes of weights read per decoded token, and the fraction of the roofline reached:
    (bytes per token / bandwidth) / measured time per token.
Usage: /usr/bin/python3 benchmarks/bench_decode.py [--dir DIR] [--new-tokens N] [--threads N]
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import habana_assist as ha  # noqa: E402
from habana_assist.safetensors import save_file  # noqa: E402

TINYLLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
    "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "bos_token_id": 1, "eos_token_id": 2,
}


def random_bf16(rng, shape, exponent):
    """Random bfloat16 bits: random sign and mantissa, magnitudes in [2**exponent, 2**(exponent+1))."""
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    return (bits & np.uint16(0x807F)) | np.uint16((127 + exponent) << 7)


def write_checkpoint(directory):
    """Writes config.json + model.safetensors (about 2.2 GB) unless already there."""
    weights_path = os.path.join(directory, "model.safetensors")
    if os.path.exists(weights_path) and os.path.exists(os.path.join(directory, "config.json")):
        return
    os.makedirs(directory, exist_ok=True)
    c = TINYLLAMA
    d, f, hd = c["hidden_size"], c["intermediate_size"], c["hidden_size"] // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    rng = np.random.default_rng(0)
    ones = (np.full(d, 0x3F80, dtype=np.uint16), "BF16")  # 1.0 in bfloat16
    t = {"model.embed_tokens.weight": (random_bf16(rng, (c["vocab_size"], d), -6), "BF16"),
         "model.norm.weight": ones, "lm_head.weight": (random_bf16(rng, (c["vocab_size"], d), -6), "BF16")}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = ones
        t[p + "post_attention_layernorm.weight"] = ones
        for name, shape in (("self_attn.q_proj", (d, d)), ("self_attn.k_proj", (kv, d)), ("self_attn.v_proj", (kv, d)),
                            ("self_attn.o_proj", (d, d)), ("mlp.gate_proj", (f, d)), ("mlp.up_proj", (f, d)),
                            ("mlp.down_proj", (d, f))):
            t[p + name + ".weight"] = (random_bf16(rng, shape, -6), "BF16")
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "habana_assist_bench", "tinyllama-1.1b-random-bf16"),
                    help="where the random checkpoint is written (reused if present)")
    ap.add_argument("--new-tokens", type=int, default=32, help="decoded tokens per timed run")
    ap.add_argument("--prompt-tokens", type=int, default=128, help="prompt length for the prefill figure")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per figure (best is kept)")
    ap.add_argument("--threads", type=int, default=None, help="core threads (default: all available cores)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()
    if args.threads:
        ha.set_num_threads(args.threads)

    t0 = time.perf_counter()
    write_checkpoint(args.dir)
    t_write = time.perf_counter() - t0
    model = ha.AutoModelForCausalLM.from_pretrained(args.dir, max_cache_len=args.prompt_tokens + args.new_tokens + 8)
    rng = np.random.default_rng(1)
    prompt = rng.integers(3, model.vocab_size, size=(1, args.prompt_tokens))
    short = prompt[:, :8]

    bw_before = ha._core.measure_read_bandwidth(1 << 30, 5)
    # decode time per token: (N + 1 new tokens) - (1 new token), the same 8-token prompt
    gen = lambda n: model.generate(short, max_new_tokens=n, do_sample=False)  # noqa: E731
    gen(2)  # warm-up: pages of the memory map, thread pool
    t_one = timed(lambda: gen(1), args.repeats)
    t_many = timed(lambda: gen(args.new_tokens + 1), args.repeats)
    per_token = (t_many - t_one) / args.new_tokens
    t_prefill = timed(lambda: model.generate(prompt, max_new_tokens=1), args.repeats)  # prefill + one choice
    bw_after = ha._core.measure_read_bandwidth(1 << 30, 5)

    bw = (bw_before + bw_after) / 2
    weight_bytes = model.weight_bytes
    roofline_time = weight_bytes / bw
    result = {
        "shape": "TinyLlama-1.1B (random weights), bfloat16",
        "kernels": ha.kernels_name(),
        "threads": ha.get_num_threads(),
        "checkpoint_write_s": round(t_write, 1),
        "bandwidth_GBps_before": round(bw_before / 1e9, 1),
        "bandwidth_GBps_after": round(bw_after / 1e9, 1),
        "weight_bytes_per_token": weight_bytes,
        "decode_ms_per_token": round(per_token * 1e3, 2),
        "decode_tokens_per_s": round(1 / per_token, 2),
        "prefill_tokens_per_s": round(args.prompt_tokens / t_prefill, 1),
        "roofline_ms_per_token": round(roofline_time * 1e3, 2),
        "fraction_of_roofline": round(roofline_time / per_token, 3),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"habana_assist decode benchmark: {result['shape']}, kernels={result['kernels']}, threads={result['threads']}")
    print(f"  read bandwidth       {result['bandwidth_GBps_before']:8.1f} GB/s before, "
          f"{result['bandwidth_GBps_after']:.1f} GB/s after")
    print(f"  weights per token    {weight_bytes / 1e9:8.3f} GB")
    print(f"  decode               {result['decode_ms_per_token']:8.2f} ms/token  "
          f"({result['decode_tokens_per_s']:.2f} tokens/s)")
    print(f"  roofline             {result['roofline_ms_per_token']:8.2f} ms/token at the mean bandwidth")
    print(f"  fraction of roofline {result['fraction_of_roofline']:8.3f}")
    print(f"  prefill              {result['prefill_tokens_per_s']:8.1f} tokens/s ({args.prompt_tokens}-token prompt)")


if __name__ == "__main__":
    main()
