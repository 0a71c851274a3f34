"""The pair shipped inside the package loads by name, model and tokenizer alike, generates, and assisted
generation with it reproduces plain generation exactly."""

import os

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.checkpoints.hub import MODELS_DIR
from habana_assist.pretrained.stdlib_split import stdlib_files


@pytest.fixture(scope="module")
def pair():
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    target = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype="float32")
    draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    return tok, target, draft


def test_shipped_pair_fits_the_size_budget_and_has_a_model_card():
    total = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(MODELS_DIR) for f in files)
    assert total <= 80 * 2**20, f"expected the shipped pair within 80 MiB, got {total / 2**20:.1f} MiB"
    assert os.path.exists(os.path.join(MODELS_DIR, "MODEL_CARD.md")), "expected habana_assist/pretrained/MODEL_CARD.md"


def test_shipped_models_have_the_promised_shapes(pair):
    tok, target, draft = pair
    t, d = target.config, draft.config
    assert t.architectures == ["LlamaForCausalLM"] and t.num_key_value_heads < t.num_attention_heads, (
        f"expected a GQA Llama target, got {t.architectures}, {t.num_attention_heads} heads / "
        f"{t.num_key_value_heads} KV"
    )
    assert d.num_key_value_heads == 1 and d.tie_word_embeddings, "expected an MQA draft with tied embeddings"
    assert t.vocab_size == d.vocab_size == tok.vocab_size, (
        f"expected one vocabulary, got target {t.vocab_size}, draft {d.vocab_size}, tokenizer {tok.vocab_size}"
    )
    assert target.weight_bytes > 3 * 32e6, (
        f"expected the float32 target to be several times a 32 MB L3, got {target.weight_bytes / 1e6:.0f} MB"
    )


def test_shipped_tokenizer_round_trips_held_out_code(pair):
    tok = pair[0]
    for path in stdlib_files()[1][:3]:
        with open(path, encoding="utf-8") as f:
            text = f.read()[:3000]
        ids = tok.encode(text, verbose=False)  # longer than model_max_length: a round trip, not a model input
        assert ids[0] == tok.bos_token_id, f"expected <s> first, got {ids[:3]}"
        assert tok.decode(ids, skip_special_tokens=True) == text, f"{path}: decode(encode(text)) differs from text"


def test_shipped_pair_assisted_greedy_is_plain_greedy_on_a_held_out_prompt(pair):
    tok, target, draft = pair
    with open(stdlib_files()[1][0], encoding="utf-8") as f:
        text = "".join(f.readlines()[:20])
    inputs = tok(text, return_tensors="np")
    plain = target.generate(**inputs, max_new_tokens=24)
    res = target.generate(
        **inputs, max_new_tokens=24, assistant_model=draft, num_assistant_tokens=5, return_dict_in_generate=True
    )
    assert np.array_equal(plain, res.sequences), "expected assisted greedy output to equal plain greedy output"
    assert res.num_accepted_tokens > 0, "expected the trained draft to have some drafts accepted"


@pytest.mark.parametrize("dtype, bound", [("int8", 0.02), ("int4", 0.05)])
def test_quantized_target_keeps_held_out_perplexity_near_float(pair, dtype, bound):
    """The bar for int8: 2%; int4, measured 0.04% off on 24 windows of 256 tokens, is held to 5%."""
    from habana_assist.pretrained.evaluation import held_out_windows, perplexity

    tok, target, _ = pair
    windows = held_out_windows(tok, n_windows=6, length=128)
    quantized = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode", dtype=dtype)
    p_float, p_q = perplexity(target, windows), perplexity(quantized, windows)
    assert 1.0 < p_float < tok.vocab_size, f"expected a trained model's perplexity, got {p_float}"
    assert abs(p_q / p_float - 1) <= bound, (
        f"{dtype} perplexity {p_q:.3f} vs float {p_float:.3f}: more than {bound:.0%} apart"
    )


def test_perplexity_rejects_malformed_windows(pair):
    from habana_assist.pretrained.evaluation import perplexity

    with pytest.raises(ha.InvalidInputError, match="windows"):
        perplexity(pair[1], np.zeros((3,), dtype=np.int64))
