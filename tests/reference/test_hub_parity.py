"""The Hugging Face cache shared with Transformers both ways, against a Hub of our own on 127.0.0.1
(tests/fixtures/hub_server.py): Transformers' own from_pretrained (the reference environment, HF_ENDPOINT set to
that Hub) downloads a repo that we then load offline from its cache; and a repo we downloaded, Transformers loads
with local_files_only=True, asking the Hub nothing. Model and tokenizer alike; logits compared within the parity
tests' tolerance (test_transformers_parity.py), ids exactly. In the reference worker (hf_reference.Worker), whose
HF_ENDPOINT is that Hub.

(Each download client of ours is checked against the same Hub, request by request, in
tests/checkpoints/test_hub.py; huggingface_hub's there runs in the reference environment too.)
"""

import os
import shutil

import numpy as np
import pytest
import tokenizer_data
from checkpoints import write_random_checkpoint
from test_transformers_parity import LOGIT_TOL

import habana_assist as ha

THEIRS, OURS = "acme/downloaded-by-transformers", "acme/downloaded-by-us"
IDS = [[1, 822, 18755, 29898, 29876, 1125, 13, 1678]]
TEXTS = ["def fib(n):", "Hello world, said the model."]


def _repo_files(directory):
    """A Llama checkpoint over Llama 2's vocabulary and its tokenizer.json, as a repo's files (path -> bytes)."""
    write_random_checkpoint(
        directory,
        vocab_size=32000,
        hidden_size=32,
        intermediate_size=64,
        num_layers=2,
        bos_token_id=1,
        eos_token_id=2,
        seed=3,
    )
    for path in (tokenizer_data.tokenizer_path("llama2"), tokenizer_data.config_path("llama2")):
        shutil.copy(path, directory)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        f.write('{"bos_token_id": 1, "eos_token_id": 2, "max_new_tokens": 7}')
    return {name: open(os.path.join(directory, name), "rb").read() for name in sorted(os.listdir(directory))}


@pytest.fixture(scope="module")
def shared(hf_reference, tmp_path_factory):
    """Both directions run once, on the reference worker's own Hub (hf_reference.Worker.hub: its HF_ENDPOINT): ours
    downloads OURS into cache_b; then Transformers downloads THEIRS into cache_a, and reads OURS from cache_b
    offline -> a dict of what happened."""
    worker = hf_reference.worker()
    server = worker.hub
    root = tmp_path_factory.mktemp("hub_parity")
    files = _repo_files(str(root / "source"))
    for repo in (THEIRS, OURS):
        server.add_repo(repo, files)
    cache_a, cache_b = str(root / "cache_a"), str(root / "cache_b")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_ENDPOINT", server.endpoint)
        mp.setenv("HA_HUB_CLIENT", "builtin")
        mp.delenv("HF_HUB_OFFLINE")
        ours_model = ha.AutoModelForCausalLM.from_pretrained(OURS, cache_dir=cache_b)
        ha.AutoTokenizer.from_pretrained(OURS, cache_dir=cache_b)
    first = len(server.requests)
    ops = [{"op": "encode", "args": [text]} for text in TEXTS]
    results = [
        worker.call(job)
        for job in (
            dict(kind="forward", dir=THEIRS, input_ids=IDS, load_kwargs={"cache_dir": cache_a}),
            dict(kind="tokenizer", dir=THEIRS, ops=ops, load_kwargs={"cache_dir": cache_a}),
            dict(kind="forward", dir=OURS, input_ids=IDS, load_kwargs={"cache_dir": cache_b, "local_files_only": True}),
            dict(kind="tokenizer", dir=OURS, ops=ops, load_kwargs={"cache_dir": cache_b, "local_files_only": True}),
        )
    ]
    return dict(
        source=str(root / "source"),
        cache_a=cache_a,
        results=results,
        requests=server.requests[first:],
        ours_model=ours_model,
    )


def _ok(result, what):
    assert "error" not in result, f"Transformers failed on {what}: {result['error']}"
    return result


def _assert_close(ours, theirs, what):
    scale = float(np.max(np.abs(theirs)))
    err = float(np.max(np.abs(np.asarray(ours, np.float64) - theirs)))
    assert err <= LOGIT_TOL * scale, f"{what}: max |ours - Transformers| = {err:.3g}, over {LOGIT_TOL:g} of {scale:.3g}"


def test_what_transformers_downloaded_loads_here_offline(shared, monkeypatch):
    forward, tokenizer = (_ok(r, THEIRS) for r in shared["results"][:2])
    assert any(THEIRS in p for _, p, _ in shared["requests"]), "Transformers should have downloaded from the Hub"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # and nothing listens there
    model = ha.AutoModelForCausalLM.from_pretrained(THEIRS, cache_dir=shared["cache_a"])
    local = ha.AutoModelForCausalLM.from_pretrained(shared["source"])
    logits = model(np.array(IDS)).logits
    assert np.array_equal(logits, local(np.array(IDS)).logits), "the cached files should be the repo's, bit for bit"
    _assert_close(logits, forward["logits"], "our logits on Transformers' download against its own")
    assert model.generation_config.max_new_tokens == 7, "generation_config.json should come from that cache too"
    tok = ha.AutoTokenizer.from_pretrained(THEIRS, cache_dir=shared["cache_a"], local_files_only=True)
    for text, theirs in zip(TEXTS, tokenizer["results"]):
        assert tok.encode(text) == theirs["value"], f"{text!r}: ours {tok.encode(text)}, theirs {theirs}"


def test_what_we_downloaded_transformers_loads_offline(shared):
    forward, tokenizer = (_ok(r, OURS) for r in shared["results"][2:])
    assert not [p for _, p, _ in shared["requests"] if OURS in p], (
        "Transformers with local_files_only=True should have asked the Hub nothing about our download"
    )
    _assert_close(
        shared["ours_model"](np.array(IDS)).logits,
        forward["logits"],
        "Transformers' logits on our download against ours",
    )
    tok = ha.AutoTokenizer.from_pretrained(shared["source"])
    for text, theirs in zip(TEXTS, tokenizer["results"]):
        assert theirs["value"] == tok.encode(text), f"{text!r}: theirs {theirs}, ours {tok.encode(text)}"
