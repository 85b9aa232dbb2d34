"""Models named the way the Hugging Face Hub names them (``meta-llama/Llama-3.1-70B``): their config.json
through ``huggingface_hub``, from its cache or the Hub, then read as any config.json (``hf_models``).

The library's own rules apply: its cache (``HF_HOME``, ``HF_HUB_CACHE``), offline mode (``HF_HUB_OFFLINE``),
the endpoint (``HF_ENDPOINT``) and the token for gated repositories (``HF_TOKEN`` or ``hf auth login``). A
config already in the cache is read without asking the Hub (a pinned ``revision`` is asked for by name); a
model neither cached nor reachable gets a message that says which, and what to run.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

from ..errors import JobError

FIELD = "job.model"
# owner/name as the Hub spells repository ids (huggingface_hub.utils.validate_repo_id): letters, digits,
# '-', '_' and '.', at most 96 characters, no '--' or '..'
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
# Seconds to open a connection to the Hub before asking it anything: without a network huggingface_hub
# retries a failed connection five times with back-off (about 23 s) before it gives up.
HOST_LOOKUP_TIMEOUT_S = 3.0


def is_repo_id(name: str) -> bool:
    """Whether ``name`` reads as a Hub model id (``owner/name``) rather than a path or a preset."""
    return bool(_REPO_ID.match(name)) and "--" not in name and ".." not in name and not name.endswith(".json")


def _endpoint() -> tuple[str, int]:
    """The Hub's host and port (``HF_ENDPOINT``, else huggingface.co over HTTPS)."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def _reachable(host: str, port: int) -> bool:
    """Whether a connection to the Hub opens within ``HOST_LOOKUP_TIMEOUT_S`` (name lookup included)."""
    try:
        socket.create_connection((host, port), timeout=HOST_LOOKUP_TIMEOUT_S).close()
        return True
    except OSError:
        return False


def _cache_dir() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def hub_config(repo_id: str, revision: str | None = None) -> Path:
    """The path of ``repo_id``'s config.json: from the cache when it holds it, else downloaded into it."""
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:  # pragma: no cover - a dependency of gpuplan; only a broken install lacks it
        raise JobError(
            f"{repo_id!r} is a Hugging Face model id, and reading it needs the huggingface_hub package: "
            "pip install huggingface_hub",
            field=FIELD,
        ) from None
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # its retry warnings are not our answer
    at = f" at revision {revision!r}" if revision else ""
    try:
        return Path(huggingface_hub.hf_hub_download(repo_id, "config.json", revision=revision, local_files_only=True))
    except errors.LocalEntryNotFoundError:
        pass  # not cached: ask the Hub, if it can be asked
    except errors.HFValidationError as exc:
        raise JobError(f"{repo_id!r} is not a Hugging Face model id: {exc}", field=FIELD) from None
    cache = _cache_dir()
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
        return Path(huggingface_hub.hf_hub_download(repo_id, "config.json", revision=revision))
    except errors.GatedRepoError:
        raise JobError(
            f"{repo_id} is a gated model: accept its licence on its Hub page and give a token (hf auth login, or "
            "HF_TOKEN), or give the config.json's path (model: {hf_config: PATH})",
            field=FIELD,
        ) from None
    except errors.RepositoryNotFoundError:
        raise JobError(
            f"no model {repo_id} on the Hub (or it is private: give a token with hf auth login or HF_TOKEN); check "
            "the id, or give a preset ('gpuplan models') or a config.json's path",
            field=FIELD,
        ) from None
    except errors.RevisionNotFoundError:
        raise JobError(
            f"{repo_id} has no revision {revision!r}; give a branch, tag or commit it has", field=FIELD
        ) from None
    except errors.EntryNotFoundError:
        raise JobError(
            f"{repo_id}{at} has no config.json, so gpuplan cannot size it; give the model's shapes in job.model",
            field=FIELD,
        ) from None
    except (errors.HfHubHTTPError, OSError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise JobError(
            f"the Hub did not answer for {repo_id}{at} ({exc.__class__.__name__}: {first}); try again, or give "
            "the config.json's path (model: {hf_config: PATH})",
            field=FIELD,
        ) from None
