"""The command a launcher runs: the plan's framework export's, or ``train.py`` reading the layout.

A launcher (Slurm, SkyPilot) starts torchrun on each host; what torchrun runs is the command of the export
named by the plan's framework (``Launcher.command``: Megatron-LM's ``pretrain_gpt.py`` with the same flags as
the megatron export, torchtitan's trainer on the torchtitan export's TOML), so that every export of one plan
starts the same run. Where that framework has no export with a command (DeepSpeed, FSDP), or its export
cannot write the plan, ``train.py`` reads the layout from the environment (``torchrun.layout_env``).
``write_files`` writes a command's files from the launcher's script (a quoted here-document, which expands
nothing), ``export_env`` its environment. Read back by tests/exports/test_exports_run.py (the Slurm and SkyPilot
tests).
"""

from __future__ import annotations

import shlex

from ...results import Plan
from . import megatron, torchtitan
from .common import Command, ExportJob
from .gaps import export_gaps
from .torchrun import layout_env

# the framework exports whose command a launcher runs for a plan of that framework (Launcher.command)
FRAMEWORK_LAUNCHERS = {launcher.kind: launcher for launcher in (megatron.LAUNCHER, torchtitan.LAUNCHER)}
# the end of a here-document that writes a framework's file (no line of an export is this word: each is a
# comment, a TOML table or key, or empty)
HEREDOC_END = "GPUPLAN_EOF"


def framework_command(plan: Plan, job: ExportJob) -> tuple[Command, list[str]]:
    """The command the plan's framework export runs (``Launcher.command``), or ``train.py`` reading the layout
    from the environment where the framework has no export that writes this plan; and the header's lines."""
    framework = plan.strategy.framework
    launcher = FRAMEWORK_LAUNCHERS.get(framework)
    if launcher is not None and launcher.command is not None and not export_gaps(plan, launcher, job):
        run = launcher.command(plan, job)
        lines = [f"runs the {framework} export's command (gpuplan solve --export {framework} writes the same)"]
        lines += [
            f"{name}: the {framework} export, written by this script beside it (fill in its placeholders here)"
            for name in run.files
        ]
        return run, lines
    target = Command(["train.py"], env=layout_env(plan))
    why = (
        "gpuplan has no launch command for it" if launcher is None else f"the {framework} export cannot write this plan"
    )
    return target, [f"train.py reads the layout from the environment ({framework}: {why})"]


def write_files(run: Command) -> str:
    """Shell lines that write the command's files beside the script, each as a quoted here-document."""
    return "".join(f"cat > {name} <<'{HEREDOC_END}'\n{text}{HEREDOC_END}\n" for name, text in run.files.items())


def export_env(run: Command) -> str:
    """A shell line exporting the command's environment (empty without one)."""
    return f"export {' '.join(f'{k}={shlex.quote(v)}' for k, v in run.env.items())}\n" if run.env else ""
