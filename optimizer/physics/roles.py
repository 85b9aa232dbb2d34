"""Throughput of a job whose GPUs split between roles: frozen models producing, a trained model consuming.

Pure functions over floats (issue 52, docs/roles.md). A role job is a pipeline: ``producers`` GPUs each run a
frozen model's forward pass (a speculative-decoding target, a distillation teacher) and hand per-token
tensors (hidden states) over a link to ``consumers`` GPUs that train a model (the drafter, the student). With
queues between them (the seed's asynchronous pipeline) every stage runs at once and the slowest one sets
the pace, as in any pipeline of queues (Little's law / the bottleneck of a tandem line):

    tokens/s = min(producers' rate, consumers' rate, link rate)

Sources, formula by formula:
- Forward FLOPs per token: 2 N_a + 4 L_a w s, the forward third of PaLM's 6 N + 12 L h s (Chowdhery et al.
  2022, appendix B); N_a active parameters, L_a the layers with softmax attention (a hybrid model's linear /
  Gated DeltaNet layers have none of the s-long score matmuls), w the attention width, s the keys per query.
- Forward time of a batch on one GPU, roofline (Williams, Waterman & Patterson 2009): the larger of its
  FLOPs at a share (MFU) of the peak and its HBM bytes (the weights, read once per batch) over bandwidth.
- A memory-bound kernel's MFU moved to another GPU: at arithmetic intensity I below the ridge (peak / HBM
  bandwidth) a kernel reaches I x bandwidth, a share I / ridge of the peak; on a GPU with another ridge the
  same kernel reaches I / ridge' (Williams et al. 2009), so MFU' = MFU x ridge / ridge'.
- The training role: gpuplan's own step time (physics/time.py ``step_time``, docs/design.md section 5), its
  tokens being the trained model's; a drafter that trains on a share of the target's tokens (DFlash's
  anchor blocks) and projects every target token's hidden states (its context) converts them here.
- Bytes per token between roles: hidden states of N layers x hidden x 2 bytes (bf16).
- Links: a peer copy over NVLink at one direction of the vendor's bidirectional figure (docs/design.md
  section 5.3); without peer-to-peer the tensor bounces through host memory, two PCIe hops (GPU to host, host
  to GPU) at one direction of the slot's bandwidth each (PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes, 128b/130b),
  both times an achieved-bandwidth efficiency. A batch waits one hop per hop (its latency); the rate is
  each GPU's own link at once, the busier side's links setting it.
- Roles on two nodes (a split across two offers, each role on its own SKU): the tensor crosses the scale-out
  network, each GPU through its own NIC (GPUDirect RDMA, one hop), at the catalog's per-GPU network bandwidth
  (one direction) times the same efficiency, as physics/links.py ``Links.net`` counts it for collectives; the
  producers send on theirs and the consumers receive on theirs, so the side whose NICs carry less sets the
  rate. NVLink joins only the GPUs of one node: two nodes never share it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layout import Cluster, Layout, RunSettings
from .shapes import ModelShape, TrainingState
from .time import step_time

# One direction of a PCIe 5.0 x16 slot: 32 GT/s per lane x 16 lanes x 128/130 encoding / 8 bits (PCI-SIG, PCI
# Express Base Specification 5.0), 63.0 GB/s.
PCIE_GEN5_X16_BYTES_PER_S = 32e9 * 16 * 128 / 130 / 8
# Hidden states cross between roles in bf16 (the target's activation dtype).
HIDDEN_STATE_BYTES_PER_VALUE = 2.0
# Hops of a host bounce: the producer's GPU to pinned host memory, host memory to the consumer's GPU.
HOST_BOUNCE_HOPS = 2
PEER_HOPS = 1

BINDING_ORDER = ("producers", "consumers", "link")  # what binds, in the order ties go


def forward_flops_per_token(
    active_params: float, attention_layers: float, attention_width: float, keys_per_query: float
) -> float:
    """2 N_a + 4 L_a w s: one forward pass (PaLM appendix B's 6 N + 12 L h s is forward + backward, 1 : 2)."""
    return 2.0 * active_params + 4.0 * attention_layers * attention_width * keys_per_query


def forward_tokens_per_s(
    flops_per_token: float,
    peak_flops_per_s: float,
    mfu: float,
    weight_bytes: float,
    batch_tokens: float,
    hbm_bytes_per_s: float,
) -> float:
    """One GPU's forward rate: a batch takes max(FLOPs / (peak x MFU), weights / HBM bandwidth) (roofline)."""
    compute_s = batch_tokens * flops_per_token / (peak_flops_per_s * mfu)
    memory_s = weight_bytes / hbm_bytes_per_s
    return batch_tokens / max(compute_s, memory_s)


def ridge_flops_per_byte(peak_flops_per_s: float, hbm_bytes_per_s: float) -> float:
    """The roofline's ridge point: FLOPs per byte of HBM traffic where a kernel stops being memory-bound."""
    return peak_flops_per_s / hbm_bytes_per_s


def moved_mfu(mfu: float, ridge_from: float, ridge_to: float) -> float:
    """A memory-bound kernel's MFU on a GPU of ridge ``ridge_to``, measured at ``mfu`` on one of ``ridge_from``:
    MFU = I / ridge below the ridge (Williams et al. 2009), so it scales as ridge_from / ridge_to, at most 1."""
    return min(1.0, mfu * ridge_from / ridge_to)


def hidden_state_bytes_per_token(layers: float, hidden: float) -> float:
    """Bytes one token's hidden states take: N layers x hidden x 2 (bf16)."""
    return layers * hidden * HIDDEN_STATE_BYTES_PER_VALUE


def peer_link_bytes_per_s(intra_node_bidirectional_bytes_per_s: float, link_efficiency: float) -> float:
    """A peer copy's bandwidth: one direction of the vendor's bidirectional NVLink figure, times efficiency."""
    return intra_node_bidirectional_bytes_per_s / 2.0 * link_efficiency


def host_link_bytes_per_s(link_efficiency: float, pcie_bytes_per_s: float = PCIE_GEN5_X16_BYTES_PER_S) -> float:
    """One PCIe hop of a host bounce: one direction of the GPU's slot, times efficiency."""
    return pcie_bytes_per_s * link_efficiency


def network_link_bytes_per_s(network_bytes_per_s: float, link_efficiency: float) -> float:
    """One GPU's share of the scale-out network, one direction, times efficiency (physics/links.py ``Links.net``)."""
    return network_bytes_per_s * link_efficiency


def network_tokens_per_s(
    bytes_per_token: float,
    producer_bytes_per_s: float,
    producers: int,
    consumer_bytes_per_s: float,
    consumers: int,
) -> float:
    """Tokens per second crossing between two nodes: the producers send on their NICs, the consumers receive on
    theirs, all at once; the side whose NICs carry less in all sets the rate."""
    return min(producers * producer_bytes_per_s, consumers * consumer_bytes_per_s) / bytes_per_token


def transfer_s(tokens: float, bytes_per_token: float, link_bytes_per_s: float, hops: int) -> float:
    """Time one batch of ``tokens`` takes to cross: its bytes over the link, once per hop (store and forward)."""
    return hops * tokens * bytes_per_token / link_bytes_per_s


def link_tokens_per_s(bytes_per_token: float, link_bytes_per_s: float, producers: int, consumers: int) -> float:
    """Tokens per second the links carry: every GPU sends or receives on its own link at once (PCIe slot or
    NVLink port), so the side with fewer GPUs (one drafter receiving from every target) sets the rate; a
    host bounce's two hops run on different slots and overlap across batches."""
    return min(producers, consumers) * link_bytes_per_s / bytes_per_token


def train_target_tokens_per_s(
    shape: ModelShape,
    train: TrainingState,
    hw: Cluster,
    layout: Layout,
    settings: RunSettings,
    trained_tokens_per_target_token: float,
    context_flops_per_target_token: float,
) -> float:
    """Target tokens per second a training role keeps up with on ``layout``'s GPUs: gpuplan's step time
    (physics/time.py) for the tokens it trains on, ``trained_tokens_per_target_token`` of them per target
    token, plus its per-target-token context work (DFlash's projection of every context token's hidden states)
    at the same efficiency."""
    step = step_time(shape, train, hw, layout, settings)
    trained_tokens_per_s = float(step.tokens_per_s)
    gpus = float(layout.tp) * float(layout.pp) * float(layout.dp) * float(layout.cp)
    context_s = context_flops_per_target_token / (float(hw.peak_flops) * float(hw.compute_efficiency) * gpus)
    return 1.0 / (trained_tokens_per_target_token / trained_tokens_per_s + context_s)


@dataclass(frozen=True)
class PipelineRate:
    """The rate of each stage of a two-role pipeline and of the whole, in target tokens per second."""

    producer_tokens_per_s: float
    consumer_tokens_per_s: float
    link_tokens_per_s: float

    @property
    def tokens_per_s(self) -> float:
        return min(self.producer_tokens_per_s, self.consumer_tokens_per_s, self.link_tokens_per_s)

    @property
    def binding(self) -> str:
        """Which stage sets the pace: producers, consumers or link (the first of equal ones)."""
        rates = (self.producer_tokens_per_s, self.consumer_tokens_per_s, self.link_tokens_per_s)
        return BINDING_ORDER[rates.index(min(rates))]

    def utilisation(self, stage: str) -> float:
        """Share of its time a stage is busy: the pipeline's rate over the stage's own."""
        rate = dict(
            zip(BINDING_ORDER, (self.producer_tokens_per_s, self.consumer_tokens_per_s, self.link_tokens_per_s))
        )
        return self.tokens_per_s / rate[stage]


def pipeline_rate(
    producer_tokens_per_s_per_gpu: float,
    producers: int,
    consumer_tokens_per_s: float,
    link_tokens_per_s_total: float,
) -> PipelineRate:
    """Producers are independent replicas of the frozen model (each holds all of it), so their rate adds."""
    return PipelineRate(
        producer_tokens_per_s=producers * producer_tokens_per_s_per_gpu,
        consumer_tokens_per_s=consumer_tokens_per_s,
        link_tokens_per_s=link_tokens_per_s_total,
    )
