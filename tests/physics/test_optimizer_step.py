"""The optimizer step by implementation (physics/optimizer_step.py): torch.optim.AdamW's foreach path makes a pass
over every parameter per operation (torch/optim/adamw.py _multi_tensor_adamw), where a fused kernel reads and writes
each byte once; the step time scales the fused step's traffic by the ratio."""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.optimizer_step import foreach_traffic_ratio


def test_the_foreach_passes_add_up():
    # pure bf16: the parameter 4 passes x 2 B, the moments and the denominator 14 x 2 B, the gradient 2 x 2 B = 40 B,
    # against the fused step's 2 x (4 + 2 + 2) = 16 B
    assert foreach_traffic_ratio("adamw", master_weights=False) == pytest.approx(40 / 16)
    # fp32 master copy: 4 x 4 + 14 x 4 + 2 x 2 + the 16-bit weights written from the master (4 + 2) = 82 B against
    # 2 x (12 + 2 + 2) = 32 B
    assert foreach_traffic_ratio("adamw", master_weights=True) == pytest.approx(82 / 32)
    assert foreach_traffic_ratio("sgd", master_weights=True) == pytest.approx(11 / 5)
    assert foreach_traffic_ratio("adamw8bit", master_weights=True) == 1.0  # bitsandbytes' own kernel


def _step(implementation: str):
    job = {"name": "s", "model": "llama-3.1-8b", "method": "full", "tokens": "1B", "seq_len": 512}
    job |= {"global_batch": 2, "master_weights": False, "optimizer_implementation": implementation}
    problem = Problem.model_validate(expand_models({"job": job}))
    request = CheckRequest("H100", 1, micro_batch=2, recompute="full", compare=False)
    return check(problem, request).plan


def test_a_small_step_pays_the_foreach_passes():
    # one H100, Llama 3.1 8B in pure bf16 at 1,024 tokens a step: the fused update reads and writes 16 B a
    # parameter (8,030,261,248 x 16 B at 3.35 TB/s: 38 ms), foreach 2.5x that
    fused, foreach = _step("fused"), _step("foreach")
    update_s = 8_030_261_248 * 16 / 3.35e12
    assert foreach.step_s - fused.step_s == pytest.approx(1.5 * update_s, rel=0.02)


@pytest.mark.parametrize("implementation", ["fused", "foreach"])
def test_the_answer_says_how_the_step_was_timed(implementation):
    job = {"name": "s", "model": "llama-3.1-8b", "method": "full", "tokens": "1B", "framework": "fsdp"}
    problem = Problem.model_validate(expand_models({"job": job | {"optimizer_implementation": implementation}}))
    notes = check(problem, CheckRequest("H100", 8, zero=3, compare=False)).notes
    said = [n for n in notes if n.startswith("optimizer step:")]
    assert len(said) == 1 and ("foreach, torch.optim.AdamW's default" in said[0]) == (implementation == "foreach")
