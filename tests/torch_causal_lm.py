"""A Llama written in torch (not Transformers, which Debian does not package) that follows Transformers' causal-LM
calling convention, for the tests of habana_assist.wrap (tests/test_external_models.py) and
benchmarks/bench_external.py.

TorchCausalLM(directory): the checkpoint's safetensors (the same files a native model loads), every weight
widened to float32, computed in float32 as Transformers' LlamaForCausalLM does (RMSNorm, rotary embeddings,
grouped-query attention with a causal mask, SiLU MLP; untied or tied head). forward(input_ids (1, n),
attention_mask, position_ids, past_key_values, use_cache) -> CausalLMOutput(logits (1, n, vocab) float32,
past_key_values: a KVCache, Transformers' DynamicCache shape: per layer keys and values (1, kv_heads, positions,
head_dim), crop(n), get_seq_length()). one_at_a_time=True runs a forward of n positions as n one-position
forwards inside (batch-invariant: its logits for a position never depend on how many came with it). device= puts
the weights and every computation on a torch device ("cuda" for benchmarks/bench_external.py --device cuda).
"""

import json
import math
import os
from types import SimpleNamespace

import numpy as np
import torch

from habana_assist.checkpoints.safetensors import read_checkpoint_tensors


class KVCache:
    """Keys and values per layer, (1, kv_heads, positions, head_dim) each, grown by update()."""

    def __init__(self, n_layers):
        self.keys, self.values = [None] * n_layers, [None] * n_layers

    def update(self, k, v, layer):
        if self.keys[layer] is None:
            self.keys[layer], self.values[layer] = k, v
        else:
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=2)
            self.values[layer] = torch.cat([self.values[layer], v], dim=2)
        return self.keys[layer], self.values[layer]

    def get_seq_length(self, layer_idx=0):
        return 0 if self.keys[layer_idx] is None else self.keys[layer_idx].shape[2]

    def crop(self, max_length):
        for i in range(len(self.keys)):
            if self.keys[i] is not None:
                self.keys[i] = self.keys[i][:, :, :max_length]
                self.values[i] = self.values[i][:, :, :max_length]


class TorchCausalLM(torch.nn.Module):
    def __init__(self, directory, one_at_a_time=False, tuple_cache=False, device="cpu"):
        super().__init__()
        self.device = torch.device(device)
        with open(os.path.join(directory, "config.json")) as f:
            cfg = json.load(f)
        self.config = SimpleNamespace(**cfg)
        self.one_at_a_time, self.tuple_cache = one_at_a_time, tuple_cache
        c = self.config
        self.nh, self.nkv = c.num_attention_heads, c.num_key_value_heads
        self.hd = getattr(c, "head_dim", None) or c.hidden_size // self.nh
        raw = read_checkpoint_tensors(directory)

        def tensor(name):
            array, dtype = raw[name]
            if dtype == "BF16":  # bfloat16 is the top half of a float32
                array = (np.ascontiguousarray(array).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            return torch.from_numpy(np.ascontiguousarray(array).astype(np.float32)).to(self.device)

        self.embed = torch.nn.Parameter(tensor("model.embed_tokens.weight"), requires_grad=False)
        head = "lm_head.weight" if "lm_head.weight" in raw else "model.embed_tokens.weight"
        self.lm_head = torch.nn.Parameter(tensor(head), requires_grad=False)
        self.norm = tensor("model.norm.weight")
        self.layers = []
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            self.layers.append({name: tensor(p + part + name + ".weight") for part, names in (
                ("self_attn.", ("q_proj", "k_proj", "v_proj", "o_proj")), ("mlp.", ("gate_proj", "up_proj", "down_proj")))
                for name in names} | {"ln1": tensor(p + "input_layernorm.weight"),
                                       "ln2": tensor(p + "post_attention_layernorm.weight")})
        theta = getattr(c, "rope_theta", 10000.0)
        self.inv_freq = (1.0 / (theta ** (torch.arange(0, self.hd, 2, dtype=torch.int64).float() / self.hd))).to(self.device)

    def _rms(self, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.config.rms_norm_eps))

    def _rope(self, x, pos):
        freqs = pos.float()[:, None] * self.inv_freq[None, :]  # (n, hd / 2)
        emb = torch.cat([freqs, freqs], dim=-1)
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * emb.cos()[None, None] + rot * emb.sin()[None, None]

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=True):
        if input_ids.dim() != 2 or input_ids.shape[0] != 1:
            raise ValueError("TorchCausalLM runs one row")
        cache = past_key_values
        if isinstance(cache, tuple):  # the legacy format: a tuple of (key, value) per layer
            legacy, cache = cache, KVCache(len(self.layers))
            for i, (k, v) in enumerate(legacy):
                cache.update(k, v, i)
        if cache is None:
            cache = KVCache(len(self.layers))
        n, start = input_ids.shape[1], cache.get_seq_length()
        if position_ids is None:
            position_ids = torch.arange(start, start + n, device=self.device)[None]
        if self.one_at_a_time and n > 1:
            outs = [self._forward(input_ids[:, i:i + 1], position_ids[:, i:i + 1], cache) for i in range(n)]
            logits = torch.cat(outs, dim=1)
        else:
            logits = self._forward(input_ids, position_ids, cache)
        if self.tuple_cache:
            cache = tuple((k, v) for k, v in zip(cache.keys, cache.values))
        return SimpleNamespace(logits=logits, past_key_values=cache if use_cache else None)

    __call__ = forward

    def _forward(self, ids, pos, cache):
        n, start = ids.shape[1], cache.get_seq_length()
        x = self.embed[ids[0]]  # (n, d)
        p = pos[0]
        total = start + n
        # causal: query i (at position start + i) sees keys 0 .. start + i
        mask = torch.arange(total, device=self.device)[None, :] > (start + torch.arange(n, device=self.device))[:, None]
        for i, L in enumerate(self.layers):
            h = self._rms(x, L["ln1"])
            q = self._rope((h @ L["q_proj"].T).view(n, self.nh, self.hd).transpose(0, 1)[None], p)
            k = self._rope((h @ L["k_proj"].T).view(n, self.nkv, self.hd).transpose(0, 1)[None], p)
            v = (h @ L["v_proj"].T).view(n, self.nkv, self.hd).transpose(0, 1)[None]
            keys, values = cache.update(k, v, i)
            rep = self.nh // self.nkv
            keys, values = keys.repeat_interleave(rep, dim=1), values.repeat_interleave(rep, dim=1)
            att = (q @ keys.transpose(-1, -2)) / math.sqrt(self.hd)
            att = att.masked_fill(mask[None, None], float("-inf")).softmax(-1)
            o = (att @ values)[0].transpose(0, 1).reshape(n, self.nh * self.hd)
            x = x + o @ L["o_proj"].T
            h = self._rms(x, L["ln2"])
            x = x + (torch.nn.functional.silu(h @ L["gate_proj"].T) * (h @ L["up_proj"].T)) @ L["down_proj"].T
        return (self._rms(x, self.norm) @ self.lm_head.T)[None]
