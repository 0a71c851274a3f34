"""training/train_pair.py, the recipe of the shipped pair: its on-policy windows (anywhere, or from a file's
beginning), its arguments' checks, and a smoke stage resumed from the shipped pair that records its shape.
Needs Debian's python3-torch and python3-sentencepiece (scripts/setup.sh installs both)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from habana_assist.checkpoints.hub import MODELS_DIR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "training", "train_pair.py")
sys.path.insert(0, os.path.join(ROOT, "training"))
_coretype = os.environ.get("OPENBLAS_CORETYPE")
tp = pytest.importorskip("train_pair", reason="training/train_pair.py needs python3-torch and python3-sentencepiece")
if _coretype is None:  # its import asks for SkylakeX's kernels; no later test's subprocess should inherit that
    os.environ.pop("OPENBLAS_CORETYPE", None)

BOS = tp.SPECIAL["bos"][0]


@pytest.fixture(scope="module")
def stream():
    """Three 'files' of distinct tokens, <s> ... </s> each, as encode_files lays them out."""
    files = [np.arange(10, 60), np.arange(100, 180), np.arange(200, 240)]
    return np.concatenate([np.concatenate([[BOS], f, [2]]) for f in files]).astype(np.int32)


def _prompts_in_stream(seqs, stream, prompt_len):
    """Where each sequence's prompt starts in the stream (-1 where it is not a window of it)."""
    windows = np.lib.stride_tricks.sliding_window_view(stream, prompt_len)
    found = [np.flatnonzero((windows == s[:prompt_len]).all(1)) for s in seqs]
    return [int(at[0]) if len(at) else -1 for at in found]


@pytest.mark.parametrize("head_share", [0.0, 1.0])
def test_onpolicy_windows_come_from_the_stream_and_head_share_starts_them_at_a_file(stream, head_share):
    seqs = tp.onpolicy_sequences(os.path.join(MODELS_DIR, "pycode"), stream, 6, 20, 8, head_share, seed=3)
    assert seqs.shape == (6, 20), f"expected 6 sequences of 20 tokens, got {seqs.shape}"
    starts = _prompts_in_stream(seqs, stream, 8)
    assert min(starts) >= 0, f"expected every prompt to be a window of the stream, got starts {starts}"
    at_file = [bool(stream[s] == BOS) for s in starts]
    if head_share == 1.0:
        assert all(at_file), f"expected every prompt to start at a file's <s>, got starts {starts}"
    else:
        assert not all(at_file), f"expected windows anywhere in the stream, got starts {starts} (all at a file)"


def test_head_share_without_a_file_beginning_is_refused_by_name():
    with pytest.raises(SystemExit, match="--head-share"):
        tp.onpolicy_sequences(os.path.join(MODELS_DIR, "pycode"), np.arange(10, 60, dtype=np.int32), 2, 12, 5, 0.5,
                              seed=0)


def test_head_share_zero_draws_the_windows_of_the_first_recipe(stream):
    """The shipped draft's first stage drew its windows before head_share existed: with 0 it draws the same."""
    seqs = tp.onpolicy_sequences(os.path.join(MODELS_DIR, "pycode"), stream, 4, 12, 5, 0.0, seed=7)
    first = np.random.default_rng(7).integers(0, len(stream) - 5, size=4)
    assert np.array_equal(seqs[:, :5], np.stack([stream[s:s + 5] for s in first])), \
        "expected head_share 0 to draw the first recipe's windows"


@pytest.mark.parametrize("args, says", [
    (["--draft-seq", "64", "--onpolicy-prompt", "64"], "--onpolicy-prompt"),
    (["--draft-seq", "2048"], "--draft-seq <= 1024"),
    (["--head-share", "1.5"], "--head-share"),
    (["--draft-batch", "0"], "--draft-batch >= 1"),
    (["--onpolicy-prompt", "0"], "--onpolicy-prompt"),
])
def test_impossible_draft_shapes_are_refused_by_name(tmp_path, args, says):
    r = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), *args], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0 and says in r.stderr, f"expected a refusal naming {says!r}, got {r.returncode}: {r.stderr}"


def test_a_resumed_smoke_stage_records_its_windows_in_metrics_and_card(tmp_path):
    """A tiny further stage of the shipped draft (--smoke): 64-token windows of 2, half of the prompts at a file's
    beginning; metrics.json keeps the shipped stages and adds this one, the card lists them all."""
    r = subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), "--smoke", "--resume", MODELS_DIR,
                        "--head-share", "0.5", "--threads", "1"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, HA_PROGRESS="0"))
    assert r.returncode == 0, f"expected the smoke stage to run, got {r.returncode}: {r.stderr[-2000:]}"
    with open(tmp_path / "metrics.json") as f:
        m = json.load(f)
    with open(os.path.join(MODELS_DIR, "metrics.json")) as f:
        shipped = tp.draft_stages(json.load(f))
    stages = m["draft_stages"]
    assert stages[:-1] == shipped, f"expected the shipped stages kept, got {stages[:-1]} for {shipped}"
    assert (stages[-1]["steps"], stages[-1]["seq"], stages[-1]["batch"], stages[-1]["head_share"]) == (5, 64, 2, 0.5), \
        stages[-1]
    assert m["steps"]["draft"] == sum(st["steps"] for st in shipped) + 5, m["steps"]
    assert m["head_acceptance"]["prompts"] == 2 and m["head_acceptance"]["drafted"] > 0, m["head_acceptance"]
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert f"{len(stages)}. 5 steps of 2 x 64 tokens" in card and "50% of them from a file's beginning" in card, card
    assert os.path.exists(tmp_path / "pycode-draft" / "model.safetensors"), "expected the exported draft"
