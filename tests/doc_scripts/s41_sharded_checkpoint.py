# Transformers docs: big_models.md / models.md, "Sharded checkpoints".
# Changed from the doc: the import line (habana_assist for transformers; AutoModelForCausalLM for AutoModel),
# the checkpoint name (os.environ["HA_MODEL"]) and the shard size ("20MB" for "5GB": this model is 53 MB).
# What follows "# Checks" is ours: the documented properties.
import os
import tempfile

from habana_assist import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
with tempfile.TemporaryDirectory() as tmp_dir:
    model.save_pretrained(tmp_dir, max_shard_size="20MB")
    print(sorted(os.listdir(tmp_dir)))
    listing = sorted(os.listdir(tmp_dir))

with tempfile.TemporaryDirectory() as tmp_dir:
    model.save_pretrained(tmp_dir, max_shard_size="20MB")
    new_model = AutoModelForCausalLM.from_pretrained(tmp_dir)

import json  # noqa: E402 - where Transformers' documentation imports it

with tempfile.TemporaryDirectory() as tmp_dir:
    model.save_pretrained(tmp_dir, max_shard_size="20MB")
    with open(os.path.join(tmp_dir, "model.safetensors.index.json"), "r") as f:
        index = json.load(f)

print(index.keys())

# Checks: model-0000k-of-0000N.safetensors shards (N > 1) and the index, whose weight_map names a shard for every
# tensor and whose metadata gives the total size; the reloaded model computes bitwise the same logits.
import re  # noqa: E402 - where Transformers' documentation imports it

import torch  # noqa: E402 - where Transformers' documentation imports it

shards = [name for name in listing if re.fullmatch(r"model-\d{5}-of-\d{5}\.safetensors", name)]
assert len(shards) > 1 and "model.safetensors.index.json" in listing and "config.json" in listing, listing
assert sorted(index.keys()) == ["metadata", "weight_map"], index.keys()
assert set(index["weight_map"].values()) == set(shards), (set(index["weight_map"].values()), shards)
assert "model.embed_tokens.weight" in index["weight_map"] and "lm_head.weight" in index["weight_map"]
assert index["metadata"]["total_size"] > 20_000_000, index["metadata"]
ids = torch.tensor([[1, 450, 3996, 17, 42]])
assert torch.equal(new_model(ids).logits, model(ids).logits)
