"""What a user of both libraries tries first, run where both are: in the reference environment (Transformers 5,
torch 2 and numpy 2 from PyPI) with habana_assist imported from the package under test (tests/fixtures/ha_jobs.py,
ha_interop), on a tiny Llama that Transformers makes over Llama 2's vocabulary with Llama 2's tokenizer.json, and a
draft (its weights plus noise). Each result is compared here with what Debian's python (numpy 1.24) computes:

- Transformers' AutoTokenizer's BatchEncoding (torch tensors) straight into our generate();
- ha.wrap() around a Transformers model as the target (assisted == plain == Transformers' own greedy) and as the
  draft (wrapped or passed as it is: assisted == our plain greedy);
- torch tensors in and out, numpy in and out, under numpy 2 (the extension reads buffers only): the same logits, bit
  for bit, as under Debian's numpy;
- our state_dict() loaded into a Transformers model of the same config (strict), for float32, bfloat16 and int8
  models: Transformers' logits equal ours within the parity tests' tolerance;
- refusals that name what to do instead.

One job in the reference worker (hf_reference.Worker) computes all of it."""

import shutil

import numpy as np
import pytest
import tokenizer_data
from test_transformers_parity import LOGIT_TOL

import habana_assist as ha

CONFIG = dict(
    vocab_size=32000,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
    initializer_range=0.1,
)
TEXTS = ["def fib(n):", "import os"]
IDS = [[1, 822, 18755, 29898, 29876, 1125, 13, 1678, 565, 302]]
NEW = 16
CHECKS = (
    "batch_encoding",
    "wrapped_target",
    "wrapped_draft",
    "tensors",
    "state_dict",
    "their_state_dict",
    "generation_config",
    "refusals",
)


@pytest.fixture(scope="module")
def interop(hf_reference, tmp_path_factory):
    """-> (results of every check, target dir, draft dir)."""
    root = tmp_path_factory.mktemp("interop")
    target, draft = str(root / "target"), str(root / "draft")
    worker = hf_reference.worker()
    for made in (
        worker.call(
            dict(
                kind="make_model", model_type="llama", config=CONFIG, seed=0, saves=[dict(dir=target, dtype="float32")]
            )
        ),
        worker.call(
            dict(
                kind="make_model",
                saves=[dict(dir=draft, dtype="float32")],
                perturb_from=dict(dir=target, noise=0.15, seed=1),
            )
        ),
    ):
        assert "error" not in made, f"Transformers could not make the models: {made['error']}"
    for path in (tokenizer_data.tokenizer_path("llama2"), tokenizer_data.config_path("llama2")):
        shutil.copy(path, target)
    results = worker.call(
        dict(kind="ha_interop", target=target, draft=draft, texts=TEXTS, ids=IDS, new=NEW, checks=CHECKS)
    )
    assert "error" not in results, f"the interop job failed: {results['error']}"
    return results, target, draft


def _check(interop, name):
    result = interop[0][name]
    assert "error" not in result, f"{name} failed in the reference environment: {result['error']}"
    return result


def _assert_close(ours, theirs, what, tol=LOGIT_TOL):
    scale = float(np.max(np.abs(theirs)))
    err = float(np.max(np.abs(np.asarray(ours, np.float64) - theirs)))
    assert err <= tol * scale, f"{what}: max |ours - Transformers| = {err:.3g}, over {tol:g} of {scale:.3g}"


def test_a_transformers_batch_encoding_generates_as_our_own_tokenizers_output(interop):
    got = _check(interop, "batch_encoding")
    assert got["type"] == "transformers.tokenization_utils_base.BatchEncoding", got["type"]
    assert got["sequences_type"] == "torch.int64", f"torch in should give torch out: {got['sequences_type']}"
    tok = ha.AutoTokenizer.from_pretrained(interop[1], pad_token="<unk>", padding_side="left")
    ours = tok(TEXTS, return_tensors="np", padding=True)
    assert np.array_equal(ours["input_ids"], got["input_ids"]) and np.array_equal(
        ours["attention_mask"], got["attention_mask"]
    ), (ours, got)
    model = ha.AutoModelForCausalLM.from_pretrained(interop[1])
    expected = model.generate(**ours, max_new_tokens=NEW)
    assert np.array_equal(got["sequences"], expected), (
        f"from Transformers' BatchEncoding:\n{got['sequences']}\nfrom ours, here:\n{expected}"
    )


def test_a_wrapped_transformers_target_gives_plain_output_assisted_and_transformers_own(interop):
    got = _check(interop, "wrapped_target")
    assert got["plain_type"] == "torch.int64", got["plain_type"]
    assert np.array_equal(got["plain"], got["transformers"]), (
        f"wrapped plain greedy\n{got['plain']}\nTransformers' own greedy\n{got['transformers']}"
    )
    assert np.array_equal(got["assisted"], got["plain"]), (
        f"assisted by our draft\n{got['assisted']}\nplain\n{got['plain']} (narrow margins {got['num_narrow_margins']})"
    )
    accepted, drafted = got["num_accepted_tokens"], got["num_draft_tokens"]
    assert 0 < accepted < drafted, f"the draft should be right sometimes and wrong sometimes: {accepted} of {drafted}"
    assert got["num_narrow_margins"] == 0, f"{got['num_narrow_margins']} margins under {got['batch_disagreement']}"


def test_a_transformers_draft_wrapped_or_as_it_is_gives_our_plain_output(interop):
    got = _check(interop, "wrapped_draft")
    model = ha.AutoModelForCausalLM.from_pretrained(interop[1])
    plain = model.generate(np.array(IDS), max_new_tokens=NEW)
    assert np.array_equal(got["plain"], plain), "our plain greedy under numpy 2 should be ours under Debian's"
    for name in ("wrapped", "as_it_is"):
        assert np.array_equal(got[name], plain), f"{name}:\n{got[name]}\nplain:\n{plain}"
        accepted, drafted = got[name + "_accepted"]
        assert 0 < accepted < drafted, f"{name}: {accepted} of {drafted} drafted tokens accepted"


def test_torch_in_torch_out_and_numpy_2_gives_the_same_bits(interop):
    got = _check(interop, "tensors")
    assert got["numpy"].startswith("2."), f"the reference environment should hold numpy 2: {got['numpy']}"
    assert got["types"] == {
        "logits_np": "numpy.float32",
        "logits_pt": "torch.float32",
        "generate_np": "numpy.int64",
        "generate_pt": "torch.int64",
        "tokenizer_pt": "torch.int64",
    }, got["types"]
    assert got["same"], "torch and numpy inputs should give the same logits and tokens"
    here = ha.AutoModelForCausalLM.from_pretrained(interop[1])(np.array(IDS)).logits
    assert np.array_equal(got["logits"], here), (
        f"logits under numpy {got['numpy']} differ from Debian's numpy {np.__version__}: "
        f"{float(np.max(np.abs(got['logits'] - here))):.3g}"
    )


# int8 rounds each matrix's input to int16 per token (docs/kernels-and-performance.md: a relative 1 / 65534 of the
# row's largest value) where Transformers multiplies the dequantized weights in float32: measured 8e-5 of the
# largest logit on this model; 1e-3 keeps a 10x margin, and a wrong scale or layout moves logits by whole units.
INT8_TOL = 1e-3


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_our_state_dict_loads_into_transformers_with_our_logits(interop, dtype):
    got = _check(interop, "state_dict")[dtype]
    assert got["missing"] == [] and got["unexpected"] == [], got
    _assert_close(
        got["ours"],
        got["transformers"],
        f"{dtype}: Transformers with our state_dict()",
        INT8_TOL if dtype == "int8" else LOGIT_TOL,
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_transformers_state_dict_loads_into_ours(interop, dtype):
    """load_state_dict holds the weights as the model held its own: float32 gives Transformers' logits, and both
    give bitwise what from_pretrained of the same weights saved by Transformers gives."""
    got = _check(interop, "their_state_dict")
    assert got[dtype]["missing"] == [] and got[dtype]["unexpected"] == [] and got[dtype]["weight_dtype"] == dtype
    assert np.array_equal(got[dtype]["ours"], got[dtype]["saved"]), f"{dtype}: load_state_dict != from_pretrained"
    if dtype == "float32":
        _assert_close(got[dtype]["ours"], got["transformers"], "ours after load_state_dict", LOGIT_TOL)
    assert (
        got["strict_missing"]
        and "RuntimeError" in got["strict_missing"]
        and "Missing key(s) in state_dict: 'model.norm.weight'" in got["strict_missing"]
    ), got["strict_missing"]
    assert got["lenient_missing"] == ["model.norm.weight"], got["lenient_missing"]


def test_transformers_generation_config_is_taken_as_ours(interop):
    got = _check(interop, "generation_config")
    assert np.array_equal(got["theirs"], got["ours"]), f"{got['theirs']}\n{got['ours']}"


def test_refusals_name_what_to_do_instead(interop):
    got = _check(interop, "refusals")
    assert (
        got["model_object"]
        and "InvalidInputError" in got["model_object"]
        and "ha.wrap(model)" in got["model_object"]
        and "save_pretrained(directory)" in got["model_object"]
    ), got
    assert got["tokenizer_object"] and "tokenizer.save_pretrained(directory)" in got["tokenizer_object"], got
    assert got["wrapped_save"] and "use its own framework" in got["wrapped_save"], got
    assert got["batch_encoding_whole"] and "unpack it, model.generate(**inputs)" in got["batch_encoding_whole"], got


def test_difference_transformers_cannot_take_our_model_as_its_assistant(interop):
    """Transformers' assisted generation drives its assistant through its own internals (generation_config
    methods, its cache): it fails on ours (docs/transformers-parity.md says to wrap the Transformers target instead,
    as test_a_wrapped_transformers_target_gives_plain_output_assisted_and_transformers_own does)."""
    got = _check(interop, "refusals")
    assert got["ours_as_transformers_assistant"] is not None, "Transformers now takes our model as its assistant"
    assert (
        "TypeError" in got["ours_as_transformers_assistant"]
        and "ha.wrap(transformers_model)" in got["ours_as_transformers_assistant"]
    ), got["ours_as_transformers_assistant"]
