"""The model object in torch's types, as Transformers': dtype a torch.dtype and device torch.device("cpu");
parameters(), named_parameters() and state_dict() under Transformers' names, holding the checkpoint's values
bitwise in its shapes (views of the model's buffers where it holds that layout, copies otherwise, int8 / int4
dequantized), needing no grad, counting num_parameters(); get_input_embeddings() / get_output_embeddings() as torch
modules over those tensors (one weight object for a tied head); config.torch_dtype the dtype loaded; and, with
torch made unimportable, the same surface in numpy's types (checkpoints/state_dict.py, utils/tensors.py)."""

import gc
import sys
import weakref

import numpy as np
import pytest
import torch
from checkpoints import maps_file
from family_checkpoints import FAMILIES, write_family_checkpoint

import habana_assist as ha
from habana_assist.checkpoints.state_dict import dequantize

TORCH = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
IDS = np.array([[3, 17, 42, 5, 61]])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Checkpoints written once: name -> (directory, config dict, {name: float64 stored values})."""
    root = tmp_path_factory.mktemp("surface")
    specs = {
        "llama_bf16": dict(family="llama", dtype="BF16", tie_word_embeddings=False),
        "qwen2_f16_tied": dict(family="qwen2", dtype="F16", tie_word_embeddings=True),
        "gpt2_f32": dict(family="gpt2", dtype="F32"),  # tied, Conv1D matrices stored (in, out)
        "llama_f32_v5": dict(family="llama", dtype="F32", tie_word_embeddings=False, v5=True),
    }
    out = {}
    for name, spec in specs.items():
        spec = dict(spec)
        family = spec.pop("family")
        config, tensors = write_family_checkpoint(str(root / name), family, seed=len(out), **spec)
        out[name] = (str(root / name), config, tensors)
    return out


def load(store, case, **kwargs):
    return ha.AutoModelForCausalLM.from_pretrained(store[case][0], **kwargs)


def held(model, name):
    """The numpy array the model holds for a weight (loading.Weight.array)."""
    return model._weights[name].array


def shares(tensor, array):
    """Whether a torch tensor (or numpy array) and a numpy array share memory."""
    if isinstance(tensor, torch.Tensor):
        tensor = tensor.detach()
        tensor = (tensor.view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor).numpy()
    return np.shares_memory(tensor, array)


# ---- dtype, device, config.torch_dtype ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, expected", [(None, "bfloat16"), ("float32", "float32"), ("float16", "float16"), (torch.float32, "float32")]
)
def test_dtype_and_device_are_torchs_and_work_where_torch_takes_them(store, dtype, expected):
    model = load(store, "llama_bf16", dtype=dtype)
    assert isinstance(model.dtype, torch.dtype) and model.dtype == TORCH[expected], (
        f"model.dtype: expected {TORCH[expected]}, got {model.dtype!r}"
    )
    assert torch.zeros(3, dtype=model.dtype).dtype == TORCH[expected]
    assert isinstance(model.device, torch.device) and model.device.type == "cpu" and str(model.device) == "cpu"
    assert torch.ones(2, device=model.device).device == model.device
    assert model.to(model.device) is model, "model.to(model.device) is a no-op on the CPU"
    assert {p.dtype for p in model.parameters()} == {TORCH[expected]}, "every weight of a float model in its dtype"
    assert model.weight_dtype == expected and model.is_quantized is False
    assert expected in repr(model), repr(model)


@pytest.mark.parametrize("dtype", [None, "float32", "bfloat16", "float16"])
def test_config_torch_dtype_is_the_dtype_loaded(store, dtype):
    """As Transformers: a loaded model's config says the dtype it was loaded in (torch's dtype in memory, the name in
    to_dict() and config.json); the file's config.json says bfloat16."""
    model = load(store, "llama_bf16", dtype=dtype)
    name = dtype or "bfloat16"
    assert model.config.torch_dtype == TORCH[name] and model.config.dtype == TORCH[name], (
        f"expected {name}, got torch_dtype={model.config.torch_dtype!r}, dtype={model.config.dtype!r}"
    )
    assert model.config.to_dict()["torch_dtype"] == name, model.config.to_dict()["torch_dtype"]
    assert ha.AutoConfig.from_pretrained(store["llama_bf16"][0]).torch_dtype == torch.bfloat16, (
        "a config read from config.json says its dtype in torch's type"
    )


def test_a_transformers_5_config_keeps_dtype_and_torch_dtype_in_agreement(store, tmp_path):
    model = load(store, "llama_f32_v5", dtype="bfloat16")
    d = model.config.to_dict()
    assert d["dtype"] == d["torch_dtype"] == "bfloat16", f"dtype={d['dtype']!r}, torch_dtype={d['torch_dtype']!r}"
    model.save_pretrained(tmp_path / "saved")
    again = ha.AutoConfig.from_pretrained(tmp_path / "saved")
    assert again.dtype == again.torch_dtype == torch.bfloat16


def test_setting_config_torch_dtype_holds_the_name(store):
    config = ha.AutoConfig.from_pretrained(store["llama_bf16"][0])
    config.torch_dtype = torch.float16
    assert config.to_dict()["torch_dtype"] == "float16" and config.torch_dtype == torch.float16
    config.torch_dtype = "torch.float32"
    assert config.to_dict()["torch_dtype"] == "float32" and config.dtype == torch.float32


@pytest.mark.parametrize("quant", ["int8", "w8a8", "int4"])
def test_a_quantized_model_reports_its_unquantized_dtype_as_bitsandbytes_models_do(store, quant):
    """Transformers' dtype of a bitsandbytes model is its first floating-point parameter's (the dtype it was loaded
    in); the integer format is is_loaded_in_8bit / is_loaded_in_4bit, and here weight_dtype."""
    model = load(store, "llama_bf16", dtype=quant)
    assert model.dtype == torch.bfloat16 and model.config.torch_dtype == torch.bfloat16, (
        f"{quant}: expected torch.bfloat16 (the file's dtype), got {model.dtype!r}, {model.config.torch_dtype!r}"
    )
    assert model.weight_dtype == quant and model.is_quantized
    assert (model.is_loaded_in_8bit, model.is_loaded_in_4bit) == (quant != "int4", quant == "int4")
    assert f"dtype={quant}" in repr(model), repr(model)


# ---- parameters(), named_parameters(), state_dict() --------------------------------------------------------------

# Transformers' LlamaDecoderLayer registers self_attn, mlp, input_layernorm, post_attention_layernorm: its
# state_dict's order within a layer (the files here are written in the order a layer applies them)
LLAMA_LAYER = [
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
]


def expected_names(config, tensors, family):
    """The file's tensors, a tied lm_head.weight last (Transformers' CausalLM registers lm_head last)."""
    tied = config.get("tie_word_embeddings", family == "gpt2")  # GPT-2's config may leave it out: tied
    return list(tensors) + (["lm_head.weight"] if tied else [])


def check_names(got, config, tensors, family, what):
    expected = expected_names(config, tensors, family)
    assert sorted(got) == sorted(expected), f"{what}: names {sorted(got)} != {sorted(expected)}"
    assert got[0] == expected[0] and got[-1] == expected[-1], f"{what}: {got[0]}...{got[-1]} first and last"
    if family == "llama":
        layer = [n[len("model.layers.0.") :] for n in got if n.startswith("model.layers.0.")]
        assert layer == LLAMA_LAYER, f"{what}: a layer's order {layer} is not Transformers' {LLAMA_LAYER}"


@pytest.mark.parametrize("case", ["llama_bf16", "qwen2_f16_tied", "gpt2_f32"])
@pytest.mark.parametrize("repack", [True, False])
def test_state_dict_holds_the_checkpoints_tensors_bitwise_under_its_names(store, case, repack):
    directory, config, tensors = store[case]
    model = load(store, case, repack=repack)
    sd = model.state_dict()
    family = config["model_type"]
    check_names(list(sd), config, tensors, family, f"{case} state_dict")
    for name, values in tensors.items():
        got = sd[name]
        assert isinstance(got, torch.Tensor) and not isinstance(got, torch.nn.Parameter), f"{name}: {type(got)}"
        assert tuple(got.shape) == values.shape, f"{name}: shape {tuple(got.shape)}, the file's {values.shape}"
        assert got.dtype == model.dtype, f"{name}: dtype {got.dtype}, the model's {model.dtype}"
        assert np.array_equal(got.float().numpy(), values.astype(np.float32)), f"{name}: values differ from the file"
    if "lm_head.weight" not in tensors:
        embed = "transformer.wte.weight" if family == "gpt2" else "model.embed_tokens.weight"
        assert sd["lm_head.weight"].data_ptr() == sd[embed].data_ptr(), "a tied head is the embedding's tensor"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_familys_state_dict_is_its_checkpoint_bitwise(tmp_path, family):
    """Phi-3's fused projections, Gemma's norms (held as stored: the 1 + weight is the core's), Qwen3's q/k norms,
    GPT-2's Conv1D: each family's tensors come back as the file holds them, in panels and row-major."""
    config, tensors = write_family_checkpoint(str(tmp_path), family, dtype="BF16")
    for repack in (True, False):
        model = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path), repack=repack)
        sd = model.state_dict()
        assert sorted(sd) == sorted(expected_names(config, tensors, family)), f"{family}: {sorted(sd)}"
        for name, values in tensors.items():
            got = sd[name]
            assert got.dtype == torch.bfloat16 and tuple(got.shape) == values.shape, f"{family} {name}: {got.shape}"
            assert np.array_equal(got.float().numpy(), values), f"{family} {name} (repack={repack}): values differ"
        assert sum(p.numel() for p in model.parameters()) == model.num_parameters()


@pytest.mark.parametrize("case", ["llama_bf16", "qwen2_f16_tied", "gpt2_f32"])
def test_parameters_count_as_num_parameters_each_once(store, case):
    directory, config, tensors = store[case]
    model = load(store, case)
    params = dict(model.named_parameters())
    check_names(
        list(params) + ([] if "lm_head.weight" in tensors else ["lm_head.weight"]),
        config,
        tensors,
        config["model_type"],
        f"{case} named_parameters (each tensor once, a tied head left out)",
    )
    assert "lm_head.weight" in params or "lm_head.weight" not in tensors
    assert all(isinstance(p, torch.nn.Parameter) and p.requires_grad is False for p in params.values())
    assert sum(p.numel() for p in model.parameters()) == model.num_parameters() == sum(v.size for v in tensors.values())
    every = [name for name, _ in model.named_parameters(prefix="m.", remove_duplicate=False)]
    assert every == ["m." + n for n in model.state_dict()], "remove_duplicate=False: every key, a tied head too"
    first = next(iter(params))
    assert model.state_dict(keep_vars=True)[first] is params[first], "keep_vars=True gives the Parameters"
    assert next(model.parameters()) is params[first], "the same object while it is held"
    target = {}
    assert model.state_dict(destination=target, prefix="x.") is target and "x." + first in target


def test_weights_held_in_the_checkpoints_layout_are_views_and_the_rest_copies(store):
    # repack=True (the default): matrices in panels are copies; the untied embedding is held row-major (a view)
    model = load(store, "llama_bf16")
    params = dict(model.named_parameters())
    for name in ("model.layers.0.self_attn.q_proj.weight", "lm_head.weight"):
        assert not shares(params[name], held(model, name)), f"{name} is held in panels: a copy"
    assert shares(params["model.embed_tokens.weight"], held(model, "model.embed_tokens.weight")), (
        "the untied embedding is held row-major: a view"
    )
    # repack=False with a conversion: row-major copies the load made, viewed; float32 vectors viewed
    converted = load(store, "llama_bf16", repack=False, dtype="float32")
    for name, p in converted.named_parameters():
        assert shares(p, held(converted, name)), f"{name}: expected a view of the model's buffer"
    # repack=False as stored: the file's read-only map; torch has no read-only tensors, so a copy
    mapped = load(store, "llama_bf16", repack=False)
    name = "model.layers.0.mlp.down_proj.weight"
    assert maps_file(held(mapped, name)) and not shares(mapped.state_dict()[name], held(mapped, name))
    # GPT-2's Conv1D matrices held (out, in): a transposed view in the checkpoint's (in, out)
    gpt2 = load(store, "gpt2_f32", repack=False, dtype="float32")
    c_attn = dict(gpt2.named_parameters())["transformer.h.0.attn.c_attn.weight"]
    assert tuple(c_attn.shape) == store["gpt2_f32"][2]["transformer.h.0.attn.c_attn.weight"].shape
    assert not c_attn.is_contiguous() and shares(c_attn, held(gpt2, "transformer.h.0.attn.c_attn.weight"))


def test_no_weight_needs_grad_and_writes_do_what_the_docs_say(store):
    """torch has no read-only tensors: a write into a view is a write into the model's weights (as into a
    Transformers model's parameters), a write into a copy changes nothing, and a matrix the file's read-only map holds
    comes as a copy, so that a write into it cannot kill the process (checkpoints/state_dict.py)."""
    model = load(store, "llama_bf16", dtype="float32")  # panels (copies), an untied row-major embedding (a view)
    assert not any(p.requires_grad for p in model.parameters())
    before = model(IDS).logits
    params = dict(model.named_parameters())
    params["model.layers.0.mlp.down_proj.weight"].mul_(0)  # a copy of a matrix in panels
    params["model.norm.weight"].mul_(1)  # a float32 model's vector: a view, written with the same values
    assert np.array_equal(model(IDS).logits, before), "a write into a copy changed the model"
    params["model.embed_tokens.weight"][IDS[0, -1]] = 0  # a view
    after = model(IDS).logits
    assert np.array_equal(after[0, :-1], before[0, :-1]) and not np.array_equal(after[0, -1], before[0, -1]), (
        "a write into the embedding's view must reach the model, for the rewritten token only"
    )
    mapped = load(store, "llama_bf16", repack=False)  # as stored: the file's map
    name = "model.layers.1.self_attn.o_proj.weight"
    assert maps_file(held(mapped, name))
    logits = mapped(IDS).logits
    mapped.state_dict()[name].zero_()  # a copy: no SIGSEGV, no change
    assert np.array_equal(mapped(IDS).logits, logits)


def test_a_tensor_is_the_same_object_while_held_and_nothing_is_kept_after(store):
    model = load(store, "llama_bf16")
    name = "model.layers.1.mlp.up_proj.weight"  # in panels: a copy, which the model must not keep
    first = dict(model.named_parameters())[name]
    assert dict(model.named_parameters())[name] is first, "asked again while held: the same object"
    kept = weakref.ref(first)
    del first
    gc.collect()
    assert kept() is None, "the model kept a copy the caller dropped"


@pytest.mark.parametrize("quant, group, steps", [("int8", 64, 127), ("int4", 32, 7)])
def test_int8_and_int4_parameters_are_the_dequantized_values(store, quant, group, steps):
    """Each weight comes back as scale * q (float32), within half a step of the file's value, the step being the
    group's max |w| / steps (csrc/ha.h), in the checkpoint's shape; vectors and the untied embedding stay bfloat16."""
    directory, config, tensors = store["llama_bf16"]
    model = load(store, "llama_bf16", dtype=quant)
    params = dict(model.named_parameters())
    assert sum(p.numel() for p in params.values()) == model.num_parameters()
    for name, values in tensors.items():
        p = params[name]
        assert tuple(p.shape) == values.shape, f"{name}: {tuple(p.shape)} != {values.shape}"
        if values.ndim == 1 or name == "model.embed_tokens.weight":
            assert p.dtype == torch.bfloat16 and np.array_equal(p.float().numpy(), values), name
            continue
        assert p.dtype == torch.float32, f"{name}: {p.dtype}"
        rows, cols = values.shape
        padded = np.zeros((rows, -(-cols // group) * group))
        padded[:, :cols] = np.abs(values)
        step = np.repeat(padded.reshape(rows, -1, group).max(axis=2) / steps, group, axis=1)[:, :cols]
        error = np.abs(p.numpy().astype(np.float64) - values)
        assert (error <= step / 2 * (1 + 1e-5) + 1e-12).all(), f"{name}: off by {error.max()} (steps {step.max()})"
        assert not np.array_equal(p.numpy(), values.astype(np.float32)), f"{name}: not quantized?"


@pytest.mark.parametrize("case", ["llama_bf16", "qwen2_f16_tied", "gpt2_f32"])
def test_w8a8_parameters_are_int8s_values_bit_for_bit(store, case):
    """w8a8 holds int8's quantization (the same integers and scales) in panels for int8 activations: every tensor of
    its state_dict equals the int8 model's, bit for bit, whatever the rows' count modulo the panels' 16."""
    w8a8, int8 = load(store, case, dtype="w8a8").state_dict(), load(store, case, dtype="int8").state_dict()
    assert list(w8a8) == list(int8)
    for name in int8:
        a, b = w8a8[name].float().numpy(), int8[name].float().numpy()
        assert a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"{case} {name}"


def test_bfloat16_pairs_parameters_are_the_bfloat16_models_bit_for_bit(store):
    """bfloat16-pairs keeps a bfloat16 checkpoint's bits (in pair panels for bf16 activations): its state_dict is the
    bfloat16 model's, tensor for tensor, bit for bit, and it reports torch.bfloat16 as that model does."""
    pairs, plain = load(store, "llama_bf16", dtype="bfloat16-pairs"), load(store, "llama_bf16", dtype="bfloat16")
    assert pairs.dtype == plain.dtype == torch.bfloat16 and pairs.weight_dtype == "bfloat16-pairs"
    a, b = pairs.state_dict(), plain.state_dict()
    assert list(a) == list(b)
    for name in b:
        x, y = a[name].float().numpy(), b[name].float().numpy()
        assert x.shape == y.shape and np.array_equal(x.view(np.uint32), y.view(np.uint32)), name


def test_dequantize_reads_the_cores_blocks():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((5, 70)).astype(np.float32)  # a partial last group in each row
    for quant in ("int8", "int4"):
        blocks = np.zeros((5, ha._core.row_bytes(quant, 70)), dtype=np.uint8)
        ha._core.quantize(w, "float32", blocks, quant)
        got = dequantize(blocks, quant, 70)
        assert got.shape == (5, 70) and got.dtype == np.float32
        steps = 127 if quant == "int8" else 7
        assert np.abs(got - w).max() <= np.abs(w).max() / steps / 2 * 1.0001, f"{quant}: {np.abs(got - w).max()}"


# ---- embeddings --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case, tied", [("llama_bf16", False), ("qwen2_f16_tied", True), ("gpt2_f32", True)])
def test_embeddings_are_torch_modules_over_the_models_weights(store, case, tied):
    directory, config, tensors = store[case]
    model = load(store, case)
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    assert isinstance(embed, torch.nn.Embedding) and isinstance(head, torch.nn.Linear) and head.bias is None
    vocab, hidden = model.config.vocab_size, model.config.hidden_size
    assert (embed.num_embeddings, embed.embedding_dim) == (vocab, hidden)
    assert (head.in_features, head.out_features) == (hidden, vocab)
    assert (embed.weight is head.weight) == tied, f"tied={tied}: is the head's weight the embedding's object?"
    embed_name = "transformer.wte.weight" if case == "gpt2_f32" else "model.embed_tokens.weight"
    assert embed.weight is dict(model.named_parameters())[embed_name]
    rows = embed(torch.from_numpy(IDS))
    assert torch.equal(rows[0], torch.from_numpy(tensors[embed_name][IDS[0]]).to(model.dtype))
    assert model.get_input_embeddings() is embed, "the same module while it is held"
    if model.dtype != torch.float16:  # torch's CPU matmul has no float16 (before torch 2)
        x = torch.randn(2, hidden, dtype=model.dtype)
        assert torch.equal(head(x), x @ head.weight.T)


# ---- wrapped models ----------------------------------------------------------------------------------------------


def test_a_wrapped_models_surface_is_its_own(store):
    from torch_causal_lm import TorchCausalLM

    torch_model = TorchCausalLM(store["llama_bf16"][0])
    wrapped = ha.wrap(torch_model)
    assert wrapped.device == torch.device("cpu") and wrapped.dtype == torch.float32
    assert [n for n, _ in wrapped.named_parameters()] == [n for n, _ in torch_model.named_parameters()]
    assert all(a is b for a, b in zip(wrapped.parameters(), torch_model.parameters()))


# ---- without torch -----------------------------------------------------------------------------------------------


@pytest.fixture
def no_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` sees where torch is not installed


def test_without_torch_dtype_is_a_name_and_device_a_cpu_string(store, no_torch):
    model = load(store, "llama_bf16")
    assert model.dtype == "bfloat16" and isinstance(model.dtype, str)
    assert model.device == "cpu" and str(model.device) == "cpu" and model.device.type == "cpu"
    assert model.config.torch_dtype == "bfloat16"
    assert load(store, "llama_bf16", dtype="float16").config.torch_dtype == "float16"
    assert np.zeros(2, dtype=load(store, "llama_bf16", dtype="float32").dtype).dtype == np.float32


@pytest.mark.parametrize("repack", [True, False])
def test_without_torch_the_weights_are_read_only_numpy_arrays(store, no_torch, repack):
    directory, config, tensors = store["llama_bf16"]
    model = load(store, "llama_bf16", repack=repack)
    sd = model.state_dict()
    check_names(list(sd), config, tensors, "llama", "state_dict without torch")
    for name, values in tensors.items():
        got = sd[name]
        assert isinstance(got, np.ndarray) and not got.flags.writeable, f"{name}: {type(got)}"
        assert got.dtype == np.float32, f"{name}: numpy has no bfloat16, so float32 values; got {got.dtype}"
        assert np.array_equal(got, values), f"{name}: values differ from the file"
    assert sum(p.size for p in model.parameters()) == model.num_parameters()
    f16 = load(store, "llama_bf16", repack=repack, dtype="float16")
    name = "model.layers.0.self_attn.v_proj.weight"
    p = dict(f16.named_parameters())[name]
    assert p.dtype == np.float16 and shares(p, held(f16, name)) == (not repack), "row-major: a view; panels: a copy"


def test_without_torch_the_embeddings_are_small_numpy_modules(store, no_torch):
    directory, config, tensors = store["qwen2_f16_tied"]
    model = load(store, "qwen2_f16_tied")
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    assert (embed.num_embeddings, embed.embedding_dim) == (config["vocab_size"], config["hidden_size"])
    assert (head.in_features, head.out_features) == (config["hidden_size"], config["vocab_size"])
    assert embed.weight is head.weight, "a tied head's weight is the embedding's"
    assert np.array_equal(embed(IDS), tensors["model.embed_tokens.weight"][IDS].astype(np.float16))
    x = np.ones((1, config["hidden_size"]), dtype=np.float32)
    assert np.allclose(head(x), x @ tensors["model.embed_tokens.weight"].T, rtol=1e-5)
