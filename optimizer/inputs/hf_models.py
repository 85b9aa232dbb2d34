"""Models described the way Hugging Face does: bundled presets and offline ``config.json`` import.

``job.model`` names a model by a preset, a ``config.json`` (``hf_config``) or a Hub id (``hub``); ``resolve``
expands each into the fields ``ModelSpec`` takes. A config is checked in ``hf_config_checks`` and counted in
``hf_counts`` (whose docstring gives the parameter counts); their names are importable from here.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from ..errors import GpuplanError, JobError, did_you_mean
from .bundled import MODEL_PRESETS, bundled_dir
from .hf_architectures import FIELD, GIVE_SHAPES
from .hf_config_checks import READ_KEYS, check_config
from .hf_counts import count_params, gated_mlp, model_fields
from .hub import check_revision, hub_config, is_repo_id
from .reader import load_json, read_bundled_yaml, read_json_file, read_text

__all__ = [
    "MODEL_SOURCES",
    "check_config",
    "config_file",
    "count_params",
    "gated_mlp",
    "model_fields",
    "model_reference",
    "presets",
    "read_hf_config",
    "resolve",
]


def _presets_file() -> Path:
    return bundled_dir("catalogs") / f"{MODEL_PRESETS}.yaml"


@functools.cache
def presets() -> dict[str, dict]:
    """The bundled model presets, read once per process (a portfolio may name a preset per job)."""
    return read_bundled_yaml(_presets_file(), "model presets")


def config_file(path: Path) -> Path:
    """A Hugging Face model folder stands for the config.json in it (whatever kind of file that is: the reader
    refuses a FIFO or a device by name, where 'a directory without a config.json' would be wrong)."""
    inside = path / "config.json"
    return inside if os.path.isdir(path) and os.path.lexists(inside) else path


def model_reference(name: str) -> dict[str, str]:
    """What a model name names (``gpuplan model NAME``, ``job.model: NAME``): a config.json (an existing
    file, a Hugging Face model folder, or a path ending in .json, in any case), else a preset, else a Hub
    model id (``owner/name``). A file wins over a preset of the same name, as it does for catalogs."""
    if os.path.exists(name) or name.lower().endswith(".json"):  # a stat: a FIFO is named here, not opened
        return {"hf_config": name}
    if name.lower() not in presets() and is_repo_id(name):
        return {"hub": name}
    return {"preset": name}


# The keys of job.model that each name a whole model, to be expanded into its fields.
MODEL_SOURCES = ("preset", "hf_config", "hub")


# A JSON string (skipped) or a bare non-finite number, as Python's json.dump writes float('inf') and NaN.
_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|-?Infinity|NaN')


def _holds_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _non_finite_as_null(path: Path) -> Any:
    """The config read with its Infinity and NaN as null where they sit only in keys gpuplan never reads
    (Nemotron-H's ``time_step_limit: [0.0, Infinity]``), every other value as strictly as ever; None where
    there are none, or one sits in a key gpuplan reads."""
    try:
        text = read_text(path, "config.json")
        loose = json.loads(text)  # Python's reader takes Infinity and NaN: only to see where they are
    except (GpuplanError, ValueError, RecursionError):
        return None
    patched = _NON_FINITE.sub(lambda m: m.group() if m.group().startswith('"') else "null", text)
    if patched == text or not isinstance(loose, dict):
        return None
    if any(_holds_non_finite(value) for key, value in loose.items() if key in READ_KEYS):
        return None
    return load_json(patched, str(path))


def read_hf_config(path: str | Path) -> dict:
    """A Hugging Face ``config.json`` (or the folder holding it): a JSON object, read with ``inputs.reader``'s
    bounds, of an architecture gpuplan models and values of the kinds it reads."""
    path = config_file(Path(path))
    if os.path.isdir(path):
        raise JobError(
            "this is a directory without a config.json in it; give a Hugging Face model directory or the path "
            "of a config.json",
            source=str(path),
            field=FIELD,
        )
    try:
        try:
            cfg = read_json_file(path, "config.json")
        except GpuplanError:
            cfg = _non_finite_as_null(path)
            if cfg is None:
                raise
    except GpuplanError as exc:
        raise JobError(exc.reason, source=exc.source or str(path), field=FIELD) from None
    if not isinstance(cfg, dict):
        raise JobError(
            f"a config.json is a JSON object of fields, got a {type(cfg).__name__}", source=str(path), field=FIELD
        )
    check_config(cfg, str(path))
    return cfg


def resolve(spec: dict | str, base: Path | None = None) -> dict:
    """``job.model`` with ``preset:``, ``hf_config:`` or ``hub:`` (a Hugging Face model id) expanded to shapes
    and counts (explicit keys win)."""
    if isinstance(spec, str):
        # a name in a job file: a preset, else a Hub model id (a config.json is given as {hf_config: PATH})
        spec = {"hub": spec} if spec.lower() not in presets() and is_repo_id(spec) else {"preset": spec}
    if not isinstance(spec, dict) or not (set(MODEL_SOURCES) & set(spec)):
        return spec
    given = [key for key in MODEL_SOURCES if key in spec]
    if len(given) > 1:
        raise JobError(
            f"{' and '.join(given)} are all given, and each names a whole model: give only one of them",
            field="job.model",
        )
    if "revision" in spec and "hub" not in spec:
        raise JobError(
            "revision pins a Hugging Face Hub model's config.json (model: {hub: owner/name, revision: ...}); "
            f"a {given[0]} has none: drop it",
            field="job.model.revision",
        )
    spec = dict(spec)
    if "hub" in spec:
        return _from_hub(spec)
    if "preset" in spec:
        name = str(spec.pop("preset"))
        table = presets()
        key = name.lower()
        if key not in table:
            raise JobError(
                f"unknown model preset {name!r}; run 'gpuplan models' for the list.{did_you_mean(name, list(table))}",
                field="job.model.preset",
            )
        fields = model_fields(table[key]["config"], name=key)
    else:
        given = spec.pop("hf_config")
        if not isinstance(given, str) or not given:
            raise JobError(
                f"hf_config is the path of a Hugging Face config.json (e.g. hf_config: llama/config.json), "
                f"got {given!r}",
                field=FIELD,
            )
        path = Path(given)
        if base is not None and not path.is_absolute():
            path = base / path
        fields = _from_config(config_file(path), spec.get("name"))
    return {**fields, **spec}


def _from_hub(spec: dict) -> dict:
    """``job.model: {hub: owner/name, revision: ...}``: the model's config.json from the Hub's cache (or the Hub)."""
    repo, revision = spec.pop("hub"), spec.pop("revision", None)
    if not isinstance(repo, str) or not is_repo_id(repo):
        raise JobError(
            f"hub is a Hugging Face model id, owner/name (e.g. hub: meta-llama/Llama-3.1-8B), got {repo!r}",
            field="job.model.hub",
        )
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise JobError(
            f"revision is a branch, tag or commit of {repo} (e.g. revision: main), got {revision!r}",
            field="job.model.revision",
        )
    if revision is not None:
        check_revision(revision, repo)  # by the Hub's rules, before any path in its cache is built
    fields = _from_config(hub_config(repo, revision), spec.get("name") or repo)
    return {**fields, **spec}


def _from_config(path: Path, name: str | None) -> dict:
    """A config.json's model fields, named ``name`` (else by the config or its folder), with its path."""
    cfg = read_hf_config(path)
    if isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg:
        # a multimodal model's config (Gemma 3, Llama 4, Qwen2.5-VL): the language model is nested
        raise GpuplanError(
            "this config nests its language model under 'text_config' (a multimodal model); gpuplan plans "
            "the language model: save the text_config part as its own config.json (with its model_type) "
            "and give that, or give the model's shapes in job.model",
            source=str(path),
            field=FIELD,
        )
    try:
        # a Hugging Face folder's config.json is named for its folder; any other file for itself
        named = path.parent.name if path.name == "config.json" else path.stem
        fields = model_fields(cfg, name=name or cfg.get("_name_or_path") or named)
    except GpuplanError as exc:
        raise exc.located(str(path), FIELD) from None
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # a backstop: check_config comes first
        raise GpuplanError(
            f"cannot size the model from this config.json ({exc.__class__.__name__}: {exc}); check that it "
            f"is a decoder model's config.json, or {GIVE_SHAPES}",
            source=str(path),
            field=FIELD,
        ) from None
    fields["config_path"] = str(path)
    return fields
