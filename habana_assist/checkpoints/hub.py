"""What a name passed to from_pretrained resolves to: the one resolver of every entry point (the models and the
Auto classes, AutoConfig, GenerationConfig, the tokenizers), in Transformers' order:

1. a local directory (with subfolder=, that folder of it);
2. a shipped name: "habana-assist/pycode" and "habana-assist/pycode-draft" are the trained pair in
   habana_assist/pretrained/ (see its MODEL_CARD.md);
3. a Hub repo id ("org/name", or a legacy "name"): a snapshot in the Hugging Face cache, the one huggingface_hub
   and Transformers share, with the files the load needs downloaded from HF_ENDPOINT (default
   https://huggingface.co) where the cache lacks them.

The cache (huggingface_hub's layout, so that each library finds what the other downloaded):

    <cache>/models--<org>--<name>/refs/<revision>                a branch's or tag's commit hash
                                  snapshots/<commit>/<path>      -> ../../blobs/<etag> (a relative symlink)
                                  blobs/<etag>                   a file's bytes: sha256 for LFS files, else its
                                                                 git blob id
    <cache>/.locks/models--<org>--<name>/<etag>.lock

<cache> is cache_dir=, else $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. A branch or tag
(revision=, "main" by default) asks the Hub for its commit on every load unless offline; a commit hash whose
files are cached asks nothing. Offline (local_files_only=True, HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1)
reads the cache only; so does a load whose Hub cannot be reached, when the cache holds what it needs.

Downloads go through huggingface_hub where it is importable (hf_hub_client.py: its hf_hub_download, into the same
cache), else through hub_client.py (the standard library); client_name() decides, and HA_HUB_CLIENT=builtin or
HA_HUB_CLIENT=huggingface_hub forces either. A load with proxies= goes through hub_client.py (huggingface_hub takes
no proxies per call).
"""

import json
import os
import re
import threading

from ..errors import CheckpointNotFoundError, HubError, InvalidInputError
from . import hf_hub_client, hub_client

MODELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pretrained")
SHIPPED = {"habana-assist/pycode": "pycode", "habana-assist/pycode-draft": "pycode-draft"}

# from_pretrained's arguments about where files come from, and what None means for each.
HUB_ARGUMENTS = {
    "revision": None,
    "cache_dir": None,
    "local_files_only": False,
    "token": None,
    "force_download": False,
    "proxies": None,
    "subfolder": "",
}
# Transformers' older names and arguments that change nothing here (resume_download: every download resumes).
LEGACY_ARGUMENTS = {"use_auth_token": "token", "resume_download": None, "_commit_hash": None}

_REPO_ID = re.compile(r"^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "ON", "YES", "TRUE"}
CLIENTS = ("builtin", "huggingface_hub")  # HA_HUB_CLIENT's values (unset or "auto": huggingface_hub where importable)
SHIPPED_REVISIONS = (None, "main")  # the shipped files are one revision, its branch's


class Files:
    """What one entry point reads from a checkpoint: `required` groups (at least one file of each must exist;
    every file of a group that exists is fetched), `optional` files (fetched where the repo has them), and
    weights=True: model.safetensors, else model.safetensors.index.json and every shard it names."""

    def __init__(self, required=(), optional=(), weights=False):
        self.required, self.optional, self.weights = tuple(required), tuple(optional), weights


CONFIG_FILES = Files(required=[("config.json",)])
MODEL_FILES = Files(required=[("config.json",)], optional=("generation_config.json",), weights=True)
TOKENIZER_FILES = Files(
    required=[("tokenizer.json", "tokenizer.model")],
    optional=("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"),
)
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")


def pop_hub_arguments(kwargs, caller):
    """Removes from_pretrained's hub arguments from kwargs -> {name: value} for resolve(); legacy names mapped
    (use_auth_token -> token), the rest checked for type."""
    args = {name: kwargs.pop(name) for name in list(kwargs) if name in HUB_ARGUMENTS}
    for old, new in LEGACY_ARGUMENTS.items():
        if old in kwargs:
            value = kwargs.pop(old)
            if new is not None and value is not None:
                if args.get(new) is not None and args[new] != value:
                    raise InvalidInputError(f"{caller}: {old}= and {new}= disagree; pass only {new}=")
                args[new] = value
    for name in ("local_files_only", "force_download"):
        if name in args and not isinstance(args[name], bool):
            raise InvalidInputError(f"{caller}: {name}={args[name]!r} must be True or False")
    for name in ("revision", "subfolder"):
        if args.get(name) is not None and not isinstance(args[name], str):
            raise InvalidInputError(f"{caller}: {name}={args[name]!r} must be a string")
    if args.get("token") is not None and not isinstance(args["token"], (str, bool)):
        raise InvalidInputError(f"{caller}: token= must be a string (hf_...), True (the stored token) or False (none)")
    if args.get("proxies") is not None and not isinstance(args["proxies"], dict):
        raise InvalidInputError(f"{caller}: proxies= must be a dict such as {{'https': 'http://proxy:3128'}}")
    return args


def resolve(
    name_or_path,
    files=MODEL_FILES,
    revision=None,
    cache_dir=None,
    local_files_only=False,
    token=None,
    force_download=False,
    proxies=None,
    subfolder="",
    progress=None,
):
    """-> the directory holding `files` (a Files) for name_or_path: a local directory, a shipped model's, or a
    snapshot of a Hub repo in the cache (see the module docstring). Raises CheckpointNotFoundError (no such
    directory, repo, revision or file; offline or unreachable without the files in the cache) or HubError (a
    token needed, a corrupt download)."""
    try:
        path = os.fspath(name_or_path)
    except TypeError:
        raise InvalidInputError(
            f"from_pretrained: expected a directory or a Hub repo id as a string or a path, not "
            f"{type(name_or_path).__name__}{_object_hint(name_or_path)}"
        ) from None
    if not isinstance(path, str):
        path = os.fsdecode(path)
    subfolder = _check_relative(subfolder or "", "subfolder")
    if os.path.isdir(path):
        return _local_subfolder(path, path, subfolder)
    if path in SHIPPED:
        directory = os.path.join(MODELS_DIR, SHIPPED[path])
        if not os.path.isdir(directory):
            raise CheckpointNotFoundError(
                f"{path} is not installed with this copy of habana_assist (expected "
                f"{directory}); reinstall the package or pass a local directory"
            )
        if revision not in SHIPPED_REVISIONS:
            raise InvalidInputError(
                f"{path}: revision={revision!r}, but the shipped files are one revision: pass "
                "revision='main' or None (or no revision=), or a local directory or a Hub repo id "
                "for another revision"
            )
        return _local_subfolder(path, directory, subfolder)
    if not is_repo_id(path):
        raise CheckpointNotFoundError(
            f"{path}: no such directory, and not a Hub repo id ('org/name'); pass a local checkpoint directory, a "
            f"Hub repo id, or one of the shipped models ({', '.join(sorted(SHIPPED))})"
        )
    snapshot = _Snapshot(path, revision or "main", cache_dir, token, proxies)
    offline = local_files_only or is_offline()
    if force_download and offline:
        raise InvalidInputError(
            f"{path}: force_download=True and "
            f"{'local_files_only=True' if local_files_only else 'offline mode (HF_HUB_OFFLINE)'} "
            "disagree; drop one"
        )
    return snapshot.directory(files, subfolder, offline, force_download, progress)


def _local_subfolder(name, directory, subfolder):
    """directory/subfolder where that folder exists; else CheckpointNotFoundError naming it and what is there."""
    if not subfolder:
        return directory
    folder = os.path.join(directory, subfolder)
    if not os.path.isdir(folder):
        there = sorted(e.name for e in os.scandir(directory) if e.is_dir())
        fix = (
            f"its folders are {there}: pass one of them as subfolder=, or leave subfolder= out for the top of the "
            "checkpoint"
            if there
            else "it has no folders: leave subfolder= out"
        )
        raise CheckpointNotFoundError(f"{name}: subfolder={subfolder!r} does not exist ({folder}); {fix}")
    return folder


def _object_hint(obj):
    """What to do instead, where from_pretrained was given a model or tokenizer object (Transformers' own)."""
    if callable(getattr(obj, "generate", None)) or callable(getattr(obj, "state_dict", None)):
        return (
            "; for a model object of Transformers (or torch), ha.wrap(model) gives it this package's generate(), "
            "or save it with model.save_pretrained(directory) and pass the directory"
        )
    if callable(getattr(obj, "save_pretrained", None)) or callable(getattr(obj, "encode", None)):
        return (
            "; for a tokenizer object, save it with tokenizer.save_pretrained(directory) and pass the directory "
            "(Transformers' tokenizers also work as they are with TextStreamer and pipeline(tokenizer=))"
        )
    return ""


def client_name(proxies=None):
    """Which client downloads: "builtin" (hub_client.py) or "huggingface_hub" (hf_hub_client.py). HA_HUB_CLIENT
    forces one; unset (or "auto"), huggingface_hub where it is importable and the load passes no proxies=."""
    wanted = os.environ.get("HA_HUB_CLIENT", "").strip().lower()
    if wanted not in ("", "auto", *CLIENTS):
        raise InvalidInputError(
            f"HA_HUB_CLIENT={os.environ['HA_HUB_CLIENT']!r}: expected one of {', '.join(CLIENTS)} "
            "(or unset it: huggingface_hub where it is installed, else builtin)"
        )
    if wanted == "builtin":
        return "builtin"
    if wanted == "huggingface_hub":
        if not hf_hub_client.available():
            raise InvalidInputError(
                "HA_HUB_CLIENT=huggingface_hub, but huggingface_hub is not importable here: pip "
                "install huggingface_hub, or unset HA_HUB_CLIENT (habana_assist's own client then "
                "downloads)"
            )
        if proxies:
            raise InvalidInputError(
                "proxies= with HA_HUB_CLIENT=huggingface_hub: huggingface_hub takes no proxies per "
                "call; set HTTPS_PROXY / HTTP_PROXY in the environment instead, or unset "
                "HA_HUB_CLIENT (a load with proxies= then goes through habana_assist's own client)"
            )
        return "huggingface_hub"
    return "huggingface_hub" if hf_hub_client.available() and not proxies else "builtin"


def is_repo_id(name):
    """Whether name is a Hub repo id as huggingface_hub validates one ("org/name" or "name")."""
    return (
        bool(_REPO_ID.match(name))
        and name.count("/") <= 1
        and "--" not in name
        and ".." not in name
        and not name.endswith(".git")
    )


def is_offline():
    """HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to 1/ON/YES/TRUE: the cache only."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in _TRUE


def hf_home():
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return os.path.expanduser(os.path.expandvars(home))


def cache_root(cache_dir=None):
    """cache_dir=, else $HF_HUB_CACHE (or its older name $HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub."""
    if cache_dir is not None:
        return os.path.expanduser(os.fspath(cache_dir))
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return os.path.expanduser(os.path.expandvars(env)) if env else os.path.join(hf_home(), "hub")


def find_token(token):
    """token= as huggingface_hub reads it: a string is the token; False none; None or True $HF_TOKEN, else the
    token file ($HF_TOKEN_PATH, else $HF_HOME/token); True with none found raises."""
    if isinstance(token, str):
        return token
    if token is False:
        return None
    found = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if not found:
        path = os.path.expanduser(os.environ.get("HF_TOKEN_PATH") or os.path.join(hf_home(), "token"))
        try:
            with open(path, encoding="utf-8") as f:
                found = f.read().strip()
        except (OSError, ValueError):
            found = None
    if token is True and not found:
        raise InvalidInputError(f"token=True but no token is stored: {hub_client.TOKEN_HINT}")
    return found or None


def _check_relative(path, what):
    """A repo path (a file or subfolder): relative, "/"-separated, no "..": never a path outside the snapshot."""
    parts = path.replace("\\", "/").split("/")
    if path and (path.startswith("/") or any(p in ("..", ".") for p in parts) or os.path.isabs(path)):
        raise InvalidInputError(f"{what}={path!r}: expected a relative path inside the repo, without '..'")
    return "/".join(p for p in parts if p)


class _Snapshot:
    """One repo at one revision in the cache: finds or fetches the files a load needs."""

    def __init__(self, repo_id, revision, cache_dir, token, proxies):
        self.repo_id, self.revision, self.token, self.proxies = repo_id, revision, token, proxies
        self.cache = cache_root(cache_dir)
        self.folder = "models--" + repo_id.replace("/", "--")
        self.storage = os.path.join(self.cache, self.folder)
        self.endpoint = (os.environ.get("HF_ENDPOINT") or hub_client.DEFAULT_ENDPOINT).rstrip("/")

    def _where(self):
        return f"{self.repo_id} (revision {self.revision!r})"

    def directory(self, files, subfolder, offline, force, progress):
        if not offline and not force and _COMMIT.match(self.revision):
            cached = self._cached(files, subfolder, self.revision)
            if cached is not None:
                return cached  # a commit's files never change: nothing to ask
        if offline:
            return self._from_cache(
                files,
                subfolder,
                "offline mode is on (local_files_only=True, HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)",
                "download it once with the network on",
            )
        try:
            return self._download(files, subfolder, force, progress)
        except hub_client.Unreachable as e:
            if force:
                raise HubError(f"{self._where()}: force_download=True but {e}; try again later") from None
            return self._from_cache(
                files,
                subfolder,
                str(e),
                "check the network (and HF_ENDPOINT), or copy the model into a local directory",
            )
        except (HubError, CheckpointNotFoundError) as e:  # refused: what the cache holds still serves
            commit = None if force or not getattr(e, "cache_may_serve", False) else self._commit()
            cached = self._cached(files, subfolder, commit) if commit else None
            if cached is None:
                raise
            return cached

    # ---- the cache --------------------------------------------------------------------------------------------

    def _commit(self):
        if _COMMIT.match(self.revision):
            return self.revision
        try:
            with open(os.path.join(self.storage, "refs", self.revision), encoding="utf-8") as f:
                commit = f.read().strip()
        except (OSError, ValueError):
            return None
        return commit if _COMMIT.match(commit) else None

    def _cached(self, files, subfolder, commit):
        """The snapshot's directory if it holds every file `files` requires, else None."""
        root = os.path.join(self.storage, "snapshots", commit)
        directory = os.path.join(root, subfolder) if subfolder else root
        present = set()
        for group in files.required:
            present.update(name for name in group if os.path.isfile(os.path.join(directory, name)))
        if files.weights:
            present.update(self._cached_weights(directory))
        return directory if not _missing(files, present) else None

    def _cached_weights(self, directory):
        if os.path.isfile(os.path.join(directory, _WEIGHTS[0])):
            return [_WEIGHTS[0]]
        index = os.path.join(directory, _WEIGHTS[1])
        if not os.path.isfile(index):
            return []
        shards = _shards(index, self.repo_id)
        return [_WEIGHTS[1]] if all(os.path.isfile(os.path.join(directory, s)) for s in shards) else []

    def _from_cache(self, files, subfolder, why, fix):
        commit = self._commit()
        directory = self._cached(files, subfolder, commit) if commit else None
        if directory is not None:
            return directory
        held = (
            f"the cache ({self.cache}) has no snapshot of it"
            if commit is None or not os.path.isdir(os.path.join(self.storage, "snapshots", commit))
            else f"its snapshot in the cache ({self.storage}/snapshots/{commit[:12]}...) lacks "
            f"{_describe(files, subfolder)}"
        )
        raise CheckpointNotFoundError(f"{self._where()}: {why}, and {held}; {fix}")

    # ---- downloads --------------------------------------------------------------------------------------------

    def _download(self, files, subfolder, force, progress):
        if client_name(self.proxies) == "huggingface_hub":
            hub = hf_hub_client.HfHubClient(
                self.repo_id, self.revision, self.endpoint, self.cache, find_token(self.token), progress
            )
        else:
            hub = _Builtin(self, progress)
        commit, listed = hub.revision()
        if self.revision != commit:
            _write_ref(self.storage, self.revision, commit)
        prefix = subfolder + "/" if subfolder else ""
        listed = {name[len(prefix) :] for name in listed if name.startswith(prefix)}
        wanted = [name for group in files.required for name in group if name in listed]
        wanted += [name for name in files.optional if name in listed]
        missing = _missing(files, set(wanted) | ({_WEIGHTS[0]} & listed) | ({_WEIGHTS[1]} & listed))
        if subfolder and not listed:
            raise CheckpointNotFoundError(
                f"{self._where()} has no folder {subfolder!r} (subfolder={subfolder!r}); "
                "check subfolder= against the repo's files, or leave it out"
            )
        if missing:
            others = sorted(listed)[:12]
            raise CheckpointNotFoundError(
                f"{self._where()} has no {missing} (it has {others}{'...' if len(listed) > 12 else ''}); "
                + (
                    "only safetensors weights are read: convert the checkpoint (save_pretrained with "
                    "safe_serialization=True) or pick a repo that has them"
                    if _WEIGHTS[0] in missing
                    else "check the repo id and revision"
                )
            )
        for name in wanted:
            hub.fetch(commit, prefix + name, force)
        directory = os.path.join(self.storage, "snapshots", commit, subfolder)
        if files.weights:
            if _WEIGHTS[0] in listed:
                hub.fetch(commit, prefix + _WEIGHTS[0], force)
            else:
                hub.fetch(commit, prefix + _WEIGHTS[1], force)
                for shard in _shards(os.path.join(directory, _WEIGHTS[1]), self.repo_id):
                    if shard not in listed:
                        raise CheckpointNotFoundError(
                            f"{self._where()}: {_WEIGHTS[1]} names shard {shard!r}, which "
                            "the repo does not have; the checkpoint is incomplete"
                        )
                    hub.fetch(commit, prefix + shard, force)
        return directory.rstrip(os.sep)


def _missing(files, present):
    """A description of the first required group with no file in `present`, or None."""
    for group in files.required:
        if not any(name in present for name in group):
            return " or ".join(group)
    if files.weights and not any(name in present for name in _WEIGHTS):
        return " or ".join(_WEIGHTS)
    return None


def _describe(files, subfolder):
    names = [" or ".join(g) for g in files.required] + (
        [" or ".join(_WEIGHTS) + " (and its shards)"] if files.weights else []
    )
    return ", ".join(f"{subfolder}/{n}" if subfolder else n for n in names)


def _shards(index_path, repo_id):
    """The shard file names model.safetensors.index.json lists (relative names inside the repo only)."""
    try:
        with open(index_path, "rb") as f:
            weight_map = json.loads(f.read().decode("utf-8")).get("weight_map")
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, AttributeError, TypeError, RecursionError) as e:
        raise HubError(
            f"{repo_id}: {index_path} is not a safetensors index ({e}); delete it from the cache to download it again"
        ) from None
    for shard in shards:
        if not isinstance(shard, str) or _check_relative_or_none(shard) is None:
            raise HubError(f"{repo_id}: {index_path} names shard {shard!r}, not a file inside the repo")
    return shards


def _check_relative_or_none(path):
    try:
        return _check_relative(path, "shard") or None
    except InvalidInputError:
        return None


def _write_ref(storage, revision, commit):
    """refs/<revision> = commit, written atomically (a reader never sees half a hash)."""
    path = os.path.join(storage, "refs", *revision.split("/"))
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == commit:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(commit)
    os.replace(tmp, path)


def _link(blob, pointer):
    """snapshots/<commit>/<path> -> the blob, as a relative symlink (replacing whatever was there)."""
    os.makedirs(os.path.dirname(pointer), exist_ok=True)
    tmp = f"{pointer}.{os.getpid()}.{threading.get_ident()}.link"
    if os.path.lexists(tmp):
        os.remove(tmp)
    os.symlink(os.path.relpath(blob, os.path.dirname(pointer)), tmp)
    os.replace(tmp, pointer)


class _Builtin:
    """Downloads through hub_client.py."""

    def __init__(self, snapshot, progress):
        self.s, self.progress = snapshot, progress
        self.client = hub_client.HubClient(snapshot.endpoint, find_token(snapshot.token), snapshot.proxies)

    def revision(self):
        return self.client.revision(self.s.repo_id, self.s.revision)

    def fetch(self, commit, path, force):
        _check_relative(path, "file")
        s = self.s
        pointer = os.path.join(s.storage, "snapshots", commit, *path.split("/"))
        if os.path.isfile(pointer) and not force:
            return
        etag, size, url, sha256 = self.client.metadata(s.repo_id, commit, path)
        blob = os.path.join(s.storage, "blobs", etag)
        with hub_client.file_lock(os.path.join(s.cache, ".locks", s.folder, etag + ".lock")):
            if force or not os.path.isfile(blob):
                partial = blob + ".incomplete"
                if force and os.path.exists(partial):
                    os.remove(partial)
                os.makedirs(os.path.dirname(blob), exist_ok=True)
                self.client.download(url, partial, size, sha256, f"{s.repo_id}/{path}", self.progress)
                os.replace(partial, blob)
            _link(blob, pointer)
