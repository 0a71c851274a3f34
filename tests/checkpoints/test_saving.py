"""model.save_pretrained / save_model and tokenizer.save_pretrained write Hugging Face checkpoint directories that
load back to the same model, bit for bit: the same weights, the same logits, the same token ids.

The written safetensors files are checked by a reader written here (struct + json), independent of the package's
own, and against torch's view of the original checkpoint's bytes."""

import json
import os
import shutil
import struct

import numpy as np
import pytest
import torch
from checkpoints import write_random_checkpoint

import habana_assist as ha
from habana_assist import _core
from habana_assist.checkpoints.loading import PANEL_ROWS
from habana_assist.checkpoints.safetensors import read_safetensors, save_file, to_bfloat16_bits
from habana_assist.checkpoints.saving import parse_shard_size, save_model, state_dict_names, unpack_panels
from habana_assist.errors import InvalidInputError

DRAFT = os.path.join(os.path.dirname(ha.__file__), "pretrained", "pycode-draft")
PROMPT = "def fibonacci(n):\n    if n < 2:\n        return n\n"
_BYTES = {"F32": 4, "BF16": 2, "F16": 2}


@pytest.fixture(scope="module")
def tok():
    return ha.AutoTokenizer.from_pretrained(DRAFT)


@pytest.fixture(scope="module")
def prompt_ids(tok):
    return tok([PROMPT, "import os"], padding=True, return_tensors="np")


def _logits(model, inputs):
    return model(inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits


def _assert_bitwise(a, b, what):
    assert a.shape == b.shape and a.dtype == b.dtype, f"{what}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    bits = a.dtype.itemsize * 8
    ua, ub = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
    differ = np.count_nonzero(ua != ub)
    assert differ == 0, f"{what}: expected bitwise-equal {bits}-bit values, {differ} of {a.size} differ"


def _assert_same_weights(original, reloaded):
    """The two models hold the same weights, bit for bit, in the same layout (panels or row-major)."""
    a, b = original._weights, reloaded._weights
    assert set(a) == set(b), f"tensor names differ: {sorted(set(a) ^ set(b))}"
    for name in a:
        wa, wb = a[name], b[name]
        assert (wa.dtype, wa.cols, wa.panels, wa.rows) == (wb.dtype, wb.cols, wb.panels, wb.rows), (
            f"{name}: expected {wa[1:]}, reloaded {wb[1:]}"
        )
        _assert_bitwise(np.asarray(wa.array), np.asarray(wb.array), name)


# ---- an independent safetensors reader ------------------------------------------------------------------------


def _read_raw(path):
    """-> (header dict, {name: bytes}) by the format's definition: u64 little-endian header size, JSON header,
    data section; checking what the format's reference writer guarantees."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0, f"{path}: header of {n} bytes, expected a multiple of 8 (padded as the reference writer)"
    text = blob[8 : 8 + n].decode("utf-8")
    assert text.startswith("{") and text.rstrip(" ").endswith("}") and len(text) - len(text.rstrip(" ")) < 8, (
        f"{path}: the header must be a JSON object padded with fewer than 8 trailing spaces, got ...{text[-12:]!r}"
    )
    header = json.loads(text)
    data = blob[8 + n :]
    assert header.get("__metadata__") == {"format": "pt"}, f"{path}: metadata {header.get('__metadata__')}"
    spans, tensors = [], {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        size = _BYTES[entry["dtype"]] * int(np.prod(entry["shape"], dtype=np.int64))
        assert end - begin == size, f"{path}: {name} spans {end - begin} bytes for {entry['dtype']}{entry['shape']}"
        assert (8 + n + begin) % _BYTES[entry["dtype"]] == 0, f"{path}: {name} is not aligned to its element size"
        spans.append((begin, end))
        tensors[name] = data[begin:end]
    spans.sort()
    assert spans[0][0] == 0 and spans[-1][1] == len(data) and all(a[1] == b[0] for a, b in zip(spans, spans[1:])), (
        f"{path}: the tensors must tile the data section exactly, got spans {spans[:4]}..."
    )
    return header, tensors


def _weight_files(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))


# ---- round trips of the shipped model -------------------------------------------------------------------------


@pytest.mark.parametrize("repack", [True, False], ids=["repack", "row-major"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_saved_model_reloads_to_bitwise_equal_weights_and_logits(tmp_path, prompt_ids, repack, dtype):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT, dtype=dtype, repack=repack)
    save_model(model, tmp_path / "saved")
    assert sorted(os.listdir(tmp_path / "saved")) == ["config.json", "generation_config.json", "model.safetensors"], (
        f"got {sorted(os.listdir(tmp_path / 'saved'))}"
    )
    reloaded = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "saved", repack=repack)
    assert reloaded.weight_dtype == dtype, f"expected the reloaded model in {dtype}, got {reloaded.weight_dtype}"
    _assert_same_weights(model, reloaded)
    _assert_bitwise(_logits(model, prompt_ids), _logits(reloaded, prompt_ids), "logits")


def test_saving_as_loaded_writes_the_checkpoints_own_tensors(tmp_path):
    """Loaded as stored and repacked into bfloat16 panels, then unpacked on save: every tensor's bytes are the
    shipped file's, names and dtypes included (so the panels' inverse permutation is exact)."""
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT, repack=True)
    assert model._weights["model.embed_tokens.weight"].panels, "test setup: the embedding should be in panels"
    save_model(model, tmp_path)
    header, saved = _read_raw(tmp_path / "model.safetensors")
    original_header, original = _read_raw(os.path.join(DRAFT, "model.safetensors"))
    assert set(saved) == set(original), f"tensor names differ: {sorted(set(saved) ^ set(original))}"
    for name in original:
        assert (header[name]["dtype"], header[name]["shape"]) == (
            original_header[name]["dtype"],
            original_header[name]["shape"],
        ), name
        assert saved[name] == original[name], f"{name}: the saved bytes differ from the shipped checkpoint's"


def test_saved_tensor_bytes_match_torchs_view_of_the_original(tmp_path):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT, dtype="float32", repack=True)
    save_model(model, tmp_path)
    header, saved = _read_raw(tmp_path / "model.safetensors")
    name = "model.layers.1.mlp.down_proj.weight"
    bits, stored = read_safetensors(os.path.join(DRAFT, "model.safetensors"))[name]
    assert stored == "BF16" and header[name]["dtype"] == "F32", f"test setup: {stored} -> {header[name]['dtype']}"
    expected = torch.frombuffer(bytearray(bits.tobytes()), dtype=torch.bfloat16).reshape(bits.shape).float()
    got = torch.frombuffer(bytearray(saved[name]), dtype=torch.float32).reshape(header[name]["shape"])
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32)), (
        f"{name}: saved float32 values differ from the original bfloat16 ones in {(got != expected).sum()} places"
    )


def test_tensor_names_and_order_are_transformers(tmp_path):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT)
    save_model(model, tmp_path)
    header, _ = _read_raw(tmp_path / "model.safetensors")
    names = state_dict_names(model.config)
    assert sorted(n for n in header if n != "__metadata__") == sorted(names), "names differ from Transformers'"
    assert "lm_head.weight" not in header, "a tied lm_head must be left out, as Transformers does"
    assert (
        names[:3]
        == [
            "model.embed_tokens.weight",
            "model.layers.0.self_attn.q_proj.weight",
            "model.layers.0.self_attn.k_proj.weight",
        ]
        and names[-1] == "model.norm.weight"
    ), names[:3]


# ---- sharding -------------------------------------------------------------------------------------------------


def test_sharded_save_has_an_index_covering_every_tensor_once_and_reloads_bitwise(tmp_path, prompt_ids):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT, repack=True)
    limit = 1_000_000
    save_model(model, tmp_path, max_shard_size="1MB")
    files = _weight_files(tmp_path)
    n = len(files)
    assert n > 2 and files == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)], f"got {files}"
    assert "model.safetensors" not in os.listdir(tmp_path)
    with open(tmp_path / "model.safetensors.index.json") as f:
        index = json.load(f)
    assert set(index) == {"metadata", "weight_map"}, f"index keys {sorted(index)}"
    seen, total = {}, 0
    for file in files:
        header, tensors = _read_raw(tmp_path / file)
        size = sum(len(b) for b in tensors.values())
        assert size <= limit or len(tensors) == 1, f"{file}: {size} bytes in {len(tensors)} tensors above {limit}"
        for name, data in tensors.items():
            assert name not in seen, f"{name} is in both {seen[name]} and {file}"
            seen[name] = file
            total += len(data)
    assert index["weight_map"] == seen, "weight_map must name exactly the shard holding each tensor"
    assert sorted(seen) == sorted(state_dict_names(model.config)), "every tensor must be saved exactly once"
    assert index["metadata"]["total_size"] == total, f"total_size {index['metadata']['total_size']} != {total}"
    reloaded = ha.AutoModelForCausalLM.from_pretrained(tmp_path, repack=True)
    _assert_same_weights(model, reloaded)
    _assert_bitwise(_logits(model, prompt_ids), _logits(reloaded, prompt_ids), "logits")


def test_shards_are_cut_in_state_dict_order_as_huggingface_hub(tmp_path):
    """A tensor that would take a shard past the limit starts the next; one larger than the limit is alone."""
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT)
    embed_bytes = 4096 * 256 * 2
    save_model(model, tmp_path, max_shard_size=embed_bytes - 1)  # the embedding alone passes the limit
    with open(tmp_path / "model.safetensors.index.json") as f:
        weight_map = json.load(f)["weight_map"]
    order = state_dict_names(model.config)
    shard_of = [weight_map[name] for name in order]
    assert shard_of == sorted(shard_of), "shards must follow Transformers' state_dict order"
    assert [name for name in order if weight_map[name] == shard_of[0]] == ["model.embed_tokens.weight"], (
        "the tensor larger than max_shard_size must get a shard of its own"
    )


def test_saving_again_removes_the_earlier_saves_weight_files(tmp_path, prompt_ids):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT)
    save_model(model, tmp_path, max_shard_size="1MB")
    save_model(model, tmp_path)
    assert _weight_files(tmp_path) == ["model.safetensors"] and not os.path.exists(
        tmp_path / "model.safetensors.index.json"
    ), f"stale shards left: {sorted(os.listdir(tmp_path))}"
    save_model(model, tmp_path, max_shard_size="2MB")  # a stale model.safetensors would shadow the shards
    assert "model.safetensors" not in os.listdir(tmp_path), f"got {sorted(os.listdir(tmp_path))}"
    _assert_bitwise(
        _logits(model, prompt_ids), _logits(ha.AutoModelForCausalLM.from_pretrained(tmp_path), prompt_ids), "logits"
    )


def test_a_model_mapping_its_directory_can_save_over_it(tmp_path, prompt_ids):
    """repack=False keeps the weights as views of model.safetensors' memory map; saving over that file renames a
    new one into place, so the model keeps its (old) pages and both models agree."""
    directory = tmp_path / "ckpt"
    shutil.copytree(DRAFT, directory)
    model = ha.AutoModelForCausalLM.from_pretrained(directory, repack=False)
    before = _logits(model, prompt_ids)
    save_model(model, directory)
    _assert_bitwise(before, _logits(model, prompt_ids), "logits of the model whose file was replaced")
    _assert_bitwise(
        before,
        _logits(ha.AutoModelForCausalLM.from_pretrained(directory, repack=False), prompt_ids),
        "logits of the reloaded model",
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        ("5GB", 5 * 10**9),
        ("500MB", 5 * 10**8),
        ("10KB", 10**4),
        (10, 10),
        ("5gb", 5 * 10**9),
        (" 0.5MB ", 500_000),
        ("1TB", 10**12),
        ("2GiB", 2 * 2**30),
        (np.int64(7), 7),
    ],
)
def test_max_shard_size_is_read_as_transformers_reads_it(value, expected):
    assert parse_shard_size(value) == expected, f"{value!r}: expected {expected}, got {parse_shard_size(value)}"


@pytest.mark.parametrize("value", ["5", "five GB", "5 GB B", "", 0, -3, True, 1.5, None, "0KB"])
def test_bad_max_shard_size_is_refused(value):
    with pytest.raises(InvalidInputError, match="max_shard_size"):
        parse_shard_size(value)


# ---- other checkpoints: biases, untied heads, odd shapes, mixed dtypes -----------------------------------------


@pytest.mark.parametrize(
    "arch, kwargs",
    [
        ("Qwen2ForCausalLM", dict(dtype="F16", vocab_size=70, intermediate_size=40)),
        ("LlamaForCausalLM", dict(dtype="F32", attention_bias=True, mlp_bias=True, vocab_size=37, num_layers=3)),
        (
            "MistralForCausalLM",
            dict(dtype="BF16", tie_word_embeddings=True, sliding_window=8, hidden_size=48, num_heads=3, num_kv_heads=1),
        ),
    ],
    ids=["qwen2-f16", "llama-bias-f32", "mistral-bf16-tied"],
)
@pytest.mark.parametrize("dtype", [None, "bfloat16", "float32"], ids=["as-stored", "bf16", "f32"])
@pytest.mark.parametrize("repack", [True, False], ids=["repack", "row-major"])
def test_random_checkpoints_round_trip(tmp_path, arch, kwargs, dtype, repack):
    write_random_checkpoint(tmp_path / "src", arch=arch, **kwargs)
    model = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "src", dtype=dtype, repack=repack)
    save_model(model, tmp_path / "out")
    reloaded = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "out", repack=repack)
    _assert_same_weights(model, reloaded)
    ids = np.arange(12, dtype=np.int64).reshape(2, 6) % model.vocab_size
    _assert_bitwise(model(ids).logits, reloaded(ids).logits, "logits")
    header, _ = _read_raw(tmp_path / "out" / "model.safetensors")
    assert ("lm_head.weight" in header) == (not model.config.tie_word_embeddings), "lm_head kept iff untied"
    biases = sorted(n for n in header if n.endswith(".bias"))
    assert biases == sorted(n for n in state_dict_names(model.config) if n.endswith(".bias")) and (
        biases or arch == "MistralForCausalLM"
    ), f"biases saved: {biases}"


def test_vectors_not_exact_in_the_model_dtype_are_saved_as_float32(tmp_path):
    """Norms stored in float32 beside bfloat16 matrices are held as float32; writing them as bfloat16 would round
    them, so they stay float32 and the reload is bitwise."""
    write_random_checkpoint(tmp_path / "src", dtype="BF16")
    tensors = read_safetensors(tmp_path / "src" / "model.safetensors")
    mixed = {name: (a.copy(), dt) for name, (a, dt) in tensors.items()}
    mixed["model.norm.weight"] = (np.linspace(0.5, 1.5, 32, dtype=np.float32) + np.float32(1e-7), "F32")
    save_file(mixed, tmp_path / "src" / "model.safetensors", metadata={"format": "pt"})
    model = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "src")
    save_model(model, tmp_path / "out")
    header, _ = _read_raw(tmp_path / "out" / "model.safetensors")
    assert (
        header["model.norm.weight"]["dtype"] == "F32"
        and header["model.layers.0.input_layernorm.weight"]["dtype"] == "BF16"
    ), f"got {header['model.norm.weight']['dtype']}, {header['model.layers.0.input_layernorm.weight']}"
    _assert_same_weights(model, ha.AutoModelForCausalLM.from_pretrained(tmp_path / "out"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("rows", [1, 15, 16, 17, 40])
def test_unpack_panels_inverts_the_cores_pack(dtype, rows):
    rng = np.random.default_rng(rows)
    cols = 24
    values = rng.standard_normal((rows, cols)).astype(np.float32)
    source = {"float32": values, "bfloat16": to_bfloat16_bits(values), "float16": values.astype(np.float16)}[dtype]
    panels = np.empty((-(-rows // PANEL_ROWS) * PANEL_ROWS, cols), dtype=source.dtype)
    _core.pack(source, dtype, panels)
    if rows > 1:
        assert not np.array_equal(panels[:rows], source), "test setup: packing should move elements"
    _assert_bitwise(unpack_panels(panels, dtype, rows, cols), source, f"{dtype} ({rows}, {cols})")


# ---- refusals -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "int4"])
def test_quantized_models_are_refused_before_anything_is_written(tmp_path, dtype):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT, dtype=dtype)
    match = f"saving {dtype} weights is not supported.*dtype=None or a float dtype"
    with pytest.raises(InvalidInputError, match=match):
        save_model(model, tmp_path / "out")
    assert not os.path.exists(tmp_path / "out"), "nothing may be written for a refused save"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(safe_serialization=False), "safe_serialization=False.*pytorch_model.bin"),
        (dict(push_to_hub=True), "push_to_hub"),
        (dict(variant="fp16"), "variant='fp16'"),
        (dict(max_shard_size="lots"), "max_shard_size='lots'"),
        (dict(state_dict={}), "unexpected argument.*state_dict"),
    ],
)
def test_unsupported_save_arguments_are_refused(tmp_path, kwargs, match):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT)
    with pytest.raises(InvalidInputError, match=match):
        save_model(model, tmp_path / "out", **kwargs)
    assert not os.path.exists(tmp_path / "out"), "nothing may be written for a refused save"


def test_saving_into_a_file_path_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InvalidInputError, match="is a file"):
        save_model(ha.AutoModelForCausalLM.from_pretrained(DRAFT), tmp_path / "f")


# ---- config.json and generation_config.json -------------------------------------------------------------------


def test_config_and_generation_config_reload_equal(tmp_path):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT, dtype="float32")
    model.generation_config.max_new_tokens = 7
    model.generation_config.do_sample = True
    save_model(model, tmp_path)
    config = ha.LlamaConfig.from_pretrained(tmp_path)
    saved = config.to_dict()["torch_dtype"]
    assert saved == "float32", f"torch_dtype must name the dtype saved, got {saved!r}"
    expected = {**model.config.to_dict(), "torch_dtype": "float32"}
    assert config.to_dict() == expected, (
        f"config.json differs in {sorted(k for k in expected if expected[k] != config.to_dict().get(k))}"
    )
    gc = ha.GenerationConfig.from_pretrained(tmp_path)
    assert gc == model.generation_config, f"expected {model.generation_config}, got {gc}"
    assert (gc.max_new_tokens, gc.do_sample) == (7, True), "edits to model.generation_config must be saved"
    reloaded = ha.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert reloaded.generation_config == model.generation_config and reloaded.config == config


def test_model_save_pretrained_writes_a_loadable_checkpoint(tmp_path, tok):
    model = ha.AutoModelForCausalLM.from_pretrained(DRAFT)
    assert model.save_pretrained(tmp_path) is None, "save_pretrained returns None, as Transformers"
    tok.save_pretrained(tmp_path)
    reloaded = ha.AutoModelForCausalLM.from_pretrained(tmp_path)
    inputs = ha.AutoTokenizer.from_pretrained(tmp_path)(PROMPT, return_tensors="np")
    expected = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    got = reloaded.generate(**inputs, max_new_tokens=12, do_sample=False)
    assert np.array_equal(expected, got), f"expected {expected}, got {got}"


# ---- tokenizer ------------------------------------------------------------------------------------------------

TEXTS = ["def f(x):\n    return x * 2\n", "import os, sys\n", "  héllo wörld ✓ ", "class A:\n\tpass"]


def test_tokenizer_save_and_reload_encodes_and_decodes_identically(tmp_path, tok):
    paths = tok.save_pretrained(tmp_path)
    assert paths == tuple(
        str(tmp_path / f) for f in ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")
    ), f"got {paths}"
    with open(tmp_path / "tokenizer.model", "rb") as a, open(os.path.join(DRAFT, "tokenizer.model"), "rb") as b:
        assert a.read() == b.read(), "tokenizer.model must be copied byte for byte"
    again = ha.AutoTokenizer.from_pretrained(tmp_path)
    for text in TEXTS:
        assert again.encode(text) == tok.encode(text), f"{text!r}: {again.encode(text)} != {tok.encode(text)}"
        ids = tok.encode(text)
        assert again.decode(ids) == tok.decode(ids) and again.decode(ids, skip_special_tokens=True) == tok.decode(
            ids, skip_special_tokens=True
        ), f"{text!r} decodes differently"
    a = tok(TEXTS, padding=True, return_tensors="np")
    b = again(TEXTS, padding=True, return_tensors="np")
    assert all(np.array_equal(a[k], b[k]) for k in ("input_ids", "attention_mask")), "batch encoding differs"
    for name in (
        "bos_token",
        "eos_token",
        "unk_token",
        "pad_token",
        "padding_side",
        "truncation_side",
        "add_bos_token",
        "add_eos_token",
        "model_max_length",
    ):
        assert getattr(again, name) == getattr(tok, name), f"{name}: {getattr(again, name)!r} != {getattr(tok, name)!r}"
    assert again.get_vocab() == tok.get_vocab() and len(tok.get_vocab()) == tok.vocab_size


def test_tokenizer_save_keeps_what_the_script_changed(tmp_path):
    tok = ha.AutoTokenizer.from_pretrained(DRAFT)
    tok.pad_token = tok.eos_token  # the documentation's idiom
    tok.padding_side = "right"
    tok.add_eos_token = True
    tok.save_pretrained(tmp_path)
    again = ha.AutoTokenizer.from_pretrained(tmp_path)
    assert (again.pad_token, again.pad_token_id, again.padding_side, again.add_eos_token) == (
        "</s>",
        tok.eos_token_id,
        "right",
        True,
    ), f"got {again}"
    enc = again(["a", "bb cc dd"], padding=True, return_tensors="np")["input_ids"]
    assert enc[0, -1] == tok.eos_token_id and enc[0, 0] == tok.bos_token_id, f"right padding with </s>: {enc}"
    with open(tmp_path / "special_tokens_map.json") as f:
        assert json.load(f)["pad_token"] == "</s>"

    by_id = ha.AutoTokenizer.from_pretrained(DRAFT)
    by_id.pad_token_id = by_id.unk_token_id
    by_id.save_pretrained(tmp_path / "by_id")
    assert ha.AutoTokenizer.from_pretrained(tmp_path / "by_id").pad_token_id == by_id.unk_token_id


def test_tokenizer_save_refusals(tmp_path):
    tok = ha.AutoTokenizer.from_pretrained(DRAFT)
    with pytest.raises(InvalidInputError, match=r"pad_token='\[PAD\]' is not a token of this vocabulary"):
        tok.pad_token = "[PAD]"  # refused where it is set, so a save never meets it
    tok = ha.AutoTokenizer.from_pretrained(DRAFT)
    for kwargs, match in (
        (dict(push_to_hub=True), "push_to_hub"),
        (dict(legacy_format=False), "legacy_format"),
        (dict(filename_prefix="x"), "filename_prefix"),
        (dict(safe_serialization=True), "unexpected"),
    ):
        with pytest.raises(InvalidInputError, match=match):
            tok.save_pretrained(tmp_path / "b", **kwargs)
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "b"), "refused saves write nothing"
