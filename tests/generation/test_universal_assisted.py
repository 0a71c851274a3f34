"""Assisted generation with a draft whose tokenizer differs from the target's (assistant_tokenizer=): the output
is exactly the target's plain output, greedy and sampled, and acceptance is reported in target tokens.

Drafts: (a) the shipped draft re-expressed in a permuted vocabulary (its embedding rows moved with its ids, so
it predicts the same text: acceptance as high as the same-tokenizer path); (b) a byte-level draft on a
tokenizer.json of 256 byte tokens, a byte bigram of Python source written in closed form into a one-layer
Llama, which segments text differently from the target everywhere (boundaries inside words and characters)."""

import json
import os
import shutil

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.checkpoints.hub import MODELS_DIR
from habana_assist.checkpoints.safetensors import read_safetensors, save_file
from habana_assist.errors import InvalidInputError
from habana_assist.pretrained.stdlib_split import stdlib_files
from habana_assist.tokenization.tokenizer_json import BYTE_TO_CHAR, TokenizerJSON

PROMPTS = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "import os\n\n\nclass Config:\n    def __init__(self, path):\n        self.",
    "# caf\u00e9 \u2192 r\u00e9sum\u00e9\nfor i in range(10):\n    print(",
    "x",
]


class PermutedTokenizer:
    """A tokenizer whose ids are another's moved by a permutation: id i of `base` is id perm[i] here."""

    def __init__(self, base, perm):
        self.base, self.perm, self.inverse = base, perm, np.argsort(perm)
        self.eos_token_id = int(perm[base.eos_token_id])
        self.all_special_ids = [int(perm[i]) for i in base.all_special_ids]

    def encode(self, text, add_special_tokens=True):
        return [int(self.perm[i]) for i in self.base.encode(text, add_special_tokens=add_special_tokens)]

    def decode(self, ids, skip_special_tokens=False):
        return self.base.decode([int(self.inverse[i]) for i in ids], skip_special_tokens=skip_special_tokens)

    def get_vocab(self):
        return {piece: int(self.perm[i]) for piece, i in self.base.get_vocab().items()}


def _write_byte_draft(directory):
    """A byte-level tokenizer.json (<s> = 0, byte b = b + 1) and a one-layer Llama whose logits are the log
    probabilities of a byte bigram counted over training source files: every layer's projections are zero (the
    residual passes the embedding through), the embedding is one-hot and the head holds log P(next | byte)."""
    os.makedirs(directory, exist_ok=True)
    symbols = BYTE_TO_CHAR  # GPT-2's byte -> printable character map (what a ByteLevel pre-tokenizer writes)
    vocab = {"<s>": 0, **{symbols[b]: b + 1 for b in range(256)}}
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": 0,
                "content": "<s>",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }
    with open(os.path.join(directory, "tokenizer.json"), "w") as f:
        json.dump(spec, f)
    V, H = 257, 258  # hidden: one spare even dimension (rotary needs an even head_dim)
    counts = np.ones((V, V))  # (previous, next), add-one smoothing
    for path in stdlib_files()[0][:60]:
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64) + 1
        np.add.at(counts, (data[:-1], data[1:]), 1)
    log_p = np.log(counts / counts.sum(axis=1, keepdims=True))  # (previous, next)
    zero = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731 - a one-line helper
    tensors = {
        "model.embed_tokens.weight": np.eye(V, H, dtype=np.float32),
        "model.norm.weight": np.full(H, 1 / np.sqrt(H), dtype=np.float32),  # rmsnorm(one-hot) = sqrt(H) e_x
        "lm_head.weight": np.ascontiguousarray(np.pad(log_p.T, ((0, 0), (0, H - V))), dtype=np.float32),
        "model.layers.0.input_layernorm.weight": np.ones(H, dtype=np.float32),
        "model.layers.0.post_attention_layernorm.weight": np.ones(H, dtype=np.float32),
        "model.layers.0.self_attn.q_proj.weight": zero(8, H),
        "model.layers.0.self_attn.k_proj.weight": zero(8, H),
        "model.layers.0.self_attn.v_proj.weight": zero(8, H),
        "model.layers.0.self_attn.o_proj.weight": zero(H, 8),
        "model.layers.0.mlp.gate_proj.weight": zero(8, H),
        "model.layers.0.mlp.up_proj.weight": zero(8, H),
        "model.layers.0.mlp.down_proj.weight": zero(H, 8),
    }
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": V,
        "hidden_size": H,
        "intermediate_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 1,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": 0,
        "eos_token_id": None,
    }
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    target = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    # (a) the shipped draft with permuted ids: embedding row i (tied head) moves to perm[i]
    perm_dir = str(tmp_path_factory.mktemp("permuted_draft"))
    shutil.rmtree(perm_dir)
    shutil.copytree(os.path.join(MODELS_DIR, "pycode-draft"), perm_dir)
    perm = np.random.default_rng(0).permutation(draft.vocab_size)
    tensors = {}
    for name, (array, dtype) in read_safetensors(os.path.join(perm_dir, "model.safetensors")).items():
        array = np.array(array)
        if name == "model.embed_tokens.weight":
            moved = np.empty_like(array)
            moved[perm] = array
            array = moved
        tensors[name] = (array, dtype)
    save_file(tensors, os.path.join(perm_dir, "model.safetensors"), metadata={"format": "pt"})
    for name in ("config.json", "generation_config.json"):
        with open(os.path.join(perm_dir, name)) as f:
            cfg = json.load(f)
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            cfg[key] = int(perm[cfg[key]])
        with open(os.path.join(perm_dir, name), "w") as f:
            json.dump(cfg, f)
    permuted = ha.AutoModelForCausalLM.from_pretrained(perm_dir)
    # (b) the byte-level bigram draft
    byte_dir = str(tmp_path_factory.mktemp("byte_draft"))
    _write_byte_draft(byte_dir)
    byte_draft = ha.AutoModelForCausalLM.from_pretrained(byte_dir)
    return dict(
        tok=tok,
        target=target,
        draft=draft,
        permuted=(permuted, PermutedTokenizer(tok, perm)),
        bytes=(byte_draft, TokenizerJSON.load(os.path.join(byte_dir, "tokenizer.json"))),
    )


def _inputs(tok, text):
    return tok(text, return_tensors="np")


@pytest.mark.parametrize("which", ["permuted", "bytes"])
def test_universal_assisted_greedy_is_bitwise_plain_greedy(models, which, one_core_thread):
    tok, target = models["tok"], models["target"]
    draft, draft_tok = models[which]
    total_proposed = total_accepted = 0
    for text in PROMPTS:
        for max_new, k, schedule in ((7, 3, "constant"), (40, 5, "heuristic_transient")):
            inputs = _inputs(tok, text)
            plain = target.generate(**inputs, max_new_tokens=max_new)
            res = target.generate(
                **inputs,
                max_new_tokens=max_new,
                assistant_model=draft,
                tokenizer=tok,
                assistant_tokenizer=draft_tok,
                num_assistant_tokens=k,
                num_assistant_tokens_schedule=schedule,
                return_dict_in_generate=True,
            )
            assert np.array_equal(plain, res.sequences), (
                f"{which} draft, {text!r}, {max_new} tokens: expected plain greedy\n{plain}\ngot\n{res.sequences}"
            )
            assert 0 <= res.num_accepted_tokens <= res.num_draft_tokens, (
                f"expected 0 <= accepted <= proposed, got {res.num_accepted_tokens}, {res.num_draft_tokens}"
            )
            assert res.proposed_per_position.sum() == res.num_draft_tokens, (
                "expected proposed_per_position to sum to num_draft_tokens (target tokens)"
            )
            assert res.accepted_per_position.sum() == res.num_accepted_tokens
            assert res.num_accepted_tokens <= plain.shape[1] - inputs["input_ids"].shape[1], (
                "expected accepted target tokens to be at most the new tokens"
            )
            total_proposed += res.num_draft_tokens
            total_accepted += res.num_accepted_tokens
    assert total_proposed > 0, f"expected the {which} draft to propose target tokens"
    if which == "permuted":
        assert total_accepted >= total_proposed / 2, (
            f"expected the permuted shipped draft to be accepted often, got {total_accepted}/{total_proposed}"
        )


def test_permuted_draft_accepts_as_many_as_the_same_tokenizer_draft(models, one_core_thread):
    """Carried through text, the permuted draft proposes what the shipped draft proposes in the target's ids."""
    tok, target, draft = models["tok"], models["target"], models["draft"]
    permuted, permuted_tok = models["permuted"]
    inputs = _inputs(tok, PROMPTS[0])
    same = target.generate(
        **inputs, max_new_tokens=40, assistant_model=draft, num_assistant_tokens=5, return_dict_in_generate=True
    )
    univ = target.generate(
        **inputs,
        max_new_tokens=40,
        assistant_model=permuted,
        tokenizer=tok,
        assistant_tokenizer=permuted_tok,
        num_assistant_tokens=5,
        return_dict_in_generate=True,
    )
    assert np.array_equal(same.sequences, univ.sequences)
    assert univ.num_accepted_tokens >= same.num_accepted_tokens - 2, (
        f"expected acceptance near the same-tokenizer path's {same.num_accepted_tokens}, got {univ.num_accepted_tokens}"
    )


@pytest.mark.parametrize("which", ["permuted", "bytes"])
@pytest.mark.parametrize("mode", ["coupled", "rejection"])
def test_universal_assisted_sampling_is_plain_sampling_for_the_same_seed(models, which, mode, one_core_thread):
    tok, target = models["tok"], models["target"]
    draft, draft_tok = models[which]
    for text, knobs in (
        (PROMPTS[0], dict(temperature=0.8, top_k=0, top_p=1.0)),
        (PROMPTS[1], dict(temperature=1.3, top_k=20, top_p=0.9)),
        (PROMPTS[2], dict(temperature=0.6, top_k=50, top_p=0.95, repetition_penalty=1.2)),
    ):
        inputs = _inputs(tok, text)
        for seed in (0, 7):
            plain = target.generate(**inputs, max_new_tokens=30, do_sample=True, seed=seed, **knobs)
            res = target.generate(
                **inputs,
                max_new_tokens=30,
                do_sample=True,
                seed=seed,
                assistant_model=draft,
                tokenizer=tok,
                assistant_tokenizer=draft_tok,
                assisted_sampling=mode,
                return_dict_in_generate=True,
                **knobs,
            )
            assert np.array_equal(plain, res.sequences), (
                f"{which}, {mode}, seed {seed}, {knobs}: expected plain sampled\n{plain}\ngot\n{res.sequences}"
            )


def test_processors_scores_and_stopping_are_plain_generations(models, one_core_thread):
    tok, target = models["tok"], models["target"]
    draft, draft_tok = models["bytes"]
    pdraft, ptok = models["permuted"]
    inputs = _inputs(tok, PROMPTS[1])
    ban = int(target.generate(**inputs, max_new_tokens=3)[0, -2])

    def halve_last_seen(input_ids, scores):
        scores = np.array(scores)
        scores[0, int(np.asarray(input_ids)[0, -1])] *= 0.5
        return scores

    def stop_after_colon(input_ids, scores):
        return tok.decode(np.asarray(input_ids)[0, -1:]).endswith(":")

    cases = [
        dict(repetition_penalty=1.3),
        dict(no_repeat_ngram_size=3),
        dict(min_new_tokens=20, eos_token_id=ban),
        dict(suppress_tokens=[ban]),
        dict(begin_suppress_tokens=[ban]),
        dict(eos_token_id=ban),
        dict(logits_processor=[halve_last_seen]),
        dict(stopping_criteria=[stop_after_colon]),
        dict(output_scores=True, output_logits=True),
        # the rest of the core's processors, which the sampler shared with plain generation runs too
        dict(sequence_bias={(ban,): -4.0}),
        dict(bad_words_ids=[[ban]]),
        dict(forced_eos_token_id=ban),
        dict(exponential_decay_length_penalty=(4, 1.5), eos_token_id=ban),
        dict(renormalize_logits=True),
        dict(do_sample=True, seed=3, min_p=0.05),
        dict(do_sample=True, seed=4, typical_p=0.9),
        dict(do_sample=True, seed=5, epsilon_cutoff=3e-4),
        dict(do_sample=True, seed=6, eta_cutoff=1e-3),
    ]
    for d, dt in ((draft, draft_tok), (pdraft, ptok)):
        for extra in cases:
            plain = target.generate(**inputs, max_new_tokens=24, return_dict_in_generate=True, **extra)
            res = target.generate(
                **inputs,
                max_new_tokens=24,
                assistant_model=d,
                tokenizer=tok,
                assistant_tokenizer=dt,
                return_dict_in_generate=True,
                **extra,
            )
            assert np.array_equal(plain.sequences, res.sequences), (
                f"{extra}: expected plain output\n{plain.sequences}\ngot\n{res.sequences}"
            )
            for field in ("scores", "logits"):
                a, b = getattr(plain, field), getattr(res, field)
                assert (a is None) == (b is None), f"{extra}: expected {field} exactly when plain gives it"
                if a is not None:
                    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b)), (
                        f"{extra}: expected {field} bitwise plain generation's"
                    )


def test_batch_rows_and_streamer_follow_the_plain_contract(models, one_core_thread):
    tok, target = models["tok"], models["target"]
    draft, draft_tok = models["bytes"]
    tok.padding_side = "left"
    batch = tok([PROMPTS[0], PROMPTS[3]], padding=True, return_tensors="np")
    for sample in (dict(), dict(do_sample=True, seed=3, temperature=0.9)):
        plain = target.generate(**batch, max_new_tokens=20, **sample)
        res = target.generate(
            **batch, max_new_tokens=20, assistant_model=draft, tokenizer=tok, assistant_tokenizer=draft_tok, **sample
        )
        assert np.array_equal(plain, res), f"{sample}: expected the batch's plain output\n{plain}\ngot\n{res}"

    class Collect:
        def __init__(self):
            self.parts, self.ended = [], False

        def put(self, value):
            self.parts.append(np.asarray(value).reshape(-1))

        def end(self):
            self.ended = True

    inputs = _inputs(tok, PROMPTS[2])
    streamer = Collect()
    out = target.generate(
        **inputs,
        max_new_tokens=25,
        assistant_model=draft,
        tokenizer=tok,
        assistant_tokenizer=draft_tok,
        streamer=streamer,
    )
    assert streamer.ended, "expected the streamer ended"
    assert np.array_equal(streamer.parts[0], inputs["input_ids"][0]), "expected the prompt put first"
    assert np.array_equal(np.concatenate(streamer.parts[1:]), out[0, inputs["input_ids"].shape[1] :]), (
        "expected the streamer to receive exactly the new tokens, in order"
    )


def test_same_vocabulary_pair_takes_the_same_tokenizer_path(models, one_core_thread):
    tok, target, draft = models["tok"], models["target"], models["draft"]
    inputs = _inputs(tok, PROMPTS[0])
    core = target.generate(
        **inputs, max_new_tokens=30, assistant_model=draft, num_assistant_tokens=4, return_dict_in_generate=True
    )
    both = target.generate(
        **inputs,
        max_new_tokens=30,
        assistant_model=draft,
        num_assistant_tokens=4,
        tokenizer=tok,
        assistant_tokenizer=tok,
        return_dict_in_generate=True,
    )
    assert np.array_equal(core.sequences, both.sequences)
    for field in ("num_draft_tokens", "num_accepted_tokens", "num_target_passes", "num_draft_passes"):
        assert getattr(core, field) == getattr(both, field), (
            f"expected identical vocabularies to draft in the core ({field} {getattr(core, field)}), "
            f"got {getattr(both, field)}"
        )


def test_universal_argument_errors_name_the_fix(models):
    tok, target = models["tok"], models["target"]
    byte_draft, byte_tok = models["bytes"]
    inputs = _inputs(tok, PROMPTS[0])
    with pytest.raises(InvalidInputError, match="different tokenizers.*assistant_tokenizer"):
        target.generate(**inputs, max_new_tokens=4, assistant_model=byte_draft)
    with pytest.raises(InvalidInputError, match="different tokenizers.*assistant_tokenizer"):
        target.generate(**inputs, max_new_tokens=4, assistant_model=byte_draft, tokenizer=tok)
    with pytest.raises(InvalidInputError, match="without `tokenizer`"):
        target.generate(**inputs, max_new_tokens=4, assistant_model=byte_draft, assistant_tokenizer=byte_tok)
    with pytest.raises(InvalidInputError, match="pass assistant_model"):
        target.generate(**inputs, max_new_tokens=4, tokenizer=tok, assistant_tokenizer=byte_tok)
    with pytest.raises(InvalidInputError, match="encode\\(\\), decode\\(\\) and get_vocab"):
        target.generate(
            **inputs, max_new_tokens=4, assistant_model=byte_draft, tokenizer=tok, assistant_tokenizer="gpt2"
        )
    with pytest.raises(InvalidInputError, match="outside the assistant model's vocabulary"):
        target.generate(**inputs, max_new_tokens=4, assistant_model=byte_draft, tokenizer=tok, assistant_tokenizer=tok)
    with pytest.raises(
        InvalidInputError, match="assistant_tree_width=2: a draft with another tokenizer.*assistant_tree_width=1"
    ):
        target.generate(
            **inputs,
            max_new_tokens=4,
            assistant_model=byte_draft,
            tokenizer=tok,
            assistant_tokenizer=byte_tok,
            assistant_tree_width=2,
        )
