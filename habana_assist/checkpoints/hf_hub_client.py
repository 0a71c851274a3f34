"""Downloads through huggingface_hub, where it is importable (a pip environment): hub.py's other client beside
hub_client.py (the standard library), chosen by hub.client_name() (HA_HUB_CLIENT=builtin|huggingface_hub).

hub.py decides which files a load needs and reads the cache; this module only asks the Hub, with huggingface_hub's
own calls and the settings hub.py resolved for the load (not the ones huggingface_hub read from the environment
once, at its first use):

    revision()  HfApi(endpoint).model_info(repo, revision, token)       -> (commit, [file path])
    fetch()     hf_hub_download(repo, path, revision=commit, cache_dir, endpoint, token, force_download,
                etag_timeout=$HF_HUB_ETAG_TIMEOUT, tqdm_class=progress= as for loading)

so the cache it fills is huggingface_hub's own (it writes blobs, snapshots, refs and locks itself). Its errors
become this package's, in hub_client.http_error's words (the same messages whichever client ran). Two things are
added to what huggingface_hub does alone:
- an LFS file it has just downloaded is checked against its sha256 (over plain HTTP huggingface_hub checks the
  size only): a mismatch deletes the blob and its link and raises HubError, as hub_client.py does;
- progress= decides its bars as for loading (utils/progress.py), instead of huggingface_hub's bar for every file.
What it does not take: proxies= per call (huggingface_hub 1.0 and later read proxies from HTTPS_PROXY / HTTP_PROXY
or a client factory only), so hub.py sends a load with proxies= through hub_client.py.
"""

import functools
import importlib.util
import inspect
import os
import re

from ..errors import CheckpointNotFoundError, HubError, InvalidInputError
from ..utils import progress as _progress
from . import hub_client

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# huggingface_hub's exceptions by class name (its module layout moves between versions): HTTP answers carry
# .response; these mean the Hub could not be asked at all.
_NETWORK = {
    "ConnectError",
    "ConnectionError",
    "TimeoutException",
    "Timeout",
    "NetworkError",
    "RemoteProtocolError",
    "ProxyError",
    "SSLError",
    "OSError",
}


def available():
    """Whether huggingface_hub is importable here."""
    return importlib.util.find_spec("huggingface_hub") is not None


@functools.lru_cache(maxsize=None)
def _accepts(name):
    """The keyword arguments huggingface_hub's hf_hub_download takes in this version."""
    import huggingface_hub

    return frozenset(inspect.signature(huggingface_hub.hf_hub_download).parameters)


class HfHubClient:
    """One repo at one revision, asked through huggingface_hub: revision() and fetch(), as hub.py's _Builtin."""

    def __init__(self, repo_id, revision, endpoint, cache, token, progress=None):
        self.repo_id, self.ref, self.endpoint, self.cache = repo_id, revision, endpoint, cache
        self.token, self.progress = token, progress
        self.storage = os.path.join(cache, "models--" + repo_id.replace("/", "--"))

    def revision(self):
        """-> (commit hash, [file path]) of the repo at the revision."""
        import huggingface_hub

        try:
            info = huggingface_hub.HfApi(endpoint=self.endpoint).model_info(
                self.repo_id,
                revision=self.ref,
                token=self.token or False,
                timeout=hub_client._timeout("HF_HUB_ETAG_TIMEOUT"),
            )
        except Exception as e:  # noqa: BLE001 - every failure becomes this package's error (_translate)
            raise self._translate(e, f"{self.repo_id}@{self.ref}") from e
        if not (isinstance(info.sha, str) and _COMMIT.match(info.sha)):
            raise HubError(
                f"{self.repo_id}@{self.ref}: the Hub ({self.endpoint}) gave no commit for it; is "
                "HF_ENDPOINT a Hugging Face Hub?"
            )
        return info.sha, [sibling.rfilename for sibling in info.siblings or ()]

    def fetch(self, commit, path, force):
        """The file `path` of the repo at `commit` into the cache (blob, snapshot link), unless it is there."""
        import huggingface_hub

        pointer = os.path.join(self.storage, "snapshots", commit, *path.split("/"))
        if os.path.isfile(pointer) and not force:
            return
        what = f"{self.repo_id}/{path}"
        kwargs = dict(
            revision=commit,
            cache_dir=self.cache,
            endpoint=self.endpoint,
            token=self.token or False,
            force_download=force,
            etag_timeout=hub_client._timeout("HF_HUB_ETAG_TIMEOUT"),
        )
        if "tqdm_class" in _accepts("hf_hub_download"):
            kwargs["tqdm_class"] = _bars(self.progress, what)
        try:
            got = huggingface_hub.hf_hub_download(self.repo_id, path, **kwargs)
        except Exception as e:  # noqa: BLE001 - every failure becomes this package's error (_translate)
            raise self._translate(e, what) from e
        blob = os.path.realpath(got)
        sha256 = os.path.basename(blob)
        if _SHA256.match(sha256):  # an LFS file, named by its sha256
            found = hub_client.sha256_of(blob)
            if found != sha256:
                size = os.path.getsize(blob)
                for stale in (got, blob):
                    if os.path.lexists(stale):
                        os.remove(stale)
                raise hub_client.mismatch(what, size, sha256, f"sha256 {found}")

    def _translate(self, e, what):
        """huggingface_hub's exception -> this package's (hub_client.http_error's words for an HTTP answer)."""
        names = {cls.__name__ for cls in type(e).__mro__}
        response = getattr(e, "response", None)
        code = getattr(response, "status_code", None)
        if code is not None:
            headers = getattr(response, "headers", None) or {}
            message = headers.get("X-Error-Message") or str(e).splitlines()[0]
            return hub_client.http_error(self.endpoint, self.token, code, headers.get("X-Error-Code"), message, what)
        if "OfflineModeIsEnabled" in names:
            return hub_client.Unreachable(
                f"huggingface_hub is offline ({e}): HF_HUB_OFFLINE was set when it first "
                "read its settings, and it keeps them for the process"
            )
        if "LocalEntryNotFoundError" in names:  # the Hub could not be asked, and huggingface_hub's cache lacks it
            cause = e.__cause__ if e.__cause__ is not None else e
            return hub_client.unreachable(self.endpoint, f"{type(cause).__name__}: {cause}")
        if names & _NETWORK:
            return hub_client.unreachable(self.endpoint, f"{type(e).__name__}: {e}")
        if names & {
            "RepositoryNotFoundError",
            "GatedRepoError",
            "RevisionNotFoundError",
            "EntryNotFoundError",
            "RemoteEntryNotFoundError",
        }:  # an HTTP answer without its response (older versions)
            raised = (CheckpointNotFoundError if "GatedRepoError" not in names else HubError)(f"{what}: {e}")
            raised.cache_may_serve = bool(names & {"RepositoryNotFoundError", "GatedRepoError"})
            return raised
        if isinstance(e, (InvalidInputError, HubError, CheckpointNotFoundError, hub_client.Unreachable)):
            return e
        return HubError(
            f"{what}: huggingface_hub failed ({type(e).__name__}: {e}); set HA_HUB_CLIENT=builtin to "
            "download with habana_assist's own client instead"
        )


def _bars(progress, what):
    """A tqdm_class for huggingface_hub: a bar by progress= as for loading (utils/progress.py), else a silent one."""

    def make(*args, **kwargs):
        total = kwargs.get("total")
        bar = _progress.bar(progress, total or 0, _progress.MIN_BYTES, total, f"downloading {what}", "B")
        if bar is None:
            import tqdm.std  # a dependency of huggingface_hub

            kwargs.pop("name", None)
            return tqdm.std.tqdm(*args, **dict(kwargs, disable=True))
        if kwargs.get("initial"):
            bar.update(kwargs["initial"])
        return bar

    return make
