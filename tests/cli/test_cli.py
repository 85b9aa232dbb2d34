"""The command line: answers exit 0, bad input exits 2 with one paragraph naming file, field and fix."""

import json
import textwrap

import pytest
from typer.testing import CliRunner

from optimizer.cli import app
from optimizer.inputs import units

runner = CliRunner()


def run(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


def write(tmp_path, text, name="job.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


GOOD = """
catalog: nodus-2026-11
job:
  model: {params: 14B}
  tokens: 1B
  activation_reserve: 0
"""


def test_check_table_says_the_verdict(problems):
    r = run("check", problems / "seed-14b-full-finetune.yaml", "--sku", "B200", "--gpus", "2", "--zero", "3")
    assert r.exit_code == 0, r.output
    assert "FITS" in r.output and "DOES NOT FIT" not in r.output
    assert "Chosen for you" in r.output


def test_check_json_follows_the_plan_contract_plus_fits(problems):
    r = run("check", problems / "seed-14b-full-finetune.yaml", "--sku", "B200", "--gpus", "1", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    for key in (
        "sku",
        "offer",
        "nodes",
        "gpus_per_node",
        "gpus",
        "strategy",
        "memory_gib",
        "tokens_per_s",
        "mfu",
        "scaling_efficiency",
        "bound",
        "hours",
        "gpu_hours",
        "cost_usd",
        "meets_deadline",
        "within_budget",
        "fits",
    ):
        assert key in data, key
    assert set(data["strategy"]) >= {
        "tp",
        "pp",
        "dp",
        "zero_stage",
        "shard_degree",
        "micro_batch",
        "grad_accum",
        "recompute",
    }
    assert set(data["memory_gib"]) >= {
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "reserve",
        "total",
        "capacity",
    }
    assert data["fits"] is False


def test_check_sku_without_price_has_null_cost(tmp_path):
    job = write(tmp_path, GOOD)
    r = run("check", job, "--sku", "MI300X", "--gpus", "8", "--catalog", "hardware", "--format", "json", "--no-compare")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["cost_usd"] is None
    assert any("no offer" in n for n in data["notes"])


def test_solve_json_contract(problems):
    r = run("solve", problems / "llama-70b-within-5-days.yaml", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["status"] == "optimal" and data["objective"] == "cost"
    assert data["best"]["meets_deadline"] is True
    assert data["frontier"] and all(
        "lost_on" in r and "breakeven_price_usd_per_gpu_hour" in r for r in data["runners_up"]
    )


def test_solve_flags_override_the_file(problems):
    r = run(
        "solve", problems / "llama-70b-within-5-days.yaml", "--gpu-types", "H100", "--deadline", "10d", "-f", "json"
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["best"]["sku"] == "H100-SXM"


def test_infeasible_is_an_answer_with_exit_0(problems):
    r = run("solve", problems / "llama-70b-within-5-days.yaml", "--deadline", "1h", "-f", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["status"] == "infeasible" and data["best"] is None
    deadline = next(i for i in data["infeasible"] if i["constraint"] == "deadline")
    assert "over the deadline" in deadline["detail"] and deadline["over_by"] > 0


@pytest.mark.parametrize("deadline", ["1h", "6h"])
def test_a_deadline_left_of_every_plan_is_drawn_at_the_chart_s_left_edge(problems, deadline):
    """Every plan is later than the deadline: the chart's x axis starts at the deadline, so its '|' is the
    first column of every row, never wrapped to the right edge or past it (an IndexError)."""
    r = run("solve", problems / "llama-70b-within-5-days.yaml", "--deadline", deadline)
    assert r.exit_code == 0, r.output
    rows = [line for line in r.output.splitlines() if line.startswith(" " * 13 + "│") or " ┤" in line]
    assert len(rows) == 12, r.output
    assert all(line.split("┤" if "┤" in line else "│", 1)[1].startswith("|") for line in rows), r.output


def test_options_lists_rejections(problems):
    r = run("options", problems / "llama-70b-within-5-days.yaml", "--format", "json")
    assert r.exit_code == 0, r.output
    opts = json.loads(r.stdout)["options"]
    reasons = {o["rejected_by"] for o in opts}
    assert {None, "memory", "deadline"} <= reasons
    late = next(o for o in opts if o["rejected_by"] == "deadline")
    assert late["hours"]["p50"] > 0 and late["cost_usd"]["p50"] > 0


def test_catalog_listing_and_filters():
    r = run("catalog", "default", "--min-memory", "160Gi", "--format", "json")
    assert r.exit_code == 0, r.output
    skus = {row["sku"] for row in json.loads(r.stdout)["rows"]}
    assert {"B200", "B300"} <= skus  # 180 GB = 167.6 GiB and 288 GB pass 160 GiB
    assert "H200" not in skus and "H100-SXM" not in skus
    r = run("catalog", "nodus-2026-11", "--types", "B200,B300")
    assert r.exit_code == 0 and "B300" in r.output and "H200" not in r.output


@pytest.mark.parametrize("floor", ["75Gi", "80GB", "140Gi"])
def test_catalog_and_options_filter_memory_alike(floor):
    """catalog filtered on the label (an H100's 74.5 GiB), options on what plans count on (its reported
    79.6 GiB): --min-memory 75Gi dropped the H100 from one and kept it in the other."""
    listed = json.loads(run("catalog", "default", "--min-memory", floor, "-f", "json").stdout)["rows"]
    options = json.loads(run("options", "problems/llama-8b-lora.yaml", "--min-memory", floor, "-f", "json").stdout)
    passing = {o["offer"].removesuffix(" (spot)") for o in options["options"] if o["rejected_by"] != "filter"}
    assert {row["offer"] for row in listed if row["offer"]} == passing
    assert all(row["usable_gib"] >= units.parse_bytes(floor) / 2**30 - 0.05 for row in listed)


def test_capacity_command():
    r = run("capacity", "--sku", "B300", "--gpus", "8", "--memory-basis", "board", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["max_params"] == pytest.approx(131.25e9)
    # a reserve written as a fraction takes that share of each GPU, as activation_reserve does in a job file
    r = run("capacity", "--sku", "B300", "--gpus", "8", "--memory-basis", "board", "--reserve", "0.2", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["max_params"] == pytest.approx(0.8 * 131.25e9)


@pytest.mark.parametrize(
    "flags", [["--reserve", "100GB"], ["--zero", "2", "--method", "qlora"], ["--memory-basis", "label"]]
)
def test_capacity_with_a_job_refuses_the_flags_it_would_ignore(flags):
    """With a job file the answer is check's memory model over the job's own settings: --reserve 100GB
    or --method qlora would change nothing while the header said full and delivered, so they are refused."""
    bad("capacity", "problems/llama-70b-within-5-days.yaml", "--sku", "B200", "--gpus", "8", *flags, expect=[flags[0]])


def test_capacity_takes_an_offer_name_as_check_does():
    by_offer = run("capacity", "--sku", "nodus-b200", "--gpus", "8", "-f", "json")
    assert by_offer.exit_code == 0, by_offer.output
    by_sku = run("capacity", "--sku", "B200", "--gpus", "8", "-c", "nodus-2026-11", "-f", "json")
    assert json.loads(by_offer.stdout)["max_params"] == json.loads(by_sku.stdout)["max_params"]


def test_capacity_without_a_job_refuses_nodes():
    bad("capacity", "--sku", "B200", "--gpus", "8", "--nodes", "3", expect=["--nodes", "job file only"])


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and "gpuplan" in r.output


# --------------------------------------------------------------------------- bad input: exit 2, no traceback


def bad(*args, expect):
    r = run(*args)
    assert r.exit_code == 2, r.output
    for text in expect:
        assert text in r.output, (text, r.output)


def test_malformed_yaml(tmp_path):
    job = write(tmp_path, "job:\n  model: {params: 14B\n  tokens: 1B\n")
    bad("check", job, "--sku", "B200", "--gpus", "1", expect=[str(job), "malformed YAML", "line"])


def test_missing_file(tmp_path):
    bad("solve", tmp_path / "nope.yaml", expect=["not found"])


def test_unknown_sku_suggests(tmp_path):
    bad("check", write(tmp_path, GOOD), "--sku", "B201", "--gpus", "1", expect=["unknown GPU 'B201'", "Did you mean"])


def test_unknown_catalog(tmp_path):
    job = write(tmp_path, GOOD.replace("nodus-2026-11", "nodus-2025"))
    bad("solve", job, expect=["unknown catalog 'nodus-2025'", "field 'catalog'", "nodus-2026-11"])


def test_negative_parameters(tmp_path):
    job = write(tmp_path, GOOD.replace("14B", "-14B"))
    bad("solve", job, expect=[str(job), "job.model.params"])


def test_zero_tokens(tmp_path):
    job = write(tmp_path, GOOD.replace("tokens: 1B", "tokens: 0"))
    bad("solve", job, expect=["job.tokens", "greater than 0"])


def test_unparseable_unit_in_file(tmp_path):
    job = write(tmp_path, GOOD + "constraints:\n  deadline: 5 fortnights\n")
    bad("solve", job, expect=["constraints.deadline", "fortnights"])


def test_unparseable_flag(problems):
    bad("solve", problems / "llama-70b-within-5-days.yaml", "--budget", "lots", expect=["--budget", "$20,000"])


def test_contradictory_token_fields(tmp_path):
    job = write(tmp_path, GOOD.replace("tokens: 1B", "tokens: 1B\n  dataset_tokens: 1B\n  epochs: 2"))
    bad("solve", job, expect=["not both"])


def test_active_params_above_total(tmp_path):
    job = write(tmp_path, GOOD.replace("{params: 14B}", "{params: 14B, active_params: 20B}"))
    bad("solve", job, expect=["active_params"])


def test_unknown_field_is_named(tmp_path):
    job = write(tmp_path, GOOD.replace("tokens: 1B", "tokens: 1B\n  tokenz: 1B"))
    bad("solve", job, expect=["job.tokenz", "unknown field"])


def test_more_tp_than_gpus_per_node(problems):
    bad(
        "check",
        problems / "llama-70b-within-5-days.yaml",
        "--sku",
        "B200",
        "--gpus",
        "8",
        "--tp",
        "16",
        expect=["--tp", "inside a node"],
    )


def test_params_only_needs_shapes_or_reserve(tmp_path):
    job = write(tmp_path, GOOD.replace("  activation_reserve: 0\n", ""))
    bad("solve", job, expect=["job.activation_reserve", "shapes"])


def test_zero_gpus(tmp_path):
    bad("check", write(tmp_path, GOOD), "--sku", "B200", "--gpus", "0", expect=["--gpus"])


def test_gpus_not_divisible_by_nodes(tmp_path):
    bad("check", write(tmp_path, GOOD), "--sku", "B200", "--gpus", "12", "--nodes", "5", expect=["--gpus", "evenly"])


def test_job_file_without_job(tmp_path):
    bad("solve", write(tmp_path, "catalog: default\n"), expect=["'job:'"])


def test_bad_catalog_file(tmp_path, problems):
    cat = write(tmp_path, "offers:\n  - name: x\n    sku: B999\n    price: $1/h\n", name="cat.yaml")
    bad(
        "solve",
        problems / "llama-70b-within-5-days.yaml",
        "--catalog",
        cat,
        expect=["unknown GPU 'B999'", "offers[0].sku"],
    )


def test_negative_price_in_catalog(tmp_path, problems):
    cat = write(tmp_path, "hardware: hardware\noffers:\n  - name: x\n    sku: B200\n    price: -5\n", name="cat.yaml")
    bad(
        "solve",
        problems / "llama-70b-within-5-days.yaml",
        "--catalog",
        cat,
        expect=["offers[0].price", "greater than 0"],
    )


def test_plot_without_matplotlib_fails_before_solving(problems, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    def no_solving(*args, **kwargs):
        raise AssertionError("solved before refusing the plot")

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    monkeypatch.setattr("optimizer.api.plan", no_solving)
    bad("solve", problems / "llama-70b-within-5-days.yaml", "--plot", tmp_path / "f.png", expect=["gpuplan[plot]"])
    assert not (tmp_path / "f.png").exists()


def test_check_takes_the_offer_a_plan_names(tmp_path):
    # A plan names its offer (nodus-b200); check accepts that name and prices the layout on it.
    r = run("check", write(tmp_path, GOOD), "--sku", "nodus-b200", "--gpus", "8", "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["offer"] == "nodus-b200"
    bad("check", write(tmp_path, GOOD), "--sku", "nodus-b20", "--gpus", "1", expect=["Did you mean 'nodus-b200'"])


def test_check_takes_a_plans_offer_with_a_measurement_or_on_spot():
    """A plan names its offer, with " (spot)" on a spot price; check refused the spot name, and, where the
    job has a measurement, any offer name (its comparison looked the name up among the SKUs)."""
    job = "problems/seed-rtx-pro-vs-b200.yaml"
    best = json.loads(run("solve", job, "-f", "json").stdout)["best"]
    mine = run("check", job, "--sku", best["offer"], "--gpus", str(best["gpus"]), "-f", "json")
    assert mine.exit_code == 0, mine.output
    assert json.loads(mine.stdout)["cost_usd"] == best["cost_usd"]
    spot = run(
        "check", "problems/llama-8b-lora.yaml", "--sku", "runpod-rtx-pro-6000 (spot)", "--gpus", "1", "-f", "json"
    )
    assert spot.exit_code == 0, spot.output
    assert json.loads(spot.stdout)["offer"] == "runpod-rtx-pro-6000 (spot)"


@pytest.mark.parametrize(
    ("args", "ends"),
    [
        (["solve", "problems/llama-70b-within-5-days.yaml"], " days)"),  # the line ends "(p90 ... days)"
        (["capacity", "--sku", "B200", "--gpus", "8"], "as check does)"),
        (["solve", "problems/llama-70b-within-5-days.yaml", "--deadline", "2h"], "(deadline binds)."),
    ],
)
def test_quiet_prints_the_whole_answer_on_a_narrow_terminal(args, ends):
    """--quiet printed the first line of the answer wrapped at the terminal's width: at 80 columns the
    plan lost its cost and time, capacity its number; an infeasible solve gave no reason."""
    r = runner.invoke(app, ["-q", *args], env={"COLUMNS": "60"})
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") == 1 and r.stdout.rstrip().endswith(ends), r.stdout


def test_options_says_why_hardware_has_no_row():
    """Megatron runs no QLoRA: options printed an empty table, where solve says what binds."""
    r = run("options", "problems/llama-70b-qlora.yaml", "--framework", "megatron", "-f", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["options"] == [] and "megatron runs no layout" in data["notes"][0] and "QLoRA" in data["notes"][0]


def test_piped_tables_keep_each_row_on_one_line(problems):
    """Piped output is as wide as its tables: at a fixed width (160 columns) the portfolio's schedule table
    (195 columns) would squeeze its cells and wrap a strategy such as 'megatron: TP 2, PP 4, ZeRO-1 DP 2, ...'
    over two lines, and a line of the output would no longer hold one job for grep or a script."""
    r = run("portfolio", problems / "portfolio-q1-finetunes.yaml", "--time-limit", "5")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("└"))
    rows = [line for line in lines[top:bottom] if line.startswith("│")]
    jobs = [line.split("│")[1].strip() for line in rows]
    assert all(jobs) and len(jobs) == len(set(jobs)), rows
    assert len({len(line) for line in lines[top : bottom + 1]}) == 1
    assert max(len(line) for line in lines[top : bottom + 1]) > 160


def test_quiet_options_prints_an_answer_not_a_table_title():
    """gpuplan -q options printed only 'Every hardware option with its best strategy', the table's title."""
    job = "problems/llama-70b-within-5-days.yaml"
    data = json.loads(run("options", job, "-f", "json").stdout)
    feasible = sum(o["feasible"] for o in data["options"])
    r = runner.invoke(app, ["-q", "options", job])
    assert r.exit_code == 0 and r.stdout.count("\n") == 1, r.stdout
    assert r.stdout.startswith(f"{len(data['options'])} hardware options, {feasible} feasible; rejected by memory")


def test_the_frontier_chart_holds_a_chosen_plan_the_frontier_does_not_reach(problems):
    """A frontier the time limit cut short can stop before the chosen plan: the chart placed '@' below its
    last row and crashed (IndexError, exit 1) on a catalog with 1,024 nodes under --time-limit 2."""
    from optimizer import load_job, plan
    from optimizer.present.render import frontier_chart

    result = plan(load_job(problems / "llama-70b-within-5-days.yaml"))
    assert result.best is not None and len(result.frontier) >= 2
    cheap = result.best.cost_usd.model_copy(update={"p50": result.best.cost_usd.p50 / 2})
    result.best = result.best.model_copy(update={"cost_usd": cheap})  # far below the frontier's cheapest point
    chart = frontier_chart(result)
    assert chart is not None and "@" in chart


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "problems/llama-70b-within-5-days.yaml"],
        ["check", "problems/seed-100b-one-node.yaml", "--sku", "B300", "--gpus", "8"],
        ["options", "problems/llama-70b-within-5-days.yaml"],
        ["capacity", "--sku", "B200", "--gpus", "8"],
        ["portfolio", "problems/portfolio-q1-finetunes.yaml", "--time-limit", "5"],
    ],
)
def test_quiet_after_the_command_as_before_it(args):
    """'gpuplan solve job.yaml -q' answers as 'gpuplan -q solve job.yaml' does."""
    before = runner.invoke(app, ["-q", *args])
    after = runner.invoke(app, [*args, "-q"])
    assert before.exit_code == after.exit_code == 0, after.output
    assert after.stdout.count("\n") == 1
    # a portfolio's status word is the clock's: within 5 s on a busy machine one run proves the schedule optimal
    # and the other stops at a 0.00 % gap; the schedule after it is the same
    assert after.stdout.split(": ", 1)[-1] == before.stdout.split(": ", 1)[-1]


def test_a_check_that_host_memory_fails_says_so(tmp_path):
    """Llama 3.1 405B with its optimizer state offloaded to 2 nodes of 8 B200: 124 of 179 GiB a GPU, but 2,268
    GiB of state a server against its 2 TB. The verdict said DOES NOT FIT with 55 GiB of headroom and no reason."""
    job = write(
        tmp_path,
        """
        job: {model: llama-3.1-405b, method: full, tokens: 1B, seq_len: 4096, offload: optimizer}
        """,
    )
    r = run("check", job, "--sku", "B200", "--gpus", "16")
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first.startswith("DOES NOT FIT") and "headroom" in first
    assert "CPU memory per host, above its 1,862.6 GiB (assumptions.host_memory_per_node)" in " ".join(r.output.split())


def test_a_portfolio_writes_progress_to_a_piped_stderr(problems, monkeypatch):
    """portfolio writes progress where stderr is not a terminal (a CI log), a line at most every few seconds and
    the first at once, so that a long run is never silent until it ends."""
    from optimizer.cli import portfolio

    monkeypatch.setattr(portfolio, "PIPED_PROGRESS_EVERY_S", 0.0)  # every line, so the test need not wait
    r = run("portfolio", problems / "portfolio-q1-finetunes.yaml", "--time-limit", "5")
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines and all(" s  " in line for line in lines), r.stderr
    assert any("options" in line for line in lines)


def test_the_export_help_names_every_registered_kind():
    """The --export help is prose kept beside the exports registry: it must name each kind the registry has."""
    from optimizer.cli_options import ExportOpt
    from optimizer.present.exports import KINDS

    assert all(kind in ExportOpt.help for kind in KINDS), ExportOpt.help


@pytest.mark.parametrize("command", [[], ["solve"], ["check"], ["options"], ["portfolio"], ["capacity"], ["serve"]])
def test_help_fits_eighty_columns_without_cutting_a_word(command):
    """--help at 80 columns: every line within 80, no option's help cut to an ellipsis (rich's option panels cut
    'meta-llama/Llama-3.1-8B' to 'meta-llama/Llama…' in a column 30 wide)."""
    r = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    assert all(len(line) <= 80 for line in r.output.splitlines()), r.output
    assert "…" not in r.output
