"""Every kernel variant gives the same bits (csrc/kernels/kernels.h): no output depends on the variant. Tested on
whole forwards and generations, where every kernel's sums meet (matmuls, attention's scores and values, the online
softmax, norms, activations, quantized activations), not kernel by kernel (tests/c/test_kernels.c does that):

- every model family of the fixtures (tests/fixtures/family_checkpoints.py), and one whose sizes leave a tail past
  the last 8 everywhere (hidden size 36, head size 12, intermediate 44), a sliding-window family whose prompt wraps
  its ring (past the window's 256 positions of rollback room), each in float32, bfloat16, float16 (panels),
  float32 row-major (repack=False), int8, w8a8 (int8 weights times int8 activations), int4 and bfloat16-pairs
  (bf16 weights times bf16 activations, vdpbf16ps's arithmetic);
- the logits of every row of a prompt chunk and of a left-padded batch; the tokens and scores of greedy, seeded
  sampled, and assisted greedy, coupled and rejection-sampled generations;
- the shipped target (habana-assist/pycode): one 21-token prompt in float32 and int8.

Each variant runs in a process of its own (HA_KERNELS is read at import), all of them at once; each variant this
CPU runs is compared with the scalar reference, bit for bit. On a CPU without AVX-512, avx512-emulated runs the
AVX-512 source through SIMDe; on one with AVX-512 VNNI but no AVX-VNNI, avx-vnni-evex runs the AVX-VNNI source. The
AVX-VNNI variants, AVX2's table but for w8a8 (kernel_variants.W8A8_ONLY), run the w8a8 loads only.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from kernel_variants import VARIANTS, W8A8_ONLY, available_variants
from package_under_test import PACKAGE_PARENT, PYTHON, child_env

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
sys.path.insert(0, FIXTURES)

from family_checkpoints import FAMILIES, write_family_checkpoint  # noqa: E402 - found through the sys.path entry above

DTYPES = ["float32", "bfloat16", "float16", "float32-rowmajor", "int8", "w8a8", "int4", "bfloat16-pairs"]
VOCAB = 96
PROMPT = 16  # tokens of the chunk: past every window below
# family -> write_family_checkpoint arguments: a sliding window of 4-6 where the family has one
FAMILY_ARGS = {
    "mistral": dict(sliding_window=4),
    "qwen2": dict(num_layers=3, sliding_window=5, max_window_layers=1),
    "qwen3": dict(sliding_window=4, max_window_layers=0),
    "phi3": dict(sliding_window=6),
    "gemma2": dict(num_layers=3, sliding_window=4),
    "gemma3_text": dict(num_layers=3, sliding_window=5),
    "smollm3": dict(num_layers=4, sliding_window=4),
}
# extra cases: name -> (family, arguments, prompt length, generations' prompt length)
EXTRA = {
    "llama_tails": (
        "llama",
        dict(hidden_size=36, num_heads=3, num_kv_heads=1, head_dim=12, intermediate_size=44),
        PROMPT,
        6,
    ),
    "mistral_ring": ("mistral", dict(sliding_window=4, max_position_embeddings=512), 270, 270),
}


def _write_cases(root):
    """The checkpoints (each with a one-layer draft of its family) and the children's CASES_JSON: every dtype and
    the shipped target, and (the second) the w8a8 loads alone, for W8A8_ONLY."""
    cases = []
    plan = [(family, family, FAMILY_ARGS.get(family, {}), PROMPT, 6) for family in FAMILIES]
    plan += [(name, *spec) for name, spec in EXTRA.items()]
    for i, (name, family, args, prompt_len, gen_len) in enumerate(plan):
        path, draft = os.path.join(root, name), os.path.join(root, name + "-draft")
        write_family_checkpoint(path, family, seed=40 + i, vocab_size=VOCAB, **args)
        draft_args = {k: v for k, v in args.items() if k not in ("num_layers", "max_window_layers")}
        write_family_checkpoint(draft, family, seed=80 + i, vocab_size=VOCAB, num_layers=1, **draft_args)
        cases.append(
            {
                "name": name,
                "path": path,
                "draft": draft,
                "dtypes": DTYPES,
                "prompt_len": prompt_len,
                "gen_prompt_len": gen_len,
            }
        )
    spec, w8a8 = os.path.join(root, "cases.json"), os.path.join(root, "cases-w8a8.json")
    with open(spec, "w") as f:
        json.dump({"cases": cases, "shipped": True}, f)
    with open(w8a8, "w") as f:
        json.dump({"cases": [dict(c, dtypes=["w8a8"]) for c in cases], "shipped": False}, f)
    return spec, w8a8


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """variant -> its outputs ({key: array}), every variant this CPU runs computed at once, one process each."""
    root = str(tmp_path_factory.mktemp("variants"))
    spec, w8a8_spec = _write_cases(root)
    script = os.path.join(FIXTURES, "variant_outputs.py")
    procs = {}
    for variant in available_variants():
        out = os.path.join(root, f"{variant}.npz")
        env = child_env(HA_KERNELS=variant, HA_NUM_THREADS="1")
        procs[variant] = (
            out,
            subprocess.Popen(
                [PYTHON, script, w8a8_spec if variant in W8A8_ONLY else spec, out],
                env=env,
                cwd=PACKAGE_PARENT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
    results = {}
    for variant, (out, proc) in procs.items():
        try:
            log = proc.communicate(timeout=600)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            log = proc.communicate()[0]
            pytest.fail(f"HA_KERNELS={variant}: expected the outputs within 600 s, got:\n{log[-4000:]}")
        assert proc.returncode == 0, f"HA_KERNELS={variant}: expected the outputs computed, got:\n{log[-4000:]}"
        with np.load(out) as f:
            results[variant] = {k: f[k] for k in f.files}
        assert str(results[variant].pop("kernels")) == variant, f"HA_KERNELS={variant}: the child ran another variant"
    return results


def _compare(outputs, variant, prefix):
    """Asserts variant's outputs under prefix bitwise scalar's (W8A8_ONLY: those of the w8a8 loads); their keys."""
    if variant not in outputs:
        pytest.skip(f"this CPU does not run the {variant} kernels")
    want, got = outputs["scalar"], outputs[variant]
    keys = sorted(k for k in want if k.startswith(prefix))
    if variant in W8A8_ONLY:
        keys = [k for k in keys if k.split("/")[1] == "w8a8" and not k.startswith("shipped/")]
    assert keys and sorted(k for k in got if k.startswith(prefix)) == keys, (
        f"{variant}: expected the outputs {keys[:6]}..., got {sorted(got)[:6]}..."
    )
    differ = []
    for key in keys:
        a, b = want[key], got[key]
        if a.shape != b.shape or a.tobytes() != b.tobytes():
            if a.shape != b.shape or a.dtype.kind != "f":
                differ.append(f"{key}: {a.shape} {a.ravel()[:12].tolist()} vs {b.shape} {b.ravel()[:12].tolist()}")
            else:
                d = np.abs(a.astype(np.float64) - b)
                differ.append(f"{key}: {int((a != b).sum())} of {a.size} differ, max |diff| {np.nanmax(d):.3g}")
    assert not differ, (
        f"scalar vs {variant}: expected every output bitwise the same, {len(differ)} of {len(keys)} "
        "differ:\n" + "\n".join(differ[:20])
    )
    return keys


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "scalar"])
def test_whole_forwards_and_generations_of_every_family_and_dtype_are_the_same_bits(outputs, variant):
    keys = _compare(outputs, variant, "")
    cases = {k.split("/")[0] for k in keys} - {"shipped"}
    assert cases == set(FAMILIES) | set(EXTRA), f"expected every family's outputs, got {sorted(cases)}"
    loads = {k.split("/")[1] for k in keys if not k.startswith("shipped/")}
    want = {"w8a8"} if variant in W8A8_ONLY else set(DTYPES)
    assert loads == want, f"expected the outputs of {sorted(want)}, got {sorted(loads)}"


# the shipped target loads float32 and int8, which the W8A8_ONLY variants compute with AVX2's own functions
@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "scalar" and v not in W8A8_ONLY])
def test_shipped_target_logits_are_the_same_bits(outputs, variant):
    keys = _compare(outputs, variant, "shipped/")
    assert keys == ["shipped/float32/logits", "shipped/int8/logits"], f"expected float32 and int8 logits, got {keys}"
    assert outputs["scalar"]["shipped/float32/logits"].shape == (21, 4096)


def test_the_outputs_exercise_what_they_compare(outputs):
    """The comparisons above do not pass vacuously: a chunk's rows differ, the ring case is longer than its ring,
    and the generations are what they claim (assisted greedy equals plain greedy)."""
    ref = outputs["scalar"]
    chunk = ref["llama/float32/chunk"]
    assert chunk.shape == (PROMPT, VOCAB) and len({row.tobytes() for row in chunk}) == PROMPT
    assert ref["mistral_ring/int8/chunk"].shape == (270, VOCAB)
    for name in ("llama", "gemma2", "llama_tails"):
        tokens = ref[f"{name}/float32/greedy/tokens"]
        assert tokens.shape == (1, 6 + 8) and np.array_equal(ref[f"{name}/float32/assisted_greedy/tokens"], tokens)
