"""Every malformed checkpoint raises the right exception, and its message names the offending file/tensor/field."""

import json
import struct

import numpy as np
import pytest
from checkpoints import maps_file

from habana_assist.checkpoints.loading import load_checkpoint
from habana_assist.checkpoints.safetensors import (
    bfloat16_bits_to_float32,
    read_safetensors,
    save_file,
    to_bfloat16_bits,
)
from habana_assist.configuration_utils import LlamaConfig
from habana_assist.errors import CheckpointError, CheckpointNotFoundError, UnsupportedModelError

TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 32,
    "hidden_size": 16,
    "intermediate_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
}


def tiny_tensors(biases=False):
    """float32 weights for TINY: {HF name: array}; head_dim 4, so q (16, 16) and k/v (8, 16)."""
    shapes = {"model.embed_tokens.weight": (32, 16), "model.norm.weight": (16,), "lm_head.weight": (32, 16)}
    for i in range(2):
        p = f"model.layers.{i}."
        shapes.update(
            {
                p + "input_layernorm.weight": (16,),
                p + "post_attention_layernorm.weight": (16,),
                p + "self_attn.q_proj.weight": (16, 16),
                p + "self_attn.k_proj.weight": (8, 16),
                p + "self_attn.v_proj.weight": (8, 16),
                p + "self_attn.o_proj.weight": (16, 16),
                p + "mlp.gate_proj.weight": (24, 16),
                p + "mlp.up_proj.weight": (24, 16),
                p + "mlp.down_proj.weight": (16, 24),
            }
        )
        if biases:
            shapes.update(
                {
                    p + "self_attn.q_proj.bias": (16,),
                    p + "self_attn.k_proj.bias": (8,),
                    p + "self_attn.v_proj.bias": (8,),
                }
            )
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def write_checkpoint(directory, tensors=None, **config_changes):
    """A tiny checkpoint directory: config.json (TINY with changes; None deletes a key) + model.safetensors."""
    directory.mkdir(exist_ok=True)
    config = {k: v for k, v in {**TINY, **config_changes}.items() if v is not None}
    (directory / "config.json").write_text(json.dumps(config))
    save_file(tiny_tensors() if tensors is None else tensors, directory / "model.safetensors")
    return directory


def write_raw(path, header, data):
    """A safetensors file from a header dict (or raw bytes) and data bytes, bypassing save_file's checks."""
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)
    return path


def f32(begin, end):
    return {"dtype": "F32", "shape": [(end - begin) // 4], "data_offsets": [begin, end]}


# --- positive controls: the helper builds a checkpoint that loads ------------------------------------------


def test_tiny_checkpoint_loads_every_weight_zero_copy(tmp_path):
    tensors = tiny_tensors()
    ckpt = load_checkpoint(write_checkpoint(tmp_path / "m"), repack=False)
    assert set(ckpt.weights) == set(tensors)
    for name, weight in ckpt.weights.items():
        assert weight.dtype == "float32" and weight.array.flags.c_contiguous, name
        assert np.array_equal(weight.array, tensors[name]), name
    assert maps_file(ckpt.weights["model.layers.0.self_attn.q_proj.weight"].array)
    assert ckpt.config.num_key_value_heads == 2 and ckpt.config.head_dim == 4


def unpack_panels(weight, padding=False):
    """A numpy reading of the core's panels (csrc/ha.h): (rows, cols) from Weight.array (rows rounded up to
    16, cols), where column k of panel p holds row 16 p + i at position i, or for bfloat16 rows i < 8 at 2 i and
    rows 8 + i at 2 i + 1. padding: the rows past weight.rows instead."""
    a = weight.array.reshape(-1, weight.cols, 16)  # (panel, column, position)
    pos = [2 * i if i < 8 else 2 * (i - 8) + 1 for i in range(16)] if weight.dtype == "bfloat16" else list(range(16))
    rows = a[:, :, pos].transpose(0, 2, 1).reshape(-1, weight.cols)  # (panel * 16 + i, column)
    return rows[weight.rows :] if padding else rows[: weight.rows]


@pytest.mark.parametrize("stored,dtype", [("F32", None), ("BF16", None), ("F32", "float16"), ("F32", "bfloat16")])
@pytest.mark.parametrize("tied", (False, True))
def test_repack_deals_float_matrices_into_panels_and_keeps_an_untied_embedding_row_major(tmp_path, stored, dtype, tied):
    tensors = tiny_tensors()
    if stored == "BF16":
        tensors = {n: (to_bfloat16_bits(a), "BF16") for n, a in tensors.items()}
    directory = write_checkpoint(tmp_path / "m", tensors, tie_word_embeddings=tied)
    plain = load_checkpoint(directory, dtype=dtype, repack=False).weights
    packed = load_checkpoint(directory, dtype=dtype).weights
    assert set(plain) == set(packed)
    for name, w in packed.items():
        row_major = plain[name]
        if w.array.ndim == 1 or (name == "model.embed_tokens.weight" and not tied):  # vectors, the untied embedding
            assert not w.panels and np.array_equal(w.array, row_major.array), name
            continue
        assert w.panels and w.dtype == row_major.dtype and w.rows == row_major.array.shape[0], name
        assert w.array.shape == (-(-w.rows // 16) * 16, w.cols) and not w.array.flags.writeable, name
        assert np.array_equal(unpack_panels(w), row_major.array), name  # bit for bit (no NaN in these tensors)
        assert not unpack_panels(w, padding=True).any(), name  # padding rows are zeros
    assert (packed["lm_head.weight"] is packed["model.embed_tokens.weight"]) == tied


def test_bfloat16_matrices_load_as_stored_or_converted_and_vectors_are_float32(tmp_path):
    tensors = {n: (to_bfloat16_bits(a), "BF16") for n, a in tiny_tensors().items()}
    directory = write_checkpoint(tmp_path / "m", tensors)
    stored = load_checkpoint(directory, repack=False)
    q = stored.weights["model.layers.1.self_attn.q_proj.weight"]
    assert q.dtype == "bfloat16" and q.array.dtype == np.uint16
    assert stored.weights["model.norm.weight"].dtype == "float32"
    assert stored.weights["model.norm.weight"].array.dtype == np.float32

    as_f32 = load_checkpoint(directory, dtype=np.float32, repack=False).weights[
        "model.layers.1.self_attn.q_proj.weight"
    ]
    assert as_f32.dtype == "float32" and np.array_equal(as_f32.array, bfloat16_bits_to_float32(q.array))


def test_tied_embeddings_make_lm_head_the_embedding_weight(tmp_path):
    ckpt = load_checkpoint(write_checkpoint(tmp_path / "m", tie_word_embeddings=True), dtype="float16")
    assert ckpt.weights["lm_head.weight"] is ckpt.weights["model.embed_tokens.weight"]
    assert ckpt.weights["lm_head.weight"].array.dtype == np.float16


@pytest.mark.parametrize("dtype", ("int8", "int4"))
def test_integer_dtypes_quantize_every_matrix_read_per_token_and_keep_an_untied_embedding_as_stored(tmp_path, dtype):
    """The embedding is read one row per token: quantizing it would save no bandwidth and cost accuracy, so it
    stays as stored (copied with repack=True, which maps nothing; a view of the file with repack=False);
    tied to lm_head it is read in full and quantized."""
    untied = load_checkpoint(write_checkpoint(tmp_path / "a"), dtype=dtype).weights
    embed = untied["model.embed_tokens.weight"]
    assert embed.dtype == "float32" and not maps_file(embed.array)
    mapped = load_checkpoint(tmp_path / "a", dtype=dtype, repack=False).weights["model.embed_tokens.weight"]
    assert mapped.dtype == "float32" and maps_file(mapped.array)
    assert np.array_equal(mapped.array, embed.array)
    assert untied["lm_head.weight"].dtype == dtype and untied["model.layers.0.mlp.down_proj.weight"].dtype == dtype
    tied = load_checkpoint(write_checkpoint(tmp_path / "b", tie_word_embeddings=True), dtype=dtype).weights
    assert tied["model.embed_tokens.weight"].dtype == dtype
    assert tied["lm_head.weight"] is tied["model.embed_tokens.weight"]


def test_qwen2_loads_qkv_biases_and_needs_them(tmp_path):
    qwen = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2"}
    ckpt = load_checkpoint(write_checkpoint(tmp_path / "a", tiny_tensors(biases=True), **qwen))
    assert ckpt.config.qkv_bias and not ckpt.config.o_bias
    assert ckpt.weights["model.layers.0.self_attn.k_proj.bias"].array.shape == (8,)
    with pytest.raises(CheckpointError, match=r"model\.layers\.0\.self_attn\.q_proj\.bias"):
        load_checkpoint(write_checkpoint(tmp_path / "b", tiny_tensors(biases=False), **qwen))


# --- missing things ------------------------------------------------------------------------------------


def test_missing_directory_raises_not_found(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="no_such_model"):
        load_checkpoint(tmp_path / "no_such_model")


def test_missing_config_json_raises_not_found(tmp_path):
    directory = write_checkpoint(tmp_path / "m")
    (directory / "config.json").unlink()
    with pytest.raises(CheckpointNotFoundError, match="config.json"):
        load_checkpoint(directory)


def test_missing_weights_file_names_both_expected_files(tmp_path):
    directory = write_checkpoint(tmp_path / "m")
    (directory / "model.safetensors").unlink()
    with pytest.raises(CheckpointNotFoundError) as info:
        load_checkpoint(directory)
    assert "model.safetensors " in str(info.value) and "model.safetensors.index.json" in str(info.value)


def test_missing_tensor_names_tensor_and_file_searched(tmp_path):
    tensors = tiny_tensors()
    del tensors["model.layers.1.mlp.down_proj.weight"]
    with pytest.raises(
        CheckpointError,
        match=r"'model\.layers\.1\.mlp\.down_proj\.weight' not found in "
        r"model\.safetensors",
    ):
        load_checkpoint(write_checkpoint(tmp_path / "m", tensors))


# --- broken safetensors files ----------------------------------------------------------------------------


def test_file_shorter_than_8_bytes(tmp_path):
    directory = write_checkpoint(tmp_path / "m")
    (directory / "model.safetensors").write_bytes(b"abc")
    with pytest.raises(CheckpointError, match=r"model\.safetensors: the file is 3 bytes"):
        load_checkpoint(directory)


def test_truncated_file_names_the_cut_tensor(tmp_path):
    directory = write_checkpoint(tmp_path / "m")
    path = directory / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-10])  # model.norm.weight is last in sorted-name order
    with pytest.raises(CheckpointError, match=r"'model\.norm\.weight' .* past the end of the data section"):
        load_checkpoint(directory)


def test_header_length_past_end_of_file(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(CheckpointError, match=r"t\.safetensors: the header length field says 1000 bytes, past the"):
        read_safetensors(path)


def test_absurd_header_length_is_rejected_before_reading(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", 2**62) + b"{}")
    with pytest.raises(CheckpointError, match="limit"):
        read_safetensors(path)


def test_header_not_json(tmp_path):
    path = write_raw(tmp_path / "t.safetensors", b"not json", b"")
    with pytest.raises(CheckpointError, match=r"t\.safetensors: the 8-byte header is not valid UTF-8 JSON"):
        read_safetensors(path)


def test_offsets_outside_the_data_section(tmp_path):
    path = write_raw(tmp_path / "t.safetensors", {"w": f32(0, 16)}, bytes(8))
    with pytest.raises(CheckpointError, match=r"'w' has data_offsets \[0, 16\] past the end .* \(8 bytes\)"):
        read_safetensors(path)


def test_offsets_disagreeing_with_dtype_and_shape(tmp_path):
    header = {"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}
    with pytest.raises(CheckpointError, match=r"'w' .* spanning 8 bytes, but dtype F32 and shape \[3\] need 12"):
        read_safetensors(write_raw(tmp_path / "t.safetensors", header, bytes(8)))


def test_overlapping_offsets_name_both_tensors(tmp_path):
    path = write_raw(tmp_path / "t.safetensors", {"a": f32(0, 8), "b": f32(4, 12)}, bytes(12))
    with pytest.raises(CheckpointError, match=r"'b' \(bytes 4\.\.12\) overlaps tensor 'a'"):
        read_safetensors(path)


def test_hole_in_data_section(tmp_path):
    path = write_raw(tmp_path / "t.safetensors", {"a": f32(0, 8), "b": f32(12, 20)}, bytes(20))
    with pytest.raises(CheckpointError, match=r"bytes 8\.\.12 .* belong to no tensor \(a hole before tensor 'b'\)"):
        read_safetensors(path)


def test_trailing_bytes_after_last_tensor(tmp_path):
    path = write_raw(tmp_path / "t.safetensors", {"a": f32(0, 8)}, bytes(12))
    with pytest.raises(CheckpointError, match=r"bytes 8\.\.12 at the end of the data section"):
        read_safetensors(path)


def test_unknown_safetensors_dtype(tmp_path):
    header = {"w": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}}
    with pytest.raises(CheckpointError, match=r"'w' has dtype 'F8_E4M3'"):
        read_safetensors(write_raw(tmp_path / "t.safetensors", header, bytes(4)))


# --- weights disagreeing with config.json ----------------------------------------------------------------


def test_q_proj_shape_disagreeing_with_config(tmp_path):
    tensors = tiny_tensors()
    tensors["model.layers.0.self_attn.q_proj.weight"] = np.zeros((8, 16), np.float32)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(write_checkpoint(tmp_path / "m", tensors))
    message = str(info.value)
    for part in (
        "model.safetensors",
        "'model.layers.0.self_attn.q_proj.weight'",
        "[8, 16]",
        "[16, 16]",
        "num_attention_heads=4 * head_dim=4",
    ):
        assert part in message, f"{part!r} missing from: {message}"


def test_embedding_vocab_disagreeing_with_config(tmp_path):
    with pytest.raises(
        CheckpointError,
        match=r"'model\.embed_tokens\.weight' has shape \[32, 16\] but config\.json "
        r"\(vocab_size=40, hidden_size=16\) expects \[40, 16\]",
    ):
        load_checkpoint(write_checkpoint(tmp_path / "m", vocab_size=40))


def test_int32_matrix_is_an_unsupported_weight_dtype(tmp_path):
    tensors = tiny_tensors()
    tensors["model.layers.1.mlp.up_proj.weight"] = np.zeros((24, 16), np.int32)
    with pytest.raises(CheckpointError, match=r"'model\.layers\.1\.mlp\.up_proj\.weight' has dtype I32"):
        load_checkpoint(write_checkpoint(tmp_path / "m", tensors))


# --- config.json the package does not support or that cannot be right ------------------------------------


def test_unsupported_architecture(tmp_path):
    with pytest.raises(UnsupportedModelError, match=r"FalconForCausalLM.*LlamaForCausalLM.*GPT2LMHeadModel"):
        load_checkpoint(write_checkpoint(tmp_path / "m", architectures=["FalconForCausalLM"], model_type="falcon"))


def test_unsupported_rope_scaling_type(tmp_path):
    with pytest.raises(UnsupportedModelError, match=r"rope_scaling type 'yarn' .*llama3"):
        load_checkpoint(write_checkpoint(tmp_path / "m", rope_scaling={"rope_type": "yarn", "factor": 4.0}))


def test_unsupported_hidden_act(tmp_path):
    with pytest.raises(UnsupportedModelError, match=r"hidden_act 'quick_gelu' .*'silu'.*'gelu_pytorch_tanh'"):
        load_checkpoint(write_checkpoint(tmp_path / "m", hidden_act="quick_gelu"))


def test_config_json_not_json(tmp_path):
    directory = write_checkpoint(tmp_path / "m")
    (directory / "config.json").write_text('{"vocab_size": 32,')
    with pytest.raises(CheckpointError, match=r"config\.json: not valid UTF-8 JSON"):
        load_checkpoint(directory)


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("num_key_value_heads", 3, "must divide num_attention_heads"),
        ("hidden_size", 0, "positive integer"),
        ("rms_norm_eps", 0.0, "positive number"),
        ("rope_theta", -1.0, "positive number"),
        ("head_dim", 5, "even head dimension"),
        ("intermediate_size", None, "required field"),
    ],
)
def test_impossible_config_values(field, value, needle):
    with pytest.raises(CheckpointError, match=f"{field}.*{needle}|{needle}.*{field}"):
        LlamaConfig.from_dict({k: v for k, v in {**TINY, field: value}.items() if v is not None})


def test_llama3_rope_keeps_high_frequencies_and_divides_low_ones():
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    config = LlamaConfig.from_dict({**TINY, "hidden_size": 512, "rope_theta": 500000.0, "rope_scaling": scaling})
    plain = LlamaConfig.from_dict({**TINY, "hidden_size": 512, "rope_theta": 500000.0}).rope_inv_freq()
    scaled = config.rope_inv_freq()
    wavelen = 2 * np.pi / plain
    assert scaled.dtype == np.float64 and scaled.shape == (64,)
    assert np.array_equal(scaled[wavelen < 8192 / 4], plain[wavelen < 8192 / 4])
    assert np.array_equal(scaled[wavelen > 8192], plain[wavelen > 8192] / 8)
    medium = (wavelen >= 8192 / 4) & (wavelen <= 8192)
    assert medium.any() and np.all((scaled[medium] < plain[medium]) & (scaled[medium] > plain[medium] / 8))


# --- sharded checkpoints ---------------------------------------------------------------------------------


def write_sharded(directory, weight_map_changes=None):
    """TINY split over two shards + index; weight_map_changes edits the index after the shards are written."""
    directory = write_checkpoint(directory)
    (directory / "model.safetensors").unlink()
    tensors = tiny_tensors()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:10], "model-00002-of-00002.safetensors": names[10:]}
    weight_map = {}
    for shard, shard_names in shards.items():
        save_file({n: tensors[n] for n in shard_names}, directory / shard)
        weight_map.update(dict.fromkeys(shard_names, shard))
    weight_map.update(weight_map_changes or {})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory


def test_sharded_checkpoint_loads(tmp_path):
    ckpt = load_checkpoint(write_sharded(tmp_path / "m"))
    assert np.array_equal(ckpt.weights["model.norm.weight"].array, tiny_tensors()["model.norm.weight"])


def test_index_naming_a_missing_shard(tmp_path):
    directory = write_sharded(tmp_path / "m")
    (directory / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointNotFoundError, match=r"shard 'model-00002-of-00002\.safetensors'"):
        load_checkpoint(directory)


def test_index_naming_a_tensor_absent_from_its_shard(tmp_path):
    directory = write_sharded(tmp_path / "m", {"model.extra.weight": "model-00001-of-00002.safetensors"})
    with pytest.raises(
        CheckpointError,
        match=r"'model\.extra\.weight' is in 'model-00001-of-00002\.safetensors' "
        r"but no shard holds it",
    ):
        load_checkpoint(directory)


def test_tensor_stored_in_two_shards(tmp_path):
    directory = write_sharded(tmp_path / "m")
    save_file({"model.norm.weight": np.ones(16, np.float32)}, directory / "model-00001-of-00002.safetensors")
    (directory / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "weight_map": {
                    "model.norm.weight": "model-00001-of-00002.safetensors",
                    "model.embed_tokens.weight": "model-00002-of-00002.safetensors",
                }
            }
        )
    )
    save_file(tiny_tensors(), directory / "model-00002-of-00002.safetensors")
    with pytest.raises(CheckpointError, match=r"'model\.norm\.weight' is also stored in shard"):
        load_checkpoint(directory)


@pytest.mark.parametrize(
    "name, same, other",
    [
        ("ignore_mismatched_sizes", False, True),
        ("disable_mmap", False, True),
        ("fusion_config", None, {"a": 1}),
        ("output_loading_info", False, True),
        ("key_mapping", None, {"^model": "m"}),
        ("quantization_config", None, {"load_in_8bit": True}),
        ("weights_only", True, None),
    ],
)
def test_transformers_loading_arguments_at_values_that_change_nothing_load_and_others_are_refused_by_name(
    name, same, other
):
    """Transformers' loading arguments whose value changes nothing here load as without them (bitwise the same
    logits); a value that would change the result is refused with the argument's name and what to do."""
    import habana_assist as ha
    from habana_assist.errors import InvalidInputError

    ids = np.array([[1, 5, 9]])
    plain = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")(ids).logits
    got = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft", **{name: same})(ids).logits
    assert np.array_equal(np.asarray(plain), np.asarray(got)), f"{name}={same!r} changed the logits"
    if name == "weights_only":  # any value: safetensors files hold weights only
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft", weights_only=False)
        return
    with pytest.raises(InvalidInputError, match=f"from_pretrained\\({name}=") as e:
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft", **{name: other})
    assert "not supported" in str(e.value) and "constructor" not in str(e.value), e.value


def test_positional_arguments_after_the_path_are_refused_as_transformers_model_args():
    """Transformers' from_pretrained(path, *model_args) hands extra positional arguments to the model's constructor:
    here they are refused, naming what to pass instead (a dtype given positionally is not taken as dtype=)."""
    import habana_assist as ha
    from habana_assist.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"positional argument.*'float32'.*dtype=") as e:
        ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft", "float32")
    assert "keywords" in str(e.value), e.value
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft", dtype="float32")
    assert model.weight_dtype == "float32", model.weight_dtype
