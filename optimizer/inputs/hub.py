"""Models named the way the Hugging Face Hub names them (``meta-llama/Llama-3.1-70B``): their config.json
through ``huggingface_hub``, from its cache or the Hub, then read as any config.json (``hf_models``).

The library's own rules apply: its cache (``HF_HOME``, ``HF_HUB_CACHE``), offline mode (``HF_HUB_OFFLINE``),
the endpoint (``HF_ENDPOINT``) and the token for gated repositories (``HF_TOKEN`` or ``hf auth login``). A
config already in the cache is read without asking the Hub (a pinned ``revision`` is asked for by name); a
model neither cached nor reachable gets a message that says which, and what to run.

A revision reaches the file system (``refs/REVISION`` in the cache), so it is checked against the Hub's own
rules (a git branch or tag name, or a 40-hex commit) before any path is built, a cached ref is read only
inside the repository's own ``refs/`` folder and only as a 40-hex commit whose snapshot lies in its
``snapshots/`` folder, and no error repeats what a file holds.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from ..errors import JobError, printable

FIELD = "job.model"
REVISION_FIELD = "job.model.revision"
# owner/name as the Hub spells repository ids (huggingface_hub.utils.validate_repo_id): letters, digits,
# '-', '_' and '.', at most 96 characters, no '--' or '..'
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
# a commit as the Hub names it (huggingface_hub.constants REGEX_COMMIT_HASH)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# git check-ref-format's rules for a branch or tag (refs/pr/1 included): no control character, space or any
# of ~^:?*[\ ; no '..', '@{', '//', leading or trailing '/', component starting with '.' or ending in '.lock'
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^/|/$|(^|/)\.|\.lock(/|$)|\.$")
# The longest revision taken: git allows longer refs, but no branch or tag of a model repository comes near it.
REVISION_MAX_CHARS = 255
# The most bytes a cached ref file may hold: a commit (40 hex digits) and a newline.
_REF_MAX_BYTES = 64
# Seconds to open a connection to the Hub before asking it anything: without a network huggingface_hub
# retries a failed connection five times with back-off (about 23 s) before it gives up.
HOST_LOOKUP_TIMEOUT_S = 3.0
# Seconds each Hub request may take to connect and to answer (huggingface_hub's etag timeout; it takes
# HF_HUB_ETAG_TIMEOUT instead where that is set, and HF_HUB_DOWNLOAD_TIMEOUT for the file's own download).
HUB_REQUEST_TIMEOUT_S = 4.0
# Seconds the whole config.json lookup may take when the Hub is asked: huggingface_hub retries a Hub that does
# not answer with back-off (up to 60 s a try, 5 tries), so the wait is cut here: a Hub that accepts the
# connection and never answers is a JobError within about 10 s, never a 90 s hang.
HUB_DEADLINE_S = 10.0
# The environment variables that place huggingface_hub's cache, in the order it reads them.
CACHE_VARIABLES = ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


def is_repo_id(name: str) -> bool:
    """Whether ``name`` reads as a Hub model id (``owner/name``) rather than a path or a preset."""
    return bool(_REPO_ID.match(name)) and "--" not in name and ".." not in name and not name.endswith(".json")


def check_revision(revision: str, repo_id: str) -> str:
    """``revision`` as given when it is a 40-hex commit or a branch or tag name by git's rules; else a JobError
    (it becomes a path under the cache's ``refs/``, so '/', '..' and the like never reach the file system)."""
    if _COMMIT.match(revision):
        return revision
    if len(revision) > REVISION_MAX_CHARS or _REF_FORBIDDEN.search(revision) or revision == "@":
        shown = printable(revision[:80]) + ("..." if len(revision) > 80 else "")
        raise JobError(
            f"{shown!r} is not a revision of {repo_id}: give a branch or tag name (git's rules: no leading '/', "
            f"no '..', no spaces, control characters or any of ~^:?*[\\, at most {REVISION_MAX_CHARS} characters; "
            "e.g. main or v1.0) or a 40-hex commit",
            field=REVISION_FIELD,
        )
    return revision


def _endpoint_url() -> str:
    """The Hub's address: ``HF_ENDPOINT`` as it is now (huggingface_hub read it once, at import), else
    huggingface.co over HTTPS; every request of a lookup goes there, and nowhere else."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _endpoint() -> tuple[str, int]:
    """The Hub's host and port (``_endpoint_url``)."""
    url = urlparse(_endpoint_url())
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def _reachable(host: str, port: int) -> bool:
    """Whether a connection to the Hub opens within ``HOST_LOOKUP_TIMEOUT_S`` (name lookup included)."""
    try:
        socket.create_connection((host, port), timeout=HOST_LOOKUP_TIMEOUT_S).close()
        return True
    except OSError:
        return False


def _cache_named() -> str:
    """The cache folder as the variable that places it, not its path: the service answers these messages, and
    a path of its machine is not the requester's to read."""
    for variable, below in (("HF_HUB_CACHE", ""), ("HF_HOME", "/hub"), ("XDG_CACHE_HOME", "/huggingface/hub")):
        if os.environ.get(variable):
            return f"{variable}{below}"
    return "~/.cache/huggingface/hub"


def _cache_dir() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _check_cache_variables() -> None:
    """A JobError naming the variable when ``HF_HUB_CACHE``, ``HF_HOME`` or ``XDG_CACHE_HOME`` (or the
    folder above it) is a file or anything else but a folder: the cache cannot live there."""
    for name in CACHE_VARIABLES:
        value = os.environ.get(name)
        if not value:
            continue
        path = Path(value).expanduser()
        while not os.path.lexists(path) and path.parent != path:
            path = path.parent  # the nearest part of it that exists must be a folder
        if os.path.lexists(path) and not path.is_dir():
            # the variable's value is not repeated: in the service it is the server's own path
            raise JobError(
                f"{name} names a file (or it lies below one), not a folder, so the Hugging Face cache cannot live "
                f"there: point {name} at a folder, or unset it",
                field=name,
            )


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (symbolic links followed) lies in ``folder`` (symbolic links followed)."""
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a link loop, a path the system cannot resolve
        return False


def _cached_commit(storage: Path, revision: str, repo_id: str) -> str | None:
    """The commit the cache's ``refs/REVISION`` names (None when it holds no such ref); a ref file that is
    a link out of ``refs/``, is not a 40-hex commit, or names a snapshot outside ``snapshots/`` is refused
    without repeating what it holds."""
    refs = storage / "refs"
    ref = refs / revision
    if not os.path.lexists(ref):
        return None
    bad = (
        f"the Hugging Face cache's ref {revision!r} of {repo_id} ({storage.name}/refs/{revision} in the cache) does "
        f"not hold a commit of that repository; delete it (or the cache's folder {storage.name}) and download the "
        "model again"
    )
    if not _inside(ref, refs) or not ref.is_file():
        raise JobError(bad, field=REVISION_FIELD)
    try:
        with open(ref, "rb") as handle:
            data = handle.read(_REF_MAX_BYTES + 1)
    except OSError:
        raise JobError(bad, field=REVISION_FIELD) from None
    commit = data.decode("ascii", "replace").strip()
    if len(data) > _REF_MAX_BYTES or not _COMMIT.match(commit):
        raise JobError(bad, field=REVISION_FIELD)
    snapshots = storage / "snapshots"
    if os.path.lexists(snapshots / commit) and not _inside(snapshots / commit, snapshots):
        raise JobError(bad, field=REVISION_FIELD)
    return commit


def _cached_config(repo_id: str, revision: str) -> Path | None:
    """``repo_id``'s cached config.json at ``revision`` (a checked branch, tag or commit), or None when the
    cache does not hold it. Only paths inside the repository's own cache folder are read."""
    from huggingface_hub import constants

    storage = (
        Path(_cache_dir()) / f"models{constants.REPO_ID_SEPARATOR}{repo_id.replace('/', constants.REPO_ID_SEPARATOR)}"
    )
    commit = revision if _COMMIT.match(revision) else _cached_commit(storage, revision, repo_id)
    if commit is None:
        return None
    snapshot = storage / "snapshots" / commit
    config = snapshot / "config.json"
    if not os.path.lexists(config):
        return None
    if not _inside(snapshot, storage / "snapshots") or not _inside(config, storage):
        raise JobError(
            f"the Hugging Face cache's config.json of {repo_id} at {commit} links outside its cache folder "
            f"({storage.name} in the cache); delete that folder and download the model again",
            field=FIELD,
        )
    if not config.is_file():
        return None
    return config


def _seconds_from(name: str) -> float | None:
    """A positive number of seconds from the environment variable ``name``, else None."""
    try:
        seconds = float(os.environ.get(name, ""))
    except ValueError:
        return None
    return seconds if 0 < seconds < 1e6 else None


def _timeouts_s() -> tuple[float, float]:
    """Each Hub request's timeout and the whole lookup's deadline, in seconds: ``HUB_REQUEST_TIMEOUT_S`` and
    ``HUB_DEADLINE_S``, or what HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT ask for where they are set."""
    etag_s = _seconds_from("HF_HUB_ETAG_TIMEOUT")
    download_s = _seconds_from("HF_HUB_DOWNLOAD_TIMEOUT")
    request_s = etag_s or HUB_REQUEST_TIMEOUT_S
    if etag_s is None and download_s is None:
        return request_s, HUB_DEADLINE_S
    return request_s, request_s + (download_s or HUB_DEADLINE_S)


def _download(repo_id: str, revision: str | None, request_s: float, deadline_s: float) -> Path:
    """huggingface_hub's download of ``repo_id``'s config.json, after one metadata request (no retries: a Hub
    that does not answer it within ``request_s`` is an error at once), waited for at most ``deadline_s``
    seconds in all (the library retries a silent Hub for minutes; its thread is left to finish on its own)."""
    import huggingface_hub

    started_s = time.monotonic()
    endpoint = _endpoint_url()
    url = huggingface_hub.hf_hub_url(repo_id, "config.json", revision=revision, endpoint=endpoint)
    huggingface_hub.get_hf_file_metadata(url, timeout=min(request_s, deadline_s), endpoint=endpoint)
    outcome: dict = {}

    def fetch() -> None:
        try:
            outcome["path"] = huggingface_hub.hf_hub_download(
                repo_id, "config.json", revision=revision, etag_timeout=request_s, endpoint=endpoint
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which sorts it
            outcome["error"] = exc

    worker = threading.Thread(target=fetch, name=f"gpuplan-hub-{repo_id}", daemon=True)
    worker.start()
    worker.join(max(1.0, deadline_s - (time.monotonic() - started_s)))
    if worker.is_alive():
        raise TimeoutError(f"{_endpoint()[0]} did not answer within {deadline_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return Path(outcome["path"])


def _library():
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:  # pragma: no cover - a dependency of gpuplan; only a broken install lacks it
        raise JobError(
            "a Hugging Face model id is read through the huggingface_hub package: pip install huggingface_hub",
            field=FIELD,
        ) from None
    return huggingface_hub, errors


def hub_config(repo_id: str, revision: str | None = None) -> Path:
    """The path of ``repo_id``'s config.json: from the cache when it holds it, else downloaded into it."""
    _, errors = _library()
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # its retry warnings are not our answer
    if not is_repo_id(repo_id):
        raise JobError(f"{printable(repo_id)!r} is not a Hugging Face model id (owner/name)", field=FIELD)
    if revision is not None:
        revision = check_revision(revision, repo_id)
    _check_cache_variables()
    at = f" at revision {revision!r}" if revision else ""
    try:
        cached = _cached_config(repo_id, revision or "main")
    except OSError as exc:
        raise JobError(
            f"the Hugging Face cache cannot be read ({exc.__class__.__name__}); check HF_HOME / HF_HUB_CACHE",
            field=FIELD,
        ) from None
    if cached is not None:
        return cached
    cache = _cache_named()
    fetch = f"run 'hf download {repo_id} config.json{' --revision ' + revision if revision else ''}' where the Hub"
    fetch += " is reachable (the same HF_HOME), or give the config.json's path (model: {hf_config: PATH})"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise JobError(
            f"{repo_id}{at} is not in the Hugging Face cache ({cache}) and HF_HUB_OFFLINE is set, so the Hub is not "
            f"asked; {fetch}",
            field=FIELD,
        )
    host, port = _endpoint()
    if not _reachable(host, port):
        raise JobError(
            f"{repo_id}{at} is not in the Hugging Face cache ({cache}) and {host} cannot be reached (no network "
            f"here?); {fetch}",
            field=FIELD,
        )
    try:
        return _download(repo_id, revision, *_timeouts_s())
    except Exception as exc:  # noqa: BLE001 - every failure of the library is the user's to fix, never a crash
        raise _hub_error(exc, errors, repo_id, revision) from None


def _hub_error(exc: Exception, errors, repo_id: str, revision: str | None) -> JobError:
    """The JobError for what huggingface_hub raised while asking the Hub; never a file's content."""
    at = f" at revision {revision!r}" if revision else ""
    if isinstance(exc, errors.GatedRepoError):
        return JobError(
            f"{repo_id} is a gated model: accept its licence on its Hub page and give a token (hf auth login, or "
            "HF_TOKEN), or give the config.json's path (model: {hf_config: PATH})",
            field=FIELD,
        )
    if isinstance(exc, errors.RepositoryNotFoundError):
        return JobError(
            f"no model {repo_id} on the Hub (or it is private: give a token with hf auth login or HF_TOKEN); check "
            "the id, or give a preset ('gpuplan models') or a config.json's path",
            field=FIELD,
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return JobError(
            f"{repo_id} has no revision {revision!r}; give a branch, tag or commit it has", field=REVISION_FIELD
        )
    if isinstance(exc, errors.EntryNotFoundError):
        return JobError(
            f"{repo_id}{at} has no config.json, so gpuplan cannot size it; give the model's shapes in job.model",
            field=FIELD,
        )
    if isinstance(exc, (errors.HFValidationError, ValueError)):
        # huggingface_hub's own checks (its messages can hold what a cached file held: not repeated)
        return JobError(
            f"huggingface_hub refused {repo_id}{at} ({exc.__class__.__name__}); check the id and the revision, or "
            "give the config.json's path (model: {hf_config: PATH})",
            field=REVISION_FIELD if revision else FIELD,
        )
    said = ""
    if isinstance(exc, (errors.HfHubHTTPError, TimeoutError)):
        said = ": " + printable((str(exc).splitlines() or [""])[0][:200])
    return JobError(
        f"the Hub did not answer for {repo_id}{at} ({exc.__class__.__name__}{said}); try again, or give the "
        "config.json's path (model: {hf_config: PATH})",
        field=FIELD,
    )
