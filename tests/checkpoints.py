"""Tiny random Hugging Face checkpoints for tests: config.json + safetensors in the Hub's layout and names.

``write_random_checkpoint`` returns the config it wrote and the EXACT stored weights as float64 (after the
bf16/f16 rounding of the file's dtype), so that tests/reference.py sees what the file holds.
"""

import json
import os

import numpy as np

from habana_assist.checkpoints.safetensors import bfloat16_bits_to_float32, save_file, to_bfloat16_bits


def memory_chain(array):
    """[array, then what its memory comes from, in turn]: each ndarray's base, a memoryview's object. The last is
    the owner: the array itself when it owns its memory, else e.g. the mmap.mmap under np.memmap or np.frombuffer."""
    chain = [array]
    while True:
        x = chain[-1]
        source = x.base if isinstance(x, np.ndarray) else x.obj if isinstance(x, memoryview) else None
        if source is None:
            return chain
        chain.append(source)


def maps_file(array):
    """Whether array is a view of a file's memory map (an np.memmap in its memory chain), rather than memory of
    its own or of the load's (loading._Arena's mappings)."""
    return any(isinstance(x, np.memmap) for x in memory_chain(array))


_ARCH_MODEL_TYPE = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
}


def _tensor_names(num_layers, *, q_k_v_bias, o_bias, mlp_bias, tied):
    names = ["model.embed_tokens.weight"]
    for i in range(num_layers):
        p = f"model.layers.{i}."
        names.append(p + "input_layernorm.weight")
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            names.append(p + f"self_attn.{proj}.weight")
            if (proj != "o_proj" and q_k_v_bias) or (proj == "o_proj" and o_bias):
                names.append(p + f"self_attn.{proj}.bias")
        names.append(p + "post_attention_layernorm.weight")
        for proj in ("gate_proj", "up_proj", "down_proj"):
            names.append(p + f"mlp.{proj}.weight")
            if mlp_bias:
                names.append(p + f"mlp.{proj}.bias")
    names.append("model.norm.weight")
    if not tied:
        names.append("lm_head.weight")
    return names


def _random_value(rng, name, shape, *, scale):
    """Weights scaled so that every layer matters and the logits are far from flat (std of several units)."""
    if name.endswith("layernorm.weight") or name == "model.norm.weight":
        return 1.0 + 0.25 * rng.standard_normal(shape)  # around 1 with some spread
    if name.endswith(".bias"):
        return 0.2 * rng.standard_normal(shape)
    if name == "model.embed_tokens.weight" or name == "lm_head.weight":
        # The final RMSNorm brings the hidden state's rms near 1, so a logit's std is about
        # 0.75 * sqrt(hidden_size) * scale: ~4 units for hidden_size 32 (measured 4.3 to 5.0).
        return scale * (0.75 * rng.standard_normal(shape))
    fan_in = shape[1]
    gain = 1.5 if (".q_proj" in name or ".k_proj" in name) else 1.0  # sharper, non-uniform attention
    return gain * rng.standard_normal(shape) / np.sqrt(fan_in)


def _stored(value64, dtype):
    """(what goes into save_file, the exact stored values as float64)."""
    f32 = np.ascontiguousarray(value64, dtype=np.float32)
    if dtype == "F32":
        return f32, f32.astype(np.float64)
    if dtype == "F16":
        f16 = f32.astype(np.float16)
        return f16, f16.astype(np.float64)
    if dtype == "BF16":
        bits = np.ascontiguousarray(to_bfloat16_bits(f32), dtype=np.uint16)
        return (bits, "BF16"), bfloat16_bits_to_float32(bits).astype(np.float64)
    raise ValueError(f"dtype must be 'F32', 'BF16' or 'F16', got {dtype!r}")


def round_to_bfloat16(tensors64):
    """The float64 values a float32 checkpoint holds once rounded to bfloat16 (round to nearest even)."""
    out = {}
    for name, value in tensors64.items():
        bits = to_bfloat16_bits(np.ascontiguousarray(value, dtype=np.float32))
        out[name] = bfloat16_bits_to_float32(bits).astype(np.float64)
    return out


def write_random_checkpoint(directory, *, arch="LlamaForCausalLM", dtype="F32", vocab_size=64, hidden_size=32,
                            num_layers=2, num_heads=4, num_kv_heads=2, head_dim=None, intermediate_size=48,
                            tie_word_embeddings=False, rope_scaling=None, rope_theta=10000.0,
                            attention_bias=False, mlp_bias=False, sliding_window=None, shards=1, seed=0,
                            eos_token_id=None, bos_token_id=None, max_position_embeddings=256, scale=1.0,
                            rms_norm_eps=1e-5):
    """Write a random checkpoint into ``directory`` and return (config dict, {name: float64 stored values}).

    ``scale`` multiplies the embedding / lm_head weights (1.0: logits with a std of several units).
    Qwen2 always has q/k/v biases; Llama has q/k/v/o biases when ``attention_bias``; ``mlp_bias`` adds
    gate/up/down biases.  ``shards`` > 1 writes model-0000k-of-0000n.safetensors files plus
    model.safetensors.index.json.
    """
    if arch not in _ARCH_MODEL_TYPE:
        raise ValueError(f"arch must be one of {sorted(_ARCH_MODEL_TYPE)}, got {arch!r}")
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    hd = head_dim if head_dim is not None else hidden_size // num_heads
    qwen = arch == "Qwen2ForCausalLM"
    q_k_v_bias = qwen or attention_bias
    o_bias = attention_bias and not qwen

    config = {
        "architectures": [arch],
        "model_type": _ARCH_MODEL_TYPE[arch],
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_kv_heads,
        "hidden_act": "silu",
        "max_position_embeddings": max_position_embeddings,
        "rms_norm_eps": rms_norm_eps,
        "rope_theta": rope_theta,
        "rope_scaling": rope_scaling,
        "tie_word_embeddings": tie_word_embeddings,
        "torch_dtype": {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dtype],
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "use_cache": True,
    }
    if head_dim is not None:
        config["head_dim"] = head_dim
    if arch == "LlamaForCausalLM":
        config["attention_bias"] = attention_bias
        config["mlp_bias"] = mlp_bias
    if arch == "MistralForCausalLM":
        config["sliding_window"] = sliding_window
    if qwen:
        config["use_sliding_window"] = False
        config["sliding_window"] = None
    if mlp_bias and arch != "LlamaForCausalLM":
        raise ValueError("mlp_bias exists only in Llama configs")

    shapes = {
        "embed_tokens": (vocab_size, hidden_size),
        "q_proj": (num_heads * hd, hidden_size),
        "k_proj": (num_kv_heads * hd, hidden_size),
        "v_proj": (num_kv_heads * hd, hidden_size),
        "o_proj": (hidden_size, num_heads * hd),
        "gate_proj": (intermediate_size, hidden_size),
        "up_proj": (intermediate_size, hidden_size),
        "down_proj": (hidden_size, intermediate_size),
        "layernorm": (hidden_size,),
        "norm": (hidden_size,),
        "lm_head": (vocab_size, hidden_size),
    }

    def shape_of(name):
        parts = name.split(".")
        if name.endswith(".bias"):
            return (shapes[parts[-2]][0],)
        key = parts[-2]
        if key.endswith("layernorm"):
            key = "layernorm"
        return shapes[key]

    names = _tensor_names(num_layers, q_k_v_bias=q_k_v_bias, o_bias=o_bias, mlp_bias=mlp_bias,
                          tied=tie_word_embeddings)
    to_file, tensors64 = {}, {}
    for name in names:
        value = _random_value(rng, name, shape_of(name), scale=scale)
        to_file[name], tensors64[name] = _stored(value, dtype)

    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)

    if shards <= 1:
        save_file(to_file, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    else:
        groups = np.array_split(np.arange(len(names)), shards)
        weight_map, total = {}, 0
        for k, idx in enumerate(groups):
            fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
            part = {names[i]: to_file[names[i]] for i in idx}
            save_file(part, os.path.join(directory, fname), metadata={"format": "pt"})
            for n in part:
                weight_map[n] = fname
                total += tensors64[n].size * (4 if dtype == "F32" else 2)
        with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    return config, tensors64
