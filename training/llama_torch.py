"""The shipped pair's architecture in plain torch, for training: a Llama (RMSNorm, rotary positions, grouped-query
attention, SwiGLU) whose tensors export under Hugging Face's names, and a bfloat16 safetensors reader and writer
(sharded as Transformers shards) that need neither habana_assist nor the safetensors package, so the same file runs
on the GPU machine (torch 2.x, no habana_assist built there) and here (Debian's torch 1.13).
"""

import json
import math
import os
import struct

import torch
import torch.nn.functional as F

SPECIAL = {"unk": (0, "<unk>"), "bos": (1, "<s>"), "eos": (2, "</s>"), "pad": (3, "<pad>")}
MAX_POSITIONS = 1024


class Llama(torch.nn.Module):
    """ids (B, T) int64 -> logits (B, T, vocab). With a cache (a list, one (k, v) per layer, filled by the call)
    and the position of ids[:, 0], it continues a sequence token by token for generation."""

    def __init__(
        self,
        vocab,
        hidden_size,
        intermediate_size,
        num_hidden_layers,
        num_attention_heads,
        num_key_value_heads,
        tie_word_embeddings,
        max_len=MAX_POSITIONS,
        theta=10000.0,
    ):
        super().__init__()
        self.nh, self.nkv, self.hd = num_attention_heads, num_key_value_heads, hidden_size // num_attention_heads
        self.embed = torch.nn.Embedding(vocab, hidden_size)
        self.layers = torch.nn.ModuleList()
        for _ in range(num_hidden_layers):
            L = torch.nn.Module()
            L.ln1, L.ln2 = torch.nn.Parameter(torch.ones(hidden_size)), torch.nn.Parameter(torch.ones(hidden_size))
            L.q = torch.nn.Linear(hidden_size, self.nh * self.hd, bias=False)
            L.k = torch.nn.Linear(hidden_size, self.nkv * self.hd, bias=False)
            L.v = torch.nn.Linear(hidden_size, self.nkv * self.hd, bias=False)
            L.o = torch.nn.Linear(self.nh * self.hd, hidden_size, bias=False)
            L.gate = torch.nn.Linear(hidden_size, intermediate_size, bias=False)
            L.up = torch.nn.Linear(hidden_size, intermediate_size, bias=False)
            L.down = torch.nn.Linear(intermediate_size, hidden_size, bias=False)
            self.layers.append(L)
        self.norm = torch.nn.Parameter(torch.ones(hidden_size))
        self.lm_head = None if tie_word_embeddings else torch.nn.Linear(hidden_size, vocab, bias=False)
        inv = 1.0 / theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd)
        ang = torch.outer(torch.arange(max_len, dtype=torch.float64), inv)
        self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1).float(), persistent=False)
        self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1).float(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
        for L in self.layers:  # residual branches start small (GPT-2's scaled init)
            torch.nn.init.normal_(L.o.weight, std=0.02 / math.sqrt(2 * num_hidden_layers))
            torch.nn.init.normal_(L.down.weight, std=0.02 / math.sqrt(2 * num_hidden_layers))

    @staticmethod
    def _rms(x, w, eps=1e-5):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    def _rope(self, x, pos):
        t, half = x.shape[-2], x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * self.cos[pos : pos + t].to(x.dtype) + rot * self.sin[pos : pos + t].to(x.dtype)

    def forward(self, ids, cache=None, pos=0):
        B, T = ids.shape
        x = self.embed(ids)
        for i, L in enumerate(self.layers):
            h = self._rms(x, L.ln1)
            q = self._rope(L.q(h).view(B, T, self.nh, self.hd).transpose(1, 2), pos)
            k = self._rope(L.k(h).view(B, T, self.nkv, self.hd).transpose(1, 2), pos)
            v = L.v(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
            if cache is not None:
                if len(cache) > i:
                    k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
                    cache[i] = (k, v)
                else:
                    cache.append((k, v))
            k, v = k.repeat_interleave(self.nh // self.nkv, 1), v.repeat_interleave(self.nh // self.nkv, 1)
            causal = T > 1 or cache is None  # one new token sees every cached one
            if hasattr(F, "scaled_dot_product_attention") and (causal is False or k.shape[2] == T):
                a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            else:
                a = self._attention(q, k, v)
            x = x + L.o(a.transpose(1, 2).reshape(B, T, -1))
            h = self._rms(x, L.ln2)
            x = x + L.down(F.silu(L.gate(h)) * L.up(h))
        x = self._rms(x, self.norm)
        return x @ self.embed.weight.t() if self.lm_head is None else self.lm_head(x)

    @staticmethod
    def _attention(q, k, v):
        """Causal attention of the last q.shape[-2] positions over all k.shape[-2] (torch 1.13 has no sdpa)."""
        T, S = q.shape[-2], k.shape[-2]
        s = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).triu(S - T + 1)
        return (s.masked_fill(mask, float("-inf")).softmax(-1).to(v.dtype)) @ v

    def hf_params(self):
        """{Hugging Face tensor name: the parameter}."""
        t = {"model.embed_tokens.weight": self.embed.weight, "model.norm.weight": self.norm}
        if self.lm_head is not None:
            t["lm_head.weight"] = self.lm_head.weight
        for i, L in enumerate(self.layers):
            p = f"model.layers.{i}."
            t.update(
                {
                    p + "input_layernorm.weight": L.ln1,
                    p + "post_attention_layernorm.weight": L.ln2,
                    p + "self_attn.q_proj.weight": L.q.weight,
                    p + "self_attn.k_proj.weight": L.k.weight,
                    p + "self_attn.v_proj.weight": L.v.weight,
                    p + "self_attn.o_proj.weight": L.o.weight,
                    p + "mlp.gate_proj.weight": L.gate.weight,
                    p + "mlp.up_proj.weight": L.up.weight,
                    p + "mlp.down_proj.weight": L.down.weight,
                }
            )
        return t


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ---- safetensors, bfloat16 only --------------------------------------------------------------------------------


def _bf16_bytes(t):
    """A tensor's bfloat16 bytes (round to nearest even, as torch converts), little-endian, row-major."""
    return t.detach().to("cpu", torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()


def save_bf16(tensors, directory, max_shard_bytes=None):
    """{name: tensor} -> directory/model.safetensors, or, where the bytes pass max_shard_bytes, shards
    model-0000i-of-0000n.safetensors (each at most max_shard_bytes, names in sorted order) with
    model.safetensors.index.json, as Transformers' save_pretrained writes them. Returns the file names."""
    os.makedirs(directory, exist_ok=True)
    names, shards, size = sorted(tensors), [[]], 0
    for n in names:
        nbytes = tensors[n].numel() * 2
        if max_shard_bytes and shards[-1] and size + nbytes > max_shard_bytes - 8192:  # room for the header
            shards.append([])
            size = 0
        shards[-1].append(n)
        size += nbytes
    files = (
        ["model.safetensors"]
        if len(shards) == 1
        else [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    )
    weight_map, total = {}, 0
    for fname, shard in zip(files, shards):
        header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
        for n in shard:
            b = _bf16_bytes(tensors[n])
            header[n] = {"dtype": "BF16", "shape": list(tensors[n].shape), "data_offsets": [off, off + len(b)]}
            blobs.append(b)
            off += len(b)
            weight_map[n] = fname
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(directory, fname), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            for b in blobs:
                f.write(b)
        total += off
    if len(files) > 1:
        with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        files.append("model.safetensors.index.json")
    return files


def load_bf16(directory):
    """{name: float32 tensor} of the bfloat16 checkpoint save_bf16 wrote (one file or shards)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fname in files:
        with open(os.path.join(directory, fname), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] != "BF16":
                raise SystemExit(f"{directory}/{fname}: {name} is {info['dtype']}, expected BF16")
            a, b = info["data_offsets"]
            bits = torch.frombuffer(bytearray(data[a:b]), dtype=torch.int16).view(torch.bfloat16)
            out[name] = bits.float().reshape(info["shape"])
    return out


def load_into(model, directory):
    """Copies a checkpoint's weights into model (names and shapes must match)."""
    stored, params = load_bf16(directory), model.hf_params()
    if set(stored) != set(params):
        raise SystemExit(f"{directory}: tensors {sorted(set(stored) ^ set(params))} do not match this shape")
    with torch.no_grad():
        for name, p in params.items():
            if tuple(stored[name].shape) != tuple(p.shape):
                raise SystemExit(f"{directory}: {name} is {tuple(stored[name].shape)}, expected {tuple(p.shape)}")
            p.copy_(stored[name])
