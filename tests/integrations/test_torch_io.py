"""Inputs and outputs in the caller's types: torch in, torch out; lists and numpy in, numpy out; torch CPU tensors
read in place (zero copy); torch never imported for a caller who passes none; clear errors for tensors the CPU
cannot read and for objects that are no arrays."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from package_under_test import PACKAGE_PARENT, PYTHON, child_env

import habana_assist as ha
from habana_assist.errors import InvalidInputError
from habana_assist.generation.utils import GenerateDecoderOnlyOutput
from habana_assist.modeling_utils import CausalLMOutput
from habana_assist.utils.tensors import convert_output, from_numpy, to_numpy, torch_available

DRAFT = os.path.join(os.path.dirname(ha.__file__), "pretrained", "pycode-draft")
TEXTS = ["def fib(n):", "import os\nimport sys\n"]


@pytest.fixture(scope="module")
def tok():
    return ha.AutoTokenizer.from_pretrained(DRAFT)


@pytest.fixture(scope="module")
def model():
    return ha.AutoModelForCausalLM.from_pretrained(DRAFT)


def _address(array):
    return array.__array_interface__["data"][0]


# ---- tokenizer ------------------------------------------------------------------------------------------------


def test_return_tensors_pt_gives_int64_torch_tensors_equal_to_numpys(tok):
    pt = tok(TEXTS, padding=True, return_tensors="pt")
    np_ = tok(TEXTS, padding=True, return_tensors="np")
    for key in ("input_ids", "attention_mask"):
        assert isinstance(pt[key], torch.Tensor) and pt[key].dtype == torch.int64, f"{key}: {type(pt[key])}"
        assert np.array_equal(pt[key].numpy(), np_[key]), f"{key}: {pt[key]} != {np_[key]}"
    single = tok(TEXTS[0], return_tensors="pt").input_ids
    assert single.shape == (1, len(tok.encode(TEXTS[0]))), f"a single text gives a (1, seq) tensor, got {single.shape}"


def test_return_tensors_pt_without_torch_says_how_to_get_it(tok, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` sees where torch is not installed
    with pytest.raises(
        InvalidInputError,
        match=r"return_tensors='pt' needs PyTorch \(torch\), which is not importable "
        r"here; install Debian's python3-torch, or use return_tensors='np'",
    ):
        tok(TEXTS[0], return_tensors="pt")
    assert isinstance(tok(TEXTS[0], return_tensors="np")["input_ids"], np.ndarray), "'np' must still work"


def test_unknown_return_tensors_is_refused(tok):
    with pytest.raises(InvalidInputError, match="return_tensors='tf'.*'np'.*'pt'"):
        tok(TEXTS[0], return_tensors="tf")


def test_decode_accepts_torch_numpy_and_lists(tok):
    ids = tok(TEXTS, padding=True, return_tensors="np")["input_ids"]
    expected = tok.batch_decode(ids.tolist(), skip_special_tokens=True)
    for sequences in (ids, torch.from_numpy(ids), torch.from_numpy(ids).to(torch.int32), ids.tolist()):
        got = tok.batch_decode(sequences, skip_special_tokens=True)
        assert got == expected, f"{type(sequences).__name__}: {got} != {expected}"
        assert tok.decode(sequences[0]) == tok.decode(ids[0].tolist()), f"decode of a {type(sequences).__name__} row"
    assert tok.decode(torch.tensor(ids[0, -1])) == tok.decode([int(ids[0, -1])]), "a 0-d tensor decodes as one id"
    with pytest.raises(InvalidInputError, match="token ids must be integers"):
        tok.decode(torch.tensor([1.5, 2.0]))


def test_batch_encoding_to_cpu_as_transformers_scripts_write_it(tok):
    pt = tok(TEXTS, padding=True, return_tensors="pt").to("cpu")
    assert isinstance(pt.input_ids, torch.Tensor) and pt.input_ids.device.type == "cpu"
    np_ = tok(TEXTS, padding=True, return_tensors="np")
    assert np_.to("cpu")["input_ids"] is np_["input_ids"], "numpy arrays already live on the CPU"
    with pytest.raises(InvalidInputError, match="not a torch tensor.*CPU"):
        np_.to("cuda")


def test_a_tokenizers_whole_output_passed_as_input_ids_says_to_unpack_it(tok, model):
    for return_tensors in ("np", "pt"):
        inputs = tok(TEXTS[:1], return_tensors=return_tensors)
        with pytest.raises(
            InvalidInputError,
            match=r"tokenizer's whole output \(BatchEncoding\); unpack it, "
            r"model.generate\(\*\*inputs\)",
        ):
            model.generate(inputs, max_new_tokens=2)
        with pytest.raises(InvalidInputError, match=r"unpack it"):
            model(dict(inputs))
    assert model.generate(**tok(TEXTS[:1], return_tensors="np"), max_new_tokens=2).shape[1] > 0


def test_numpy_users_never_import_torch():
    code = (
        "import sys, numpy as np, habana_assist as ha\n"
        f"tok = ha.AutoTokenizer.from_pretrained({DRAFT!r})\n"
        f"model = ha.AutoModelForCausalLM.from_pretrained({DRAFT!r})\n"
        "inputs = tok(['def f(x):'], return_tensors='np')\n"
        "out = model.generate(**inputs, max_new_tokens=4, return_dict_in_generate=True, output_scores=True)\n"
        "model.generate(**inputs, max_new_tokens=4, do_sample=True)  # its seed: set_seed's generator, not torch's\n"
        "model([[1, 5, 9]]); tok.batch_decode(out.sequences); tok.decode([1, 2])\n"
        "assert isinstance(out.sequences, np.ndarray)\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, cwd=PACKAGE_PARENT, env=child_env(), timeout=120
    )
    assert result.returncode == 0, f"the script failed: {result.stderr[-2000:]}"
    assert result.stdout.strip() == "False", "numpy in and out must never import torch"


# ---- to_numpy / from_numpy / convert_output -------------------------------------------------------------------


def test_torch_cpu_tensors_are_read_in_place():
    t = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    array, kind = to_numpy(t, "input_ids")
    assert kind == "torch" and array.dtype == np.int64 and array.shape == (3, 4), f"{kind}, {array.dtype}"
    assert _address(array) == t.data_ptr() and np.shares_memory(array, t.numpy()), "expected a view, not a copy"
    t[1, 2] = 99
    assert array[1, 2] == 99, "a change to the tensor must show in the view"


def test_a_tensor_that_requires_grad_is_read_detached_in_place():
    t = torch.linspace(-1, 1, 8, requires_grad=True)
    array, kind = to_numpy(t, "scores")
    assert kind == "torch" and array.dtype == np.float32 and _address(array) == t.data_ptr(), "expected a view"
    y = t * 2  # a non-leaf result, as a logits processor returns
    assert np.array_equal(to_numpy(y, "scores")[0], y.detach().numpy())


@pytest.mark.parametrize(
    "make, dtype",
    [
        (lambda: torch.arange(6, dtype=torch.int32).reshape(2, 3).T, np.int32),  # strided: a view of another layout
        (lambda: torch.tensor([[True, False, True]]), np.bool_),
        (lambda: torch.tensor([[0.5, -1.25, 3.0]], dtype=torch.bfloat16), np.float32),  # numpy has no bfloat16
        (lambda: torch.tensor([[0.5, 2.0]], dtype=torch.float16), np.float16),
        (lambda: -torch.ones(2, 2), np.float32),
    ],
    ids=["transposed-int32", "bool", "bfloat16", "float16", "negated"],
)
def test_tensor_dtypes_and_layouts_are_kept_as_numpy_can(make, dtype):
    t = make()
    array, kind = to_numpy(t, "x")
    assert kind == "torch" and array.dtype == dtype, f"expected {np.dtype(dtype)}, got {array.dtype}"
    assert np.array_equal(array, t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()), "values differ"


def test_tensors_off_the_cpu_are_refused_with_the_fix():
    t = torch.empty(2, 3, dtype=torch.int64, device="meta")  # a real tensor with no CPU memory, as on a GPU
    with pytest.raises(InvalidInputError, match=r"input_ids is a torch tensor on device 'meta'.*input_ids\.cpu\(\)"):
        to_numpy(t, "input_ids")
    with pytest.raises(InvalidInputError, match=r"layout.*to_dense\(\)"):
        to_numpy(torch.eye(3).to_sparse(), "attention_mask")


def test_lists_and_numpy_arrays():
    array, kind = to_numpy([[1, 2, 3], [4, 5, 6]], "input_ids")
    assert kind == "list" and array.shape == (2, 3) and array.dtype.kind == "i", f"{kind}, {array.shape}, {array.dtype}"
    assert to_numpy((7, 8), "input_ids")[1] == "list"
    a = np.zeros((1, 4), dtype=np.int64)
    b, kind = to_numpy(a, "input_ids")
    assert b is a and kind == "numpy", "numpy arrays pass through untouched"


@pytest.mark.parametrize(
    "value",
    ["def f():", {"input_ids": [1]}, None, 5, {1, 2}, b"\x01\x02", [[1, 2], [3]], [1, "a", None]],
    ids=["str", "dict", "None", "int", "set", "bytes", "ragged", "mixed"],
)
def test_other_objects_are_refused_naming_the_argument(value):
    with pytest.raises(InvalidInputError, match="input_ids"):
        to_numpy(value, "input_ids")


def test_from_numpy_shares_memory_and_copies_read_only_arrays_quietly():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = from_numpy(a, "torch")
    assert isinstance(t, torch.Tensor) and t.data_ptr() == _address(a), "expected a tensor over the array's memory"
    frozen = np.arange(4, dtype=np.int64)
    frozen.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns on a read-only array; from_numpy must not hand it one
        t = from_numpy(frozen, "torch")
    assert t.tolist() == [0, 1, 2, 3] and t.data_ptr() != _address(frozen)
    assert from_numpy(a, "numpy") is a and from_numpy(a, "list") is a


def test_convert_output_converts_every_array_and_keeps_the_rest():
    out = GenerateDecoderOnlyOutput(
        sequences=np.ones((1, 3), dtype=np.int64),
        scores=(np.zeros((1, 5), np.float32), np.ones((1, 5), np.float32)),
        num_draft_tokens=4,
        proposed_per_position=np.array([2, 1]),
    )
    got = convert_output(out, "torch")
    assert isinstance(got, GenerateDecoderOnlyOutput) and got is not out
    assert isinstance(got.sequences, torch.Tensor) and got.sequences.dtype == torch.int64
    assert isinstance(got.scores, tuple) and all(isinstance(s, torch.Tensor) for s in got.scores)
    assert isinstance(got.proposed_per_position, torch.Tensor)
    assert got.num_draft_tokens == 4 and got.num_accepted_tokens is None, "numbers and None stay as they are"
    assert isinstance(out.sequences, np.ndarray) and isinstance(out.scores[0], np.ndarray), "the input is unchanged"
    logits = convert_output(CausalLMOutput(logits=np.zeros((1, 2, 3), np.float32)), "torch").logits
    assert isinstance(logits, torch.Tensor) and logits.shape == (1, 2, 3)
    assert convert_output(out, "numpy") is out and convert_output(out, "list") is out
    nested = convert_output({"a": [np.ones(2)], "b": (1, None)}, "torch")
    assert isinstance(nested["a"][0], torch.Tensor) and nested["b"] == (1, None)


def test_torch_available():
    assert torch_available() is True, "torch is installed here (scripts/setup.sh installs python3-torch)"


# ---- the model: torch in, torch out; lists in, numpy out ---------------------------------------------------------


def test_forward_torch_in_torch_out(tok, model):
    np_ = tok(TEXTS, padding=True, return_tensors="np")
    pt = tok(TEXTS, padding=True, return_tensors="pt")
    expected = model(np_["input_ids"], attention_mask=np_["attention_mask"]).logits
    got = model(pt["input_ids"], attention_mask=pt["attention_mask"]).logits
    assert isinstance(expected, np.ndarray), f"numpy in must give numpy out, got {type(expected)}"
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32, f"torch in, torch out; got {type(got)}"
    assert np.array_equal(got.numpy(), expected), "torch and numpy inputs must give the same logits"
    listed = model(np_["input_ids"].tolist(), attention_mask=np_["attention_mask"].tolist()).logits
    assert isinstance(listed, np.ndarray) and np.array_equal(listed, expected), "lists in, numpy out"


def test_generate_torch_in_torch_out(tok, model):
    pt = tok(TEXTS, padding=True, return_tensors="pt")
    np_ = tok(TEXTS, padding=True, return_tensors="np")
    expected = model.generate(**np_, max_new_tokens=6, return_dict_in_generate=True, output_scores=True)
    got = model.generate(**pt, max_new_tokens=6, return_dict_in_generate=True, output_scores=True)
    assert isinstance(got.sequences, torch.Tensor) and got.sequences.dtype == torch.int64, type(got.sequences)
    assert np.array_equal(got.sequences.numpy(), expected.sequences), "torch input changed the tokens"
    assert all(isinstance(s, torch.Tensor) for s in got.scores) and len(got.scores) == len(expected.scores)
    plain = model.generate(pt["input_ids"], attention_mask=pt["attention_mask"], max_new_tokens=6)
    assert isinstance(plain, torch.Tensor) and np.array_equal(plain.numpy(), expected.sequences)
    listed = model.generate(tok.encode(TEXTS[0]), max_new_tokens=6)
    assert isinstance(listed, np.ndarray) and listed.shape == (1, len(tok.encode(TEXTS[0])) + 6), (
        f"a 1-D list in gives a numpy (1, prompt + new) array, got {type(listed)} {np.shape(listed)}"
    )


def test_assisted_generate_torch_in_torch_out(tok):
    target = ha.AutoModelForCausalLM.from_pretrained(os.path.join(os.path.dirname(DRAFT), "pycode"))
    draft = ha.AutoModelForCausalLM.from_pretrained(DRAFT)
    pt = tok(TEXTS[:1], return_tensors="pt")
    plain = target.generate(**pt, max_new_tokens=10)
    assisted = target.generate(**pt, assistant_model=draft, max_new_tokens=10)
    assert isinstance(assisted, torch.Tensor) and torch.equal(assisted, plain), f"{assisted} != {plain}"


def test_logits_processors_see_torch_tensors_when_the_input_was_torch(tok, model):
    banned = tok.encode("    ", add_special_tokens=False)[0]
    seen = []

    def ban(input_ids, scores):
        seen.append(
            (type(input_ids), input_ids.dtype, tuple(input_ids.shape), type(scores), scores.dtype, tuple(scores.shape))
        )
        out = scores.clone().requires_grad_(True)  # a processor that builds a new, autograd-tracked tensor
        mask = torch.zeros_like(scores, dtype=torch.bool)
        mask[:, banned] = True
        return out.masked_fill(mask, float("-inf"))

    def ban_np(input_ids, scores):
        scores[:, banned] = -np.inf
        return scores

    pt = tok(["def f(x):\n"], return_tensors="pt")
    got = model.generate(**pt, max_new_tokens=8, logits_processor=[ban])
    expected = model.generate(**tok(["def f(x):\n"], return_tensors="np"), max_new_tokens=8, logits_processor=[ban_np])
    assert seen and all(s[:3] == (torch.Tensor, torch.int64, (1, s[2][1])) for s in seen), f"input_ids: {seen[:2]}"
    assert all(s[3:] == (torch.Tensor, torch.float32, (1, model.vocab_size)) for s in seen), f"scores: {seen[:2]}"
    assert isinstance(got, torch.Tensor) and np.array_equal(got.numpy(), expected), f"{got} != {expected}"
    assert banned not in got[0, pt["input_ids"].shape[1] :].tolist(), "the banned token was generated"


def test_model_refuses_what_is_no_array(model):
    with pytest.raises(InvalidInputError, match="input_ids"):
        model("def f():")
    with pytest.raises(InvalidInputError, match=r"device 'meta'.*\.cpu\(\)"):
        model(torch.empty(1, 3, dtype=torch.int64, device="meta"))
    with pytest.raises(InvalidInputError, match="attention_mask"):
        model.generate(torch.ones(1, 3, dtype=torch.int64), attention_mask={"mask": 1}, max_new_tokens=2)
