"""The leave-one-family-out figures of bench/throughput.py by GPU generation and by framework family (issue 48,
done when: "at most 15 % within each GPU generation (A100, H100/H200, Blackwell) and each framework family
(Megatron, FSDP/torchtitan, DeepSpeed, Hugging Face), every row within 1.5x").

Each row's held-out prediction (``_lofo``: every fitted term refitted without its source family) is grouped by
its GPU's generation (physics/efficiency.family_of) and by the stack it ran on: Megatron-Core (Megatron-LM,
NeMo, Megatron-Bridge), PyTorch FSDP and torchtitan (FSDP2 with or without TP/PP; the HF Trainer / accelerate
rows with FSDP), DeepSpeed (the HF Trainer / accelerate rows with DeepSpeed); and the rows of the families that
train transformers' modules through its Trainer or accelerate (validation/families.yaml ``stack: hugging-face``)
once more as Hugging Face's, whichever of FSDP or DeepSpeed ran underneath.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import yaml

FAMILIES = Path(__file__).resolve().parent.parent / "validation" / "families.yaml"
HUGGING_FACE = "Hugging Face (Trainer / accelerate)"

STACKS = {
    "megatron": "Megatron-Core",
    "fsdp": "FSDP / torchtitan",
    "torchtitan": "FSDP / torchtitan",
    "deepspeed": "DeepSpeed",
}


def _errors(rows: list[dict]) -> tuple[float, float]:
    """(median |error|, worst ratio) of the rows' held-out predictions."""
    errors = [r["_lofo"] / r["tokens_per_s_per_gpu"] - 1 for r in rows if r.get("_lofo") is not None]
    ratio = max(max(1 + e, 1 / (1 + e)) for e in errors)
    return statistics.median(abs(e) for e in errors), ratio


def hugging_face_families() -> frozenset[str]:
    """The source families whose runs train transformers' modules through its Trainer or accelerate."""
    families = yaml.safe_load(FAMILIES.read_text())["families"]
    return frozenset(name for name, f in families.items() if f.get("stack") == "hugging-face")


def groups(rows: list[dict], generation_of) -> dict[str, list[dict]]:
    """Rows by GPU generation and by stack, dense and MoE apart; a Hugging Face family's rows under its stack too."""
    out: dict[str, list[dict]] = {}
    hugging_face = hugging_face_families()
    for r in rows:
        if r.get("_lofo") is None:
            continue
        kind = "MoE" if r["kind"] == "moe" else "dense"
        out.setdefault(f"{kind} on {generation_of(r)}", []).append(r)
        out.setdefault(f"{kind} on {STACKS.get(r['framework'], r['framework'])}", []).append(r)
        if r["family"] in hugging_face:
            out.setdefault(f"{kind} on {HUGGING_FACE}", []).append(r)
    return out


def print_groups(rows: list[dict], generation_of) -> dict[str, tuple[float, float]]:
    """Prints the held-out median and worst ratio per group; returns them."""
    print("\nLeave one family out by GPU generation and by framework family (gpuplan held out):")
    out = {}
    for name, members in sorted(groups(rows, generation_of).items()):
        median, ratio = _errors(members)
        families = len({r["family"] for r in members})
        print(f"  {name:<46} {len(members):>4} rows of {families:>2} families: median {median:.1%}, worst {ratio:.2f}x")
        out[name] = (median, ratio)
    return out
