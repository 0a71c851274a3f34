#!/usr/bin/python3
"""Lays out the weights train_gpu.py brought back from the GPU machine as habana_assist ships its pair, in
Hugging Face layout: OUT/pycode and OUT/pycode-draft, each with config.json, generation_config.json,
model.safetensors (bfloat16, one file: the target's shards joined, the same tensors bit for bit),
tokenizer.model, tokenizer_config.json and special_tokens_map.json; and OUT/training.json: the shapes and
train_gpu.py's metrics of the run that trained the target and of the one that trained the draft.

Usage: /usr/bin/python3 training/package_pair.py --run RUN_DIR [--draft-run RUN_DIR2] --out habana_assist/pretrained
       (--draft-run: the draft of a later run, such as one with --init RUN_DIR --target-share 0)
"""

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llama_torch import MAX_POSITIONS, SPECIAL, load_bf16, save_bf16  # noqa: E402 - found through the sys.path entry above
from train_gpu import DRAFT, TARGET, TOKENIZER  # noqa: E402 - found through the sys.path entry above

# The draft's generation config carries its assisted-generation defaults, where Transformers reads them (the
# assistant's generation_config): K = 4 drafts a round, cut short where the draft is unsure (threshold 0.4, the
# library's default). Measured on held-out packages (evaluate_pair.py): greedy acceptance 0.797 against 0.545
# with GenerationConfig's K = 20; and on the demo's prompts 1.78x against 1.52x (bench_assisted.py).
DRAFT_GENERATION = {"num_assistant_tokens": 4, "num_assistant_tokens_schedule": "constant"}


def write_model(directory, tensors, shape, vocab, tokenizer, generation=None):
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):  # an older layout's weights (shards) must not linger beside the new ones
        if name.startswith("model") and name.endswith((".safetensors", ".json")):
            os.remove(os.path.join(directory, name))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "torch_dtype": "bfloat16",
        "bos_token_id": SPECIAL["bos"][0],
        "eos_token_id": SPECIAL["eos"][0],
        "pad_token_id": SPECIAL["pad"][0],
        "attention_bias": False,
        "mlp_bias": False,
        **shape,
    }
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump(
            {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "max_new_tokens": 128, **(generation or {})},
            f,
            indent=2,
        )
    save_bf16(tensors, directory)
    if os.path.abspath(tokenizer) != os.path.abspath(os.path.join(directory, "tokenizer.model")):
        shutil.copyfile(tokenizer, os.path.join(directory, "tokenizer.model"))
    names = {k: v[1] for k, v in SPECIAL.items()}
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(
            {
                "tokenizer_class": "LlamaTokenizer",
                "bos_token": names["bos"],
                "eos_token": names["eos"],
                "unk_token": names["unk"],
                "pad_token": names["pad"],
                "add_bos_token": True,
                "add_eos_token": False,
                "padding_side": "left",
                "model_max_length": MAX_POSITIONS,
                # the model has no dummy prefix; said outright, or Transformers 5 puts a "\u2581" before the text
                "add_prefix_space": False,
            },
            f,
            indent=2,
        )
    with open(os.path.join(directory, "special_tokens_map.json"), "w") as f:
        json.dump(
            {
                "bos_token": names["bos"],
                "eos_token": names["eos"],
                "unk_token": names["unk"],
                "pad_token": names["pad"],
            },
            f,
            indent=2,
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="train_gpu.py's --out, as it came back")
    ap.add_argument("--out", required=True)
    ap.add_argument("--draft-run", help="take the draft from this run instead (default --run)")
    ap.add_argument("--tokenizer", default=TOKENIZER)
    args = ap.parse_args()
    runs = {"target": args.run, "draft": args.draft_run or args.run}
    metrics = {}
    for role, run in runs.items():
        with open(os.path.join(run, "metrics.json")) as f:
            metrics[role] = json.load(f)
        if (
            metrics[role][role] != {"target": TARGET, "draft": DRAFT}[role]
            or metrics[role]["vocab"] != metrics["target"]["vocab"]
        ):
            raise SystemExit(f"{run}: the run's {role} shape or vocabulary differs from train_gpu.py's")
    os.makedirs(args.out, exist_ok=True)
    tokenizer = os.path.join(args.out, "tokenizer.model.tmp")
    shutil.copyfile(args.tokenizer, tokenizer)  # read before the target's directory is rewritten
    try:
        for name, role, shape in (("pycode", "target", TARGET), ("pycode-draft", "draft", DRAFT)):
            write_model(
                os.path.join(args.out, name),
                load_bf16(os.path.join(runs[role], name)),
                shape,
                metrics["target"]["vocab"],
                tokenizer,
                DRAFT_GENERATION if role == "draft" else None,
            )
    finally:
        os.remove(tokenizer)
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(
            {
                "target": TARGET,
                "draft": DRAFT,
                "vocab": metrics["target"]["vocab"],
                "target_run": metrics["target"],
                "draft_run": metrics["draft"],
            },
            f,
            indent=1,
        )
    print(f"packaged {args.run} -> {args.out}")


if __name__ == "__main__":
    main()
