"""One step of RL post-training (GRPO) as its frameworks run it: generate, score, train, resync (issue 52).

Pure functions over floats (docs/roles.md, GRPO). A step takes a batch of prompts, generates ``samples`` responses
to each (the rollout: physics/decode.py), runs forward passes over the finished sequences (the reference model's
log-probabilities for the KL term and the policy's own, recomputed, for the importance ratio), trains the policy
on them (gpuplan's ``step_time``) and hands the new weights to the rollout engines. Sources:

- The stages and their order: GRPO (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300, section 4.1: the old
  policy samples G outputs a question, the reference model's KL term); verl's trainer loop (HybridFlow, Sheng et
  al. 2024, arXiv:2409.19256; ``verl/trainer/ppo/ray_trainer.py`` ``fit``: ``generate_sequences``, then
  ``compute_log_prob`` (old log-probs recomputed) and ``compute_ref_log_prob``, then ``update_actor``).
- Colocated (HybridFlow's default placement, verl's ``actor_rollout_ref`` worker; NeMo RL ``colocated``): every
  GPU generates, then scores, then trains, then reshards the trained weights into the engine's layout, one after
  another, so the step takes their sum (HybridFlow section 5, the 3D-HybridEngine's resharding).
- Resharding: an all-gather of the weights over the GPUs that hold them, each rank receiving (n - 1) / n of the
  bytes (ring all-gather, Thakur, Rabenseifner & Gropp 2005; NCCL's ring algorithm).
- Colocated, the switch between roles: the engine sleeps while the trainer runs and wakes for the rollout;
  vLLM's sleep mode level 1 "offloads model weights" to CPU memory and discards the KV cache, and waking copies
  them back (vLLM docs, Sleep Mode; NeMo RL and verl call it every step), and the trainer moves its optimizer
  state out of GPU memory for the rollout and back for training (NeMo RL examples/configs/grpo_math_1B.yaml:
  "colocated generation will always offload optimizer to cuda before refit"; verl's ``optimizer_offload``).
  Each crosses the GPU's host link twice, one direction at a time (physics/roles.py: PCIe 5.0 x16).
- Disaggregated (OpenRLHF, Hu et al. 2024, arXiv:2405.11143, section 3: vLLM engines on their own GPUs, the
  trained weights broadcast to them over NCCL after each update): synchronous, the rollout GPUs wait for the
  training and the training for the rollout, so the step is still the sum (on fewer GPUs each); asynchronous with
  a staleness of at least one step (verl's one-step-off-policy recipe; AReaL, Fu et al. 2025,
  arXiv:2505.24298, its staleness bound; NeMo RL's ``max_trajectory_age_steps``) the two sides overlap and the
  slower sets the pace: a step takes max(generate + weight load, forward + train).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .roles import PipelineRate

Placement = Literal["colocated", "disaggregated"]
STAGES = ("rollout", "train", "sync")  # what binds, in the order ties go


def all_gather_s(total_bytes: float, ranks: int, link_bytes_per_s: float) -> float:
    """A ring all-gather of ``total_bytes`` over ``ranks``: each rank receives (n - 1) / n of them (Thakur et al.
    2005)."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) / ranks * total_bytes / link_bytes_per_s


def host_round_trip_s(bytes_per_gpu: float, host_link_bytes_per_s: float) -> float:
    """``bytes_per_gpu`` out to host memory and back over each GPU's own host link, all GPUs at once."""
    return 2.0 * bytes_per_gpu / host_link_bytes_per_s


def broadcast_s(total_bytes: float, link_bytes_per_s: float) -> float:
    """A pipelined broadcast (NCCL's ring/tree in chunks): the bytes cross each receiver's link once."""
    return total_bytes / link_bytes_per_s


@dataclass(frozen=True)
class RlStep:
    """One GRPO step's stages in seconds, and the tokens (prompt + response, every sample) it processes."""

    tokens: float
    generate_s: float  # the rollout: prefill and decode of every sample
    forward_s: float  # reference and recomputed log-probabilities over the finished sequences
    train_s: float  # the policy's update on them
    sync_s: float  # the trained weights into the rollout engines
    placement: Placement
    asynchronous: bool = False  # disaggregated only: rollout of step k + 1 overlaps training of step k
    switch_s: float = 0.0  # colocated: the engine's weights and the trainer's optimizer state out and back

    @property
    def rollout_s(self) -> float:
        """The rollout side's time a step: generation, and loading the new weights where it waits for them."""
        return self.generate_s

    @property
    def trainer_s(self) -> float:
        return self.forward_s + self.train_s

    @property
    def step_s(self) -> float:
        """Seconds a step: the sum of its stages, or, disaggregated and asynchronous, the slower side."""
        if self.placement == "disaggregated" and self.asynchronous:
            return max(self.generate_s + self.sync_s, self.trainer_s)
        return self.generate_s + self.trainer_s + self.sync_s + self.switch_s

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.step_s

    def stage_s(self, stage: str) -> float:
        return {"rollout": self.generate_s, "train": self.trainer_s, "sync": self.sync_s + self.switch_s}[stage]

    @property
    def binding(self) -> str:
        """The stage taking the most of a step (the first of equal ones)."""
        times = [self.stage_s(s) for s in STAGES]
        return STAGES[times.index(max(times))]


# The pipeline's stage names (physics/roles.py) for a GRPO step's: the rollout produces, the trainer consumes,
# the weight sync is the link between them.
PIPELINE_STAGE = {"rollout": "producers", "train": "consumers", "sync": "link"}


@dataclass(frozen=True)
class RlRate(PipelineRate):
    """A GRPO step as the role answers read a pipeline: each stage's rate is the step's tokens over that
    stage's seconds, the whole the step's tokens over the step's seconds (``RlStep.step_s``), and a stage's
    utilisation the share of the step it is busy."""

    step: RlStep

    @classmethod
    def of(cls, step: RlStep) -> RlRate:
        def rate(seconds: float) -> float:
            return step.tokens / seconds if seconds > 0 else float("inf")

        return cls(rate(step.generate_s), rate(step.trainer_s), rate(step.sync_s + step.switch_s), step)

    @property
    def tokens_per_s(self) -> float:
        return self.step.tokens_per_s

    @property
    def binding(self) -> str:
        return PIPELINE_STAGE[self.step.binding]
