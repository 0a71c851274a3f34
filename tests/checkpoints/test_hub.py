"""from_pretrained("org/name"): the Hugging Face cache and downloads, against a Hub of our own on 127.0.0.1
(tests/fixtures/hub_server.py) with HF_HOME in a temporary folder, through each of the two download clients
(checkpoints/hub.py client_name()):

- builtin: checkpoints/hub_client.py, the standard library (what Debian 12, which packages no huggingface_hub, runs);
- huggingface_hub: checkpoints/hf_hub_client.py, run where huggingface_hub is: in the reference environment
  (.venv-reference, huggingface_hub from PyPI), one child kept for the session (hf_reference.Worker). The load runs
  here as always; each call the client makes (the revision's commit, one file's download) runs there, on this
  test's Hub and cache, and its result or exception comes back (_HfHubInVenv).

Tests taking `hub` run once per client; `builtin_hub` marks what only the built-in client does (or what does not
depend on the client: the command line's and the pipeline's children download with the built-in one), and
`library_hub` where huggingface_hub differs (test_difference_*, docs/models.md)."""

import functools
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import tokenizer_fixture as tf
from checkpoints import write_random_checkpoint
from hub_server import FakeHub

import habana_assist as ha
from habana_assist import errors
from habana_assist.checkpoints import hf_hub_client, hub_client
from habana_assist.checkpoints import hub as hub_module
from habana_assist.errors import CheckpointNotFoundError, HubError, InvalidInputError, UnsupportedModelError

REPO = "acme/tiny-llama"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRAFT = os.path.join(hub_module.MODELS_DIR, "pycode-draft")
TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"


def _files(directory):
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory).replace(os.sep, "/")] = open(path, "rb").read()
    return out


class _HfHubInVenv:
    """hf_hub_client.HfHubClient as hub.py calls it, each call run by the real one in the reference environment's
    worker (tests/fixtures/ha_jobs.py: ha_hub_client): its return value, what it wrote to stderr (a progress bar:
    written here again), and its exception, raised here again as the same class with the same message."""

    def __init__(self, worker, repo_id, revision, endpoint, cache, token, progress=None):
        self.worker = worker
        self.args = dict(
            repo_id=repo_id, revision=revision, endpoint=endpoint, cache=cache, token=token, progress=progress
        )

    def _call(self, **op):
        result = self.worker.call(dict(kind="ha_hub_client", **self.args, **op))
        if "error" in result:
            raise RuntimeError(f"the huggingface_hub client failed in the reference environment: {result['error']}")
        sys.stderr.write(result["stderr"])
        if "raised" in result:
            cls = hub_client.Unreachable if result["raised"] == "Unreachable" else getattr(errors, result["raised"])
            raised = cls(result["message"])
            if result["cache_may_serve"]:
                raised.cache_may_serve = True
            raise raised
        return result["value"]

    def revision(self):
        commit, files = self._call(op="revision")
        return commit, files

    def fetch(self, commit, path, force):
        self._call(op="fetch", commit=commit, path=path, force=force)


def _serve(request, tmp_path, monkeypatch, client):
    """A Hub on 127.0.0.1 for this test, HF_HOME in tmp_path, downloads through `client` -> the FakeHub."""
    server = FakeHub()
    server.client = client
    request.addfinalizer(server.close)
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HA_HUB_CLIENT", client)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    if client == "huggingface_hub":
        worker = request.getfixturevalue("hf_reference").worker()
        monkeypatch.setattr(hf_hub_client, "available", lambda: True)
        monkeypatch.setattr(hf_hub_client, "HfHubClient", functools.partial(_HfHubInVenv, worker))
    return server


@pytest.fixture(params=hub_module.CLIENTS)
def hub(request, tmp_path, monkeypatch):
    return _serve(request, tmp_path, monkeypatch, request.param)


@pytest.fixture
def builtin_hub(request, tmp_path, monkeypatch):
    return _serve(request, tmp_path, monkeypatch, "builtin")


@pytest.fixture
def library_hub(request, tmp_path, monkeypatch):
    return _serve(request, tmp_path, monkeypatch, "huggingface_hub")


@pytest.fixture
def tiny(tmp_path):
    """A complete small checkpoint directory (weights, tokenizer, generation config, chat template) -> its files."""
    directory = tmp_path / "tiny"
    tf.write_checkpoint(directory)
    (directory / "generation_config.json").write_text(json.dumps({"eos_token_id": tf.EOS_ID, "max_new_tokens": 5}))
    (directory / "chat_template.jinja").write_text(TEMPLATE)
    (directory / "README.md").write_text("not needed by any load")
    return _files(directory)


def _cache(tmp_path):
    return tmp_path / "hf-home" / "hub" / ("models--" + REPO.replace("/", "--"))


def _logits(model, ids=(1, 5, 9, 3)):
    return model(np.array([ids])).logits


# ---- a load from the Hub, and the cache it leaves -------------------------------------------------------------


def test_every_entry_point_loads_a_repo_id_as_from_the_same_files_on_disk(hub, tiny, tmp_path):
    _, commit = hub.add_repo(REPO, tiny)
    model = ha.AutoModelForCausalLM.from_pretrained(REPO)
    local = tmp_path / "local"
    local.mkdir()
    for name, data in tiny.items():
        (local / name).write_bytes(data)
    reference = ha.AutoModelForCausalLM.from_pretrained(str(local))
    assert np.array_equal(_logits(model), _logits(reference)), "the downloaded weights should be the repo's"
    tok = ha.AutoTokenizer.from_pretrained(REPO)
    assert tok.encode("hello world") == ha.AutoTokenizer.from_pretrained(str(local)).encode("hello world")
    assert tok.chat_template == TEMPLATE, "chat_template.jinja should come down with the tokenizer"
    assert ha.AutoConfig.from_pretrained(REPO).to_dict() == ha.AutoConfig.from_pretrained(str(local)).to_dict()
    assert ha.GenerationConfig.from_pretrained(REPO).max_new_tokens == 5
    assert model.generation_config.max_new_tokens == 5, "the model should read the repo's generation_config.json"
    cached = _files(_cache(tmp_path) / "snapshots" / commit)
    assert "README.md" not in cached, "a file no load reads should not be downloaded"
    assert {k: v for k, v in tiny.items() if k != "README.md"} == cached


def test_the_cache_has_huggingface_hubs_layout(hub, tiny, tmp_path):
    _, commit = hub.add_repo(REPO, tiny)
    ha.AutoModelForCausalLM.from_pretrained(REPO)
    storage = _cache(tmp_path)
    assert (storage / "refs" / "main").read_text() == commit, "refs/main should hold the commit, no newline"
    for name in ("config.json", "model.safetensors"):
        pointer = storage / "snapshots" / commit / name
        target = os.readlink(pointer)
        assert not os.path.isabs(target) and target.startswith("../../blobs/"), f"{name}: {target}"
        data = tiny[name]
        blob = (
            hashlib.sha256(data).hexdigest()
            if name.endswith(".safetensors")
            else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        )
        assert os.path.basename(target) == blob, f"{name}: blobs are named by sha256 (LFS) or git blob id"
    assert not [n for n in os.listdir(storage / "blobs") if n.endswith(".incomplete")]
    assert (tmp_path / "hf-home" / "hub" / ".locks" / storage.name).is_dir(), "locks live in .locks/<repo folder>"


def test_a_second_load_asks_only_for_the_commit_and_offline_asks_nothing(hub, tiny, monkeypatch):
    _, commit = hub.add_repo(REPO, tiny)
    first = _logits(ha.AutoModelForCausalLM.from_pretrained(REPO))
    hub.requests.clear()
    ha.AutoModelForCausalLM.from_pretrained(REPO)
    assert [(m, p) for m, p, _ in hub.requests] == [("GET", f"/api/models/{REPO}/revision/main")], (
        "a cached load should ask the Hub for the branch's commit only"
    )
    hub.requests.clear()
    ha.AutoModelForCausalLM.from_pretrained(REPO, revision=commit)
    assert hub.requests == [], "a commit whose files are cached needs no request"
    ha.AutoModelForCausalLM.from_pretrained(REPO, local_files_only=True)
    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(variable, "1")
        assert np.array_equal(_logits(ha.AutoModelForCausalLM.from_pretrained(REPO)), first)
        monkeypatch.delenv(variable)
    assert hub.requests == [], "offline loads should make no request"


def test_offline_without_the_files_says_offline_and_what_is_missing(hub, tiny, monkeypatch):
    hub.add_repo(REPO, tiny)
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoModelForCausalLM.from_pretrained(REPO, local_files_only=True)
    assert "offline" in str(e.value) and REPO in str(e.value) and "no snapshot" in str(e.value), e.value
    ha.AutoConfig.from_pretrained(REPO)  # config.json only: the weights are still missing
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoModelForCausalLM.from_pretrained(REPO)
    assert "model.safetensors" in str(e.value) and "offline" in str(e.value), e.value
    with pytest.raises(InvalidInputError, match="force_download"):
        ha.AutoModelForCausalLM.from_pretrained(REPO, force_download=True)
    assert hub.requests and all("/api/" in p or "config.json" in p for _, p, _ in hub.requests)


def test_an_unreachable_hub_falls_back_to_the_cache_or_says_how_to_go_offline(hub, tiny, monkeypatch):
    hub.add_repo(REPO, tiny)
    ha.AutoTokenizer.from_pretrained(REPO)
    hub.close()  # the port now refuses connections
    assert ha.AutoTokenizer.from_pretrained(REPO).encode("ab"), "a cached tokenizer should load without the Hub"
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoModelForCausalLM.from_pretrained(REPO)
    message = str(e.value)
    assert "could not be reached" in message and "model.safetensors" in message and "network" in message, message
    with pytest.raises(CheckpointNotFoundError, match="no snapshot"):
        ha.AutoConfig.from_pretrained("acme/never-downloaded")


# ---- revisions --------------------------------------------------------------------------------------------------


def test_revisions_branches_tags_and_commits(hub, tiny, tmp_path):
    repo, first = hub.add_repo(REPO, tiny, tags=("v1.0",))
    changed = dict(tiny, **{"generation_config.json": json.dumps({"max_new_tokens": 9}).encode()})
    second = repo.commit(changed)  # main moves on; v1.0 stays
    assert ha.GenerationConfig.from_pretrained(REPO).max_new_tokens == 9
    assert ha.GenerationConfig.from_pretrained(REPO, revision="v1.0").max_new_tokens == 5
    assert ha.GenerationConfig.from_pretrained(REPO, revision=first).max_new_tokens == 5
    storage = _cache(tmp_path)
    assert (storage / "refs" / "main").read_text() == second and (storage / "refs" / "v1.0").read_text() == first
    assert not (storage / "refs" / first).exists(), "a commit revision writes no ref"
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoConfig.from_pretrained(REPO, revision="no-such-branch")
    assert "RevisionNotFound" in str(e.value) and "revision=" in str(e.value), e.value


# ---- sharded checkpoints, missing files, families ---------------------------------------------------------------


def test_a_sharded_checkpoint_downloads_its_index_and_every_shard(hub, tmp_path):
    write_random_checkpoint(tmp_path / "sharded", shards=3)
    files = _files(tmp_path / "sharded")
    assert "model.safetensors.index.json" in files and len([f for f in files if f.endswith(".safetensors")]) == 3
    _, commit = hub.add_repo(REPO, files)
    model = ha.AutoModelForCausalLM.from_pretrained(REPO)
    reference = ha.AutoModelForCausalLM.from_pretrained(str(tmp_path / "sharded"))
    assert np.array_equal(_logits(model), _logits(reference))
    assert set(_files(_cache(tmp_path) / "snapshots" / commit)) == set(files)


def test_missing_files_and_pytorch_only_repos_are_named(hub, tiny):
    hub.add_repo("acme/bin-only", {"config.json": tiny["config.json"], "pytorch_model.bin": b"\0" * 64})
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoModelForCausalLM.from_pretrained("acme/bin-only")
    assert "pytorch_model.bin" in str(e.value) and "safetensors" in str(e.value), e.value
    hub.add_repo("acme/no-gen", {k: v for k, v in tiny.items() if k != "generation_config.json"})
    with pytest.raises(CheckpointNotFoundError, match="generation_config.json"):
        ha.GenerationConfig.from_pretrained("acme/no-gen")
    with pytest.raises(CheckpointNotFoundError) as e:
        ha.AutoModelForCausalLM.from_pretrained("acme/does-not-exist")
    assert "RepoNotFound" in str(e.value) and "token" in str(e.value), e.value


def test_trust_remote_code_for_a_family_we_do_not_run_says_so(hub, tiny):
    config = json.loads(tiny["config.json"])
    config.update(
        architectures=["MambaForCausalLM"],
        model_type="mamba",
        auto_map={"AutoModelForCausalLM": "modeling_mamba.MambaForCausalLM"},
    )
    hub.add_repo("acme/custom", dict(tiny, **{"config.json": json.dumps(config).encode()}))
    with pytest.raises(UnsupportedModelError) as e:
        ha.AutoModelForCausalLM.from_pretrained("acme/custom", trust_remote_code=True)
    assert "trust_remote_code=True" in str(e.value) and "never runs" in str(e.value), e.value
    with pytest.raises(UnsupportedModelError, match="trust_remote_code=True"):
        ha.AutoConfig.from_pretrained("acme/custom", trust_remote_code=True)


def test_subfolder_reads_that_folder_of_the_repo(hub, tiny, tmp_path):
    hub.add_repo(REPO, {f"draft/{k}": v for k, v in tiny.items()})
    tok = ha.AutoTokenizer.from_pretrained(REPO, subfolder="draft")
    model = ha.AutoModelForCausalLM.from_pretrained(REPO, subfolder="draft")
    assert tok.encode("ab") and model.config.vocab_size == tf.VOCAB_SIZE
    with pytest.raises(CheckpointNotFoundError):
        ha.AutoConfig.from_pretrained(REPO)  # nothing at the top
    with pytest.raises(InvalidInputError, match="subfolder"):
        ha.AutoConfig.from_pretrained(REPO, subfolder="../x")


# ---- tokens and gated repos --------------------------------------------------------------------------------------


def test_a_gated_repo_needs_its_token_from_the_argument_the_environment_or_the_token_file(
    hub, tiny, tmp_path, monkeypatch
):
    hub.add_repo(REPO, tiny, token="hf_secret")
    with pytest.raises(HubError) as e:
        ha.AutoConfig.from_pretrained(REPO)
    assert "gated" in str(e.value) and "token=" in str(e.value) and "HF_TOKEN" in str(e.value), e.value
    with pytest.raises(HubError, match="a token without access"):
        ha.AutoConfig.from_pretrained(REPO, token="hf_wrong")
    ha.AutoConfig.from_pretrained(REPO, token="hf_secret")
    assert any(h.get("Authorization") == "Bearer hf_secret" for _, _, h in hub.requests)
    ha.GenerationConfig.from_pretrained(REPO, use_auth_token="hf_secret")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    ha.AutoTokenizer.from_pretrained(REPO)
    monkeypatch.delenv("HF_TOKEN")
    (tmp_path / "hf-home" / "token").write_text("hf_secret\n")
    model = ha.AutoModelForCausalLM.from_pretrained(REPO)
    assert model.config.vocab_size == tf.VOCAB_SIZE
    cdn = [h for m, p, h in hub.requests if p.startswith("/lfs/") and m == "GET"]
    assert cdn and not any("Authorization" in h for h in cdn), "the token must not leave the Hub for its CDN"
    with pytest.raises(HubError, match="gated"):
        ha.AutoModelForCausalLM.from_pretrained(REPO, token=False, force_download=True)


# ---- downloads that go wrong ------------------------------------------------------------------------------------


def test_a_corrupted_blob_is_deleted_and_raises(hub, tiny, tmp_path):
    hub.add_repo(REPO, tiny)
    hub.corrupt.add((REPO, "model.safetensors"))
    with pytest.raises(HubError) as e:
        ha.AutoModelForCausalLM.from_pretrained(REPO)
    assert "sha256" in str(e.value) and "deleted" in str(e.value), e.value
    blobs = os.listdir(_cache(tmp_path) / "blobs")
    assert hashlib.sha256(tiny["model.safetensors"]).hexdigest() not in blobs
    assert not [b for b in blobs if b.endswith(".incomplete")], blobs
    hub.corrupt.clear()
    ha.AutoModelForCausalLM.from_pretrained(REPO)  # and the next try succeeds


def test_a_dropped_connection_resumes_with_a_range_request(hub, tiny, tmp_path):
    hub.add_repo(REPO, tiny)
    hub.drop_once.add((REPO, "model.safetensors"))
    model = ha.AutoModelForCausalLM.from_pretrained(REPO)
    half = len(tiny["model.safetensors"]) // 2
    ranges = [h.get("Range") for m, p, h in hub.requests if m == "GET" and p.startswith("/lfs/")]
    # huggingface_hub resumes from the last whole chunk it wrote (10 MiB): for this file, from the start
    resumed = f"bytes={half}-" if hub.client == "builtin" else None
    assert ranges == [None, resumed], f"expected a full GET, then one from {resumed}: {ranges}"
    assert model.config.vocab_size == tf.VOCAB_SIZE


def test_a_partial_file_left_by_a_killed_download_is_resumed(builtin_hub, tiny, tmp_path):
    hub = builtin_hub
    hub.add_repo(REPO, tiny)
    data = tiny["model.safetensors"]
    sha = hashlib.sha256(data).hexdigest()
    blobs = _cache(tmp_path) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / (sha + ".incomplete")).write_bytes(data[:1000])
    ha.AutoModelForCausalLM.from_pretrained(REPO)
    ranges = [h.get("Range") for m, p, h in hub.requests if m == "GET" and p.startswith("/lfs/")]
    assert ranges == ["bytes=1000-"], ranges
    assert (blobs / sha).read_bytes() == data


def test_difference_huggingface_hub_starts_over_where_a_killed_download_left_a_partial_file(
    library_hub, tiny, tmp_path
):
    """huggingface_hub (2.x) downloads to a file of its own per process and never resumes another's (docs/models.md):
    the file our client left stays, and the blob comes whole from a fresh GET."""
    hub = library_hub
    hub.add_repo(REPO, tiny)
    data = tiny["model.safetensors"]
    blobs = _cache(tmp_path) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / (hashlib.sha256(data).hexdigest() + ".incomplete")).write_bytes(data[:1000])
    ha.AutoModelForCausalLM.from_pretrained(REPO)
    ranges = [h.get("Range") for m, p, h in hub.requests if m == "GET" and p.startswith("/lfs/")]
    assert ranges == [None], f"huggingface_hub was expected to download the whole file, not resume: {ranges}"
    assert (blobs / hashlib.sha256(data).hexdigest()).read_bytes() == data


def test_two_processes_downloading_the_same_file_leave_one_whole_blob(hub, tiny, tmp_path):
    """Two processes with the built-in client; or, with huggingface_hub, one process of each client at once (both
    take the same flock on .locks/<repo folder>/<etag>.lock)."""
    draft = _files(DRAFT)  # 5 MB of weights
    hub.add_repo(REPO, draft)
    hub.slow = 0.01  # per 64 KiB: long enough for both to be downloading at once
    script = textwrap.dedent(f"""
        import numpy as np, habana_assist as ha
        m = ha.AutoModelForCausalLM.from_pretrained({REPO!r})
        print(float(m(np.array([[1, 2, 3]])).logits.sum()))
    """)
    env = dict(os.environ, HA_HUB_CLIENT="builtin")
    n_children = 2 if hub.client == "builtin" else 1
    here = []  # the huggingface_hub side runs in this process, from a thread, while the child runs
    thread = threading.Thread(target=lambda: here.append(ha.AutoModelForCausalLM.from_pretrained(REPO)))
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
        )
        for _ in range(n_children)
    ]
    if n_children == 1:
        thread.start()
    outputs = [c.communicate(timeout=300) for c in children]
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0, err
    if n_children == 1:
        thread.join(timeout=300)
        assert here, "the load through huggingface_hub failed (its error is above)"
        outputs.append((f"{float(here[0](np.array([[1, 2, 3]])).logits.sum())}\n", ""))
    assert outputs[0][0] == outputs[1][0]
    blob = _cache(tmp_path) / "blobs" / hashlib.sha256(draft["model.safetensors"]).hexdigest()
    assert blob.read_bytes() == draft["model.safetensors"]
    assert hub.count("GET", "/lfs/") == 1, "the second process should find the blob the first one wrote"
    assert not [b for b in os.listdir(blob.parent) if b.endswith(".incomplete")]


def test_downloads_show_a_progress_bar_by_bytes(hub, tiny, capsys):
    pytest.importorskip("tqdm")
    hub.add_repo(REPO, tiny)
    ha.AutoModelForCausalLM.from_pretrained(REPO, progress=True)
    err = capsys.readouterr().err
    assert f"downloading {REPO}/model.safetensors" in err and "100%" in err, err


# ---- the cache without a server -----------------------------------------------------------------------------------


def _lay_out_cache(cache, repo_id, commit, source, revision="main"):
    """A cache exactly as huggingface_hub leaves it: blobs named by etag, relative symlinks, refs/<revision>."""
    storage = cache / ("models--" + repo_id.replace("/", "--"))
    for name, data in source.items():
        etag = (
            hashlib.sha256(data).hexdigest()
            if name.endswith((".safetensors", ".model"))
            else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        )
        blob = storage / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        pointer = storage / "snapshots" / commit / name
        pointer.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, pointer.parent), pointer)
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / revision).write_text(commit)


def test_a_cache_laid_out_by_hand_loads_with_no_server(tmp_path, monkeypatch):
    draft = _files(DRAFT)
    commit = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    _lay_out_cache(tmp_path / "home" / "hub", "habana-assist-mirror/pycode-draft", commit, draft)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist-mirror/pycode-draft")
    tok = ha.AutoTokenizer.from_pretrained("habana-assist-mirror/pycode-draft")
    shipped = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    ids = tok("def add(a, b):", return_tensors="np")["input_ids"]
    assert np.array_equal(model.generate(ids, max_new_tokens=8), shipped.generate(ids, max_new_tokens=8))
    monkeypatch.delenv("HF_HUB_OFFLINE")  # online with nothing listening: falls back to the same snapshot
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert ha.AutoConfig.from_pretrained("habana-assist-mirror/pycode-draft").to_dict() == model.config.to_dict()
    assert ha.AutoConfig.from_pretrained("habana-assist-mirror/pycode-draft", revision=commit).vocab_size


def test_cache_dir_then_hf_hub_cache_then_hf_home(tmp_path, monkeypatch):
    config = {"config.json": open(os.path.join(DRAFT, "config.json"), "rb").read()}
    commit = "1" * 40
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for folder, n_layers in (("argument", 1), ("hub-cache", 2), ("home/hub", 3)):
        data = dict(json.loads(config["config.json"]), num_hidden_layers=n_layers)
        _lay_out_cache(tmp_path / folder, REPO, commit, {"config.json": json.dumps(data).encode()})
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    assert ha.AutoConfig.from_pretrained(REPO, cache_dir=tmp_path / "argument").num_hidden_layers == 1
    assert ha.AutoConfig.from_pretrained(REPO).num_hidden_layers == 2
    monkeypatch.delenv("HF_HUB_CACHE")
    assert ha.AutoConfig.from_pretrained(REPO).num_hidden_layers == 3


# ---- names -------------------------------------------------------------------------------------------------------


def test_every_entry_point_takes_the_shipped_names():
    for name in ("habana-assist/pycode", "habana-assist/pycode-draft"):
        directory = os.path.join(hub_module.MODELS_DIR, name.split("/")[1])
        assert ha.AutoConfig.from_pretrained(name).to_dict() == ha.AutoConfig.from_pretrained(directory).to_dict()
        assert (
            ha.GenerationConfig.from_pretrained(name).to_dict()
            == ha.GenerationConfig.from_pretrained(directory).to_dict()
        )
        assert ha.AutoTokenizer.from_pretrained(name).encode("x = 1") == ha.AutoTokenizer.from_pretrained(
            directory
        ).encode("x = 1")


def test_names_that_are_neither_directories_nor_repo_ids_say_so(tmp_path):
    for name in (str(tmp_path / "nowhere"), "a/b/c", "bad--name/x", "./relative/nothing"):
        with pytest.raises(CheckpointNotFoundError) as e:
            ha.AutoConfig.from_pretrained(name)
        assert "no such directory" in str(e.value) and "repo id" in str(e.value), e.value
    with pytest.raises(InvalidInputError, match="local_files_only"):
        ha.AutoConfig.from_pretrained(REPO, local_files_only="yes")


def test_the_command_line_takes_repo_ids(builtin_hub, tmp_path):
    hub = builtin_hub
    hub.add_repo("acme/pycode-draft", _files(DRAFT))
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONIOENCODING="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "habana_assist",
            "generate",
            "--model",
            "acme/pycode-draft",
            "--assistant",
            "none",
            "--prompt",
            "def f(x):",
            "--max-new-tokens",
            "6",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode-draft")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    inputs = tok("def f(x):", return_tensors="np")
    out = model.generate(**inputs, max_new_tokens=6)
    expected = tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert run.stdout == expected + "\n", (run.stdout, expected)


def test_pipeline_takes_repo_ids_for_the_model_and_the_assistant(builtin_hub):
    hub = builtin_hub
    hub.add_repo("acme/pycode-draft", _files(DRAFT))
    hub.add_repo("acme/pycode-draft-copy", _files(DRAFT))
    pipe = ha.pipeline("text-generation", model="acme/pycode-draft", assistant_model="acme/pycode-draft-copy")
    got = pipe("def add(a, b):", max_new_tokens=8, do_sample=False)
    tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode-draft")
    model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
    ids = tok("def add(a, b):", return_tensors="np")["input_ids"]
    expected = tok.decode(model.generate(ids, max_new_tokens=8)[0], skip_special_tokens=True)
    assert got == [{"generated_text": expected}], (got, expected)


def test_a_partial_file_longer_than_the_blob_is_started_over(builtin_hub, tiny, tmp_path):
    hub = builtin_hub
    hub.add_repo(REPO, tiny)
    data = tiny["model.safetensors"]
    blobs = _cache(tmp_path) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / (hashlib.sha256(data).hexdigest() + ".incomplete")).write_bytes(b"x" * (len(data) + 10))
    ha.AutoModelForCausalLM.from_pretrained(REPO)
    assert (blobs / hashlib.sha256(data).hexdigest()).read_bytes() == data


# ---- which client, and what each refuses --------------------------------------------------------------------------


def test_ha_hub_client_picks_the_client_and_says_what_it_takes(builtin_hub, tiny, monkeypatch):
    builtin_hub.add_repo(REPO, tiny)
    monkeypatch.delenv("HA_HUB_CLIENT")
    for available, proxies, expected in (
        (True, None, "huggingface_hub"),
        (False, None, "builtin"),
        (True, {"https": "http://proxy:3128"}, "builtin"),
    ):
        monkeypatch.setattr(hf_hub_client, "available", lambda: available)
        got = hub_module.client_name(proxies)
        assert got == expected, f"huggingface_hub importable {available}, proxies={proxies}: {got}, not {expected}"
    monkeypatch.setenv("HA_HUB_CLIENT", "requests")
    with pytest.raises(InvalidInputError, match="HA_HUB_CLIENT='requests': expected one of builtin, huggingface_hub"):
        ha.AutoConfig.from_pretrained(REPO)
    monkeypatch.setenv("HA_HUB_CLIENT", "huggingface_hub")
    monkeypatch.setattr(hf_hub_client, "available", lambda: False)
    with pytest.raises(InvalidInputError, match="not importable here: pip install huggingface_hub, or unset"):
        ha.AutoConfig.from_pretrained(REPO)
    monkeypatch.setattr(hf_hub_client, "available", lambda: True)
    with pytest.raises(InvalidInputError, match="proxies=.*HTTPS_PROXY"):
        ha.AutoConfig.from_pretrained(REPO, proxies={"http": builtin_hub.endpoint})
    assert builtin_hub.requests == [], "a refused load should ask the Hub nothing"


def test_proxies_go_through_the_builtin_client_which_honours_them(builtin_hub, tiny, monkeypatch):
    """huggingface_hub takes no proxies per call, so a load with proxies= goes through our client even where
    huggingface_hub is installed; the Hub's server answers as a proxy too (it serves a request by its path), and
    HF_ENDPOINT names a port where nothing listens: the load works only through the proxy."""
    builtin_hub.add_repo(REPO, tiny)
    monkeypatch.delenv("HA_HUB_CLIENT")
    monkeypatch.setattr(hf_hub_client, "available", lambda: True)
    monkeypatch.setattr(hf_hub_client, "HfHubClient", None)  # calling it would fail the test
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    config = ha.AutoConfig.from_pretrained(REPO, proxies={"http": builtin_hub.endpoint})
    assert config.vocab_size == tf.VOCAB_SIZE
    assert builtin_hub.count("GET", f"/api/models/{REPO}/revision/main") == 1, builtin_hub.requests
    monkeypatch.setenv("HA_HUB_CLIENT", "builtin")
    with pytest.raises(CheckpointNotFoundError, match="could not be reached"):
        ha.AutoConfig.from_pretrained(REPO, revision="v1")  # no proxy (and no ref cached): nothing listens there


# ---- the shipped names' revision, and subfolders that are not there ------------------------------------------------

ENTRY_POINTS = {
    "AutoConfig": ha.AutoConfig.from_pretrained,
    "AutoModelForCausalLM": ha.AutoModelForCausalLM.from_pretrained,
    "AutoTokenizer": ha.AutoTokenizer.from_pretrained,
    "GenerationConfig": ha.GenerationConfig.from_pretrained,
}


def test_a_shipped_name_takes_main_or_no_revision_and_refuses_others():
    name = "habana-assist/pycode-draft"
    for revision in (None, "main"):
        assert ha.AutoConfig.from_pretrained(name, revision=revision).vocab_size
    for entry, load in ENTRY_POINTS.items():
        with pytest.raises(InvalidInputError) as e:
            load(name, revision="v2.0")
        message = str(e.value)
        assert "revision='v2.0'" in message and "revision='main' or None" in message and name in message, (
            f"{entry}: {message}"
        )


def test_a_missing_subfolder_is_named_for_a_directory_a_shipped_name_and_a_repo(builtin_hub, tiny, tmp_path):
    local = tmp_path / "local"
    (local / "draft").mkdir(parents=True)
    for name, data in tiny.items():
        (local / "draft" / name).write_bytes(data)
    builtin_hub.add_repo(REPO, {f"draft/{k}": v for k, v in tiny.items()})
    for name, folders in ((str(local), "['draft']"), ("habana-assist/pycode-draft", "no folders"), (REPO, None)):
        for entry, load in ENTRY_POINTS.items():
            with pytest.raises(CheckpointNotFoundError) as e:
                load(name, subfolder="target")
            message = str(e.value)
            assert "subfolder='target'" in message and name in message, f"{entry}({name!r}): {message}"
            assert folders is None or folders in message, f"{entry}({name!r}) should list {folders}: {message}"
    assert ha.AutoConfig.from_pretrained(str(local), subfolder="draft").vocab_size == tf.VOCAB_SIZE
