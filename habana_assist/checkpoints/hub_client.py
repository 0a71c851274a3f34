"""The Hub's HTTP conventions, spoken with the standard library only (Debian 12 packages no huggingface_hub).

What huggingface_hub's file_download.py does, for the requests a load needs (hub.py decides which files):

    GET  {endpoint}/api/models/{repo}/revision/{revision}   -> JSON {"sha": commit, "siblings": [{"rfilename"}]}
    HEAD {endpoint}/{repo}/resolve/{commit}/{path}          -> X-Repo-Commit; ETag (a git blob id) for a plain
         file; for an LFS file a redirect (Location, not followed) with X-Linked-Etag (its sha256) and
         X-Linked-Size. Relative redirects (a renamed repo) are followed, absolute ones (the CDN) are not.
    GET  the file's URL (or the redirect's), with Range: bytes=<done>- to resume a partial download.

Every request carries "Authorization: Bearer <token>" where there is a token (never to another host than the
endpoint's: a CDN's URL is signed) and "Accept-Encoding: identity" (sizes are the file's). An error answer
carries X-Error-Code (RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound) and X-Error-Message; they
become HubError / CheckpointNotFoundError here, and Unreachable where the cache may still serve the load.

A download goes to blobs/<etag>.incomplete under a lock (.locks/<repo folder>/<etag>.lock, fcntl.flock as
huggingface_hub's filelock takes it, so the two never write one file at once), resumes a dropped connection
(and a file left by a killed process) with a Range request, is checked against its size and, for LFS files,
its sha256, and is then renamed to blobs/<etag>: a blob is whole or absent.
"""

import contextlib
import hashlib
import http.client
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request

from ..errors import CheckpointNotFoundError, HubError
from ..utils import progress as _progress

DEFAULT_ENDPOINT = "https://huggingface.co"
_CHUNK = 1 << 20
_RETRIES = 5  # resumptions of one download in a row that bring no new byte before giving up
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
TOKEN_HINT = (
    "pass token='hf_...' to from_pretrained, set HF_TOKEN in the environment, or log in once with "
    "`hf auth login` (or the older `huggingface-cli login`: it writes the token file); for a gated model "
    "accept its terms on its page first"
)


class Unreachable(Exception):
    """The Hub could not answer (no network, a timeout, a server error): the cache may still serve the load."""


def _timeout(name):
    value = os.environ.get(name, "10")
    try:
        return float(value)
    except ValueError:
        raise HubError(f"{name}={value!r} must be a number of seconds; unset it for the default (10)") from None


def http_error(endpoint, token, code, error, message, what):
    """An HTTP error answer of the Hub (status `code`, X-Error-Code `error`, X-Error-Message `message`) -> the
    exception to raise, with the same words whichever client got the answer (this one or hf_hub_client.py). Those
    the cache may still serve (a repo not found, a token refused: huggingface_hub falls back to the cache for them
    too) carry cache_may_serve=True; a server error or throttling is Unreachable."""
    said = f"the Hub ({endpoint}) answered {code}{' ' + error if error else ''} ({message})"
    if error == "GatedRepo" or (code in (401, 403) and error != "RepoNotFound"):
        raised = HubError(
            f"{what}: {said}: the repo is gated or private and this request has "
            f"{'a token without access' if token else 'no token'}; {TOKEN_HINT}"
        )
        raised.cache_may_serve = True
    elif error == "RepoNotFound":
        raised = CheckpointNotFoundError(
            f"{what}: {said}: no such repo, or a private one needing a token; check "
            f"the name ('org/name' as on the Hub's page), or {TOKEN_HINT}"
        )
        raised.cache_may_serve = True
    elif error == "RevisionNotFound":
        raised = CheckpointNotFoundError(
            f"{what}: {said}: no such revision; pass revision= a branch, tag or commit of the repo"
        )
    elif error == "EntryNotFound" or code == 404:
        raised = CheckpointNotFoundError(f"{what}: {said}: no such file in the repo at that revision")
    elif code >= 500 or code in (408, 429):
        raised = Unreachable(said)
    else:
        raised = HubError(f"{what}: {said}")
    return raised


def unreachable(endpoint, reason):
    """The Hub could not be asked (refused, DNS, TLS, a timeout): Unreachable, worded alike for both clients."""
    return Unreachable(f"{endpoint} could not be reached ({reason})")


def mismatch(what, size, sha256, found):
    """HubError for a download that is not the file the Hub advertised (already deleted by the caller)."""
    return HubError(
        f"{what}: the downloaded file does not match what the Hub advertised ({size} bytes"
        f"{', sha256 ' + sha256 if sha256 else ''}; got {found}), so it was deleted; try again "
        "(the network or a proxy altered it)"
    )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """HEAD requests see a redirect's headers (X-Linked-Etag, Location) instead of following it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class HubClient:
    """Requests to one endpoint with one token; proxies as urllib takes them (None: the environment's)."""

    def __init__(self, endpoint, token, proxies=None):
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        handlers = [urllib.request.ProxyHandler(proxies)] if proxies else []
        self._open = urllib.request.build_opener(*handlers).open
        self._open_head = urllib.request.build_opener(*handlers, _NoRedirect()).open
        self.etag_timeout = _timeout("HF_HUB_ETAG_TIMEOUT")
        self.download_timeout = _timeout("HF_HUB_DOWNLOAD_TIMEOUT")

    # ---- requests ---------------------------------------------------------------------------------------------

    def _headers(self, url, extra=None):
        headers = {"Accept-Encoding": "identity", "User-Agent": "habana_assist"}
        same_host = urllib.parse.urlsplit(url).netloc == urllib.parse.urlsplit(self.endpoint).netloc
        if self.token and same_host:
            headers["Authorization"] = f"Bearer {self.token}"
        headers.update(extra or {})
        return headers

    def _request(self, url, what, method="GET", extra=None, head=False, timeout=None):
        """The response (the caller closes it); a redirect answer too where head=True. HTTP errors become
        HubError / CheckpointNotFoundError (see _raise_for_status); network failures Unreachable."""
        request = urllib.request.Request(url, method=method, headers=self._headers(url, extra))
        try:
            return (self._open_head if head else self._open)(request, timeout=timeout or self.etag_timeout)
        except urllib.error.HTTPError as e:
            if head and e.code in (301, 302, 303, 307, 308):
                return e
            self._raise_for_status(e, what)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:  # refused, DNS, TLS, a timeout
            raise unreachable(self.endpoint, getattr(e, "reason", e)) from None

    def _raise_for_status(self, e, what):
        raise http_error(
            self.endpoint,
            self.token,
            e.code,
            e.headers.get("X-Error-Code"),
            e.headers.get("X-Error-Message") or e.reason,
            what,
        ) from None

    def revision(self, repo_id, revision):
        """-> (commit hash, [file path]) of repo_id at revision (a branch, tag or commit)."""
        url = f"{self.endpoint}/api/models/{repo_id}/revision/{urllib.parse.quote(revision, safe='')}"
        with contextlib.closing(self._request(url, f"{repo_id}@{revision}")) as response:
            try:
                info = json.loads(response.read().decode("utf-8"))
            except (OSError, ValueError) as e:
                raise Unreachable(f"{url}: the answer is not JSON ({e})") from None
        commit = info.get("sha") if isinstance(info, dict) else None
        siblings = info.get("siblings") if isinstance(info, dict) else None
        if not (isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit) and isinstance(siblings, list)):
            raise HubError(
                f'{url}: the answer has no commit ("sha") and file list ("siblings"); is HF_ENDPOINT '
                "a Hugging Face Hub?"
            )
        return commit, [s["rfilename"] for s in siblings if isinstance(s, dict) and isinstance(s.get("rfilename"), str)]

    def metadata(self, repo_id, commit, path):
        """-> (etag, size, URL to download, sha256 or None) of one file at a commit: what HEAD /resolve/ says."""
        url = f"{self.endpoint}/{repo_id}/resolve/{commit}/{urllib.parse.quote(path)}"
        what = f"{repo_id}@{commit[:12]}/{path}"
        for _ in range(5):  # relative redirects: a renamed repo
            with contextlib.closing(self._request(url, what, method="HEAD", head=True)) as response:
                headers, status = response.headers, response.status if hasattr(response, "status") else response.code
            location = headers.get("Location")
            if status in (301, 302, 303, 307, 308) and location and location.startswith("/"):
                url = urllib.parse.urljoin(url, location)
                continue
            break
        linked = headers.get("X-Linked-Etag")
        etag = (linked or headers.get("ETag") or "").removeprefix("W/").strip('"')
        size = headers.get("X-Linked-Size") or (None if location else headers.get("Content-Length"))
        if not etag or size is None or not size.isdigit() or "/" in etag or etag.startswith("."):
            raise HubError(
                f"{what}: the Hub's answer lacks an ETag or a size; is HF_ENDPOINT ({self.endpoint}) a "
                "Hugging Face Hub? (a proxy may be rewriting the answers)"
            )
        sha256 = etag if linked and _SHA256.match(etag) else None
        return etag, int(size), (location or url), sha256

    # ---- a download ---------------------------------------------------------------------------------------------

    def download(self, url, partial, size, sha256, what, progress):
        """Writes the file at url to `partial` (appending to what a dropped connection or a killed process left),
        then checks its size and sha256 (when given); a mismatch removes `partial` and raises HubError."""
        bar = _progress.bar(progress, size, _progress.MIN_BYTES, size, f"downloading {what}", "B")
        try:
            retries = _RETRIES
            while True:
                done = os.path.getsize(partial) if os.path.exists(partial) else 0
                if done > size:  # not a beginning of this file (left by another download): start over
                    os.remove(partial)
                    continue
                if done == size:
                    break
                try:
                    got = self._fetch(url, partial, done, what, bar)
                except Unreachable:
                    if retries == 0:
                        raise
                    got = 0
                retries = _RETRIES if got else retries - 1
            if bar is not None:
                bar.n = size
                bar.refresh()
        finally:
            if bar is not None:
                bar.close()
        have = os.path.getsize(partial)
        if have != size or (sha256 is not None and sha256_of(partial) != sha256):
            found = f"{have} bytes" if have != size else f"sha256 {sha256_of(partial)}"
            os.remove(partial)
            raise mismatch(what, size, sha256, found)

    def _fetch(self, url, partial, done, what, bar):
        """One GET from byte `done` on -> the bytes it appended; Unreachable where the connection dropped."""
        extra = {"Range": f"bytes={done}-"} if done else {}
        response = self._request(url, what, extra=extra, timeout=self.download_timeout)
        got = 0
        with contextlib.closing(response), open(partial, "ab" if done else "wb") as f:
            if done and response.status == 200:  # the server ignored Range: start over
                f.truncate(0)
                if bar is not None:
                    bar.reset(total=bar.total)
            elif bar is not None and bar.n == 0 and done:
                bar.update(done)
            try:
                while True:
                    chunk = response.read(_CHUNK)
                    if not chunk:
                        break
                    f.write(chunk)
                    got += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
            except (OSError, http.client.HTTPException) as e:  # a reset, a timeout, IncompleteRead
                f.flush()
                raise Unreachable(f"{what}: the connection dropped after {done + got} bytes ({e})") from None
        return got


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def file_lock(path):
    """An exclusive lock on `path` (created), as huggingface_hub's filelock takes it on Unix (fcntl.flock): one
    writer of a blob at a time across processes and across the two libraries."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl
        except ImportError:  # no flock here (Windows): the atomic rename still keeps blobs whole
            fcntl = None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock
