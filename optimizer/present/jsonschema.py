"""JSON Schemas of the input files, generated from the pydantic models, for editors and validation.

``# yaml-language-server: $schema=job.schema.json`` at the top of a job file lets editors autocomplete.
"""

from __future__ import annotations

import copy

from pydantic import BaseModel

from ..errors import ArgumentError
from ..inputs.schema import CatalogFile, Portfolio, Problem

KINDS: dict[str, type[BaseModel]] = {"job": Problem, "portfolio": Portfolio, "catalog": CatalogFile}


def _model_variants(schema: dict) -> None:
    """``job.model`` may also be a preset name or Hub id, ``{preset: ...}``, ``{hf_config: ...}`` or ``{hub: ...}``
    (``hf_models.resolve``)."""
    defs = schema.get("$defs", {})
    if "ModelSpec" not in defs:
        return
    full = defs["ModelSpec"]
    full.get("properties", {}).pop("config_path", None)  # set by hf_config expansion, not written in files
    by_name = {
        "type": "object",
        "additionalProperties": False,
        "required": ["preset"],
        "properties": {
            "preset": {"type": "string", "description": "A bundled preset (gpuplan models)."},
            "name": {"type": "string"},
        },
    }
    by_config = {
        "type": "object",
        "additionalProperties": False,
        "required": ["hf_config"],
        "properties": {
            "hf_config": {"type": "string", "description": "Path to a Hugging Face config.json."},
            "name": {"type": "string"},
        },
    }
    by_hub = {
        "type": "object",
        "additionalProperties": False,
        "required": ["hub"],
        "properties": {
            "hub": {"type": "string", "description": "A Hugging Face model id, owner/name (its config.json)."},
            "revision": {"type": "string", "description": "A branch, tag or commit of the Hub repository."},
            "name": {"type": "string"},
        },
    }
    defs["ModelSpec"] = {"anyOf": [full, by_name, by_config, by_hub, {"type": "string"}]}


def json_schema(kind: str) -> dict:
    if kind not in KINDS:
        raise ArgumentError(f"unknown schema {kind!r}; choose job, portfolio or catalog", field="kind")
    schema = copy.deepcopy(KINDS[kind].model_json_schema(by_alias=True, mode="validation"))
    _model_variants(schema)
    props = schema.get("properties", {})
    props.pop("source_path", None)
    if kind == "job":
        props["spec"] = {
            "type": "object",
            "description": "Kubernetes-style spec.resources.gpu {minMemory, count, type}.",
        }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"gpuplan {kind} file"
    return schema
