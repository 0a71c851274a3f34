"""blas_prefill=True (off by default): prompts that start an empty cache go through OpenBLAS in blocks
of 128 tokens.

What it must keep: greedy and coupled assisted generation equal plain generation bit for bit (both append
the prompt alone, so both compute the same blocks), a left-padded batch row equals its prompt alone, and
the logits stay within the float64 reference's tolerance.  What it changes: the block rows are not
bitwise those of the batch-invariant kernels (checked, so that the OpenBLAS path is known to run).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from checkpoints import write_random_checkpoint
from reference import reference_logits

import habana_assist as ha

VOCAB = 96
ARGS = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=136,
    max_position_embeddings=512,
)
DRAFT_ARGS = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=40,
    max_position_embeddings=512,
)
LENGTHS = (127, 128, 200, 256, 300)  # below one block, exactly one, one plus a rest, two, two plus a rest


def prompt(n, seed=1):
    return np.random.default_rng(seed).integers(0, VOCAB, size=(1, n)).astype(np.int64)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("blas_prefill")
    out = {}
    for dtype in ("F32", "BF16"):
        out[dtype] = (str(root / f"target_{dtype}"), str(root / f"draft_{dtype}"))
        config, tensors = write_random_checkpoint(out[dtype][0], dtype=dtype, seed=5, **ARGS)
        out[dtype + "_ref"] = (config, tensors)
        write_random_checkpoint(out[dtype][1], dtype=dtype, seed=6, **DRAFT_ARGS)
    return out


def load(path, blas, dtype=None):
    return ha.AutoModelForCausalLM.from_pretrained(path, blas_prefill=blas, dtype=dtype)


@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_blas_prefill_logits_match_the_float64_reference(checkpoints, dtype):
    config, tensors = checkpoints[dtype + "_ref"]
    ids = prompt(300)
    got = load(checkpoints[dtype][0], True)(ids).logits[0].astype(np.float64)
    ref = reference_logits(config, tensors, ids[0])
    tol = 1e-4 * max(1.0, np.abs(ref).max())
    err = np.abs(got - ref)
    assert err.max() <= tol, (
        f"{dtype}: max |logit - reference| = {err.max():.3g} at position "
        f"{np.unravel_index(err.argmax(), err.shape)[0]}; expected <= {tol:.3g}"
    )


@pytest.mark.parametrize("dtype", ["F32", "BF16", "int8"])
def test_blas_prefill_runs_openblas_only_on_whole_prompt_blocks(checkpoints, dtype):
    """Rows of a 300-token prompt: the first 256 (two blocks) come from OpenBLAS and so differ in the last bits
    from the kernels' rows; the last 44 and every later token are the kernels' own, bitwise."""
    path = checkpoints["BF16" if dtype == "int8" else dtype][0]
    load_dtype = "int8" if dtype == "int8" else None
    blas, kernels = load(path, True, load_dtype), load(path, False, load_dtype)
    ids = prompt(300)
    a, b = blas(ids).logits[0], kernels(ids).logits[0]
    assert not np.array_equal(a[:256], b[:256]), (
        f"{dtype}: the two OpenBLAS blocks gave bitwise the kernels' logits; the OpenBLAS path did not run"
    )
    # The rest attends to the blocks' keys and values, so compare one token appended after an identical prefix.
    cache_a, cache_b = blas.create_cache(1, 400), kernels.create_cache(1, 400)
    blas(ids[:, :100], past_key_values=cache_a)  # 100 < 128: no block, so the caches hold the same bits
    kernels(ids[:, :100], past_key_values=cache_b)
    rest_a = blas(ids[:, 100:], past_key_values=cache_a).logits
    rest_b = kernels(ids[:, 100:], past_key_values=cache_b).logits
    assert np.array_equal(rest_a, rest_b), (
        f"{dtype}: an append to a non-empty cache must not use OpenBLAS, but its logits differ from the kernels'"
    )


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["F32", "BF16", "int8"])
def test_assisted_equals_plain_with_blas_prefill(checkpoints, dtype, threads):
    old = ha.get_num_threads()
    ha.set_num_threads(threads)
    try:
        t_path, d_path = checkpoints["BF16" if dtype == "int8" else dtype]
        load_dtype = "int8" if dtype == "int8" else None
        target, draft = load(t_path, True, load_dtype), load(d_path, True)
        for n in LENGTHS:
            ids = prompt(n, seed=n)
            expected = target.generate(ids, max_new_tokens=24)
            for draft_model in (draft, target):
                for K in (1, 4):
                    got = target.generate(
                        ids,
                        max_new_tokens=24,
                        assistant_model=draft_model,
                        num_assistant_tokens=K,
                        num_assistant_tokens_schedule="constant",
                    )
                    assert np.array_equal(expected, got), (
                        f"{dtype}, {threads} thread(s), prompt of {n}, K={K}, "
                        f"{'self' if draft_model is target else 'small'} draft: assisted {got[0, n:].tolist()} "
                        f"differs from plain {expected[0, n:].tolist()}"
                    )
        ids = prompt(200, seed=3)
        kw = dict(max_new_tokens=24, do_sample=True, temperature=1.5, seed=11)
        plain = target.generate(ids, **kw)
        coupled = target.generate(ids, assistant_model=draft, num_assistant_tokens=3, assisted_sampling="coupled", **kw)
        assert np.array_equal(plain, coupled), f"{dtype}: coupled sampling differs from plain sampling"
    finally:
        ha.set_num_threads(old)


def test_left_padded_batch_rows_equal_each_prompt_alone_with_blas_prefill(checkpoints):
    model = load(checkpoints["F32"][0], True)
    a, b = prompt(130, seed=8)[0], prompt(260, seed=9)[0]
    ids = np.zeros((2, 260), dtype=np.int64)
    mask = np.zeros((2, 260), dtype=np.int64)
    ids[0, 130:], mask[0, 130:] = a, 1
    ids[1], mask[1] = b, 1
    batch = model.generate(ids, attention_mask=mask, max_new_tokens=16)
    for row, alone in ((0, a), (1, b)):
        single = model.generate(alone[None], max_new_tokens=16)
        assert np.array_equal(batch[row, 260:], single[0, alone.size :]), (
            f"batch row {row}: {batch[row, 260:].tolist()} but its prompt alone gives "
            f"{single[0, alone.size :].tolist()}"
        )


@pytest.mark.parametrize("bad", ["yes", 1, "auto"])
def test_blas_prefill_must_be_a_bool_or_none(checkpoints, bad):
    with pytest.raises(ha.InvalidInputError, match="blas_prefill"):
        ha.AutoModelForCausalLM.from_pretrained(checkpoints["F32"][0], blas_prefill=bad)


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_repack_must_be_a_bool(checkpoints, bad):
    with pytest.raises(ha.InvalidInputError, match="repack"):
        ha.AutoModelForCausalLM.from_pretrained(checkpoints["F32"][0], repack=bad)


@pytest.mark.parametrize(
    "stored, dtype, default",
    [("F32", None, False), ("BF16", None, False), ("BF16", "float16", False), ("BF16", "int8", False)],
)
def test_blas_prefill_is_off_by_default_and_can_be_forced(checkpoints, stored, dtype, default):
    path = checkpoints[stored][0]
    assert load(path, None, dtype).blas_prefill is default, f"{stored} loaded as {dtype}: default blas_prefill"
    for forced in (True, False):
        assert load(path, forced, dtype).blas_prefill is forced
    # the choice reaches the core: the default's logits are bitwise those of the model forced to it, not the other's
    ids = prompt(200)
    got, same, other = (load(path, b, dtype)(ids).logits for b in (None, default, not default))
    assert np.array_equal(got, same), f"{stored} as {dtype}: the default's logits differ from blas_prefill={default}"
    assert not np.array_equal(got, other), f"{stored} as {dtype}: blas_prefill={not default} gave the default's logits"


def test_blas_prefill_logits_are_bitwise_the_same_with_1_and_2_threads(tmp_path):
    """OpenBLAS's calls are fixed units of rows, not the threads' shares, so the thread count changes no bit.
    A model wide enough that every matrix has several units to share out."""
    write_random_checkpoint(
        tmp_path,
        dtype="BF16",
        seed=5,
        vocab_size=300,
        hidden_size=256,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=520,
        max_position_embeddings=512,
    )
    model = load(str(tmp_path), True)
    ids = np.random.default_rng(0).integers(0, 300, size=(1, 300))
    old = ha.get_num_threads()
    try:
        got = []
        for threads in (1, 2):
            ha.set_num_threads(threads)
            got.append(model(ids).logits)
    finally:
        ha.set_num_threads(old)
    assert np.array_equal(got[0], got[1]), (
        f"blas_prefill logits differ between 1 and 2 threads in {int((got[0] != got[1]).sum())} places"
    )


OWN_CORE = {"avx512": "SkylakeX", "avx-vnni": "Haswell", "avx2": "Haswell"}  # the OpenBLAS core for each variant


@pytest.mark.parametrize("forced", ["Prescott", "matching"])
def test_blas_prefill_warns_where_openblas_runs_older_kernels_than_the_cpu_has(checkpoints, forced):
    """OpenBLAS picks its kernels once per process, from OPENBLAS_CORETYPE or cpuid; Debian 12's falls back to
    Prescott's (SSE3) on CPUs newer than itself. A process forced to Prescott is warned, with the fix, where our
    kernels show AVX2 or AVX-512 (the fix's core then runs here); one given the matching core is not."""
    ours = ha.kernels_name()
    core = OWN_CORE.get(ours, "Prescott") if forced == "matching" else "Prescott"
    code = (
        "import warnings, habana_assist as ha\n"
        "from habana_assist import _core\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    ha.AutoModelForCausalLM.from_pretrained({checkpoints['F32'][0]!r}, blas_prefill=True)\n"
        f"    ha.AutoModelForCausalLM.from_pretrained({checkpoints['F32'][0]!r}, blas_prefill=False)\n"
        "print(_core.blas_core(), _core.kernels_name())\n"
        "print('\\n'.join(str(w.message) for w in seen if w.category is RuntimeWarning))\n"
    )
    env = dict(os.environ, OPENBLAS_CORETYPE=core, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{core} {ours}", f"OPENBLAS_CORETYPE={core}: OpenBLAS and our kernels reported {lines[0]!r}"
    warned = [line for line in lines[1:] if line]
    if ours in OWN_CORE and core == "Prescott":
        assert len(warned) == 1 and f"OPENBLAS_CORETYPE={OWN_CORE[ours]}" in warned[0] and "Prescott" in warned[0], (
            f"expected one warning naming the fix, got {warned}"
        )
    else:
        assert warned == [], f"OpenBLAS on {core} with our {ours} kernels: unexpected warnings {warned}"
