"""The reference commands: ``catalog`` (a catalog's GPUs and offers, or ``catalog import skypilot``),
``models`` and ``model`` (the model presets, one model's shapes) and ``schema`` (a file kind's JSON Schema)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import typer
import yaml
from rich.table import Table

from .. import __version__, api
from ..cli_options import Format, FormatOpt, MinMemoryOpt, QuietOpt
from ..errors import ArgumentError, GpuplanError, printable
from ..inputs import skypilot
from ..inputs.catalog import catalog_entries
from ..inputs.files import expand_models, load_catalog, parse_model
from ..inputs.hf_models import presets
from ..inputs.question import model_value
from ..inputs.schema import ModelSpec
from ..inputs.units import fmt_count, parse_bytes
from ..present import answers, output, render
from ..present.jsonschema import json_schema
from .checks import check_flags, check_followable, check_gpu_names, check_outputs, names
from .handling import handled, say, state
from .shared import emit


@handled
def catalog_cmd(
    name: str = typer.Argument("default", help="Bundled catalog name or a YAML path; or 'import skypilot'."),
    source: str | None = typer.Argument(None, help="With 'import': skypilot.", show_default=False),
    min_memory: str | None = MinMemoryOpt,
    types: str | None = typer.Option(None, "--types", help="Only these GPUs, comma-separated."),
    from_dir: Path | None = typer.Option(
        None, "--from", help="import: SkyPilot's catalog folder or a vms.csv (default ~/.sky/catalogs, newest vN)."
    ),
    clouds: str | None = typer.Option(None, "--clouds", help="import: only these clouds, e.g. aws,gcp,lambda,runpod."),
    regions: str | None = typer.Option(
        None, "--regions", help="import: an offer per region of these (default: each instance type's cheapest region)."
    ),
    max_nodes: int = typer.Option(
        1, "--max-nodes", min=1, help="import: the nodes one job may rent of each offer (SkyPilot publishes no supply)."
    ),
    out: Path | None = typer.Option(None, "--out", help="import: the catalog file to write (default: print it)."),
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """List a catalog's GPUs and offers: memory in GB and GiB, dense BF16 TFLOPS, bandwidths, price. 'gpuplan
    catalog import skypilot --out FILE' writes a catalog of SkyPilot's published prices."""
    state["quiet"] = state["quiet"] or quiet
    if name == "import":
        _import_catalog(source, from_dir, clouds, regions, max_nodes, out)
        return
    if source is not None:
        raise ArgumentError(f"unexpected {source!r}: 'catalog' takes one name (or 'import skypilot')", field="name")
    check_flags(min_memory=min_memory)
    cat = load_catalog(name)
    floor = None
    if min_memory:
        try:
            floor = parse_bytes(min_memory, "a memory size")
        except GpuplanError as exc:
            raise ArgumentError(exc.reason, field="min_memory") from None
    wanted = names(types, "types") if types is not None else None
    check_gpu_names(cat, "types", wanted or [])
    rows = render.catalog_rows(catalog_entries(cat, wanted, floor))
    if fmt == Format.table and state["quiet"]:
        typer.echo(render.catalog_headline(cat.name, rows))
    elif fmt == Format.table:
        render.print_catalog(cat.name, rows, render.console())
    else:
        emit({"catalog": cat.name, "description": cat.description, "rows": rows}, fmt, lambda r, c: None)


def _import_catalog(
    source: str | None, from_dir: Path | None, clouds: str | None, regions: str | None, max_nodes: int, out: Path | None
) -> None:
    """``gpuplan catalog import skypilot``: SkyPilot's vms.csv prices as a catalog file."""
    if source != "skypilot":
        raise ArgumentError(
            f"catalog import reads SkyPilot's catalogs: 'gpuplan catalog import skypilot', got {source!r}", field="name"
        )
    check_flags(max_nodes=max_nodes)
    check_outputs([from_dir], out=out)
    check_followable(from_dir, "from_dir", "SkyPilot catalog")
    wanted_clouds = [c.strip().lower() for c in clouds.split(",") if c.strip()] if clouds else None
    wanted_regions = [r.strip() for r in regions.split(",") if r.strip()] if regions else None
    # never --out onto a vms.csv it reads (or a link to one): the import would overwrite its own input
    skypilot.check_out(out, skypilot.catalog_files(from_dir or skypilot.default_source(), wanted_clouds))
    document, imported = api.import_skypilot(from_dir, wanted_clouds, wanted_regions, max_nodes)
    left_out = "; ".join(f"{n} x {why}" for why, n in sorted(imported.left_out.items(), key=lambda kv: -kv[1]))
    header = [
        f"# {len(document['offers'])} offers imported by gpuplan {__version__} from SkyPilot's catalogs on "
        f"{dt.date.today().isoformat()}:",
        *(f"#   {f}" for f in imported.files),
        "# Prices per GPU-hour (the instance's price / its GPUs), each instance type's cheapest region"
        + (" of those asked for" if wanted_regions else "")
        + "; 'checked' is the file's date.",
        f"# max_nodes {max_nodes}: SkyPilot publishes no supply; set it to the nodes you can rent.",
    ]
    if left_out:
        header.append(f"# Rows left out: {left_out}"[:2000])
    text = "\n".join(header) + "\n" + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if out is None:
        typer.echo(text, nl=False)
        return
    output.write_text(out, text, "out")
    read_as = f"; {'; '.join(imported.notes)}" if imported.notes else ""
    say(
        f"wrote {len(document['offers'])} offers to {printable(str(out))}"
        + (f" ({left_out})" if left_out else "")
        + read_as
    )


@handled
def models_cmd(fmt: Format = FormatOpt) -> None:
    """List the bundled model presets (use them as job.model: {preset: NAME})."""
    rows = answers.model_rows(presets())
    if fmt != Format.table:
        emit({"models": rows}, fmt, lambda r, c: None)
        return
    # the sources are sentences: in 'gpuplan model NAME' and the JSON, so the table fits 100 columns
    table = Table(title="Model presets (gpuplan model NAME shows one with its source)", title_justify="left")
    for col in ("name", "params", "active", "layers", "hidden", "experts"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for r in rows:
        table.add_row(
            r["name"],
            fmt_count(r["params"]),
            fmt_count(r["active_params"]),
            str(r["layers"]),
            str(r["hidden"]),
            f"{r['experts']} (top {r['experts_per_token']})" if r["experts"] else "-",
        )
    render.console().print(table)


@handled
def model_cmd(
    name: str = typer.Argument(
        ...,
        help="A config.json or the model folder holding it (a path that exists comes first, as in solve --model), "
        "else a preset name, else a Hugging Face Hub id (meta-llama/Llama-3.1-8B).",
    ),
    fmt: Format = FormatOpt,
) -> None:
    """Show one model: total and active parameters and the shapes, from a preset or a config.json."""
    try:
        data = expand_models({"job": {"model": model_value(name)}})
    except GpuplanError as exc:
        if exc.source is None:  # the name itself (an unknown preset); errors inside a config.json name the file
            raise ArgumentError(exc.reason, field="name") from None
        raise
    spec = parse_model(ModelSpec, data["job"]["model"], name, "job.model")
    data = spec.model_dump(exclude_none=True)
    data.setdefault("active_params", data["params"])
    preset = presets().get(name.lower())
    if preset is not None:
        data["source"] = preset["published"]["source"]
    if fmt != Format.table:
        emit(data, fmt, lambda r, c: None)
        return
    for key, value in data.items():
        shown = fmt_count(value) if key in ("params", "active_params") else value
        typer.echo(f"{key:>18}: {shown}")


@handled
def schema_cmd(kind: str = typer.Argument(..., help="job, portfolio or catalog.")) -> None:
    """Print the JSON Schema of a file kind (for editor autocompletion and validation)."""
    typer.echo(json.dumps(json_schema(kind), indent=2))
