#!/usr/bin/python3
"""habana_assist in a few lines: load a checkpoint, generate greedily, sample, and generate with a draft.

Usage: /usr/bin/python3 examples/quickstart.py [TARGET_DIR [DRAFT_DIR]]
Without arguments it writes two small random Llama checkpoints (Hugging Face layout) to a temporary
directory, so it runs anywhere; with real checkpoints (same tokenizer for both) it runs on those.
Token ids are printed as numbers, since the random checkpoints have no tokenizer (the notebooks in examples/
show text, with the shipped pair and its tokenizer).
"""

import json
import os
import sys
import tempfile

import numpy as np

try:
    import habana_assist as ha
except ImportError:  # run from a checkout of the repository: the package is the folder above examples/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import habana_assist as ha
from habana_assist.checkpoints.safetensors import save_file


def write_random_llama(directory, layers, hidden, seed, vocab=256):
    """A small random LlamaForCausalLM in Hugging Face layout: config.json + model.safetensors."""
    rng = np.random.default_rng(seed)
    heads, kv_heads, inter = 4, 2, 2 * hidden
    hd = hidden // heads
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "hidden_act": "silu",
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    w = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)  # noqa: E731 - a one-line helper
    tensors = {"model.embed_tokens.weight": w(vocab, hidden) * 8, "model.norm.weight": np.ones(hidden, np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update(
            {
                p + "input_layernorm.weight": np.ones(hidden, np.float32),
                p + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
                p + "self_attn.q_proj.weight": w(heads * hd, hidden),
                p + "self_attn.k_proj.weight": w(kv_heads * hd, hidden),
                p + "self_attn.v_proj.weight": w(kv_heads * hd, hidden),
                p + "self_attn.o_proj.weight": w(hidden, heads * hd),
                p + "mlp.gate_proj.weight": w(inter, hidden),
                p + "mlp.up_proj.weight": w(inter, hidden),
                p + "mlp.down_proj.weight": w(hidden, inter),
            }
        )
    os.makedirs(directory, exist_ok=True)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def main():
    if len(sys.argv) > 1:
        target_dir = sys.argv[1]
        draft_dir = sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    else:
        tmp = tempfile.mkdtemp(prefix="habana_assist_quickstart_")
        target_dir, draft_dir = os.path.join(tmp, "target"), os.path.join(tmp, "draft")
        write_random_llama(target_dir, layers=4, hidden=128, seed=0)
        write_random_llama(draft_dir, layers=1, hidden=64, seed=1)
    model = ha.AutoModelForCausalLM.from_pretrained(target_dir)
    draft = ha.AutoModelForCausalLM.from_pretrained(draft_dir)
    print(model)
    ids = np.array([[1, 17, 42, 99, 42, 99, 7]])

    greedy = model.generate(ids, max_new_tokens=24)
    print("greedy         ", greedy[0, ids.shape[1] :].tolist())
    res = model.generate(
        ids, max_new_tokens=24, assistant_model=draft, num_assistant_tokens=4, return_dict_in_generate=True
    )
    print("assisted greedy", res.sequences[0, ids.shape[1] :].tolist())
    print(
        f"  identical to greedy: {np.array_equal(greedy, res.sequences)}; drafts accepted "
        f"{res.num_accepted_tokens}/{res.num_draft_tokens}; target passes {res.num_target_passes}"
    )
    sampled = model.generate(ids, max_new_tokens=24, do_sample=True, temperature=0.8, top_k=40, seed=0)
    print("sampled        ", sampled[0, ids.shape[1] :].tolist())
    coupled = model.generate(
        ids,
        max_new_tokens=24,
        do_sample=True,
        temperature=0.8,
        top_k=40,
        seed=0,
        assistant_model=draft,
        assisted_sampling="coupled",
    )
    print(f"  coupled assisted sampling equals it: {np.array_equal(sampled, coupled)}")
    print("logits shape   ", model(ids).logits.shape)


if __name__ == "__main__":
    main()
