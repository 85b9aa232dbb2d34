"""Sentences for people, written from typed results: why a problem is infeasible and by how much, why a
portfolio job was dropped, how a configuration compares with a measured one.

The solver and planning layers return data (binding constraint families, candidate rows, ratios); this
package is the one place that turns them into the ``detail`` and ``summary`` strings of the output: one
job's infeasibility (``infeasible``), a portfolio's and its dropped jobs' (``portfolio``), and the notes
under an answer (``notes``).
"""

from __future__ import annotations

from .infeasible import (
    TOGETHER,
    filter_infeasibility,
    framework_reason,
    infeasibility,
)
from .notes import (
    LIMIT_YEARS,
    added_sentence,
    aeons_notes,
    batch_notes,
    calibration_note,
    check_notes,
    export_label_note,
    fix_notes,
    measured_summary,
    measurement_notes,
    moe_notes,
    outside_search_notes,
    plan_notes,
    precision_notes,
    recompute_note,
    spot_note,
)
from .portfolio import (
    drop_reason,
    earliest_ends,
    fill_drop_reasons,
    no_option,
    portfolio_infeasibility,
)

__all__ = [
    "LIMIT_YEARS",
    "TOGETHER",
    "added_sentence",
    "aeons_notes",
    "batch_notes",
    "calibration_note",
    "check_notes",
    "drop_reason",
    "earliest_ends",
    "export_label_note",
    "fill_drop_reasons",
    "filter_infeasibility",
    "fix_notes",
    "framework_reason",
    "infeasibility",
    "measured_summary",
    "measurement_notes",
    "moe_notes",
    "no_option",
    "outside_search_notes",
    "plan_notes",
    "portfolio_infeasibility",
    "precision_notes",
    "recompute_note",
    "spot_note",
]
