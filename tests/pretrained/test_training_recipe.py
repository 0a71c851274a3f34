"""training/, the recipe of the shipped pair: the corpus collector's file rules and document format, the bfloat16
safetensors writer (sharded as Transformers shards), the trainer's cached generation, and a smoke run of
train_gpu.py on the CPU whose weights package_pair.py lays out for habana_assist to load and compute as torch does.
Needs Debian's python3-torch and python3-sentencepiece (scripts/setup.sh installs both)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import habana_assist as ha
from habana_assist.checkpoints.hub import MODELS_DIR
from habana_assist.pretrained.stdlib_split import stdlib_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAINING = os.path.join(ROOT, "training")
sys.path.insert(0, TRAINING)
torch = pytest.importorskip("torch", reason="training/ needs python3-torch")
pytest.importorskip("sentencepiece", reason="training/ needs python3-sentencepiece")
import collect_corpus  # noqa: E402 - once torch is known to be there
import llama_torch  # noqa: E402 - once torch is known to be there
import train_gpu  # noqa: E402 - once torch is known to be there


@pytest.mark.parametrize(
    "rel, text, kept",
    [
        ("pkg/module.py", "import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n", True),
        ("pkg/tests/test_module.py", "def test_f():\n    assert f(1)\n", False),
        ("pkg/test_module.py", "def test_f():\n    assert f(1)\n", False),
        ("pip/_vendor/requests/api.py", "def get(url):\n    return request('get', url)\n", False),
        ("botocore/vendored/six.py", "import sys\nPY3 = sys.version_info[0] == 3\n", False),
        ("pkg/table.py", "T = [" + ", ".join(str(i) for i in range(600)) + "]\n", False),  # one long line: data
        ("pkg/nums.py", "\n".join(f"({i}, {i * 3}, {i * 7})," for i in range(200)), False),  # numbers, not code
        ("pkg/empty.py", "\n\n", False),
        ("pkg/nul.py", "x = 1\0\n", False),
    ],
)
def test_collector_keeps_code_and_drops_tests_vendored_copies_and_data(rel, text, kept):
    assert collect_corpus.keep(rel, text) is kept, f"{rel}: expected keep() to say {kept}"


def test_corpus_documents_round_trip_through_xz(tmp_path):
    docs = ["import os\n", "# é → ∑\nx = 'ü'\n", "", "class A:\n    pass\n"]
    n = collect_corpus.write_docs(tmp_path / "d.bin.xz", docs)
    assert n == len("\0".join(docs).encode("utf-8")), f"expected the UTF-8 byte count back, got {n}"
    assert collect_corpus.read_docs(tmp_path / "d.bin.xz") == docs, "expected the documents back as written"


def test_bf16_writer_shards_as_transformers_does_and_reads_back(tmp_path):
    g = torch.Generator().manual_seed(0)
    tensors = {f"model.layers.{i}.w": torch.randn(64, 96, generator=g) for i in range(5)}
    tensors["model.norm.weight"] = torch.randn(64, generator=g)
    files = llama_torch.save_bf16(tensors, tmp_path, max_shard_bytes=64 * 96 * 2 * 2 + 8192)
    shards = [f for f in files if f.endswith(".safetensors")]
    assert shards == [f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)], f"got {files}"
    with open(tmp_path / "model.safetensors.index.json") as f:
        index = json.load(f)
    assert set(index["weight_map"]) == set(tensors) and set(index["weight_map"].values()) == set(shards), index
    assert index["metadata"]["total_size"] == sum(t.numel() * 2 for t in tensors.values()), index["metadata"]
    back = llama_torch.load_bf16(tmp_path)
    for name, t in tensors.items():
        assert torch.equal(back[name], t.to(torch.bfloat16).float()), f"{name}: expected its bfloat16 rounding back"


def test_cached_generation_equals_recomputing_the_whole_sequence():
    torch.manual_seed(0)
    shape = dict(train_gpu.DRAFT, hidden_size=64, intermediate_size=96)
    model = llama_torch.Llama(50, **shape).eval()
    prompts = torch.randint(0, 50, (3, 9))
    cached = train_gpu.continue_with(model, prompts, 7, 0.0, None, torch.device("cpu"))
    full = prompts
    with torch.no_grad():
        for _ in range(7):
            full = torch.cat([full, model(full)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(cached, full), "expected greedy continuation with the cache to equal recomputation"


def test_loop_mask_marks_the_third_copy_of_a_run_and_leaves_a_line_written_twice():
    line = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]  # one 10-token line
    twice = torch.tensor([line + [1, 2] + line + [3, 4, 40]])
    assert not train_gpu.loop_mask(twice).any(), "a run written twice is code, not a loop: expected nothing marked"
    thrice = torch.tensor([line + [1, 2] + line + [3, 4] + line + [40]])
    mask = train_gpu.loop_mask(thrice)[0]
    third = 2 * (len(line) + 2)
    assert mask[third : third + len(line)].all(), f"expected the third copy marked, got {mask.tolist()}"
    assert not mask[:third].any() and not mask[-1], f"expected only the third copy marked, got {mask.tolist()}"


def test_unlikelihood_lowers_the_probability_of_marked_tokens_only():
    torch.manual_seed(0)
    model = llama_torch.Llama(50, **dict(train_gpu.DRAFT, hidden_size=64, intermediate_size=96))
    seqs = torch.randint(0, 50, (2, 20))
    mask = torch.zeros(2, 12, dtype=torch.bool)
    mask[0, 3:7] = True
    cpu = torch.device("cpu")

    def p_of_continuation():
        with torch.no_grad():
            p = torch.softmax(model(seqs[:, :-1])[:, 7:], -1)
        return p.gather(-1, seqs[:, 8:, None])[..., 0]

    before = p_of_continuation()
    loss = train_gpu.unlikelihood(model, seqs, mask, 8, cpu)
    expected = -torch.log1p(-before[mask]).sum() / mask.numel()
    assert torch.allclose(loss.detach(), expected, rtol=1e-4), (
        f"loss {float(loss)} != -sum log(1 - p)/N {float(expected)}"
    )
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.5 * p.grad
    after = p_of_continuation()
    assert (after[mask] < before[mask]).all(), "expected each marked token less likely after one descent step"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """A corpus of a few standard-library files laid out as collect_corpus.py writes one, train_gpu.py --smoke on
    it (the real shapes, 3 steps each), and package_pair.py's layout of what it wrote."""
    base = tmp_path_factory.mktemp("recipe")
    corpus, run, pair = base / "corpus", base / "run", base / "pair"
    corpus.mkdir()
    train, held = stdlib_files()
    texts = []
    for path in train[:12] + held[:3]:
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    collect_corpus.write_docs(corpus / "train.bin.xz", texts[:12])
    collect_corpus.write_docs(corpus / "held_out.bin.xz", texts[12:])
    with open(corpus / "manifest.json", "w") as f:
        json.dump({"held_out": {"packages": {"stdlib-sample": {"files": 3}}}}, f)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, os.path.join(TRAINING, "train_gpu.py"), "--corpus", str(corpus), "--out", str(run), "--smoke"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, f"train_gpu.py --smoke failed:\n{proc.stdout}\n{proc.stderr}"
    proc = subprocess.run(
        [sys.executable, os.path.join(TRAINING, "package_pair.py"), "--run", str(run), "--out", str(pair)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"package_pair.py failed:\n{proc.stdout}\n{proc.stderr}"
    return corpus, run, pair


def test_smoke_run_writes_shards_small_enough_to_come_back_and_its_metrics(smoke_run):
    _, run, _ = smoke_run
    shards = sorted(os.listdir(run / "pycode"))
    assert shards == [f"model-{i:05d}-of-00004.safetensors" for i in range(1, 5)] + ["model.safetensors.index.json"], (
        f"got {shards}"
    )
    for name in shards:
        assert os.path.getsize(run / "pycode" / name) <= 16 * 2**20, f"{name}: over 16 MiB"
    with open(run / "metrics.json") as f:
        m = json.load(f)
    assert m["target"] == train_gpu.TARGET and m["draft"] == train_gpu.DRAFT, m
    assert m["target_training"]["steps"] == 3 and m["draft_training"]["steps"] == 3, m
    assert 0 < m["target_held_out"]["bits_per_byte"] < 8 and "gpu_checks" in m, m


def test_packaged_smoke_pair_loads_and_computes_what_torch_computes(smoke_run):
    _, run, pair = smoke_run
    assert sorted(os.listdir(pair)) == ["pycode", "pycode-draft", "training.json"], os.listdir(pair)
    ids = np.random.default_rng(0).integers(4, 4096, (1, 40))
    for name, shape in (("pycode", train_gpu.TARGET), ("pycode-draft", train_gpu.DRAFT)):
        assert "model.safetensors" in os.listdir(pair / name), f"{name}: expected one file of weights"
        ours = ha.AutoModelForCausalLM.from_pretrained(str(pair / name), dtype="float32")
        ref = llama_torch.Llama(4096, **shape).eval()
        llama_torch.load_into(ref, str(run / name))
        with torch.no_grad():
            expected = ref(torch.from_numpy(ids)).numpy()
        got = ours(input_ids=ids).logits
        assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max(), (
            f"{name}: habana_assist's logits differ from the trainer's by {np.abs(got - expected).max()}"
        )


def test_draft_only_run_needs_a_trained_target(smoke_run, tmp_path):
    corpus = smoke_run[0]
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(TRAINING, "train_gpu.py"),
            "--corpus",
            str(corpus),
            "--out",
            str(tmp_path),
            "--smoke",
            "--target-share",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "--target-share 0 needs --init" in proc.stderr, proc.stderr


def test_shipped_pair_has_the_recipes_shapes_and_its_training_record():
    with open(os.path.join(MODELS_DIR, "training.json")) as f:
        record = json.load(f)
    for name, shape in (("pycode", "target"), ("pycode-draft", "draft")):
        with open(os.path.join(MODELS_DIR, name, "config.json")) as f:
            config = json.load(f)
        for key, value in getattr(train_gpu, shape.upper()).items():
            assert config[key] == value == record[shape][key], f"{name}: {key} disagrees with the recipe's"
