"""A checkpoint file that changes while it is loaded, or while a model built from it lives.

Truncated or rewritten in place during the load (another process saving or copying over it): CheckpointError
naming the file, never SIGBUS and never a model made of two files' bytes. Replaced by rename during or after the
load: the model is the file that was opened, unchanged. After a load with repack=True nothing maps the file, so
truncating it then is harmless too (README, "Checkpoints"; habana_assist/checkpoints/loading.py's docstring).
"""

import json
import os
import shutil
import signal
import subprocess

import numpy as np
import pytest
from checkpoints import write_random_checkpoint
from package_under_test import PACKAGE_PARENT, PYTHON, child_env

import habana_assist as ha
from habana_assist.checkpoints import loading
from habana_assist.errors import CheckpointError

TIMEOUT = 300  # seconds for a child process: a hang is a failure, not a stuck test run
IDS = np.array([[3, 17, 42, 5, 9, 11]])
# Every way to load that leaves nothing mapped: repacked as stored, quantized, converted (repacked or not).
UNMAPPED = [{}, {"dtype": "int8"}, {"dtype": "int4"}, {"dtype": "float16"}, {"dtype": "float32", "repack": False}]
UNMAPPED_IDS = ["repacked", "int8", "int4", "float16", "float32-row-major"]


def checkpoint(directory, seed=0, **kw):
    """A small random BF16 checkpoint (so that every dtype is a real conversion) -> its model.safetensors."""
    write_random_checkpoint(directory, dtype="BF16", seed=seed, **kw)
    return directory / "model.safetensors"


def logits(directory, **kwargs):
    return ha.AutoModelForCausalLM.from_pretrained(directory, **kwargs)(IDS).logits


def on_first_read(monkeypatch, action):
    """Run action() just before the loader's first read of weight bytes (after every header was read)."""
    read_rows, calls = loading._read_rows, []

    def reading(tensor, start, stop, out):
        if not calls:
            action()
        calls.append(tensor.name)
        return read_rows(tensor, start, stop, out)

    monkeypatch.setattr(loading, "_read_rows", reading)
    return calls


@pytest.mark.parametrize("kwargs", UNMAPPED + [{"repack": False}], ids=UNMAPPED_IDS + ["as-stored-mapped"])
def test_a_file_truncated_after_its_header_was_read_gives_checkpoint_error_naming_it(tmp_path, monkeypatch, kwargs):
    path = checkpoint(tmp_path / "m")
    calls = on_first_read(monkeypatch, lambda: os.truncate(path, path.stat().st_size // 2))
    with pytest.raises(CheckpointError) as caught:
        ha.AutoModelForCausalLM.from_pretrained(tmp_path / "m", **kwargs)
    message = str(caught.value)
    assert calls, "the loader read no weight bytes through _read_rows: the truncation never happened"
    assert str(path) in message and "changed while loading" in message, (
        f"expected a CheckpointError naming {path} and saying it changed while loading, got: {message}"
    )


@pytest.mark.parametrize("kwargs", UNMAPPED + [{"repack": False}], ids=UNMAPPED_IDS + ["as-stored-mapped"])
def test_a_file_rewritten_in_place_during_the_load_gives_checkpoint_error_not_a_mixed_model(
    tmp_path, monkeypatch, kwargs
):
    path, other = checkpoint(tmp_path / "m", seed=0), checkpoint(tmp_path / "other", seed=1)
    assert path.stat().st_size == other.stat().st_size  # same shapes: same header, same size
    os.utime(path, ns=(10**18, 10**18))  # an old modification time, so the rewrite's differs at any clock grain

    def rewrite_in_place():
        with open(path, "r+b") as f:
            f.write(other.read_bytes())

    on_first_read(monkeypatch, rewrite_in_place)
    with pytest.raises(CheckpointError, match="changed while loading") as caught:
        ha.AutoModelForCausalLM.from_pretrained(tmp_path / "m", **kwargs)
    assert str(path) in str(caught.value), f"the message should name {path}: {caught.value}"


@pytest.mark.parametrize("repack", (True, False))
def test_a_file_replaced_by_rename_during_or_after_the_load_leaves_the_model_as_loaded(tmp_path, monkeypatch, repack):
    """Header and data come from one open file, so a rename during the load gives the opened file's model; a
    map keeps the old inode, so a rename after it changes nothing either."""
    path, other = checkpoint(tmp_path / "m", seed=0), checkpoint(tmp_path / "other", seed=1)
    expected, different = logits(tmp_path / "m", repack=repack), logits(tmp_path / "other", repack=repack)
    assert not np.array_equal(expected, different), "the two checkpoints should differ"

    def replace_by_rename():
        shutil.copy(other, path.with_suffix(".new"))
        os.replace(path.with_suffix(".new"), path)

    shutil.copy(tmp_path / "m" / "model.safetensors", tmp_path / "original.safetensors")
    calls = on_first_read(monkeypatch, replace_by_rename)
    during = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "m", repack=repack)
    monkeypatch.undo()
    assert calls, "the loader read no weight bytes through _read_rows: the rename never happened"
    assert np.array_equal(during(IDS).logits, expected), "renamed over during the load: not the opened file's model"

    os.replace(tmp_path / "original.safetensors", path)
    after = ha.AutoModelForCausalLM.from_pretrained(tmp_path / "m", repack=repack)
    replace_by_rename()
    for name, model in (("during", during), ("after", after)):
        assert np.array_equal(model(IDS).logits, expected), f"model loaded {name}: logits changed by the rename"
    assert np.array_equal(logits(tmp_path / "m", repack=repack), different)  # the path now holds the other file


def run_child(script, *args):
    child = subprocess.run(
        [PYTHON, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=PACKAGE_PARENT,
        env=child_env(),
        timeout=TIMEOUT,
    )
    died = (
        f"died of signal {signal.Signals(-child.returncode).name}"
        if child.returncode < 0
        else f"exited {child.returncode}"
    )
    assert child.returncode == 0, f"the child {died}, expected exit 0; stderr:\n{child.stderr[-3000:]}"
    return json.loads(child.stdout.strip().splitlines()[-1])


AFTER_LOAD = """
import json, os, sys
import numpy as np
import habana_assist as ha
directory, modes = sys.argv[1], json.loads(sys.argv[2])
ids = np.array([[3, 17, 42, 5, 9, 11]])
models = [ha.AutoModelForCausalLM.from_pretrained(directory, **m) for m in modes]
before = [m(ids).logits for m in models]
os.truncate(os.path.join(directory, "model.safetensors"), 0)
print(json.dumps([bool(np.array_equal(m(ids).logits, b)) for m, b in zip(models, before)]))
"""


def test_after_a_load_that_maps_nothing_the_file_may_be_truncated(tmp_path):
    """Run in a child: were a weight still mapped, reading it would raise SIGBUS, killing the process."""
    checkpoint(tmp_path / "m")
    same = run_child(AFTER_LOAD, tmp_path / "m", json.dumps(UNMAPPED))
    assert same == [True] * len(UNMAPPED), f"logits unchanged after truncation per mode {UNMAPPED_IDS}: {same}"


RACE_LOADER = """
import json, sys
import numpy as np
import habana_assist as ha
from habana_assist.checkpoints import loading
from habana_assist.errors import CheckpointError
loading._CHUNK_BYTES = 1 << 16  # many reads a load: many chances to meet the writer
directory, reference, modes, n = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
ids = np.array([[3, 17, 42, 5, 9, 11]])
expected = [ha.AutoModelForCausalLM.from_pretrained(reference, **m)(ids).logits for m in modes]
counts = {"ok": 0, "errors": 0, "wrong": [], "messages": set()}
for i in range(n):
    try:
        model = ha.AutoModelForCausalLM.from_pretrained(directory, **modes[i % len(modes)])
    except CheckpointError as e:
        counts["errors"] += 1
        counts["messages"].add(str(e).split(": ", 1)[-1][:40])
        continue
    if np.array_equal(model(ids).logits, expected[i % len(modes)]):  # computed while the writer goes on
        counts["ok"] += 1
    else:
        counts["wrong"].append(i)
counts["messages"] = sorted(counts["messages"])
print(json.dumps(counts))
"""

RACE_WRITER = """
import os, random, sys, time
path, stop = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
rng = random.Random(0)
fd = os.open(path, os.O_WRONLY)
while not os.path.exists(stop):
    at = rng.randrange(len(data))
    os.ftruncate(fd, at)  # what a writer opening with O_TRUNC does, then it writes the same bytes back
    for start in range(at, len(data), 1 << 16):
        os.pwrite(fd, data[start:start + (1 << 16)], start)
    time.sleep(0.02)
"""


def test_loading_a_file_another_process_keeps_truncating_never_dies_and_never_gives_wrong_logits(tmp_path):
    """A writer process truncates the file at a random byte and writes it back, over and over, while a child
    loads it N times (every mode that maps nothing) and computes logits after each load: each load succeeds with
    the right logits or raises CheckpointError, and the child never dies of SIGBUS."""
    n = 40
    path = checkpoint(
        tmp_path / "m", vocab_size=2048, hidden_size=128, intermediate_size=256, num_heads=4, num_kv_heads=2
    )
    shutil.copytree(tmp_path / "m", tmp_path / "reference")
    stop = tmp_path / "stop"
    writer = subprocess.Popen([PYTHON, "-c", RACE_WRITER, str(path), str(stop)])
    try:
        counts = run_child(RACE_LOADER, tmp_path / "m", tmp_path / "reference", json.dumps(UNMAPPED), n)
    finally:
        stop.touch()
        try:
            writer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()
    print(f"race: {counts}")  # for -s: how often the writer was met
    assert writer.returncode == 0, f"the writer exited {writer.returncode}"
    assert counts["wrong"] == [], f"loads {counts['wrong']} succeeded with wrong logits; expected right or an error"
    assert counts["ok"] + counts["errors"] == n, f"expected {n} loads counted, got {counts}"
