"""Links between GPUs as a step's collectives see them: the achieved bandwidth per GPU inside a node and across
nodes, and the ring algorithms' share of the bytes each GPU sends (Patarasuk & Yuan 2009; NCCL's bus bandwidth
convention: all-reduce 2 (n - 1) / n x bytes, reduce-scatter and all-gather (n - 1) / n x bytes each)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .layout import Cluster


def ring(n) -> np.ndarray:
    """(n - 1) / n: the share of the bytes a ring collective over n ranks moves per rank (1 rank: none)."""
    n = np.asarray(n, float)
    return (n - 1.0) / np.maximum(n, 1.0)


@dataclass(frozen=True)
class Links:
    """Achieved bandwidths per GPU: inside a node per direction, across nodes at the NIC."""

    intra: np.ndarray
    net: np.ndarray
    multi_node: np.ndarray

    @classmethod
    def of(cls, hw: Cluster, link_efficiency: float) -> Links:
        return cls(
            intra=np.asarray(hw.intra_bytes_per_s, float) / 2.0 * link_efficiency,
            net=np.asarray(hw.network_bytes_per_s, float) * link_efficiency,
            multi_node=np.asarray(hw.nodes, float) > 1,
        )

    def spanning(self, group_gpus, gpus_per_node, stride=1.0) -> np.ndarray:
        """The bus bandwidth of a ring collective over the ranks ``stride`` apart among ``group_gpus``
        consecutive ranks. Inside a node: NVLink. Across nodes NCCL runs one ring per channel and spreads
        the channels over the node's NICs (one per GPU, rail-optimised), so a node's traffic leaves through
        every NIC its members own: the group's members per node (g / stride) times the per-GPU network
        bandwidth, at most NVLink's (each member still forwards everything over NVLink)."""
        members = np.maximum(1.0, np.asarray(gpus_per_node, float) / np.asarray(stride, float))
        inter = np.minimum(self.net * members, self.intra)
        return np.where(self.multi_node & (group_gpus > gpus_per_node), inter, self.intra)
