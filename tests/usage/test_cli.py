"""The command line, `python3 -m habana_assist generate|bench|demo`, run as a user runs it: a subprocess of this
Python from another directory, with the package under test on PYTHONPATH (tests/fixtures/package_under_test.py).

The model pair is a random target and a random draft over the tokenizer of tests/fixtures/tokenizer_fixture.py; what
the command prints is compared with what the library computes in this process for the same arguments.
"""

import os
import re
import subprocess
import sys

import pytest
import tokenizer_fixture as tf
from package_under_test import PYTHON, child_env

import habana_assist as ha

TIMEOUT = 120  # seconds for one command: a hang is a failure, not a stuck test run
PROMPT = "def fib(n):\n    if n < 2:"
KEY_FLAGS = ["--model", "--assistant", "--max-new-tokens", "--num-assistant-tokens", "--prompt-lookup", "--dtype"]
PROMPT_FLAGS = ["--prompt", "--prompt-file", "--do-sample", "--temperature", "--top-k", "--top-p", "--seed"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    target = tf.write_checkpoint(tmp_path_factory.mktemp("cli_target"), seed=41)
    draft = tf.write_checkpoint(tmp_path_factory.mktemp("cli_draft"), seed=42, num_layers=1)
    return target, draft


@pytest.fixture(scope="module")
def loaded(pair):
    target, draft = pair
    return (
        ha.AutoTokenizer.from_pretrained(target),
        ha.AutoModelForCausalLM.from_pretrained(target),
        ha.AutoModelForCausalLM.from_pretrained(draft),
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cli_cwd"))


def run_cli(workdir, *args):
    """-> (exit status, stdout, stderr) of `python3 -m habana_assist ARGS` run from workdir."""
    env = child_env(PYTHONIOENCODING="utf-8")
    p = subprocess.run(
        [PYTHON, "-m", "habana_assist", *args], cwd=workdir, env=env, capture_output=True, timeout=TIMEOUT
    )
    # bytes decoded by hand: no newline translation, so a "\r" the model emits stays a "\r"
    return p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8")


def completion(tok, model, prompt, max_new_tokens=8, **kwargs):
    """What the library generates for prompt, decoded as the command line prints it."""
    inputs = tok(prompt, return_tensors="np")
    out = model.generate(**inputs, max_new_tokens=max_new_tokens, **kwargs)
    return tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)


def _ok(rc, out, err, what):
    assert rc == 0, f"{what}: expected exit status 0, got {rc}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
    assert "Traceback" not in err, f"{what}: a traceback on stderr:\n{err[-2000:]}"


# ---- the package the commands run -------------------------------------------------------------------------------


def test_a_child_process_imports_the_package_under_test(workdir):
    """The commands here run the package this suite imports (a checkout's, or the one scripts/test.sh installs into
    a virtual environment for its second step), not whatever the working directory or the checkout holds."""
    p = subprocess.run(
        [PYTHON, "-c", "import habana_assist, sys; print(habana_assist.__file__); print(sys.prefix)"],
        cwd=workdir,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert p.returncode == 0, f"the child failed to import habana_assist:\n{p.stderr[-2000:]}"
    path, prefix = p.stdout.split()
    assert os.path.realpath(path) == os.path.realpath(ha.__file__) and prefix == sys.prefix, (
        f"expected the child to import {ha.__file__} in {sys.prefix}; it imported {path} in {prefix}"
    )


# ---- help ------------------------------------------------------------------------------------------------------


def test_help_names_the_three_commands(workdir):
    rc, out, err = run_cli(workdir, "--help")
    _ok(rc, out, err, "--help")
    for command in ("generate", "bench", "demo"):
        assert command in out, f"--help should name {command!r}:\n{out}"


@pytest.mark.parametrize("command", ["generate", "bench", "demo"])
def test_each_command_help_names_its_flags(workdir, command):
    rc, out, err = run_cli(workdir, command, "--help")
    _ok(rc, out, err, f"{command} --help")
    expected = KEY_FLAGS + (PROMPT_FLAGS if command != "demo" else ["--prompts"])
    missing = [flag for flag in expected if flag not in out]
    assert not missing, f"{command} --help should name {expected}; missing {missing}:\n{out}"


def test_no_command_is_a_usage_error(workdir):
    rc, out, err = run_cli(workdir)
    assert rc == 2 and "generate" in err, f"expected exit 2 and a usage naming the commands, got {rc}: {err}"


# ---- generate --------------------------------------------------------------------------------------------------


def test_generate_with_assistant_prints_the_plain_greedy_completion(workdir, pair, loaded):
    tok, model, _ = loaded
    expected = completion(tok, model, PROMPT)
    rc, out, err = run_cli(
        workdir, "generate", "--model", pair[0], "--assistant", pair[1], "--prompt", PROMPT, "--max-new-tokens", "8"
    )
    _ok(rc, out, err, "generate")
    assert out == expected + "\n", f"expected the greedy completion {expected!r} on stdout, got {out!r}"
    assert re.search(r"8 tokens in [\d.]+ s", err), f"stderr should report '8 tokens in ... s': {err!r}"
    assert "drafts accepted" in err, f"stderr should report the draft acceptance: {err!r}"


@pytest.mark.parametrize("flag, with_prompt", [("--no-stream", False), ("--show-prompt", True)])
def test_generate_flags_print_the_same_completion(workdir, pair, loaded, flag, with_prompt):
    """--no-stream prints the completion once at the end; --show-prompt prints the prompt before it."""
    tok, model, _ = loaded
    expected = (PROMPT if with_prompt else "") + completion(tok, model, PROMPT)
    rc, out, err = run_cli(
        workdir,
        "generate",
        "--model",
        pair[0],
        "--assistant",
        pair[1],
        "--prompt",
        PROMPT,
        "--max-new-tokens",
        "8",
        flag,
    )
    _ok(rc, out, err, f"generate {flag}")
    assert out == expected + "\n", f"expected {expected!r} on stdout, got {out!r}"


def test_generate_sampled_with_a_seed_is_reproducible_and_is_the_plain_seeded_sample(workdir, pair, loaded):
    """The command line samples in coupled mode, so the assisted text is the plain sample for that seed."""
    tok, model, draft = loaded
    args = [
        "generate",
        "--model",
        pair[0],
        "--assistant",
        pair[1],
        "--prompt",
        PROMPT,
        "--max-new-tokens",
        "12",
        "--do-sample",
        "--seed",
        "3",
    ]
    first, second = run_cli(workdir, *args), run_cli(workdir, *args)
    _ok(*first, "generate --do-sample --seed 3")
    assert first[1] == second[1], f"the same seed should print the same text: {first[1]!r} then {second[1]!r}"
    expected = completion(tok, model, PROMPT, 12, do_sample=True, seed=3, temperature=1.0, top_k=50, top_p=1.0)
    assert first[1] == expected + "\n", f"expected the library's seed-3 sample {expected!r}, got {first[1]!r}"


def test_generate_assistant_none_is_plain_generation(workdir, pair, loaded):
    tok, model, _ = loaded
    expected = completion(tok, model, PROMPT)
    rc, out, err = run_cli(
        workdir, "generate", "--model", pair[0], "--assistant", "none", "--prompt", PROMPT, "--max-new-tokens", "8"
    )
    _ok(rc, out, err, "generate --assistant none")
    assert out == expected + "\n", f"expected {expected!r}, got {out!r}"
    assert "drafts accepted" not in err, f"plain generation drafts nothing: {err!r}"


def test_generate_prompt_lookup_prints_the_plain_greedy_completion(workdir, pair, loaded):
    tok, model, _ = loaded
    prompt = "x = 1\ny = 2\nx = 1\ny = 2\nx = 1\n"
    expected = completion(tok, model, prompt)
    rc, out, err = run_cli(
        workdir,
        "generate",
        "--model",
        pair[0],
        "--assistant",
        pair[1],
        "--prompt",
        prompt,
        "--max-new-tokens",
        "8",
        "--prompt-lookup",
        "3",
    )
    _ok(rc, out, err, "generate --prompt-lookup 3")
    assert out == expected + "\n", f"expected {expected!r}, got {out!r}"


def test_generate_prompt_file_completes_the_files_text(workdir, pair, loaded, tmp_path):
    tok, model, _ = loaded
    prompt = "# caf\u00e9 \u4e2d\u6587\nimport os\n\n\tdef f():\n"
    path = tmp_path / "prompt.py"
    path.write_text(prompt, encoding="utf-8")
    expected = completion(tok, model, prompt)
    rc, out, err = run_cli(
        workdir,
        "generate",
        "--model",
        pair[0],
        "--assistant",
        pair[1],
        "--prompt-file",
        str(path),
        "--max-new-tokens",
        "8",
    )
    _ok(rc, out, err, "generate --prompt-file")
    assert out == expected + "\n", f"expected {expected!r}, got {out!r}"


def test_generate_escapes_turns_backslash_n_into_newlines_and_keeps_unicode(workdir, pair, loaded):
    tok, model, _ = loaded
    prompt = "# caf\u00e9\ndef f():\n\t"
    expected = completion(tok, model, prompt)
    rc, out, err = run_cli(
        workdir,
        "generate",
        "--model",
        pair[0],
        "--assistant",
        "none",
        "--escapes",
        "--prompt",
        "# caf\u00e9\\ndef f():\\n\\t",
        "--max-new-tokens",
        "8",
        "--no-stream",
    )
    _ok(rc, out, err, "generate --escapes")
    assert out == expected + "\n", f"--escapes with prompt {prompt!r}: expected {expected!r}, got {out!r}"


@pytest.mark.parametrize("dtype", ["int8", "int4"])
def test_generate_dtype_integer_prints_the_quantized_models_completion(workdir, pair, dtype):
    tok = ha.AutoTokenizer.from_pretrained(pair[0])
    model = ha.AutoModelForCausalLM.from_pretrained(pair[0], dtype=dtype)
    expected = completion(tok, model, PROMPT)
    rc, out, err = run_cli(
        workdir,
        "generate",
        "--model",
        pair[0],
        "--assistant",
        pair[1],
        "--prompt",
        PROMPT,
        "--max-new-tokens",
        "8",
        "--dtype",
        dtype,
    )
    _ok(rc, out, err, f"generate --dtype {dtype}")
    assert out == expected + "\n", f"expected the {dtype} model's completion {expected!r}, got {out!r}"


@pytest.mark.parametrize(
    "blas, flags",
    [(None, []), (True, ["--blas-prefill"]), (False, ["--no-blas-prefill"])],
    ids=["default", "blas-prefill", "no-blas-prefill"],
)
def test_generate_prints_the_completion_of_the_matching_prefill(workdir, pair, tmp_path, blas, flags):
    """A prompt long enough for an OpenBLAS block (over 128 tokens), with the draft: the command prints what a
    model with the same blas_prefill generates plainly."""
    tok = ha.AutoTokenizer.from_pretrained(pair[0])
    model = ha.AutoModelForCausalLM.from_pretrained(pair[0], blas_prefill=blas)
    prompt = PROMPT + "\n" + "\n".join(f"    x{i} = fib(n - {i})" for i in range(40))
    assert tok(prompt, return_tensors="np")["input_ids"].shape[1] > 128, "test setup: the prompt must pass 128 tokens"
    expected = completion(tok, model, prompt)
    path = tmp_path / "long_prompt.py"
    path.write_text(prompt, encoding="utf-8")
    rc, out, err = run_cli(
        workdir,
        "generate",
        "--model",
        pair[0],
        "--assistant",
        pair[1],
        "--prompt-file",
        str(path),
        "--max-new-tokens",
        "8",
        *flags,
    )
    _ok(rc, out, err, "generate " + " ".join(flags))
    assert out == expected + "\n", f"expected the completion {expected!r}, got {out!r}"


def test_tree_width_reaches_generate_and_keeps_the_plain_completion(pair, loaded):
    """--tree-width W is generate()'s assistant_tree_width (token trees); the completion stays the plain one."""
    from habana_assist import cli

    tok, model, _ = loaded
    args = cli.build_parser().parse_args(
        ["generate", "--model", pair[0], "--assistant", pair[1], "--tree-width", "3", "--schedule", "constant"]
    )
    _, _, target, draft = cli._load(args)
    kw = cli._assist(args, draft)
    assert kw.get("assistant_tree_width") == 3, f"--tree-width 3: expected assistant_tree_width=3, got {kw}"
    ids = tok(PROMPT, return_tensors="np")["input_ids"]
    res = target.generate(ids, max_new_tokens=8, return_dict_in_generate=True, **kw)
    assert (
        tok.decode(res.sequences[0, ids.shape[1] :], skip_special_tokens=True) == completion(tok, model, PROMPT)
        and res.num_sibling_tokens > 0
    ), "--tree-width 3: expected the plain completion, with siblings verified"
    args = cli.build_parser().parse_args(
        ["generate", "--model", pair[0], "--assistant", pair[1], "--tree-width", "3", "--tree-shape", "dynamic"]
    )
    kw = cli._assist(args, draft)
    assert kw.get("assistant_tree_shape") == "dynamic", f"--tree-shape dynamic: expected it in generate()'s {kw}"
    res = target.generate(ids, max_new_tokens=8, **kw)
    assert tok.decode(res[0, ids.shape[1] :], skip_special_tokens=True) == completion(tok, model, PROMPT), (
        "--tree-shape dynamic: expected the plain completion"
    )


@pytest.mark.parametrize(
    "flags, dtype, want",
    [([], None, False), ([], "int8", False), (["--blas-prefill"], None, True), (["--no-blas-prefill"], "int8", False)],
)
def test_blas_prefill_flags_reach_both_models(pair, flags, dtype, want):
    """What the command loads: the default (off, whatever the weights), or either flag, for the target and
    the draft alike. (The completions above cannot tell: both settings give this pair the same tokens.)"""
    from habana_assist import cli

    argv = ["generate", "--model", pair[0], "--assistant", pair[1], *flags] + (["--dtype", dtype] if dtype else [])
    _, _, model, draft = cli._load(cli.build_parser().parse_args(argv))
    assert (model.blas_prefill, draft.blas_prefill) == (want, want), f"{argv}: blas_prefill of target and draft"


@pytest.mark.parametrize(
    "flags, dtype, want",
    [([], None, True), (["--no-repack"], None, False), (["--no-repack"], "bfloat16", False), ([], "int8", False)],
)
def test_no_repack_flag_reaches_both_models(pair, flags, dtype, want):
    """Float weights are repacked into panels unless --no-repack; integer weights never are."""
    from habana_assist import cli

    argv = ["generate", "--model", pair[0], "--assistant", pair[1], *flags] + (["--dtype", dtype] if dtype else [])
    argv += ["--assistant-dtype", dtype or "auto"]
    _, _, model, draft = cli._load(cli.build_parser().parse_args(argv))
    assert (model.repacked, draft.repacked) == (want, want), f"{argv}: repacked target and draft"


@pytest.mark.parametrize(
    "flags, target, draft",
    [
        ([], "float32", "w8a8"),
        (["--dtype", "int4"], "int4", "w8a8"),
        (["--assistant-dtype", "bfloat16"], "float32", "bfloat16"),
        (["--assistant-dtype", "auto"], "float32", "float32"),
    ],
)
def test_the_draft_is_held_in_w8a8_unless_assistant_dtype_says_otherwise(pair, flags, target, draft):
    """The draft only proposes, so the command holds it in w8a8 whatever the target's --dtype; --assistant-dtype
    chooses, 'auto' as stored (the test pair is stored in float32)."""
    from habana_assist import cli

    argv = ["generate", "--model", pair[0], "--assistant", pair[1], *flags]
    _, _, m, d = cli._load(cli.build_parser().parse_args(argv))
    assert (m.weight_dtype, d.weight_dtype) == (target, draft), f"{argv}: dtypes of target and draft"


def test_missing_prompt_file_exits_2_naming_the_file_without_a_traceback(workdir, pair, tmp_path):
    missing = str(tmp_path / "no_such_prompt.txt")
    rc, out, err = run_cli(workdir, "generate", "--model", pair[0], "--assistant", "none", "--prompt-file", missing)
    assert "Traceback" not in err, f"a missing --prompt-file should be an error message, not a traceback:\n{err}"
    assert rc == 2 and missing in err, f"expected exit status 2 and a message naming {missing}, got {rc}: {err!r}"


@pytest.mark.parametrize(
    "flags, named",
    [(["--repetition-penalty", "0"], "repetition_penalty"), (["--no-repeat-ngram-size", "-1"], "no_repeat_ngram_size")],
)
def test_impossible_processor_values_exit_2_naming_the_argument(workdir, pair, flags, named):
    rc, out, err = run_cli(workdir, "generate", "--model", pair[0], "--assistant", "none", "--prompt", PROMPT, *flags)
    assert rc == 2 and named in err and "Traceback" not in err, (rc, err)


def test_generate_without_a_prompt_says_how_to_pass_one(workdir, pair):
    rc, out, err = run_cli(workdir, "generate", "--model", pair[0], "--assistant", "none")
    assert rc != 0 and "--prompt" in err, f"expected a failure naming --prompt, got {rc}: {err!r}"
    assert "Traceback" not in err, f"a traceback on stderr:\n{err}"


# ---- bench and demo ------------------------------------------------------------------------------------------


def test_bench_prints_speeds_acceptance_and_identical_outputs(workdir, pair):
    rc, out, err = run_cli(
        workdir, "bench", "--model", pair[0], "--assistant", pair[1], "--prompt", PROMPT, "--max-new-tokens", "16"
    )
    _ok(rc, out, err, "bench")
    for pattern in (
        r"plain\s+[\d.]+ tokens/s",
        r"assisted\s+[\d.]+ tokens/s",
        r"speed-up [\d.]+x",
        r"acceptance rate [\d.]+ \(\d+ of \d+ drafted tokens\)",
        r"outputs identical: yes",
    ):
        assert re.search(pattern, out), f"bench output should match {pattern!r}:\n{out}"


def test_bench_with_prompt_lookup_reports_identical_outputs(workdir, pair):
    rc, out, err = run_cli(
        workdir,
        "bench",
        "--model",
        pair[0],
        "--prompt",
        "a = 1\nb = 2\na = 1\n",
        "--max-new-tokens",
        "16",
        "--prompt-lookup",
        "2",
    )
    _ok(rc, out, err, "bench --prompt-lookup")
    assert "prompt lookup" in out and "outputs identical: yes" in out, f"got:\n{out}"


def test_demo_prints_a_summary_with_identical_outputs(workdir, pair):
    rc, out, err = run_cli(
        workdir, "demo", "--model", pair[0], "--assistant", pair[1], "--prompts", "1", "--max-new-tokens", "8"
    )
    _ok(rc, out, err, "demo")
    first = out.splitlines()[0]
    assert "greedy with no_repeat_ngram_size 10 (plain and assisted alike)" in first, (
        f"the demo's first line should state its decoding:\n{first}"
    )
    assert "=== summary over all prompts ===" in out, f"demo should print a summary:\n{out[-3000:]}"
    summary = out.split("=== summary over all prompts ===")[1]
    for pattern in (
        r"plain\s+[\d.]+ tokens/s",
        r"speed-up [\d.]+x",
        r"acceptance rate [\d.]+",
        r"outputs identical: yes",
    ):
        assert re.search(pattern, summary), f"the demo summary should match {pattern!r}:\n{summary}"
    assert out.count("identical: True") == 1, f"one prompt, one 'identical: True' line expected:\n{out[-3000:]}"
    # the assisted run against the fastest plain configuration of the target: each class timed, the best named
    m = re.search(r"fastest plain on this machine \((.+); kernels (\S+)\): (\S+) ([\d.]+) tokens/s \((.*)\)", summary)
    assert m, f"the demo summary should name the fastest plain class:\n{summary}"
    named = {m.group(3)} | {part.split()[0] for part in m.group(5).split(", ")}
    assert named == {"float32", "bfloat16", "bfloat16-pairs", "int8", "w8a8"}, named
    assert all(float(part.split()[1]) <= float(m.group(4)) for part in m.group(5).split(", ")), summary
    assert re.search(r"assisted \(float32\) against it: [\d.]+x generating \([\d.]+x with the prefill\)", summary), (
        summary
    )


def test_demo_without_processors_says_plain_greedy(workdir, pair):
    quick = ["--prompts", "1", "--max-new-tokens", "8", "--no-fastest-plain"]
    rc, out, err = run_cli(
        workdir, "demo", "--model", pair[0], "--assistant", pair[1], *quick, "--no-repeat-ngram-size", "0"
    )
    _ok(rc, out, err, "demo --no-repeat-ngram-size 0")
    assert ", greedy, 8 new tokens" in out.splitlines()[0], out.splitlines()[0]
    assert "outputs identical: yes" in out, out[-2000:]


@pytest.mark.parametrize(
    "flags, kwargs",
    [
        (["--no-repeat-ngram-size", "2"], dict(no_repeat_ngram_size=2)),
        (["--repetition-penalty", "1.5"], dict(repetition_penalty=1.5)),
        (
            ["--repetition-penalty", "0.7", "--no-repeat-ngram-size", "3"],
            dict(repetition_penalty=0.7, no_repeat_ngram_size=3),
        ),
    ],
)
def test_generate_processor_flags_print_what_the_library_generates_with_them(workdir, pair, loaded, flags, kwargs):
    tok, model, _ = loaded
    expected = completion(tok, model, PROMPT, max_new_tokens=12, **kwargs)
    assert expected != completion(tok, model, PROMPT, max_new_tokens=12), f"{kwargs} should change this completion"
    pair_args = ["--model", pair[0], "--assistant", pair[1]]
    rc, out, err = run_cli(workdir, "generate", *pair_args, "--prompt", PROMPT, "--max-new-tokens", "12", *flags)
    _ok(rc, out, err, f"generate {flags}")
    assert out == expected + "\n", f"expected {expected!r} on stdout, got {out!r}"


# ---- errors ----------------------------------------------------------------------------------------------------


def test_generate_without_model_uses_the_shipped_pair(workdir):
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
    expected = completion(tok, model, "def f():", 6)
    rc, out, err = run_cli(workdir, "generate", "--prompt", "def f():", "--max-new-tokens", "6")
    _ok(rc, out, err, "generate with the default (shipped) model and draft")
    assert out == expected + "\n", f"expected the shipped target's own greedy completion {expected!r}, got {out!r}"
    assert "drafts accepted" in err, f"the shipped draft should have drafted: {err!r}"


def test_missing_model_directory_exits_2_saying_no_such_directory(workdir, tmp_path, pair):
    missing = str(tmp_path / "no_model_here")
    for args in (
        ["generate", "--model", missing, "--assistant", "none", "--prompt", "x"],
        ["generate", "--model", pair[0], "--assistant", missing, "--prompt", "x"],
        ["bench", "--model", missing, "--prompt", "x"],
    ):
        rc, out, err = run_cli(workdir, *args)
        assert rc == 2, f"{args}: expected exit status 2, got {rc}\nstderr: {err}"
        assert "no such directory" in err and missing in err, (
            f"{args}: expected 'no such directory' and the path: {err!r}"
        )
        assert "Traceback" not in err, f"{args}: a traceback on stderr:\n{err}"
