#!/usr/bin/python3
"""Trains the model pair habana_assist ships: a SentencePiece tokenizer, a Llama target (about 27M parameters,
grouped-query attention) and a draft (about 2.5M, multi-query attention, tied embeddings) distilled from it.

Data: the Python standard library on this machine (/usr/lib/python3.X, test suites left out), read from a
sorted file list; whole files are held out for evaluation (those whose path hashes to 0 mod 20). Everything
is seeded, so the same files and seed give the same pair under the same BLAS kernels (see _openblas_core_hint).
Debian's python3-torch and python3-sentencepiece are needed here only, never at run time. Training runs in
float32: the CPU it was first run on had no bfloat16 arithmetic, and torch's bfloat16 autocast measured 50x
slower than float32 there.

Writes, in Hugging Face layout, OUT/pycode (target) and OUT/pycode-draft (draft): config.json,
generation_config.json, model.safetensors (bfloat16), tokenizer.model, tokenizer_config.json,
special_tokens_map.json; and OUT/metrics.json (losses, sizes, times, greedy acceptance of the pair).
Usage: /usr/bin/python3 training/train_pair.py --out DIR [--target-steps N] [--draft-steps N] [--smoke]
       /usr/bin/python3 training/train_pair.py --out DIR2 --resume DIR [--draft-steps N] [--draft-seq N]
           [--head-share F]  (the draft, further)
"""

import argparse
import io
import json
import math
import os
import sys
import time


def _openblas_core_hint():
    """Debian 12's OpenBLAS (0.3.21) does not know CPUs newer than itself (Emerald Rapids, model 207, among them)
    and falls back to Prescott's SSE3 kernels: torch.mm measured 33 GFLOP/s there and 137-225 with
    OPENBLAS_CORETYPE=SkylakeX (2 cores), the target's forward 8.1 s -> 2.6 s per batch. On a CPU with AVX-512
    (F, BW, VL, DQ, CD) SkylakeX's kernels are right, so they are asked for unless the caller chose. The variable
    is read when OpenBLAS is loaded, so this runs before numpy and torch are imported. Other kernels round float32
    sums differently, so a run under other kernels gives another pair."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= set(flags):
        os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")


_openblas_core_hint()

import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from habana_assist.checkpoints.safetensors import save_file, to_bfloat16_bits  # noqa: E402
from habana_assist.pretrained.stdlib_split import stdlib_files  # noqa: E402

SPECIAL = {"unk": (0, "<unk>"), "bos": (1, "<s>"), "eos": (2, "</s>"), "pad": (3, "<pad>")}
TARGET = dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=8, num_attention_heads=8,
              num_key_value_heads=2, tie_word_embeddings=False)
DRAFT = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=1, tie_word_embeddings=True)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- data ----------------------------------------------------------------------------------------------------

def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def train_tokenizer(files, vocab_size, seed):
    """SentencePiece BPE with byte fallback; text kept as is (newlines and indentation are pieces)."""
    chunks = []
    for f in files:
        text = read(f)
        chunks += [text[i:i + 2000] for i in range(0, len(text), 2000)]
    rng = np.random.default_rng(seed)
    sample = [chunks[i] for i in sorted(rng.choice(len(chunks), size=min(len(chunks), 6000), replace=False))]
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sample), model_writer=proto, vocab_size=vocab_size, model_type="bpe",
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=False,
        user_defined_symbols=["\n"], allow_whitespace_only_pieces=True, split_digits=True, character_coverage=0.9995,
        max_sentence_length=8192, max_sentencepiece_length=16, unk_id=0, bos_id=1, eos_id=2, pad_id=3,
        num_threads=2, minloglevel=2)
    return proto.getvalue()


def encode_files(sp, files):
    """One int32 stream: <s> file tokens </s>, file after file."""
    parts = []
    for f in files:
        parts.append(np.array([SPECIAL["bos"][0]] + sp.encode(read(f)) + [SPECIAL["eos"][0]], dtype=np.int32))
    return np.concatenate(parts)


def batches(stream, batch, seq, rng):
    """Random windows (batch, seq + 1) of the stream, forever."""
    while True:
        starts = rng.integers(0, len(stream) - seq - 1, size=batch)
        yield torch.from_numpy(np.stack([stream[s:s + seq + 1] for s in starts]).astype(np.int64))


# ---- the model (Hugging Face Llama names, so export is a rename-free copy) ---------------------------------

class Llama(torch.nn.Module):
    def __init__(self, vocab, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                 num_key_value_heads, tie_word_embeddings, max_len=1024, theta=10000.0):
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
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def _rope(self, x):
        t, half = x.shape[-2], x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * self.cos[:t] + rot * self.sin[:t]

    def forward(self, ids):
        B, T = ids.shape
        x = self.embed(ids)
        for L in self.layers:
            h = self._rms(x, L.ln1)
            q = self._rope(L.q(h).view(B, T, self.nh, self.hd).transpose(1, 2))
            k = self._rope(L.k(h).view(B, T, self.nkv, self.hd).transpose(1, 2))
            v = L.v(h).view(B, T, self.nkv, self.hd).transpose(1, 2)
            k, v = k.repeat_interleave(self.nh // self.nkv, 1), v.repeat_interleave(self.nh // self.nkv, 1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") \
                else self._attention(q, k, v)
            x = x + L.o(a.transpose(1, 2).reshape(B, T, -1))
            h = self._rms(x, L.ln2)
            x = x + L.down(F.silu(L.gate(h)) * L.up(h))
        x = self._rms(x, self.norm)
        return x @ self.embed.weight.t() if self.lm_head is None else self.lm_head(x)

    @staticmethod
    def _attention(q, k, v):
        T = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        return s.softmax(-1) @ v

    def hf_tensors(self):
        """{Hugging Face tensor name: float32 numpy array}."""
        return {k: v.detach().float().numpy() for k, v in self._hf_params().items()}

    def load_exported(self, directory):
        """Weights from a checkpoint this script exported (bfloat16 on disk, exact in float32)."""
        from habana_assist.checkpoints.safetensors import bfloat16_bits_to_float32, read_checkpoint_tensors
        stored, params = read_checkpoint_tensors(directory), self._hf_params()
        if set(stored) != set(params):
            raise SystemExit(f"{directory}: tensors {sorted(set(stored) ^ set(params))} do not match this shape")
        with torch.no_grad():
            for name, p in params.items():
                bits, dtype = stored[name]
                if dtype != "BF16" or tuple(bits.shape) != tuple(p.shape):
                    raise SystemExit(f"{directory}: {name} is {dtype} {tuple(bits.shape)}, "
                                     f"expected BF16 {tuple(p.shape)}")
                p.copy_(torch.from_numpy(bfloat16_bits_to_float32(bits)))

    def _hf_params(self):
        """{Hugging Face tensor name: the parameter}."""
        t = {"model.embed_tokens.weight": self.embed.weight, "model.norm.weight": self.norm}
        if self.lm_head is not None:
            t["lm_head.weight"] = self.lm_head.weight
        for i, L in enumerate(self.layers):
            p = f"model.layers.{i}."
            t.update({p + "input_layernorm.weight": L.ln1, p + "post_attention_layernorm.weight": L.ln2,
                      p + "self_attn.q_proj.weight": L.q.weight, p + "self_attn.k_proj.weight": L.k.weight,
                      p + "self_attn.v_proj.weight": L.v.weight, p + "self_attn.o_proj.weight": L.o.weight,
                      p + "mlp.gate_proj.weight": L.gate.weight, p + "mlp.up_proj.weight": L.up.weight,
                      p + "mlp.down_proj.weight": L.down.weight})
        return t


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup))))


@torch.no_grad()
def held_out_loss(model, stream, seq, n_windows, seed):
    model.eval()
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(n_windows):
        s = int(rng.integers(0, len(stream) - seq - 1))
        w = torch.from_numpy(stream[s:s + seq + 1].astype(np.int64))[None]
        total += float(F.cross_entropy(model(w[:, :-1])[0], w[0, 1:]))
    model.train()
    return total / n_windows


def train_target(model, stream, args, rng):
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    data, t0 = batches(stream, args.batch, args.seq, rng), time.time()
    for step in range(args.target_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.target_steps, args.lr, args.warmup)
        w = next(data)
        loss = F.cross_entropy(model(w[:, :-1]).reshape(-1, model.embed.num_embeddings), w[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.target_steps - 1:
            log(f"target step {step}/{args.target_steps} loss {float(loss):.3f} ({time.time() - t0:.0f} s)")
    return time.time() - t0


def onpolicy_sequences(target_dir, stream, n, seq, prompt_len, head_share, seed, batch=32):
    """(n, seq) int64: training windows of prompt_len tokens, each continued greedily by the target (through
    habana_assist, in float32) to seq tokens. This is what the draft is judged on: greedy verification accepts a
    drafted token iff it is the target's argmax after the target's own tokens. A head_share of the windows start
    at a file's beginning (its <s>), as the demo's prompts (a file's first lines) do; the rest anywhere."""
    import habana_assist as ha
    t = ha.AutoModelForCausalLM.from_pretrained(target_dir, dtype="float32")
    rng, out = np.random.default_rng(seed), []
    heads = np.flatnonzero(stream[:len(stream) - prompt_len] == SPECIAL["bos"][0])
    if head_share > 0 and not len(heads):
        raise SystemExit(f"--head-share {head_share}: no file begins {prompt_len} tokens before the stream's end")
    for b0 in range(0, n, batch):
        starts = rng.integers(0, len(stream) - prompt_len, size=min(batch, n - b0))
        if head_share > 0:  # drawn after the windows, so head_share 0 draws what the first recipe drew
            at_head = rng.random(len(starts)) < head_share
            starts[at_head] = heads[rng.integers(0, len(heads), size=int(at_head.sum()))]
        ids = np.stack([stream[s:s + prompt_len] for s in starts]).astype(np.int64)
        out.append(t.generate(ids, max_new_tokens=seq - prompt_len, eos_token_id=[], do_sample=False))
    return np.concatenate(out)


def distill_draft(draft, target, stream, onpolicy, args, rng):
    """Trained on the target's output distribution: KL(p || q) plus cross-entropy on the target's argmax, the
    token greedy verification accepts. Each batch holds args.onpolicy_share of the target's own greedy
    continuations (onpolicy, (n, seq)) and the rest random windows of the training text."""
    opt = torch.optim.AdamW(draft.parameters(), lr=args.lr * 2, betas=(0.9, 0.95), weight_decay=0.0)
    target.eval()
    n_on = min(args.draft_batch - 1, int(round(args.draft_batch * args.onpolicy_share))) if len(onpolicy) else 0
    data, t0 = batches(stream, args.draft_batch - n_on, args.draft_seq, rng), time.time()
    V = draft.embed.num_embeddings
    for step in range(args.draft_steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args.draft_steps, args.lr * 2, args.warmup)
        w = next(data)[:, :-1]
        if n_on:
            w = torch.cat([torch.from_numpy(onpolicy[rng.integers(0, len(onpolicy), size=n_on)]), w])
        with torch.no_grad():
            p_logits = target(w).reshape(-1, V)
        q_logits = draft(w).reshape(-1, V)
        kl = F.kl_div(F.log_softmax(q_logits, -1), F.log_softmax(p_logits, -1), log_target=True, reduction="batchmean")
        hard = F.cross_entropy(q_logits, p_logits.argmax(-1))
        loss = kl + hard
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.draft_steps - 1:
            log(f"draft step {step}/{args.draft_steps} kl {float(kl):.3f} hard-ce {float(hard):.3f} "
                f"({time.time() - t0:.0f} s)")
    return time.time() - t0


def export(model, shape, directory, tok_proto, vocab):
    os.makedirs(directory, exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab, "hidden_act": "silu",
              "max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
              "bos_token_id": SPECIAL["bos"][0], "eos_token_id": SPECIAL["eos"][0], "pad_token_id": SPECIAL["pad"][0],
              "attention_bias": False, "mlp_bias": False, **shape}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "max_new_tokens": 128}, f, indent=2)
    save_file({k: (to_bfloat16_bits(v), "BF16") for k, v in model.hf_tensors().items()},
              os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(directory, "tokenizer.model"), "wb") as f:
        f.write(tok_proto)
    names = {k: v[1] for k, v in SPECIAL.items()}
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "bos_token": names["bos"], "eos_token": names["eos"],
                   "unk_token": names["unk"], "pad_token": names["pad"], "add_bos_token": True, "add_eos_token": False,
                   "padding_side": "left", "model_max_length": 1024}, f, indent=2)
    with open(os.path.join(directory, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": names["bos"], "eos_token": names["eos"], "unk_token": names["unk"],
                   "pad_token": names["pad"]}, f, indent=2)


def greedy_acceptance(target_dir, draft_dir, held_stream, n_prompts, seed):
    """Acceptance of the exported pair through habana_assist itself: greedy, K = 5, on held-out prompts."""
    import habana_assist as ha
    t = ha.AutoModelForCausalLM.from_pretrained(target_dir, dtype="float32")
    d = ha.AutoModelForCausalLM.from_pretrained(draft_dir, dtype="float32")
    rng, drafted, accepted, identical = np.random.default_rng(seed), 0, 0, 0
    for _ in range(n_prompts):
        s = int(rng.integers(0, len(held_stream) - 80))
        ids = held_stream[s:s + 64][None].astype(np.int64)
        plain = t.generate(ids, max_new_tokens=64, eos_token_id=[])
        res = t.generate(ids, max_new_tokens=64, eos_token_id=[], assistant_model=d, num_assistant_tokens=5,
                         num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0,
                         return_dict_in_generate=True)
        drafted, accepted = drafted + res.num_draft_tokens, accepted + res.num_accepted_tokens
        identical += int(np.array_equal(plain, res.sequences))
    return {"drafted": drafted, "accepted": accepted, "acceptance": accepted / max(1, drafted),
            "identical_outputs": f"{identical}/{n_prompts}"}


def head_acceptance(target_dir, draft_dir, n_prompts, new_tokens):
    """Acceptance as the demo meets it: greedy, K = 5, new_tokens after the first 30 lines of the first n_prompts
    held-out files (cli.demo_prompts; their prompts run to about 500 tokens, past the 256 of a window)."""
    import habana_assist as ha
    from habana_assist.cli import demo_prompts
    tok = ha.AutoTokenizer.from_pretrained(target_dir)
    t = ha.AutoModelForCausalLM.from_pretrained(target_dir, dtype="float32")
    d = ha.AutoModelForCausalLM.from_pretrained(draft_dir, dtype="float32")
    drafted = accepted = 0
    for _, text in demo_prompts(n_prompts, 30):
        res = t.generate(tok(text, return_tensors="np")["input_ids"], max_new_tokens=new_tokens, eos_token_id=[],
                         assistant_model=d, num_assistant_tokens=5, num_assistant_tokens_schedule="constant",
                         assistant_confidence_threshold=0.0, return_dict_in_generate=True)
        drafted, accepted = drafted + res.num_draft_tokens, accepted + res.num_accepted_tokens
    return {"prompts": n_prompts, "new_tokens": new_tokens, "drafted": drafted, "accepted": accepted,
            "acceptance": accepted / max(1, drafted)}


def draft_stages(m):
    """The draft's training stages in metrics m: its "draft_stages", or the one stage of a run without them."""
    if "draft_stages" in m:
        return list(m["draft_stages"])
    return [{"steps": m["steps"]["draft"], "minutes": m["minutes"]["draft"],
             "onpolicy_sequences": m.get("onpolicy", {}).get("sequences", 0),
             "onpolicy_minutes": m["minutes"].get("onpolicy", 0.0), "train_files": m["files"]["train"]}]


def _head_line(m):
    h = m.get("head_acceptance")
    if not h:
        return ""
    return (f"- Greedy acceptance after the first 30 lines of {h['prompts']} held-out files (the demo's prompts, "
            f"{h['new_tokens']} new tokens, K = 5): {h['acceptance']:.3f}\n  ({h['accepted']} of {h['drafted']}).\n")


def _first_files(m):
    """Where a later stage ran on another machine (another standard library), the files of the first."""
    first = draft_stages(m)[0]["train_files"]
    if first == m["files"]["train"]:
        return ""
    return (f";\n  the target and the draft's first stage were trained on the first machine's {first} files, the "
            f"losses are on these held-out files")


def _stages_lines(m):
    """One line per stage of the draft's training where there were several."""
    stages = draft_stages(m)
    if len(stages) < 2:
        return ""
    lines = "- The draft's training stages:\n"
    for i, st in enumerate(stages, 1):
        seq, batch = st.get("seq", m["steps"]["seq"]), st.get("batch", m["steps"]["batch"])
        heads = f", {100 * st['head_share']:.0f}% of them from a file's beginning" if st.get("head_share") else ""
        lines += (f"  {i}. {st['steps']} steps of {batch} x {seq} tokens, {st['minutes']:.0f} min; "
                  f"{st['onpolicy_sequences']} greedy continuations of the target{heads}\n")
    return lines


def write_card(out, m):
    """OUT/MODEL_CARD.md from the metrics of a run (metrics.json)."""
    a = m["greedy_acceptance"]
    on = m.get("onpolicy", {"sequences": 0, "share": 0.0})
    share = 100 * on["share"] if on["sequences"] else 0.0
    card = f"""# habana-assist/pycode and habana-assist/pycode-draft

A small Llama-architecture pair trained by `training/train_pair.py` (seed {m['seed']}) for habana_assist's demo of
assisted generation: the draft proposes, the target verifies, the output is the target's own.

| | target (`pycode`) | draft (`pycode-draft`) |
|---|---|---|
| parameters | {m['params']['target'] / 1e6:.1f}M | {m['params']['draft'] / 1e6:.2f}M |
| shape | {TARGET['num_hidden_layers']} layers, hidden {TARGET['hidden_size']}, {TARGET['num_attention_heads']} heads, \
{TARGET['num_key_value_heads']} KV heads (GQA), MLP {TARGET['intermediate_size']} | {DRAFT['num_hidden_layers']} layers, \
hidden {DRAFT['hidden_size']}, {DRAFT['num_attention_heads']} heads, 1 KV head (MQA), MLP {DRAFT['intermediate_size']}, \
tied embeddings |
| training | {m['steps']['target']} steps of {m['steps']['batch']} x {m['steps']['seq']} tokens, {m['minutes']['target']:.0f} min | \
distilled from the target (KL to its distribution + cross-entropy on its argmax), \
{' + '.join(str(st['steps']) for st in draft_stages(m))} steps, \
{m['minutes']['draft']:.0f} min; {share:.0f}% of each batch the target's own greedy continuations \
({on['sequences']} of them, generated by habana_assist in {m['minutes'].get('onpolicy', 0):.0f} min) |
| held-out loss (nats/token) | {m['held_out_loss']['target_held_out']:.3f} | {m['held_out_loss']['draft_held_out']:.3f} |

- Data: the Python standard library of the training machine (Python {sys.version.split()[0]}), test suites left out,
  {m['files']['train']} files ({m['tokens']['train']:,} tokens) for training; {m['files']['held_out']} whole files
  ({m['tokens']['held_out']:,} tokens) held out (habana_assist/stdlib_split.py){_first_files(m)}.
- Tokenizer: SentencePiece BPE, {m['vocab']} pieces, byte fallback, text kept as is (newline and indentation pieces).
- Weights stored in bfloat16 (load with dtype="float32" to compute in float32, as the demo does).
- Greedy acceptance of the draft on held-out prompts (K = 5, through habana_assist): {a['acceptance']:.3f}
  ({a['accepted']} of {a['drafted']} drafted tokens); assisted output identical to plain: {a['identical_outputs']}.
{_head_line(m)}{_stages_lines(m)}\
- Trained on {os.cpu_count()} CPU cores with torch {m['torch']} in float32, {m['minutes']['total']:.0f} minutes in all.
- A demonstration model, not a useful code assistant: it completes Python in the standard library's style.
"""
    with open(os.path.join(out, "MODEL_CARD.md"), "w") as f:
        f.write(card)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--target-steps", type=int, default=1400)
    ap.add_argument("--draft-steps", type=int, default=1200)
    ap.add_argument("--onpolicy-seqs", type=int, default=3072,
                    help="target greedy continuations generated for the draft's training")
    ap.add_argument("--onpolicy-share", type=float, default=0.75, help="their share of each draft batch")
    ap.add_argument("--draft-seq", type=int,
                    help="tokens per window of the draft's training (default --seq). A draft follows the target only "
                         "as far as it was trained: the first stage's (256) agreed with the target's greedy tokens "
                         "0.87-0.88 of the time within 256 positions, 0.69-0.70 past them")
    ap.add_argument("--draft-batch", type=int, help="windows per draft batch (default --batch)")
    ap.add_argument("--onpolicy-prompt", type=int, help="prompt tokens of an on-policy window (default a quarter)")
    ap.add_argument("--head-share", type=float, default=0.0,
                    help="share of the on-policy prompts that start at a file's beginning (the rest anywhere)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--smoke", action="store_true", help="a tiny run (few files and steps) to check the recipe")
    ap.add_argument("--card-only", action="store_true", help="only (re)write OUT/MODEL_CARD.md from OUT/metrics.json")
    ap.add_argument("--target-only", action="store_true",
                    help="stop after training the target (saved as OUT/target.pt); a later run picks it up")
    ap.add_argument("--resume", metavar="DIR",
                    help="a pair this script exported (DIR/pycode, DIR/pycode-draft, DIR/metrics.json, such as "
                         "habana_assist/pretrained): keep its tokenizer and target, distill its draft further for "
                         "--draft-steps on fresh on-policy sequences (a new stage of the draft's training)")
    args = ap.parse_args()
    args.draft_seq = args.seq if args.draft_seq is None else args.draft_seq
    args.draft_batch = args.batch if args.draft_batch is None else args.draft_batch
    args.onpolicy_prompt = args.draft_seq // 4 if args.onpolicy_prompt is None else args.onpolicy_prompt
    if not 0 < args.onpolicy_prompt < args.draft_seq <= 1024 or not 0.0 <= args.head_share <= 1.0 or \
            args.draft_batch < 1:
        raise SystemExit("need 0 < --onpolicy-prompt < --draft-seq <= 1024 (the models' positions), "
                         "0 <= --head-share <= 1 and --draft-batch >= 1")
    if args.card_only:
        with open(os.path.join(args.out, "metrics.json")) as f:
            write_card(args.out, json.load(f))
        return
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    t_start = time.time()

    train_files, held_files = stdlib_files()
    if args.smoke:
        train_files, held_files = train_files[:40], held_files[:5]
        args.vocab, args.target_steps, args.draft_steps, args.batch, args.seq = 512, 5, 5, 2, 64
        args.onpolicy_seqs, args.draft_seq, args.draft_batch = 4, min(args.draft_seq, 64), 2
        args.onpolicy_prompt = min(args.onpolicy_prompt, 16)
    log(f"{len(train_files)} training files, {len(held_files)} held out")
    prev = None
    if args.resume:
        with open(os.path.join(args.resume, "metrics.json")) as f:
            prev = json.load(f)
        with open(os.path.join(args.resume, "pycode", "tokenizer.model"), "rb") as f:
            tok = f.read()
        args.vocab, args.seed, args.target_steps = prev["vocab"], prev["seed"], prev["steps"]["target"]
    else:
        tok = train_tokenizer(train_files, args.vocab, args.seed)
    sp = spm.SentencePieceProcessor(model_proto=tok)
    train, held = encode_files(sp, train_files), encode_files(sp, held_files)
    log(f"tokens: {len(train)} training, {len(held)} held out")

    target = Llama(args.vocab, **TARGET)
    draft = Llama(args.vocab, **DRAFT)
    log(f"target {n_params(target) / 1e6:.1f}M parameters, draft {n_params(draft) / 1e6:.2f}M")
    # The target's weights go to OUT/target.pt, and a run that finds them there (with the steps it was
    # trained for) skips to the draft: the phases can run apart, with the same result as one run, since
    # each phase draws from its own generator.
    # A resumed run keeps the target and starts the draft where it was; its data (on-policy sequences, draft
    # batches) draw from generators shifted by 1000 per earlier stage, the held-out evaluation's do not.
    stages = draft_stages(prev) if prev else []
    shift = 1000 * len(stages)
    ckpt = os.path.join(args.out, "target.pt")
    saved = torch.load(ckpt) if os.path.exists(ckpt) and not prev else None
    if prev:
        target.load_exported(os.path.join(args.resume, "pycode"))
        draft.load_exported(os.path.join(args.resume, "pycode-draft"))
        t_target = prev["minutes"]["target"] * 60
        t_start -= prev["minutes"]["total"] * 60  # the total counts the earlier stages
        log(f"resumed from {args.resume}: target and draft loaded, draft stage {len(stages) + 1}")
    elif saved is not None and saved["steps"] == args.target_steps:
        target.load_state_dict(saved["state"])
        t_target = saved["seconds"]
        t_start -= t_target  # the total counts the target's training where it was done
        log(f"target loaded from {ckpt} ({args.target_steps} steps, trained in {t_target / 60:.1f} min)")
    else:
        t_target = train_target(target, train, args, np.random.default_rng(args.seed))
        os.makedirs(args.out, exist_ok=True)
        torch.save({"steps": args.target_steps, "seconds": t_target, "state": target.state_dict()}, ckpt)
    if args.target_only:
        return
    target_dir, draft_dir = os.path.join(args.out, "pycode"), os.path.join(args.out, "pycode-draft")
    export(target, TARGET, target_dir, tok, args.vocab)
    t1 = time.time()
    onpolicy = onpolicy_sequences(target_dir, train, args.onpolicy_seqs, args.draft_seq, args.onpolicy_prompt,
                                  args.head_share, args.seed + 3 + shift)
    t_onpolicy = time.time() - t1
    log(f"{len(onpolicy)} on-policy sequences of {args.draft_seq} tokens in {t_onpolicy / 60:.1f} min")
    t_draft = distill_draft(draft, target, train, onpolicy, args, np.random.default_rng(args.seed + 10 + shift))
    stages.append({"steps": args.draft_steps, "minutes": t_draft / 60, "onpolicy_sequences": int(len(onpolicy)),
                   "onpolicy_minutes": t_onpolicy / 60, "peak_lr": args.lr * 2, "warmup": args.warmup,
                   "train_files": len(train_files), "seq": args.draft_seq, "batch": args.draft_batch,
                   "onpolicy_prompt": args.onpolicy_prompt, "head_share": args.head_share})
    n_eval = 4 if args.smoke else 64
    losses = {"target_held_out": held_out_loss(target, held, args.seq, n_eval, args.seed + 1),
              "draft_held_out": held_out_loss(draft, held, args.seq, n_eval, args.seed + 1)}
    log(f"held-out loss: target {losses['target_held_out']:.3f}, draft {losses['draft_held_out']:.3f}")
    export(draft, DRAFT, draft_dir, tok, args.vocab)
    acceptance = greedy_acceptance(target_dir, draft_dir, held, 2 if args.smoke else 16, args.seed + 2)
    log(f"greedy acceptance of the pair on held-out prompts: {acceptance}")
    heads = head_acceptance(target_dir, draft_dir, 2 if args.smoke else 10, 16 if args.smoke else 128)
    log(f"greedy acceptance after held-out files' first 30 lines: {heads}")
    metrics = {"seed": args.seed, "files": {"train": len(train_files), "held_out": len(held_files)},
               "tokens": {"train": int(len(train)), "held_out": int(len(held))}, "vocab": args.vocab,
               "params": {"target": n_params(target), "draft": n_params(draft)},
               "steps": {"target": args.target_steps, "draft": sum(st["steps"] for st in stages), "batch": args.batch,
                         "seq": args.seq},
               "onpolicy": {"sequences": sum(st["onpolicy_sequences"] for st in stages), "share": args.onpolicy_share},
               "minutes": {"target": t_target / 60, "onpolicy": sum(st["onpolicy_minutes"] for st in stages),
                           "draft": sum(st["minutes"] for st in stages), "total": (time.time() - t_start) / 60},
               "draft_stages": stages,
               "held_out_loss": losses, "greedy_acceptance": acceptance, "head_acceptance": heads,
               "torch": torch.__version__}
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    write_card(args.out, metrics)
    log(f"done in {(time.time() - t_start) / 60:.1f} minutes: {args.out}")


if __name__ == "__main__":
    main()
