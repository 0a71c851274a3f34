"""A plain PyTorch Llama with a KV cache: the peer a Transformers user on CPU gets, for bench_decode.py.

Written from the architecture's definition (no Transformers here): weights from the same safetensors
file, every tensor in the same precision as the checkpoint (bfloat16 activations for a bfloat16 model, as
`model.to(torch.bfloat16)` gives), or int8 through torch's own dynamic quantization of nn.Linear (what
`torch.ao.quantization.quantize_dynamic` gives a Transformers user). Used only by the benchmark; Debian's
python3-torch is optional and never imported by the package.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from habana_assist.checkpoints.safetensors import read_checkpoint_tensors


def _tensor(array, dtype_name):
    if dtype_name == "BF16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array))


class TorchLlama(torch.nn.Module):
    """Greedy decoding, batch 1, a preallocated KV cache of max_len positions."""

    def __init__(self, directory, config, max_len, int8=False):
        super().__init__()
        c = config
        self.c, self.hd = c, c["hidden_size"] // c["num_attention_heads"]
        raw = read_checkpoint_tensors(directory)
        t = {name: _tensor(a, dt) for name, (a, dt) in raw.items()}
        self.dtype = t["model.embed_tokens.weight"].dtype

        def linear(name):
            w = t[name]
            lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=torch.float32 if int8 else w.dtype)
            lin.weight.data = w.float() if int8 else w
            return lin

        self.embed = t["model.embed_tokens.weight"]
        self.layers = torch.nn.ModuleList()
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            layer = torch.nn.Module()
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(layer, name, linear(p + "self_attn." + name + ".weight"))
            for name in ("gate_proj", "up_proj", "down_proj"):
                setattr(layer, name, linear(p + "mlp." + name + ".weight"))
            layer.ln1, layer.ln2 = t[p + "input_layernorm.weight"], t[p + "post_attention_layernorm.weight"]
            self.layers.append(layer)
        self.norm = t["model.norm.weight"]
        self.lm_head = linear("lm_head.weight")
        if int8:
            self.dtype = torch.float32
            self.embed, self.norm = self.embed.float(), self.norm.float()
            for layer in self.layers:
                layer.ln1, layer.ln2 = layer.ln1.float(), layer.ln2.float()
            torch.ao.quantization.quantize_dynamic(self, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        kv = c["num_key_value_heads"] * self.hd
        self.k = torch.zeros(c["num_hidden_layers"], max_len, kv, dtype=self.dtype)
        self.v = torch.zeros_like(self.k)
        inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        ang = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
        self.cos, self.sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
        self.n = 0

    def _rms(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])).to(x.dtype) * w

    def _rope(self, x, pos):
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * self.cos[pos].to(x.dtype) + rot * self.sin[pos].to(x.dtype)

    @torch.no_grad()
    def step(self, token):
        """Appends one token; returns its logits (vocab,)."""
        c, hd, pos = self.c, self.hd, self.n
        nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
        x = self.embed[token][None]
        for i, L in enumerate(self.layers):
            h = self._rms(x, L.ln1)
            q = self._rope(L.q_proj(h).view(nh, hd), pos)
            k = self._rope(L.k_proj(h).view(nkv, hd), pos)
            self.k[i, pos] = k.reshape(-1)
            self.v[i, pos] = L.v_proj(h).reshape(-1)
            keys = self.k[i, : pos + 1].view(pos + 1, nkv, hd).repeat_interleave(nh // nkv, dim=1)
            vals = self.v[i, : pos + 1].view(pos + 1, nkv, hd).repeat_interleave(nh // nkv, dim=1)
            att = torch.einsum("hd,thd->ht", q, keys) / math.sqrt(hd)
            att = att.float().softmax(-1).to(x.dtype)
            x = x + L.o_proj(torch.einsum("ht,thd->hd", att, vals).reshape(1, -1))
            h = self._rms(x, L.ln2)
            x = x + L.down_proj(F.silu(L.gate_proj(h)) * L.up_proj(h))
        self.n += 1
        return self.lm_head(self._rms(x, self.norm))[0]
