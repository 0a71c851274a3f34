"""Mutation fuzzing of every parser of outside bytes.

    /usr/bin/python3 tests/fuzz/fuzz_parsers.py --iterations 2000 --seed 0      # each target 2000 inputs
    /usr/bin/python3 tests/fuzz/fuzz_parsers.py --seconds 600 --seed 1          # the long run, time split evenly
    /usr/bin/python3 tests/fuzz/fuzz_parsers.py --replay tests/fuzz/crashers    # the kept regression inputs
    /usr/bin/python3 tests/fuzz/fuzz_parsers.py --make-corpus                   # rewrite tests/fuzz/corpus/
    /usr/bin/python3 tests/fuzz/fuzz_parsers.py --make-corpus --targets tokenizer_json   # only that target's
    /usr/bin/python3 tests/fuzz/fuzz_parsers.py --make-corpus --targets config   # only the families' config seeds

The promise under test (docs/design.md, promise 3): every input gives a valid result or a ``HabanaAssistError``
(whose classes also derive from ValueError / FileNotFoundError); never a crash, a hang, another exception type
(TypeError, KeyError, OverflowError, RecursionError, UnicodeError, numpy's ValueError, MemoryError...), or
memory far beyond the input's size.

Targets (each input is a directory, a seed from corpus/<target>/<name>/ with one of its files mutated):
    safetensors        read_safetensors + read_metadata of model.safetensors, every array read through
    sharded            checkpoint_files of model.safetensors.index.json and the shards it names
    config             PretrainedConfig.from_pretrained (config.json) of every family, its derived properties, a
                       from_dict round trip, core_config(), layer_settings() and the expected tensor names
    generation_config  GenerationConfig.from_pretrained (generation_config.json), validate(), eos_token_ids()
    tokenizer          AutoTokenizer.from_pretrained (tokenizer.model, tokenizer_config.json,
                       special_tokens_map.json), then encode / decode / a padded batch with the result
    tokenizer_json     AutoTokenizer.from_pretrained of a tokenizer.json checkpoint (tokenizer.json,
                       tokenizer_config.json, special_tokens_map.json, chat_template.jinja: four tiny hand-built
                       ones in the real formats, written by tokenizer_json_seeds()), then texts holding its
                       special and added tokens encoded, decoded, batched with truncation and padding, and each
                       chat template rendered; mutations aim at the pipeline components and the template too
    load               AutoModelForCausalLM.from_pretrained of a whole tiny checkpoint (config.json, weights,
                       generation_config.json), then a forward and a 2-token generate()
ChatTemplateError (an InvalidInputError) is the clear error of a broken chat template.

Input i of target t under seed s is a pure function of (s, t, i) and the corpus: a seed directory and 1-4
stacked mutations drawn from random.Random(f"{s}:{t}:{i}"), so any reported input can be rebuilt and saved.

Isolation, hangs and memory: the inputs run in a child process (a worker, this file with --worker) that
reports each input's start and outcome over a pipe. A worker that dies (a signal: segfault, abort) is a
crash of the input it had started; one that reports nothing for --timeout seconds is killed and the input is
a hang (a watchdog, not a timing assertion: the limit is far above any normal input's time). Either way a
fresh worker goes on with the next input. Memory: after a warm-up pass over the seed corpus (which also
checks that every seed gives a valid result), the worker caps its address space with
setrlimit(RLIMIT_AS) at its size then (about 100 MiB: Python, numpy, the core, sentencepiece) plus
MEMORY_SLACK_BYTES plus MEMORY_FACTOR times twice the largest seed directory (a mutated input can grow
about that much): about 194 MiB in all for this corpus. An allocation past the cap fails (numpy and Python raise
MemoryError, C code gets NULL), and that outcome is a failure like any other exception, so a header claiming a
2**60-element tensor or a config asking for 10**9 layers is caught as soon as anything tries to allocate for it. glibc's
malloc arenas are limited (MALLOC_ARENA_MAX) so that a thread's first allocation does not reserve 64 MB of address
space.
"""

import argparse
import importlib.util
import json
import os
import random
import resource
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS_DIR = os.path.join(HERE, "corpus")
CRASHERS_DIR = os.path.join(HERE, "crashers")
TARGETS = ("safetensors", "sharded", "config", "generation_config", "tokenizer", "tokenizer_json", "load")

MEMORY_SLACK_BYTES = 96 << 20  # room for ordinary work: Python objects, numpy temporaries, a small KV cache
MEMORY_FACTOR = 16  # ... plus this many times the input's size
DEFAULT_TIMEOUT_S = 60.0  # per input; a normal input takes milliseconds


# ---- corpus ---------------------------------------------------------------------------------------------------


def corpus_seeds(target, corpus_dir=CORPUS_DIR):
    """-> sorted [(seed name, {file name: bytes})] of corpus/<target>/*/."""
    root = os.path.join(corpus_dir, target)
    seeds = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        d = os.path.join(root, name)
        files = {}
        for f in sorted(os.listdir(d)):
            with open(os.path.join(d, f), "rb") as fh:
                files[f] = fh.read()
        seeds.append((name, files))
    return seeds


def read_input_dir(directory):
    """A crasher directory -> (target, {file name: bytes}); its TARGET file names the target."""
    with open(os.path.join(directory, "TARGET")) as f:
        target = f.read().strip()
    files = {}
    for f in sorted(os.listdir(directory)):
        if f not in ("TARGET", "FOUND.txt"):
            with open(os.path.join(directory, f), "rb") as fh:
                files[f] = fh.read()
    return target, files


def write_input_dir(directory, files, target=None):
    os.makedirs(directory, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    if target is not None:
        with open(os.path.join(directory, "TARGET"), "w") as f:
            f.write(target + "\n")


def make_corpus(corpus_dir=CORPUS_DIR):
    """Write the seed corpus: tiny valid checkpoints (tests/fixtures/checkpoints.py), the shipped pair's JSON files and
    tokenizer.model, four small sentencepiece models (unigram, bpe with byte fallback, char, word) trained
    on textwrap.py, and tokenizer_json's seeds. Run once; the result is committed (sentencepiece training is not
    bitwise reproducible across versions)."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fixtures"))
    import numpy as np
    import sentencepiece as spm
    from checkpoints import write_random_checkpoint

    from habana_assist.checkpoints.safetensors import save_file

    shipped = os.path.join(REPO, "habana_assist", "pretrained", "pycode")
    if os.path.isdir(corpus_dir):
        shutil.rmtree(corpus_dir)

    def copy_shipped(dst, *names):
        os.makedirs(dst, exist_ok=True)
        for n in names:
            shutil.copy(os.path.join(shipped, n), os.path.join(dst, n))

    small = dict(vocab_size=32, hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=24)
    checkpoints = {
        "llama_f32": dict(small),
        "llama_bf16_tied": dict(small, dtype="BF16", tie_word_embeddings=True, eos_token_id=2, bos_token_id=1),
        "qwen2_f16_bias": dict(small, arch="Qwen2ForCausalLM", dtype="F16"),
        "mistral_llama3_rope": dict(
            small,
            arch="MistralForCausalLM",
            sliding_window=8,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        ),
    }
    for name, kw in checkpoints.items():
        d = os.path.join(corpus_dir, "load", name)
        write_random_checkpoint(d, seed=len(name), **kw)
    shutil.copy(
        os.path.join(shipped, "generation_config.json"),
        os.path.join(corpus_dir, "load", "llama_f32", "generation_config.json"),
    )
    with open(os.path.join(corpus_dir, "load", "qwen2_f16_bias", "generation_config.json"), "w") as f:
        json.dump(
            {
                "do_sample": True,
                "temperature": 0.7,
                "top_p": 0.9,
                "top_k": 5,
                "eos_token_id": [2, 3],
                "num_assistant_tokens": 4,
                "num_assistant_tokens_schedule": "heuristic",
            },
            f,
            indent=2,
        )

    # safetensors: every dtype, metadata, an empty tensor, a scalar, unaligned offsets
    rng = np.random.default_rng(0)
    st = os.path.join(corpus_dir, "safetensors")
    os.makedirs(os.path.join(st, "all_dtypes"))
    from habana_assist.checkpoints.safetensors import DTYPES, to_bfloat16_bits

    tensors = {}
    for i, (dname, dt) in enumerate(DTYPES.items()):
        a = (
            (rng.standard_normal((2, 3)) * 10).astype(dt)
            if dname != "BF16"
            else to_bfloat16_bits(rng.standard_normal((2, 3)))
        )
        tensors[f"t{i}.{dname.lower()}"] = (a, dname)
    tensors["scalar"] = np.array(1.5, dtype=np.float32)
    tensors["empty"] = np.zeros((0, 4), dtype=np.float32)
    save_file(tensors, os.path.join(st, "all_dtypes", "model.safetensors"), metadata={"format": "pt", "k": "v"})
    os.makedirs(os.path.join(st, "unaligned"))
    save_file(
        {
            "a": np.arange(3, dtype=np.uint8),
            "b": np.arange(5, dtype=np.float32),
            "c": (to_bfloat16_bits(np.arange(3)), "BF16"),
        },
        os.path.join(st, "unaligned", "model.safetensors"),
    )
    os.makedirs(os.path.join(st, "llama_f32"))
    shutil.copy(
        os.path.join(corpus_dir, "load", "llama_f32", "model.safetensors"),
        os.path.join(st, "llama_f32", "model.safetensors"),
    )

    # sharded: the load corpus's llama written in 3 shards (config.json is not read by checkpoint_files)
    d = os.path.join(corpus_dir, "sharded", "llama_3_shards")
    write_random_checkpoint(d, seed=1, shards=3, **small)
    os.remove(os.path.join(d, "config.json"))

    for name in checkpoints:
        d = os.path.join(corpus_dir, "config", name)
        os.makedirs(d)
        shutil.copy(os.path.join(corpus_dir, "load", name, "config.json"), os.path.join(d, "config.json"))
    copy_shipped(os.path.join(corpus_dir, "config", "shipped"), "config.json")
    make_config_family_corpus(corpus_dir)

    copy_shipped(os.path.join(corpus_dir, "generation_config", "shipped"), "generation_config.json")
    d = os.path.join(corpus_dir, "generation_config", "sampling")
    os.makedirs(d)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(
            {
                "do_sample": True,
                "temperature": 0.7,
                "top_p": 0.9,
                "top_k": 5,
                "eos_token_id": [2, 3],
                "pad_token_id": 0,
                "seed": 7,
                "max_length": 64,
                "min_new_tokens": 2,
                "repetition_penalty": 1.1,
                "num_assistant_tokens": 4,
                "num_assistant_tokens_schedule": "heuristic",
                "assistant_confidence_threshold": 0.3,
                "prompt_lookup_num_tokens": 3,
                "max_matching_ngram_size": 2,
                "assisted_sampling": "coupled",
                "transformers_version": "4.45.0",
            },
            f,
            indent=2,
        )

    copy_shipped(
        os.path.join(corpus_dir, "tokenizer", "shipped"),
        "tokenizer.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
    )
    text = open(os.path.join(os.path.dirname(json.__file__), "..", "textwrap.py")).read().splitlines()
    for model_type, vocab, extra in (
        ("unigram", 300, {}),
        ("bpe", 400, {"byte_fallback": True}),
        ("char", 100, {}),
        ("word", 200, {}),
    ):
        d = os.path.join(corpus_dir, "tokenizer", model_type)
        os.makedirs(d)
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(text),
            model_prefix=os.path.join(d, "tokenizer"),
            vocab_size=vocab,
            model_type=model_type,
            pad_id=3,
            hard_vocab_limit=False,
            minloglevel=2,
            normalization_rule_name="identity",
            **extra,
        )
        os.remove(os.path.join(d, "tokenizer.vocab"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(
                {
                    "bos_token": {"content": "<s>", "lstrip": False},
                    "eos_token": "</s>",
                    "unk_token": "<unk>",
                    "add_bos_token": model_type != "word",
                    "add_eos_token": model_type == "char",
                    "padding_side": "right",
                    "truncation_side": "left",
                    "model_max_length": 64,
                },
                f,
                indent=2,
            )
        if model_type in ("unigram", "bpe"):
            with open(os.path.join(d, "special_tokens_map.json"), "w") as f:
                json.dump({"pad_token": "<pad>", "additional_special_tokens": []}, f, indent=2)
    make_tokenizer_json_corpus(corpus_dir)


# ---- config.json seeds of the other families (miniatures of their hub configs) ----------------------------------


def family_config_seeds():
    """{seed name: {"config.json": bytes}}: one small config.json per family beyond the load corpus's Llama,
    Mistral and Qwen2, with the keys their hub checkpoints carry (Qwen2.5 with a sliding window, Qwen3, Phi-4-mini's
    partial rotary and longrope, Gemma 2's softcaps, Gemma 3 in both Transformers 4 and 5 layouts, SmolLM3's
    NoPE layers, the original GPT-2)."""
    shape = {
        "vocab_size": 32,
        "hidden_size": 16,
        "intermediate_size": 24,
        "num_hidden_layers": 4,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 64,
    }
    gemma = {
        **shape,
        "head_dim": 8,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": 8,
        "rms_norm_eps": 1e-6,
        "sliding_window": 4,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 1,
    }
    configs = {
        "qwen2_sliding": {
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            **shape,
            "use_sliding_window": True,
            "sliding_window": 8,
            "max_window_layers": 2,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
        },
        "qwen3": {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            **shape,
            "head_dim": 16,
            "attention_bias": False,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": 4,
            "layer_types": ["full_attention"] * 4,
            "tie_word_embeddings": True,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        "phi3_longrope": {
            "architectures": ["Phi3ForCausalLM"],
            "model_type": "phi3",
            **shape,
            "max_position_embeddings": 256,
            "original_max_position_embeddings": 32,
            "partial_rotary_factor": 0.75,
            "rope_theta": 10000.0,
            "sliding_window": 128,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.01, 1.02], "long_factor": [1.0, 2.5, 6.0]},
            "hidden_act": "silu",
            "rms_norm_eps": 1e-5,
            "bos_token_id": 1,
            "eos_token_id": [2, 3],
            "pad_token_id": 0,
            "tie_word_embeddings": True,
        },
        "gemma2": {
            "architectures": ["Gemma2ForCausalLM"],
            "model_type": "gemma2",
            **gemma,
            "hidden_act": "gelu_pytorch_tanh",
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            "rope_theta": 10000.0,
            "cache_implementation": "hybrid",
        },
        "gemma3_text": {
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            **gemma,
            "rope_theta": 1000000.0,
            "rope_local_base_freq": 10000.0,
            "sliding_window_pattern": 2,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0},
            "attn_logit_softcapping": None,
            "final_logit_softcapping": None,
            "layer_types": ["sliding_attention", "full_attention"] * 2,
        },
        "gemma3_text_v5": {
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            **gemma,
            "rope_parameters": {
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
            "dtype": "bfloat16",
        },
        "smollm3": {
            "architectures": ["SmolLM3ForCausalLM"],
            "model_type": "smollm3",
            **shape,
            "no_rope_layers": [1, 1, 1, 0],
            "no_rope_layer_interval": 4,
            "use_sliding_window": False,
            "sliding_window": None,
            "rope_theta": 5000000.0,
            "pad_token_id": 0,
            "bos_token_id": None,
            "eos_token_id": 2,
            "tie_word_embeddings": True,
        },
        "gpt2": {
            "architectures": ["GPT2LMHeadModel"],
            "model_type": "gpt2",
            "vocab_size": 32,
            "n_embd": 16,
            "n_layer": 2,
            "n_head": 2,
            "n_positions": 64,
            "n_ctx": 64,
            "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5,
            "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": True,
            "reorder_and_upcast_attn": False,
            "bos_token_id": 30,
            "eos_token_id": 31,
            "resid_pdrop": 0.1,
        },
    }
    return {
        f"family_{name}": {"config.json": (json.dumps(config, indent=2) + "\n").encode()}
        for name, config in configs.items()
    }


def make_config_family_corpus(corpus_dir=CORPUS_DIR):
    """Write corpus/config/family_*/ (only): built from code alone, so rewriting it is reproducible."""
    root = os.path.join(corpus_dir, "config")
    for name in os.listdir(root) if os.path.isdir(root) else ():
        if name.startswith("family_"):
            shutil.rmtree(os.path.join(root, name))
    for name, files in family_config_seeds().items():
        write_input_dir(os.path.join(root, name), files)


# ---- tokenizer.json seeds (small hand-built checkpoints in the real formats of Llama 3, Llama 2, Gemma, Qwen) ----


def _byte_chars():
    """GPT-2's byte -> printable character table (byte-level BPE's alphabet), written here from its rule so the
    seeds do not take it from the code under test: printable Latin-1 bytes stand for themselves, the other 68
    for chr(256 + their rank)."""
    keep = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    out, extra = [], 0
    for b in range(256):
        out.append(chr(b) if b in keep else chr(256 + extra))
        extra += b not in keep
    return out


def _bpe(vocab, merges, pair_form=False, **model):
    """-> a BPE model object: vocab (list of tokens, ids in order) grown by the merges' results."""
    table = {t: i for i, t in enumerate(vocab)}
    for a, b in merges:
        table.setdefault(a + b, len(table))
    return dict(
        {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
        },
        **model,
        vocab=table,
        merges=[[a, b] if pair_form else f"{a} {b}" for a, b in merges],
    )


def _added(start, *specs):
    """-> tokenizer.json added_tokens from (content, special, {flags}) specs, ids from start."""
    return [
        {
            "id": start + i,
            "content": c,
            "single_word": f.get("single_word", False),
            "lstrip": f.get("lstrip", False),
            "rstrip": f.get("rstrip", False),
            "normalized": f.get("normalized", not special),
            "special": special,
        }
        for i, (c, special, f) in enumerate(specs)
    ]


def _decoder_table(added):
    """tokenizer_config.json's added_tokens_decoder for tokenizer.json's added tokens."""
    return {
        str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
        for t in added
    }


def _template(single, pair, specials):
    """TemplateProcessing: single/pair are lists of "$A" / "$B" / special token strings (type id 1 after $B)."""

    def items(seq):
        out, type_id = [], 0
        for s in seq:
            type_id = 1 if s == "$B" else type_id
            out.append(
                {"Sequence": {"id": s[1], "type_id": type_id}}
                if s.startswith("$")
                else {"SpecialToken": {"id": s, "type_id": type_id}}
            )
        return out

    return {
        "type": "TemplateProcessing",
        "single": items(single),
        "pair": items(pair),
        "special_tokens": {s: {"id": s, "ids": [i], "tokens": [s]} for s, i in specials.items()},
    }


_SPLIT_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
_CHAT_LLAMA3 = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
_CHAT_LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system = false %}"
    "{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 "
    "== 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system != false %}{% set content = '<<SYS>>\\n' + system + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)
_CHAT_GEMMA = (
    "{{ bos_token }}{% for message in messages %}{% set role = 'model' if message['role'] == 'assistant' "
    "else message['role'] %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
    "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}"
    "{% endif %}"
)
_CHAT_TOOLS = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}{{ 'tools:' + (tools | length | string) }}"
)
_CHAT_QWEN = (
    "{%- if tools %}{{- '<|im_start|>system\\n# Tools\\n' }}{%- for tool in tools %}{{- '\\n' }}"
    "{{- tool | tojson }}{%- endfor %}{{- '<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and "
    "enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}\n"
)


def tokenizer_json_seeds():
    """-> {seed name: {file name: bytes}}: four tiny tokenizer.json checkpoints, a few KB each, in the formats of
    real ones (tests/data/npm's Llama 3, Llama 2, Gemma 3 and Qwen3 files are the models) with every component
    kind the package reads: byte-level BPE (Split + ByteLevel, ignore_merges, merges as strings or pairs),
    byte-fallback BPE (Prepend + Replace normalizers, TemplateProcessing, a Sequence decoder with ByteFallback,
    Fuse and Strip), Metaspace with Digits, NFKC/NFC, added tokens with lstrip/rstrip/single_word, chat
    templates as a string, as named templates and as chat_template.jinja, tokenizer.json padding/truncation."""
    chars = _byte_chars()
    g = chars[ord(" ")]  # the byte-level space, "Ġ"
    seeds = {}

    # Llama 3 style: byte-level BPE, Split regex + ByteLevel, a Sequence post-processor adding bos.
    merges = [
        (g, "t"),
        ("h", "e"),
        (g + "t", "he"),
        ("a", "t"),
        (g, "c"),
        (g + "c", "at"),
        ("i", "n"),
        ("o", "n"),
        (g, "s"),
        (g + "s", "at"),
        ("1", "2"),
        ("12", "3"),
        (g, g),
        ("e", "r"),
    ]
    model = _bpe(chars, merges, ignore_merges=True)
    added = _added(
        len(model["vocab"]),
        ("<|begin_of_text|>", True, {}),
        ("<|end_of_text|>", True, {}),
        ("<|start_header_id|>", True, {}),
        ("<|end_header_id|>", True, {}),
        ("<|eot_id|>", True, {}),
        ("<mask>", True, {"lstrip": True}),
        ("[tool]", False, {"rstrip": True, "normalized": False}),
        ("cat", False, {"single_word": True}),
    )
    bos_id = added[0]["id"]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": _SPLIT_LLAMA3}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
            ],
        },
        "post_processor": {
            "type": "Sequence",
            "processors": [
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                _template(
                    ["<|begin_of_text|>", "$A"],
                    ["<|begin_of_text|>", "$A", "<|begin_of_text|>", "$B"],
                    {"<|begin_of_text|>": bos_id},
                ),
            ],
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": model,
    }
    config = {
        "added_tokens_decoder": _decoder_table(added),
        "bos_token": "<|begin_of_text|>",
        "chat_template": _CHAT_LLAMA3,
        "clean_up_tokenization_spaces": True,
        "eos_token": "<|eot_id|>",
        "pad_token": "<|end_of_text|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    seeds["byte_level_bpe"] = {"tokenizer.json": doc, "tokenizer_config.json": config}

    # Llama 2 style: byte-fallback BPE on "▁"-marked text, no pre-tokenizer, TemplateProcessing, a Sequence decoder.
    sp = "\u2581"
    base = (
        ["<unk>", "<s>", "</s>"]
        + [f"<0x{b:02X}>" for b in range(256)]
        + [sp]
        + list("abcdefghijklmnopqrstuvwxyzTH0123456789.,!?'\u00e9")
    )
    merges = [
        (sp, "t"),
        ("h", "e"),
        (sp + "t", "he"),
        ("a", "t"),
        (sp, "c"),
        (sp + "c", "at"),
        ("i", "n"),
        (sp, "s"),
        (sp + "s", "at"),
        (sp, sp),
        ("e", "r"),
        (sp, "T"),
        (sp + "T", "he"),
    ]
    model = _bpe(base, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    added = _added(0, ("<unk>", True, {}), ("<s>", True, {}), ("</s>", True, {}))
    added += _added(
        len(model["vocab"]),
        ("[INST]", False, {"lstrip": True, "rstrip": True}),
        ("<<SYS>>", False, {"single_word": True, "normalized": True}),
    )
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": sp},
                {"type": "Replace", "pattern": {"String": " "}, "content": sp},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": _template(["<s>", "$A"], ["<s>", "$A", "<s>", "$B"], {"<s>": 1}),
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": sp}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": model,
    }
    config = {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": _decoder_table(added[:3]),
        "bos_token": {
            "__type": "AddedToken",
            "content": "<s>",
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
        },
        "chat_template": _CHAT_LLAMA2,
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "legacy": True,
        "model_max_length": 4096,
        "pad_token": "<unk>",
        "padding_side": "left",
        "sp_model_kwargs": {},
        "spaces_between_special_tokens": False,
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
        "use_default_system_prompt": False,
    }
    seeds["byte_fallback_bpe"] = {"tokenizer.json": doc, "tokenizer_config.json": config}

    # Gemma / Mistral style: NFKC, Metaspace (prepend_scheme first) + Digits, eos added by the template, named
    # chat templates, tokenizer.json's own padding and truncation.
    base = (
        ["<pad>", "<eos>", "<bos>", "<unk>"]
        + [f"<0x{b:02X}>" for b in range(256)]
        + [sp]
        + list("abcdefghijklmnopqrstuvwxyz0123456789.,:!?")
    )
    merges = [
        (sp, "t"),
        ("h", "e"),
        (sp + "t", "he"),
        (sp, "w"),
        ("o", "r"),
        (sp + "w", "or"),
        ("l", "d"),
        (sp + "wor", "ld"),
        (sp, "h"),
        ("e", "l"),
        (sp + "h", "el"),
    ]
    model = _bpe(base, merges, pair_form=True, unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    added = _added(0, ("<pad>", True, {}), ("<eos>", True, {}), ("<bos>", True, {}), ("<unk>", True, {}))
    added += _added(
        len(model["vocab"]),
        ("<start_of_turn>", True, {}),
        ("<end_of_turn>", True, {}),
        ("<mask>", True, {"lstrip": True, "rstrip": True}),
        ("hello", False, {"single_word": True, "normalized": True}),
    )
    doc = {
        "version": "1.0",
        "truncation": {"direction": "Left", "max_length": 64, "strategy": "LongestFirst", "stride": 0},
        "padding": {
            "strategy": "BatchLongest",
            "direction": "Left",
            "pad_to_multiple_of": None,
            "pad_id": 0,
            "pad_type_id": 0,
            "pad_token": "<pad>",
        },
        "added_tokens": added,
        "normalizer": {"type": "NFKC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "Metaspace", "replacement": sp, "prepend_scheme": "first", "split": True},
            ],
        },
        "post_processor": _template(
            ["<bos>", "$A", "<eos>"], ["<bos>", "$A", "<eos>", "$B", "<eos>"], {"<bos>": 2, "<eos>": 1}
        ),
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Metaspace", "replacement": sp, "prepend_scheme": "first", "split": True},
            ],
        },
        "model": model,
    }
    config = {
        "added_tokens_decoder": _decoder_table(added),
        "bos_token": "<bos>",
        "eos_token": "<end_of_turn>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "additional_special_tokens": ["<start_of_turn>"],
        "chat_template": [{"name": "default", "template": _CHAT_GEMMA}, {"name": "tool_use", "template": _CHAT_TOOLS}],
        "model_max_length": 32768,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    seeds["metaspace_digits"] = {"tokenizer.json": doc, "tokenizer_config.json": config}

    # Qwen style: NFC, Split + ByteLevel, merges as pairs, a ByteLevel post-processor (no bos), the template in
    # chat_template.jinja, a special_tokens_map.json.
    merges = [
        (g, "t"),
        ("h", "e"),
        (g + "t", "he"),
        ("i", "n"),
        (g, "w"),
        ("o", "r"),
        ("l", "d"),
        (g + "w", "or"),
        (g + "wor", "ld"),
        ("\u00c3", "\u00a9"),
    ]
    model = _bpe(chars, merges, pair_form=True, continuing_subword_prefix="", end_of_word_suffix="")
    added = _added(
        len(model["vocab"]),
        ("<|endoftext|>", True, {}),
        ("<|im_start|>", True, {}),
        ("<|im_end|>", True, {}),
        ("<think>", False, {}),
        ("</think>", False, {}),
    )
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": _SPLIT_LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": model,
    }
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": _decoder_table(added),
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    special = {
        "eos_token": {
            "content": "<|im_end|>",
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
        },
        "pad_token": "<|endoftext|>",
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
    }
    seeds["qwen_byte_level"] = {
        "tokenizer.json": doc,
        "tokenizer_config.json": config,
        "special_tokens_map.json": special,
        "chat_template.jinja": _CHAT_QWEN,
    }
    return {
        name: {
            f: (v.encode() if isinstance(v, str) else (json.dumps(v, indent=2, ensure_ascii=False) + "\n").encode())
            for f, v in files.items()
        }
        for name, files in seeds.items()
    }


def make_tokenizer_json_corpus(corpus_dir=CORPUS_DIR):
    """Write corpus/tokenizer_json/ (only): it is built from code alone, so rewriting it is reproducible."""
    root = os.path.join(corpus_dir, "tokenizer_json")
    if os.path.isdir(root):
        shutil.rmtree(root)
    for name, files in tokenizer_json_seeds().items():
        write_input_dir(os.path.join(root, name), files)


# ---- mutations ------------------------------------------------------------------------------------------------

INTERESTING_INTS = (
    0,
    1,
    -1,
    2,
    3,
    7,
    8,
    16,
    255,
    256,
    4096,
    65535,
    65536,
    2**31 - 1,
    2**31,
    -(2**31),
    2**32,
    2**53 + 1,
    2**62,
    2**63 - 1,
    2**63,
    -(2**63),
    2**64 - 1,
    2**64,
    2**70,
    -(2**70),
    10**30,
    10**400,
)
INTERESTING_FLOATS = (
    0.0,
    -0.0,
    0.5,
    1.5,
    -1.5,
    1e-45,
    1e-320,
    1e308,
    -1e308,
    2.0**63,
    1e30,
    float("inf"),
    float("-inf"),
    float("nan"),
)
INTERESTING_STRINGS = (
    "",
    "F32",
    "BF16",
    "F16",
    "F64",
    "I64",
    "I8",
    "U8",
    "BOOL",
    "F8_E4M3",
    "f32",
    "float32",
    "bfloat16",
    "int8",
    "silu",
    "gelu",
    "llama3",
    "linear",
    "dynamic",
    "default",
    "left",
    "right",
    "middle",
    "<s>",
    "</s>",
    "<unk>",
    "<pad>",
    "\u2581",
    "\x00",
    "\ud800",
    "\u00e9",
    "x" * 3000,
    "../outside.safetensors",
    "/etc/hostname",
    "model.safetensors",
    "model.safetensors.index.json",
    "config.json",
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "MistralForCausalLM",
    "GPT2LMHeadModel",
    "llama",
    "qwen2",
    "mistral",
    "heuristic",
    "coupled",
    "rejection",
    "constant",
    "1e400",
    "NaN",
    "true",
    "null",
    "0",
    "gelu_pytorch_tanh",
    "gelu_new",
    "relu",
    "longrope",
    "su",
    "sliding_attention",
    "full_attention",
    "chunked_attention",
    "gemma2",
    "gemma3_text",
    "gpt2",
    "phi3",
    "qwen3",
    "smollm3",
    "qwen3_moe",
    "Gemma3ForCausalLM",
    "Phi3ForCausalLM",
    "Qwen3ForCausalLM",
)
FLOAT32_VALUES = (0.0, -0.0, 0.5, -1.5, 1e-45, 3.4e38, -3.4e38, float("inf"), float("-inf"), float("nan"))
# Keys worth adding: the fields the parsers read, and names that collide with attributes and methods.
INTERESTING_KEYS = (
    "dtype",
    "shape",
    "data_offsets",
    "__metadata__",
    "weight_map",
    "metadata",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_act",
    "rms_norm_eps",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "rope_type",
    "type",
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "sliding_window",
    "use_sliding_window",
    "max_position_embeddings",
    "partial_rotary_factor",
    "architectures",
    "model_type",
    "torch_dtype",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "max_new_tokens",
    "max_length",
    "min_length",
    "min_new_tokens",
    "do_sample",
    "num_beams",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
    "seed",
    "output_scores",
    "return_dict_in_generate",
    "num_assistant_tokens",
    "num_assistant_tokens_schedule",
    "assistant_confidence_threshold",
    "prompt_lookup_num_tokens",
    "max_matching_ngram_size",
    "assisted_sampling",
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "add_bos_token",
    "add_eos_token",
    "padding_side",
    "truncation_side",
    "model_max_length",
    "content",
    "__class__",
    "__dict__",
    "__init__",
    "to_dict",
    "validate",
    "update",
    "eos_token_ids",
    "_validate",
    "from_dict",
    "family",
    "rope_type",
    "qkv_bias",
    "rope_inv_freq",
    "__eq__",
    "__repr__",
    "sp",
    "encode",
    "decode",
    "vocab_size",
    "",
    "n_embd",
    "n_layer",
    "n_head",
    "n_positions",
    "n_inner",
    "activation_function",
    "hidden_activation",
    "layer_types",
    "sliding_window_pattern",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "rope_local_base_freq",
    "no_rope_layers",
    "no_rope_layer_interval",
    "max_window_layers",
    "short_factor",
    "long_factor",
    "attention_factor",
    "num_experts",
    "use_bidirectional_attention",
    "scale_attn_by_inverse_layer_idx",
    "scale_attn_weights",
    "full_attention",
    "sliding_attention",
    "core_config",
    "layer_settings",
)
# Text values spliced in after serialization (json.dumps cannot write them): deep nesting, huge literals.
RAW_VALUES = (
    "[" * 100000 + "]" * 100000,
    "[" * 400 + "]" * 400,
    "[" * 900 + "]" * 900,
    '{"a":' * 50000 + "1" + "}" * 50000,
    "1" * 5000,
    "-" + "9" * 4400,
    "1e999999",
    "-1e400",
    "0.0000000000000000000000000000001e-400",
    "Infinity",
    "-Infinity",
    "NaN",
    "123456789012345678901234567890",
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\\u0000"',
    "1.5e308",
    "[1,2",
    '"unterminated',
    "tru",
    "01",
    "0x10",
    "+1",
    ".5",
)
_RAW = "\u0001RAW{}\u0001"


def _value(rng):
    kind = rng.randrange(9)
    if kind < 2:
        return rng.choice(INTERESTING_INTS)
    if kind == 2:
        return rng.choice(INTERESTING_FLOATS)
    if kind == 3:
        return rng.choice(INTERESTING_STRINGS)
    if kind == 4:
        return rng.choice((None, True, False, [], {}, [[]], {"": None}))
    if kind == 5:
        return [rng.choice(INTERESTING_INTS) for _ in range(rng.randrange(5))]
    if kind == 6:
        return {rng.choice(INTERESTING_KEYS): rng.choice(INTERESTING_INTS + INTERESTING_STRINGS)}
    if kind == 7:
        return _RAW.format(rng.randrange(len(RAW_VALUES)))
    return rng.randrange(-1000, 100000)


def _nodes(obj, path=()):
    """-> every (path, value) of a parsed JSON document, the root included."""
    out = [(path, obj)]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _nodes(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _nodes(v, path + (i,))
    return out


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def _nearby_number(rng, v):
    """A value near v, or at a boundary of v's type: the off-by-one and overflow cases."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return rng.choice(INTERESTING_INTS)
    choices = [
        lambda: v + 1,
        lambda: v - 1,
        lambda: -v,
        lambda: v * 2,
        lambda: v * 1000003,
        lambda: v + 2**32,
        lambda: v + 2**63,
        lambda: v - 2**64,
        lambda: float(v),
        lambda: str(v),
        lambda: [v],
        lambda: v / 3,
        lambda: int(v),
        lambda: v * 1e300,
    ]
    try:
        return rng.choice(choices)()
    except (OverflowError, ValueError):  # 10**400 as a float, inf or nan as an int
        return v


def mutate_json_value(rng, doc):
    """One structural mutation of a parsed JSON document -> the new document (may be the same object)."""
    nodes = _nodes(doc)
    path, value = rng.choice(nodes)
    op = rng.randrange(10)
    if op <= 2 or not path:
        new = _value(rng) if op != 2 else _nearby_number(rng, value)
        if not path:
            return new if rng.random() < 0.2 else doc
        _get(doc, path[:-1])[path[-1]] = new
    elif op == 3 and isinstance(value, dict):  # add a key
        value[rng.choice(INTERESTING_KEYS)] = _value(rng)
    elif op == 4 and isinstance(value, dict) and value:  # delete a key
        del value[rng.choice(list(value))]
    elif op == 5 and isinstance(value, dict) and value:  # rename a key
        k = rng.choice(list(value))
        value[rng.choice(INTERESTING_KEYS + (k + "x", k.upper()))] = value.pop(k)
    elif op == 6 and isinstance(value, list):  # grow, shrink or reorder a list
        r = rng.randrange(3)
        if r == 0:
            value.insert(
                rng.randrange(len(value) + 1), rng.choice(value) if value and rng.random() < 0.5 else _value(rng)
            )
        elif r == 1 and value:
            del value[rng.randrange(len(value))]
        else:
            rng.shuffle(value)
    elif op == 7:  # copy another node's value here (e.g. one tensor's offsets onto another's)
        _, other = rng.choice(nodes)
        _get(doc, path[:-1])[path[-1]] = json.loads(json.dumps(other))
    elif op == 8:  # wrap
        _get(doc, path[:-1])[path[-1]] = rng.choice(([value], {"content": value}, {"value": value}))
    else:
        _get(doc, path[:-1])[path[-1]] = _nearby_number(rng, value)
    return doc


def dump_json(rng, doc):
    """json.dumps with raw-text placeholders filled in, sometimes a duplicated key, sometimes no indent."""
    text = json.dumps(doc, indent=rng.choice((None, 2)), allow_nan=True)
    for i, raw in enumerate(RAW_VALUES):
        text = text.replace(json.dumps(_RAW.format(i)), raw)
    if rng.random() < 0.05 and isinstance(doc, dict) and doc:  # a duplicate key, which json.dumps cannot write
        k = rng.choice(list(doc))
        text = text.replace("{", "{" + json.dumps(k) + ": " + json.dumps(_value(rng)) + ", ", 1)
    return text.encode("utf-8", "surrogatepass")


def mutate_bytes(rng, data, others):
    """One byte-level mutation: flips, interesting bytes and integers, inserts, deletes, copies, splices."""
    b = bytearray(data)
    op = rng.randrange(9)
    pos = rng.randrange(len(b) + 1)
    if op == 0 and b:
        for _ in range(rng.choice((1, 1, 2, 8))):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif op == 1 and b:
        b[min(pos, len(b) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, 0x22, 0x5C, 0x7B, 0x5B, 0x30, 0xC0, 0xED))
    elif op == 2:
        width, fmt = rng.choice(((8, "<Q"), (8, "<q"), (4, "<I"), (4, "<f"), (2, "<H"), (1, "<B")))
        v = rng.choice(INTERESTING_INTS) if fmt != "<f" else rng.choice(INTERESTING_FLOATS)
        try:
            packed = struct.pack(fmt, v)
        except (struct.error, OverflowError):
            packed = bytes(rng.randrange(256) for _ in range(width))
        b[pos : pos + width] = packed
    elif op == 3:
        b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 2, 4, 8, 64))))
    elif op == 4:
        del b[pos : pos + rng.choice((1, 2, 4, 8, 64, 1024))]
    elif op == 5 and b:
        i = rng.randrange(len(b))
        chunk = b[i : i + rng.choice((1, 4, 16, 256))]
        b[pos:pos] = chunk
    elif op == 6 and others:  # splice: our head, another file's tail
        other = rng.choice(others)
        b = b[:pos] + other[rng.randrange(len(other) + 1) :]
    elif op == 7:
        b = b[:pos]  # truncate
    else:
        b[pos:pos] = b"\x00" * rng.choice((1, 7, 8, 4096))
    return bytes(b)


def mutate_safetensors(rng, data):
    """Edit the header as JSON (entries' dtype, shape, offsets) and rewrite the length field; the data section
    is kept, cut or extended."""
    try:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
        body = data[8 + n :]
    except (ValueError, RecursionError):
        return None
    if not isinstance(header, dict):  # an earlier step made it another JSON value
        return None
    names = [k for k in header if k != "__metadata__" and isinstance(header[k], dict)]
    op = rng.randrange(6)
    if op == 0 and names:  # offsets: swapped, shifted, another tensor's, past the end, huge
        e = header[rng.choice(names)]
        offsets = e.get("data_offsets")
        b, end = offsets[:2] if isinstance(offsets, list) and len(offsets) >= 2 else (0, 0)
        b, end = (b, end) if all(isinstance(o, int) for o in (b, end)) else (0, 0)
        other = header[rng.choice(names)].get("data_offsets")
        e["data_offsets"] = rng.choice(
            (
                [end, b],
                [b + 1, end + 1],
                [b, end + 2],
                other,
                [b, len(body) + 8],
                [0, 2**64],
                [2**63, 2**63 + (end - b)],
                [b - 2**64, end],
                [b, end, end],
                [b],
                [float(b), end],
                [str(b), end],
            )
        )
    elif op == 1 and names:  # shapes: huge with a zero, many dims, negative, float, off by one
        e = header[rng.choice(names)]
        shape = e.get("shape") if isinstance(e.get("shape"), list) else []
        e["shape"] = rng.choice(
            (
                [2**60],
                [2**62, 0],
                [0, 2**64],
                [2**32, 2**32],
                [1] * 40,
                [0] * 70,
                [-1],
                [-2, -3],
                shape + [1],
                shape[1:],
                shape[::-1],
                [1.0] * len(shape),
                [d + 1 for d in shape if isinstance(d, int)],
                [2**63] * 2 + [0],
            )
        )
    elif op == 2 and names:  # dtype: every name, a bad one, a non-string
        header[rng.choice(names)]["dtype"] = rng.choice(INTERESTING_STRINGS[:14] + (None, 4, ["F32"]))
    elif op == 3 and names:  # a tensor entry removed or duplicated under a new name
        k = rng.choice(names)
        if rng.random() < 0.5:
            del header[k]
        else:
            header[k + ".copy"] = json.loads(json.dumps(header[k]))
    else:
        header = mutate_json_value(rng, header)
    text = dump_json(rng, header)
    text += b" " * (-len(text) % 8) if rng.random() < 0.8 else b""
    length = (
        len(text)
        if rng.random() < 0.9
        else rng.choice((len(text) + 1, len(text) - 1, 0, 2**63, 2**64 - 1, 100_000_001, len(text) + len(body)))
    )
    r = rng.random()
    body = body if r < 0.8 else body[: rng.randrange(len(body) + 1)] if r < 0.9 else body + b"\x00" * 8
    return (length % 2**64).to_bytes(8, "little") + text + body


# ---- protobuf (tokenizer.model is a sentencepiece ModelProto; python3-protobuf is not needed) ---------------


def _varint(data, i):
    v, shift = 0, 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        c = data[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def _enc_varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def parse_proto(data):
    """bytes -> [(field number, wire type, value)]: varints as int, fixed as bytes, length-delimited as bytes."""
    fields, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(data, i)
        elif wire == 1:
            v, i = data[i : i + 8], i + 8
        elif wire == 2:
            n, i = _varint(data, i)
            v, i = data[i : i + n], i + n
        elif wire == 5:
            v, i = data[i : i + 4], i + 4
        else:
            raise ValueError("bad wire type")
        if i > len(data):
            raise ValueError("truncated")
        fields.append((number, wire, v))
    return fields


def encode_proto(fields):
    out = bytearray()
    for number, wire, v in fields:
        out += _enc_varint(number << 3 | wire)
        if wire == 0:
            out += _enc_varint(v)
        elif wire == 2:
            out += _enc_varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def mutate_proto(rng, data, depth=0):
    """One mutation of a field somewhere in the message tree: a varint or float at a boundary, a string
    replaced, a field deleted, duplicated or moved; nested messages (pieces, trainer and normalizer specs)
    are entered."""
    try:
        fields = parse_proto(data)
    except ValueError:
        return None
    if not fields:
        return None
    k = rng.randrange(len(fields))
    number, wire, v = fields[k]
    op = rng.randrange(8)
    if wire == 2 and depth < 3 and op < 4:
        inner = mutate_proto(rng, v, depth + 1)
        if inner is not None:
            fields[k] = (number, wire, inner)
            return encode_proto(fields)
    if op == 4:
        del fields[k]
    elif op == 5:
        fields.insert(rng.randrange(len(fields) + 1), fields[k])
    elif wire == 0:
        fields[k] = (number, wire, rng.choice(INTERESTING_INTS[:27] + (v + 1, v - 1 & (2**64 - 1))) % 2**64)
    elif wire == 5:
        fields[k] = (
            number,
            wire,
            struct.pack("<f", rng.choice(FLOAT32_VALUES))
            if rng.random() < 0.7
            else struct.pack("<I", rng.choice((0, 2**32 - 1, 2**31))),
        )
    elif wire == 2:
        fields[k] = (
            number,
            wire,
            rng.choice(
                (
                    b"",
                    b"\xff\xfe",
                    "\u2581".encode(),
                    b"<s>",
                    b"<unk>",
                    b"\x00",
                    b"a" * 1000,
                    v + v,
                    v[: len(v) // 2],
                    "\u00e9".encode()[:1],
                )
            ),
        )
    else:
        fields[k] = (number, rng.choice((0, 1, 2, 5)), v)
    return encode_proto(fields)


# ---- tokenizer.json and chat template mutations -----------------------------------------------------------------

# Values worth putting into a pipeline component: the other components' type names, the enum strings of their
# fields, patterns (invalid, empty-matching, backtracking, lookaround) and token strings.
TOKENIZER_JSON_STRINGS = (
    "BPE",
    "WordPiece",
    "Unigram",
    "ByteLevel",
    "Metaspace",
    "Split",
    "Sequence",
    "Digits",
    "Whitespace",
    "WhitespaceSplit",
    "Punctuation",
    "TemplateProcessing",
    "RobertaProcessing",
    "BertProcessing",
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
    "Lowercase",
    "Strip",
    "StripAccents",
    "Replace",
    "Prepend",
    "ByteFallback",
    "Fuse",
    "Precompiled",
    "Isolated",
    "Removed",
    "MergedWithPrevious",
    "MergedWithNext",
    "Contiguous",
    "first",
    "always",
    "never",
    "Left",
    "Right",
    "LongestFirst",
    "BatchLongest",
    "$A",
    "$B",
    "$C",
    "A",
    "B",
    "",
    " ",
    "\u2581",
    "(",
    "[",
    "\\",
    "(?!",
    "a*",
    "(a*)*b",
    "(?<=a)",
    "\\p{L}+",
    "\\p{Xx}",
    "(?i:x)",
    "\\b",
    "^",
    "$",
    "\\s*",
    ".",
    "<0x41>",
    "<0xZZ>",
    "<0x100>",
    "<unk>",
    "<s>",
    "\ud800",
    "\x00",
    "\u00e9",
    "\U0001f600",
    "x" * 500,
)
COMPONENT_KEYS = (
    "model",
    "normalizer",
    "pre_tokenizer",
    "post_processor",
    "decoder",
    "added_tokens",
    "truncation",
    "padding",
)
# Pieces spliced into a chat template: syntax errors, undefined names and attributes, the globals Transformers
# offers, filters, loops, deep nesting, a sandbox escape attempt and a large (but bounded) output.
TEMPLATE_PIECES = (
    "{{",
    "}}",
    "{%",
    "%}",
    "{#",
    "{% endfor %}",
    "{% if %}",
    "{{ undefined_name.attr }}",
    "{{ messages[99] }}",
    "{{ messages[0]['content'] | tojson }}",
    "{{ raise_exception('fuzz') }}",
    "{{ strftime_now('%Y') }}",
    "{{ messages | tojson(indent=2) }}",
    "{% for m in messages %}{{ m }}{% endfor %}",
    "{{ bos_token * 1000 }}",
    "{% generation %}x{% endgeneration %}",
    "{{ ''.__class__.__mro__ }}",
    "{{ tools | length }}",
    "{% set x = namespace(a=1) %}{{ x.a }}",
    "{{ 1 / 0 }}",
    "{{ '%s' % 1 }}",
    "{{ range(3) | list }}",
    "{{ (messages | first).role | upper }}",
    "{% break %}",
    "{{ loop.index }}",
    "{{ " * 300 + "1" + " }}" * 300,
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
    "{{ 'x' | indent(4) }}",
    "{{ content[::-1] }}",
    "\ud800",
)


def mutate_component(rng, doc):
    """One mutation aimed at a pipeline component of a tokenizer.json document (its vocab and merges would
    otherwise draw nearly every plain JSON mutation): a node under a component replaced or edited as by
    mutate_json_value, or a string in it (a type name, a pattern) replaced by TOKENIZER_JSON_STRINGS."""
    keys = [k for k in COMPONENT_KEYS if k in doc]
    if not keys:
        return mutate_json_value(rng, doc)
    k = rng.choice(keys)
    sub = doc[k]
    if k == "model" and isinstance(sub, dict):  # its scalars only (vocab and merges are the plain mutations')
        sub = {key: v for key, v in sub.items() if key not in ("vocab", "merges")}
    strings = [p for p, v in _nodes(sub) if isinstance(v, str) and p]
    if strings and rng.random() < 0.4:
        path = rng.choice(strings)
        _get(sub, path[:-1])[path[-1]] = rng.choice(TOKENIZER_JSON_STRINGS)
    else:
        sub = mutate_json_value(rng, sub)
    if k == "model" and isinstance(doc[k], dict) and isinstance(sub, dict):
        doc[k] = {**{key: doc[k][key] for key in ("vocab", "merges") if key in doc[k]}, **sub}
    else:
        doc[k] = sub
    return doc


def mutate_template(rng, text):
    """A Jinja template's text with a TEMPLATE_PIECES piece inserted, or a span of it cut or repeated."""
    pos = rng.randrange(len(text) + 1)
    r = rng.random()
    if r < 0.6:
        return text[:pos] + rng.choice(TEMPLATE_PIECES) + text[pos:]
    end = min(len(text), pos + rng.choice((1, 2, 5, 20, 200)))
    return text[:pos] + text[end:] if r < 0.8 else text[:end] + text[pos:]


def _mutate_chat_template(rng, files):
    """-> (file name, new bytes) with the checkpoint's chat template mutated, or None: chat_template.jinja
    where present, else tokenizer_config.json's chat_template (a string or one named template)."""
    if "chat_template.jinja" in files:
        text = files["chat_template.jinja"].decode("utf-8", "surrogateescape")
        return "chat_template.jinja", mutate_template(rng, text).encode("utf-8", "surrogatepass")
    try:
        config = json.loads(files.get("tokenizer_config.json", b""))
    except (ValueError, RecursionError):
        return None
    if not isinstance(config, dict):
        return None
    value = config.get("chat_template")
    if isinstance(value, str):
        config["chat_template"] = mutate_template(rng, value)
    elif isinstance(value, list) and value and isinstance(value[0], dict) and isinstance(value[0].get("template"), str):
        entry = rng.choice([e for e in value if isinstance(e, dict) and isinstance(e.get("template"), str)])
        entry["template"] = mutate_template(rng, entry["template"])
    else:
        return None
    return "tokenizer_config.json", dump_json(rng, config)


def make_input(target, seed, iteration, seeds):
    """-> (seed name, {file name: bytes}, [mutation descriptions]) for input `iteration` of `target`."""
    rng = random.Random(f"{seed}:{target}:{iteration}")
    name, files = seeds[rng.randrange(len(seeds))]
    files = dict(files)
    steps = []
    others = [d for _, fs in seeds for d in fs.values()]
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        fname = rng.choice(sorted(files))
        data = files[fname]
        new, kind = None, "bytes"
        r = rng.random()
        if target == "tokenizer_json" and r < 0.15:  # the chat template, wherever the checkpoint keeps it
            changed = _mutate_chat_template(rng, files)
            if changed is not None:
                fname, new = changed
                kind = "template"
        elif target == "tokenizer_json" and fname == "tokenizer.json" and r < 0.5:
            try:
                doc = json.loads(data)
            except (ValueError, RecursionError):
                doc = None
            if isinstance(doc, dict):
                try:
                    new, kind = dump_json(rng, mutate_component(rng, doc)), "component"
                except RecursionError:
                    new = None
        elif fname.endswith(".json") and r < 0.75:
            try:
                doc = json.loads(data)
            except (ValueError, RecursionError):  # an earlier step broke it, or nested it too deep
                doc = None
            if doc is not None:
                try:
                    new, kind = dump_json(rng, mutate_json_value(rng, doc)), "json"
                except RecursionError:  # parsed near the depth limit, then wrapped deeper: bytes instead
                    new = None
        elif fname.endswith(".safetensors") and r < 0.6:
            new, kind = mutate_safetensors(rng, data), "header"
        elif fname.endswith(".model") and r < 0.6:
            new, kind = mutate_proto(rng, data), "proto"
        if new is None:
            same = [fs[fname] for _, fs in seeds if fname in fs] or others
            new, kind = mutate_bytes(rng, data, same), "bytes"
        files[fname] = new
        steps.append(f"{kind}:{fname}")
    if target == "tokenizer" and rng.random() < 0.05:  # an optional JSON file removed
        for f in ("tokenizer_config.json", "special_tokens_map.json"):
            files.pop(f, None)
    if target == "tokenizer_json" and rng.random() < 0.05:  # one optional file removed
        optional = sorted(set(files) - {"tokenizer.json"})
        if optional:
            f = rng.choice(optional)
            del files[f]
            steps.append(f"removed:{f}")
    return name, files, steps


# ---- targets (run in the worker) --------------------------------------------------------------------------------


def _touch(array):
    """Read every byte of a tensor (a memory map's pages included), costing no copy."""
    import numpy as np

    flat = array.reshape(-1).view(np.uint8) if array.size and array.flags.c_contiguous else array
    return int(flat.sum()) if flat.size else 0


def run_safetensors(d):
    from habana_assist.checkpoints.safetensors import read_metadata, read_safetensors

    path = os.path.join(d, "model.safetensors")
    tensors = read_safetensors(path)
    for array, dtype in tensors.values():
        assert not array.flags.writeable, "read_safetensors returned a writable array"
        _touch(array)
    read_metadata(path)
    return len(tensors)


def run_sharded(d):
    from habana_assist.checkpoints.safetensors import checkpoint_files

    tensors, origin = checkpoint_files(d)
    for array, _ in tensors.values():
        _touch(array)
    return len(tensors)


def run_config(d):
    from habana_assist.checkpoints.loading import expected_weights
    from habana_assist.checkpoints.saving import state_dict_names
    from habana_assist.configuration_utils import FLOAT_DTYPES, PretrainedConfig

    c = PretrainedConfig.from_pretrained(d)
    _ = (c.family, c.rope_type, c.qkv_bias, c.o_bias, c.mlp_biases, c.qk_norm, c.activation, repr(c))
    assert PretrainedConfig.from_dict(c.to_dict()) == c, "from_dict(to_dict()) differs"
    for dtype in FLOAT_DTYPES:  # what the model is built from: the core's config, its rotary tables
        core = c.core_config(dtype)
        for key in ("rope_inv_freq", "rope_inv_freq_long", "rope_inv_freq_local"):
            table = core[key]
            assert table is None or table.shape == (core["rope_dim"] // 2,), f"{key} of shape {table.shape}"
    if c.num_hidden_layers <= 4096:  # (a config may say 2**62 layers: the loader refuses it against the tensors)
        settings = c.layer_settings()
        assert len(settings) == c.num_hidden_layers, f"{len(settings)} layer settings"
        names = [spec.name for spec in expected_weights(c)]
        assert sorted(names) == sorted(state_dict_names(c)), "expected_weights and state_dict_names differ"
    return c.family


def run_generation_config(d):
    from habana_assist.errors import InvalidInputError
    from habana_assist.generation.configuration_utils import GenerationConfig

    g = GenerationConfig.from_pretrained(d)
    repr(g)
    try:
        g.validate()
    except InvalidInputError:
        return "invalid"
    return len(g.eos_token_ids())


def run_tokenizer(d):
    import habana_assist as ha

    tok = ha.AutoTokenizer.from_pretrained(d)
    repr(tok)
    ids = tok.encode("def f(x):\n    return x + 1  # \u00e9\u4e2d \U0001f600 <s>")
    text = tok.decode(ids, skip_special_tokens=True)
    tok.decode(list(range(min(len(tok), 300))))
    tok.convert_ids_to_tokens(ids)
    tok(["a b", "c"], truncation=True, max_length=4)
    if tok.pad_token_id is not None:
        tok(["a b c d", "e"], padding=True, return_tensors="np")
    return len(text)


# A conversation for the chat templates: a system turn, alternating user/assistant turns with special-token text.
_CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 12 + 3? <s> \u00e9"},
    {"role": "assistant", "content": "15 </s>"},
    {"role": "user", "content": " the cat sat "},
]
_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Adds.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    },
}


def run_tokenizer_json(d):
    """AutoTokenizer.from_pretrained of a tokenizer.json checkpoint, then texts with its special and added tokens
    inside encoded (single, pair, tokenize), decoded both ways, a truncated and a padded batch, every id
    decoded, and each chat template rendered (tokenize=False; then tokenized)."""
    import habana_assist as ha

    tok = ha.AutoTokenizer.from_pretrained(d)
    repr(tok)
    marks = sorted(set(tok.all_special_tokens) | {t.content for t in tok.added_tokens_decoder.values()})[:12]
    texts = [
        "the cat sat on the mat 123 \u00e9\u4e2d \U0001f600\n\tdef f(x):  return x",
        " ".join(marks) + " hello world",
        "".join(f"{m}x{m} " for m in marks),
        "",
        " ",
        "\u2581\u2581a <0x41>",
    ]
    for text in texts:
        ids = tok.encode(text)
        tok.decode(ids)
        tok.decode(ids, skip_special_tokens=True)
        tok.convert_ids_to_tokens(ids)
        tok.tokenize(text)
    tok.encode(texts[0], texts[1])
    tok.decode(list(range(min(len(tok), 600))))
    tok(texts[:3], truncation=True, max_length=5)
    if tok.pad_token_id is not None:
        tok(texts[:3], texts[3:], padding=True, return_tensors="np")
    templates = tok.chat_template
    for name in sorted(templates) if isinstance(templates, dict) else [None] if templates is not None else []:
        text = tok.apply_chat_template(
            _CHAT,
            tokenize=False,
            add_generation_prompt=True,
            chat_template=name,
            tools=[_TOOL] if name == "tool_use" else None,
        )
        assert isinstance(text, str), f"apply_chat_template(tokenize=False) gave {type(text).__name__}"
        tok.apply_chat_template(
            _CHAT[:2], tokenize=True, chat_template=name, tools=[_TOOL] if name == "tool_use" else None
        )
    return len(tok)


def run_load(d):
    import numpy as np

    import habana_assist as ha

    for dtype in (None, "int8"):  # as stored (panels), then quantized: the two ways weights are converted
        model = ha.AutoModelForCausalLM.from_pretrained(d, dtype=dtype, max_cache_len=16)
        vocab = model.config.vocab_size
        ids = np.array([[1 % vocab, 2 % vocab, 3 % vocab]])
        logits = model(ids).logits
        assert logits.shape == (1, 3, vocab), f"logits shape {logits.shape}, expected (1, 3, {vocab})"
        try:
            model.generate(ids, max_new_tokens=2, seed=0)
        except ha.InvalidInputError:
            pass  # a generation_config.json that validate() rejects: a clear error, raised where it is used
    return vocab


def run_selftest(d):
    """The harness's own check (tests/fuzz/test_fuzz_parsers.py): does what the file ACTION says, so that a test can
    see a failure, a crash, a hang and an over-allocation each reported."""
    with open(os.path.join(d, "ACTION")) as f:
        action = f.read().strip()
    if action == "clear-error":
        from habana_assist.errors import CheckpointError

        raise CheckpointError("selftest: a clear error")
    if action == "type-error":
        return len(5)
    if action == "allocate-1-TiB":
        return bytearray(1 << 40)
    if action == "abort":
        os.abort()
    if action == "hang":
        while True:
            time.sleep(1)
    return action


RUNNERS = {
    "selftest": run_selftest,
    "safetensors": run_safetensors,
    "sharded": run_sharded,
    "config": run_config,
    "generation_config": run_generation_config,
    "tokenizer": run_tokenizer,
    "tokenizer_json": run_tokenizer_json,
    "load": run_load,
}


def _signature(exc):
    """(type, innermost habana_assist frame or else innermost frame) naming one distinct failure."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if os.sep + "habana_assist" + os.sep in f.filename] or frames
    f = ours[-1] if ours else None
    where = f"{os.path.relpath(f.filename, REPO)}:{f.lineno} in {f.name}" if f else "?"
    return f"{type(exc).__name__} at {where}"


def run_one(target, files, workdir, tag):
    """Run one input in this process -> (outcome, signature, message): outcome "ok", "error" (a
    HabanaAssistError) or "FAIL" (anything else)."""
    from habana_assist.errors import HabanaAssistError

    d = os.path.join(workdir, tag)
    write_input_dir(d, files)
    try:
        RUNNERS[target](d)
        return "ok", None, None
    except HabanaAssistError as e:
        if not str(e):
            return "FAIL", f"empty {type(e).__name__} message", ""
        return "error", None, None
    except BaseException as e:  # noqa: B902 -- MemoryError, RecursionError, KeyboardInterrupt alike are findings
        if isinstance(e, KeyboardInterrupt):
            raise
        return "FAIL", _signature(e), "".join(traceback.format_exception(type(e), e, e.__traceback__))[-3000:]
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- worker -----------------------------------------------------------------------------------------------------


def _vm_size():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def worker_main(args):
    """Protocol: reads one JSON job from stdin, writes JSON lines to the fd it got: {"begin": [t, i]} before
    each input and {"end": [t, i], ...} after it; {"ready": ...} after the warm-up."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the libraries print goes to stderr, not into the protocol
    sys.setrecursionlimit(3000)
    job = json.loads(sys.stdin.readline())
    import habana_assist as ha

    ha.set_num_threads(1)
    workdir = tempfile.mkdtemp(prefix="ha_fuzz_")
    seeds = {t: corpus_seeds(t, job["corpus"]) for t in job["targets"]}
    # Warm-up: every seed must give a valid result (else the target fuzzes nothing but its error path).
    bad_seeds = []
    for t in job["targets"]:
        for name, files in seeds[t]:
            outcome, sig, msg = run_one(t, files, workdir, f"warm_{t}_{name}_0")
            if outcome != "ok":
                bad_seeds.append(f"{t}/{name}: {outcome} {sig or ''} {msg or ''}")
    biggest = max((sum(map(len, fs.values())) for t in job["targets"] for _, fs in seeds[t]), default=0)
    if job["memory"]:
        limit = _vm_size() + MEMORY_SLACK_BYTES + MEMORY_FACTOR * 2 * biggest  # mutations may double a file
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    else:
        limit = None
    out.write(json.dumps({"ready": {"bad_seeds": bad_seeds, "memory_limit": limit}}) + "\n")
    for t, start, stop, seconds in job["plan"]:
        deadline = None if seconds is None else time.time() + seconds
        for i in range(start, stop if stop is not None else 1 << 62):
            if deadline is not None and time.time() >= deadline:
                break
            if job["replay"]:
                if i >= len(job["replay"][t]):
                    break
                _, files = read_input_dir(job["replay"][t][i])
                name, steps = os.path.basename(job["replay"][t][i]), ["replay"]
            else:
                name, files, steps = make_input(t, job["seed"], i, seeds[t])
            out.write(json.dumps({"begin": [t, i]}) + "\n")
            outcome, sig, msg = run_one(t, files, workdir, f"in_{i}")
            out.write(
                json.dumps(
                    {"end": [t, i], "outcome": outcome, "sig": sig, "msg": msg, "seed_name": name, "steps": steps}
                )
                + "\n"
            )
    out.write(json.dumps({"done": True}) + "\n")
    shutil.rmtree(workdir, ignore_errors=True)


# ---- parent -----------------------------------------------------------------------------------------------------


class Report:
    """Per target: executions, outcomes and distinct failures {signature: (count, first input, message)}."""

    def __init__(self, targets):
        self.targets = list(targets)
        self.execs = dict.fromkeys(targets, 0)
        self.outcomes = {t: {"ok": 0, "error": 0, "FAIL": 0} for t in targets}
        self.failures = {t: {} for t in targets}
        self.bad_seeds = []
        self.memory_limit = None

    def add(self, target, i, outcome, sig=None, msg=None, detail=""):
        self.execs[target] += 1
        self.outcomes[target][outcome] += 1
        if outcome == "FAIL":
            count, first, first_msg, first_detail = self.failures[target].get(sig, (0, i, msg, detail))
            self.failures[target][sig] = (count + 1, first, first_msg, first_detail)

    def total_failures(self):
        return sum(len(f) for f in self.failures.values()) + len(self.bad_seeds)

    def details(self):
        """The first traceback of every distinct failure."""
        return "\n".join(
            f"--- {t}: {sig} (input {first} {detail})\n{msg}"
            for t in self.targets
            for sig, (_, first, msg, detail) in sorted(self.failures[t].items())
        )

    def summary(self):
        lines = []
        for t in self.targets:
            o = self.outcomes[t]
            lines.append(
                f"{t:18s} executions {self.execs[t]:7d}   valid {o['ok']:6d}   clear errors {o['error']:6d}"
                f"   distinct failures {len(self.failures[t])} (expected 0)"
            )
            for sig, (count, first, msg, detail) in sorted(self.failures[t].items()):
                lines.append(f"    {count:5d} x {sig}   first: input {first} {detail}")
        for b in self.bad_seeds:
            lines.append(f"seed not valid: {b}")
        if self.memory_limit:
            lines.append(f"address-space limit in the worker: {self.memory_limit / 2**20:.0f} MiB")
        return "\n".join(lines)


def _start_worker(job, stderr_file):
    import habana_assist  # the worker imports the package this process imports (the test suite's, or main()'s)

    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(habana_assist.__file__)))
    env = dict(
        os.environ,
        MALLOC_ARENA_MAX="1",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")])),
    )
    p = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr_file,
        env=env,
        cwd=REPO,
    )
    p.stdin.write((json.dumps(job) + "\n").encode())
    p.stdin.close()
    return p


def run_fuzz(
    targets,
    seed,
    iterations=None,
    seconds=None,
    timeout=DEFAULT_TIMEOUT_S,
    memory=True,
    save_dir=None,
    corpus_dir=CORPUS_DIR,
    log=None,
    replay=None,
):
    """Fuzz `targets` (iterations each, or seconds split evenly) -> Report. A crash (the worker died) or a hang
    (no word for `timeout` s) fails the input it had begun; a new worker continues after it. Failing inputs
    are written to save_dir/<target>-seed<S>-input<i>/ when save_dir is given. replay: {target: [input
    directories]} runs those instead of mutations."""
    report = Report(targets)
    seeds = {t: corpus_seeds(t, corpus_dir) for t in targets}
    # [target, next input, stop (None: until time is up), seconds left (None: no time limit)]
    plan = [
        [
            t,
            0,
            len(replay[t]) if replay is not None else iterations,
            None if seconds is None else seconds / len(targets),
        ]
        for t in targets
        if replay is None or replay.get(t)
    ]
    stderr_file = tempfile.TemporaryFile()
    first_worker = True
    while plan:
        stderr_file.seek(0)
        stderr_file.truncate()
        job = {"targets": targets, "seed": seed, "plan": plan, "memory": memory, "corpus": corpus_dir, "replay": replay}
        p = _start_worker(job, stderr_file)
        buf, current, began, outcome = b"", None, {}, None
        ready, last = False, time.time()
        while outcome is None:
            r, _, _ = select.select([p.stdout], [], [], 1.0)
            now = time.time()
            if r:
                chunk = os.read(p.stdout.fileno(), 1 << 16)
                if not chunk:
                    outcome = "died"
                buf += chunk
            while b"\n" in buf and outcome is None:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                last = now
                if "ready" in msg:
                    ready = True
                    if first_worker:
                        report.bad_seeds = msg["ready"]["bad_seeds"]
                        report.memory_limit = msg["ready"]["memory_limit"]
                        first_worker = False
                elif "begin" in msg:
                    current = tuple(msg["begin"])
                    began.setdefault(current[0], now)
                elif "end" in msg:
                    t, i = msg["end"]
                    report.add(
                        t,
                        i,
                        msg["outcome"],
                        msg["sig"],
                        msg["msg"],
                        f"(seed {msg['seed_name']}, {' '.join(msg['steps'])})",
                    )
                    if msg["outcome"] == "FAIL" and save_dir and replay is None:
                        _save(save_dir, t, i, seed, seeds[t], msg["sig"])
                    current = None
                    if log and report.execs[t] % 2000 == 0:
                        log(f"  {t}: {report.execs[t]} executions, {len(report.failures[t])} distinct failures")
                elif "done" in msg:
                    outcome = "done"
            # the warm-up imports and runs every seed: give it more time than one input
            if outcome is None and now - last > (timeout if ready else max(timeout, 300.0)):
                outcome = "hang"
                p.kill()
        p.wait()
        if outcome == "done":
            break
        stderr_file.seek(0)
        err = stderr_file.read().decode("utf-8", "replace")[-2000:]
        if current is None:  # died or hung outside any input: in the warm-up or between inputs
            report.bad_seeds.append(f"worker {outcome} outside any input (exit status {p.returncode}): {err}")
            break
        t, i = current
        sig = (
            f"hang (no progress for {timeout:.0f} s)"
            if outcome == "hang"
            else f"crash (worker exit status {p.returncode})"
        )
        report.add(t, i, "FAIL", sig, err, "")
        if save_dir and replay is None:
            _save(save_dir, t, i, seed, seeds[t], sig)
        # A new worker resumes after the failing input with what is left of the target's time; the targets
        # before it are finished.
        plan = plan[[row[0] for row in plan].index(t) :]
        plan[0][1] = i + 1
        if plan[0][3] is not None:
            plan[0][3] = max(0.0, plan[0][3] - (time.time() - began[t]))
        if plan[0][2] is not None and plan[0][1] >= plan[0][2]:
            plan = plan[1:]
    return report


def _save(save_dir, target, i, seed, seeds, sig):
    name, files, steps = make_input(target, seed, i, seeds)
    d = os.path.join(save_dir, f"{target}-seed{seed}-input{i}")
    write_input_dir(d, files, target)
    with open(os.path.join(d, "FOUND.txt"), "w") as f:
        f.write(f"{sig}\nseed corpus entry {name}, mutations {steps}\n")


def crasher_dirs(crashers_dir=CRASHERS_DIR):
    """-> {target: [crasher directories]} of tests/fuzz/crashers/*/ (each with a TARGET file)."""
    out = {}
    if not os.path.isdir(crashers_dir):
        return out
    for name in sorted(os.listdir(crashers_dir)):
        d = os.path.join(crashers_dir, name)
        if os.path.isfile(os.path.join(d, "TARGET")):
            target, _ = read_input_dir(d)
            out.setdefault(target, []).append(d)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, help="inputs per target")
    ap.add_argument("--seconds", type=float, help="total time, split evenly between the targets")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default=None, help=f"comma-separated, of {', '.join(TARGETS)} (default: all)")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds one input may take")
    ap.add_argument("--no-memory-limit", action="store_true")
    ap.add_argument("--save", default=None, help="directory for failing inputs (default: none kept)")
    ap.add_argument("--replay", default=None, help="run the inputs kept in this crashers directory")
    ap.add_argument("--make-corpus", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print each distinct failure's first traceback")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.make_corpus:
        if args.targets is None:
            make_corpus()
        elif args.targets == "tokenizer_json":
            make_tokenizer_json_corpus()
        elif args.targets == "config":  # the families' seeds; the others come with the load corpus's checkpoints
            make_config_family_corpus()
        else:  # the others' seeds come from sentencepiece training and random weights, written all together
            ap.error("--make-corpus --targets: only tokenizer_json's and config's family seeds are rewritten alone")
        return 0
    targets = [t for t in (args.targets or ",".join(TARGETS)).split(",") if t]
    unknown = set(targets) - set(TARGETS)
    if unknown:
        ap.error(f"unknown targets {sorted(unknown)}; choose among {', '.join(TARGETS)}")
    replay = crasher_dirs(args.replay) if args.replay else None
    if replay is None and (args.iterations is None) == (args.seconds is None):
        ap.error("pass exactly one of --iterations N and --seconds S (or --replay DIR)")
    if replay is not None:
        targets = [t for t in TARGETS if t in replay]
    start = time.time()
    report = run_fuzz(
        targets,
        args.seed,
        args.iterations,
        args.seconds,
        args.timeout,
        not args.no_memory_limit,
        args.save,
        log=lambda s: print(s, flush=True),
        replay=replay,
    )
    if args.verbose:
        print(report.details())
    print(report.summary())
    print(
        f"total executions {sum(report.execs.values())} in {time.time() - start:.0f} s; "
        f"distinct failures {report.total_failures()} (expected 0)"
    )
    return 1 if report.total_failures() else 0


if __name__ == "__main__":
    if importlib.util.find_spec("habana_assist") is None:  # else the one on the path (installed, or on PYTHONPATH)
        sys.path.insert(0, REPO)  # run as a script from a checkout: its package
    sys.exit(main())
