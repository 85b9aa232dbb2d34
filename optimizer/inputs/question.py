"""A question asked on the command line: the job document its flags build, alone or over a job file.

``gpuplan solve --model meta-llama/Llama-3.1-70B --method lora --tokens 2B --seq-len 8k --deadline 2d`` is the
job file it would be, so it plans the same: ``job_document`` merges the job flags into the file's mapping (or
an empty one), and ``problem_of`` reads it as ``load_job`` reads a file, naming the flag in any error that a
flag's value causes. ``--save`` writes that document, so a one-liner becomes a file.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, GpuplanError, JobError
from . import units
from .files import expand_models, parse_model, read_yaml
from .hf_models import model_reference
from .overrides import parse_measurement
from .reader import link_problem
from .schema import Problem

# job fields a flag sets (the flag is --name-with-dashes): what users commonly set on a job
JOB_FLAGS = (
    "model",
    "method",
    "tokens",
    "dataset_tokens",
    "epochs",
    "seq_len",
    "global_batch",
    "precision",
    "optimizer",
    "lora_rank",
    "lora_targets",
    "lora_dropout",
    "lora_adapter_dtype",
    "master_weights",
    "gradient_dtype",
    "loss",
    "attention",
    "context_parallel",
    "optimizer_implementation",
    "variable_lengths",
    "activation_offload",
    "offload",
)
# a context length in thousands counts in 1,024s (an 8k context is 8,192 tokens, Llama 3.1's 128k 131,072)
_CONTEXT = re.compile(r"^\s*([0-9]+)\s*[kK]\s*$")


def seq_len_value(text: str) -> int:
    """``--seq-len``: a token count, or N k as context lengths are named (8k = 8,192)."""
    match = _CONTEXT.match(text)
    try:
        if not text.isascii():  # int() reads other scripts' digits ('١٢'), which no other quantity takes
            raise ValueError(text)
        value = int(match.group(1)) * 1024 if match else int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise ArgumentError(
            f"{text!r} is not a sequence length; give tokens per sequence, e.g. 4096 or 8k (8,192)", field="seq_len"
        ) from None
    if value < 1:
        raise ArgumentError(f"{text!r} is not a sequence length: it must be at least 1 token", field="seq_len")
    return value


# a token amount: a count with its unit word ('4M tokens', '4,194,304 tok'), as job.global_batch takes it
_TOKENS = re.compile(r"^(.*?)\s*(tokens?|tok)\s*$", re.IGNORECASE)
# a plain number: digits with thousands grouped by commas or underscores, a point, an exponent
_PLAIN_NUMBER = re.compile(r"^[0-9][0-9,_]*(\.[0-9]*)?([eE][+-]?[0-9]+)?$")
# a plain decimal, signed, without grouping: --epochs
_PLAIN_DECIMAL = re.compile(r"^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$")


def global_batch_value(value: object) -> int | str:
    """``--global-batch``: sequences per step as a whole number (``1024``, ``1,000``, ``1e3``, ``1000.0``), or a
    token amount with its unit (``4M tokens``, kept as text for the job's own reading), or ``free``."""
    text = str(value).strip()
    if text.lower() == "free":
        return "free"
    tokens = _TOKENS.match(text)
    if tokens and tokens.group(1):
        return text
    example = (
        "give sequences per step as a whole number (1024, 1,000 or 1e3), tokens with their unit ('4M tokens'), or free"
    )
    if not _PLAIN_NUMBER.match(text):
        unit = " (a token amount needs its unit: '4M tokens')" if re.match(r"^[0-9.,_]+\s*[kKmMbBtT]$", text) else ""
        raise ArgumentError(f"cannot read {text!r} as a global batch{unit}; {example}", field="global_batch")
    try:
        number = units.parse_count(text, "a global batch in sequences")
    except GpuplanError as exc:
        raise ArgumentError(f"{exc.reason}; {example}", field="global_batch") from None
    if number != int(number) or number < 1:
        raise ArgumentError(
            f"{text!r} is not a whole number of sequences (at least 1); {example}", field="global_batch"
        )
    return int(number)


def job_document(path: Path | None, flags: dict[str, Any]) -> dict:
    """The job file's mapping (or a new one) with the given job flags over its ``job:`` fields."""
    given = {k: v for k, v in flags.items() if v is not None}
    if path is None:
        missing = [f"--{k.replace('_', '-')}" for k in ("model", "tokens") if k not in given]
        if "dataset_tokens" in given:  # the tokens as a data set's and its epochs (job.dataset_tokens x epochs)
            missing = [flag for flag in missing if flag != "--tokens"]
        if missing:
            raise ArgumentError(
                f"a question without a job file needs {' and '.join(missing)} (e.g. gpuplan solve --model "
                "meta-llama/Llama-3.1-8B --tokens 1B, or --dataset-tokens 500M --epochs 2 for the tokens), or "
                "give a job file (see problems/)",
                field="job",
            )
        data: dict = {"job": {"name": job_name_of(str(given["model"]))}}
    else:
        data = read_yaml(path, "job")
        if not isinstance(data, dict) or not isinstance(data.get("job"), dict):
            raise JobError("a job file needs a top-level 'job:' mapping (see problems/ for examples)", source=str(path))
    if "model" in given:
        given["model"] = model_value(str(given["model"]), path)
    if "seq_len" in given:
        given["seq_len"] = seq_len_value(str(given["seq_len"]))
    if "lora_rank" in given:
        given["lora_rank"] = int(given["lora_rank"])
    if "global_batch" in given:
        given["global_batch"] = global_batch_value(given["global_batch"])
    if "epochs" in given:
        given["epochs"] = epochs_value(str(given["epochs"]))
    data["job"].update(given)
    return data


def epochs_value(text: str) -> int | float:
    """``--epochs``: a plain number as a job file writes it (``2``, ``1.5``, ``2e0``), for the job to range-check
    (``job.epochs``: greater than 0, at most 10,000); no grouping, which would read the decimal comma of '1,5' as
    15 epochs."""
    if not text.isascii() or not _PLAIN_DECIMAL.match(text):
        raise ArgumentError(
            f"job.epochs: {text!r} is not a number of epochs; give the passes over --dataset-tokens as a number, "
            "e.g. 2 or 1.5 (a decimal point, no grouping)",
            field="epochs",
        )
    number = float(text)
    return int(number) if number.is_integer() else number


def model_value(name: str, job: Path | None = None) -> str | dict:
    """``--model NAME`` read as ``gpuplan model NAME`` reads it (``hf_models.model_reference``), in one order: a
    path that exists (a config.json, or the model folder holding one) first, else a preset, else a Hugging Face
    Hub id. A path is made relative to the job file's folder, where the file's own paths are read from."""
    # a link that leads nowhere (a loop, a dangling link) is a path too: the reader says what is wrong with it
    reference = {"hf_config": name} if link_problem(name, "model") else model_reference(name)
    if "hf_config" not in reference:
        return name  # a preset or a Hub id, as a job file names it
    path = reference["hf_config"]
    if job is not None and not os.path.isabs(path):
        path = os.path.relpath(os.path.abspath(path), os.path.abspath(job.parent))
    return {"hf_config": path}


# Where each constraint flag (an ``apply_overrides`` keyword) lands in a job document: the sections on the way,
# the key, and the key's other spelling (the field name, which a file may use instead of the alias).
_FLAG_FIELDS: dict[str, tuple[tuple[str, ...], str, str | None]] = {
    "objective": ((), "objective", None),
    "framework": (("job",), "framework", None),
    "compile": (("job",), "compile", None),
    "deadline": (("constraints",), "deadline", "deadline_s"),
    "budget": (("constraints",), "budget", "budget_usd"),
    "max_nodes": (("constraints",), "max_nodes", None),
    "max_gpus": (("constraints",), "max_gpus", None),
    "deadline_quantile": (("constraints",), "deadline_quantile", None),
    "spot": (("constraints",), "spot", None),
    "gpu_types": (("constraints", "gpu"), "types", None),
    "min_memory": (("constraints", "gpu"), "min_memory", "min_memory_bytes"),
    "headroom": (("constraints",), "memory_headroom", None),
}


def saved_document(
    document: dict,
    flags: dict[str, Any] | None = None,
    *,
    catalog: str | None = None,
    base: Path | None = None,
    to: Path | None = None,
) -> dict:
    """The whole question as one job document, to save and ask again (``--save``, the page's job.yaml): the job
    ``document`` (a job file's mapping with the job flags over it, as ``job_document`` builds it), the constraint
    flags ``flags`` (as ``apply_overrides`` takes them: deadline, budget, spot policy, GPU filters, objective,
    framework, measurements) written where a job file says them, and the catalog (``catalog``, as --catalog
    names it, over the document's own). With ``to``, the file it is saved as, every relative path (the catalog, a
    model's hf_config) is rebased from ``base`` (the job file's folder; None: the working folder) to ``to``'s
    folder, so that it names the same file from there."""
    saved = copy.deepcopy(document)
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key == "measured":
            job = saved["job"]
            job["measured"] = [*(job.get("measured") or []), *(_measurement_entry(text) for text in value)]
            continue
        where, field, other = _FLAG_FIELDS[key]
        section = saved
        for name in where:
            if not isinstance(section.get(name), dict):
                section[name] = {}
            section = section[name]
        section.pop(other or field, None)
        section[field] = [t.strip() for t in str(value).split(",") if t.strip()] if key == "gpu_types" else value
        _drop_spec_filter(saved, _SPEC_FILTERS.get(key))
    if catalog is not None or isinstance(saved.get("catalog"), str):
        saved["catalog"] = _rebased(catalog or saved["catalog"], None if catalog else base, to, catalog=True)
    model = saved["job"].get("model")
    if isinstance(model, dict) and isinstance(model.get("hf_config"), str):
        model["hf_config"] = _rebased(model["hf_config"], base, to, catalog=False)
    return saved


# The flags that override a filter of the seed's job spec block (spec.resources.gpu), by the block's key
_SPEC_FILTERS = {"gpu_types": "type", "min_memory": "minMemory"}


def _drop_spec_filter(saved: dict, key: str | None) -> None:
    """The spec block's ``key`` filter left out where a flag gives it anew: the flag overrides it, as it
    overrides the file's constraints (kept, the two would disagree and the saved file be refused)."""
    spec = saved.get("spec")
    gpu = (
        spec.get("resources", {}).get("gpu")
        if isinstance(spec, dict) and isinstance(spec.get("resources"), dict)
        else None
    )
    if key is not None and isinstance(gpu, dict):
        gpu.pop(key, None)
        if not gpu:  # nothing left: the block takes no empty filter
            del saved["spec"]


def _measurement_entry(text: str) -> dict:
    """A --measured text as a job file's ``job.measured`` entry."""
    return parse_measurement(text).model_dump(by_alias=True, exclude_none=True, mode="json")


def _rebased(path: str, base: Path | None, to: Path | None, *, catalog: bool) -> str:
    """``path``, read from ``base`` (None: the working folder), as a path from ``to``'s folder; an absolute path,
    and a catalog that names no file (a bundled name), as it is. A catalog is looked for as ``files`` looks:
    beside the file, then from the working folder."""
    if to is None or os.path.isabs(path):
        return path
    here = base / path if base is not None else Path(path)
    if catalog and not os.path.isfile(here):
        if not os.path.isfile(path):
            return path
        here = Path(path)
    return os.path.relpath(os.path.abspath(here), os.path.abspath(to.parent))


def job_name_of(model: str) -> str:
    """The name a job without a file gets (the CLI's and the service's): its model's Hub id's name part, the
    preset, or a config.json's folder (any other .json file by its own name), as a name gpuplan takes."""
    if model.lower().endswith(".json"):
        path = Path(model)
        model = path.parent.name if path.stem.lower() == "config" and path.parent.name else path.stem
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model.rsplit("/", 1)[-1]).strip("-.") or "job"


def _named_at(reason: str, key: str) -> int | None:
    """Where a job-level error's sentence first names the field ``key`` (``job.tokens``, or ``global_batch`` as a
    word), or None: --tokens over a file's dataset_tokens, or --global-batch past the tokens, was blamed on the
    file's 'job' though the flag set it; of two flags it names (--tokens 1B --epochs 2), the one it names first
    is the one it is about ('job.epochs goes with job.dataset_tokens ... with job.tokens, ...')."""
    match = re.search(rf"\bjob\.{key}\b", reason) or ("_" in key and re.search(rf"\b{key}\b", reason)) or None
    return match.start() if match else None


def _naming_field(reason: str, key: str) -> str:
    """An error in a value a flag gave, naming the job field the flag sets (``job.loss: Input should be ...``)
    where its sentence names none: the flag is the job file's field, and the fix is the same in either."""
    return reason if f"job.{key}" in reason else f"job.{key}: {reason}"


def problem_of(data: dict, path: Path | None, flags: dict[str, Any]) -> Problem:
    """The problem a job document states (a copy: the document is left as the user wrote it, for --save); an
    error in a value a flag gave names the flag."""
    source = str(path) if path else "command line"
    given = [k for k, v in flags.items() if v is not None]
    try:
        expanded = expand_models(copy.deepcopy(data), base=path.parent if path else None, source=source)
        problem = parse_model(Problem, expanded, source)
    except GpuplanError as exc:
        field = exc.field or ""
        flag = next((k for k in given if field == f"job.{k}" or field.startswith(f"job.{k}.")), None)
        if flag is None and field == "job":  # a rule across the job's fields: the flag its sentence names
            named = {k: at for k in given if (at := _named_at(exc.reason, k)) is not None}
            flag = min(named, key=named.__getitem__) if named else None
        if flag is not None:
            raise ArgumentError(_naming_field(exc.reason, flag), field=flag) from None
        raise
    problem.source_path = str(path) if path else None
    return problem
