"""The peak of live tensor memory over a piece of PyTorch code (helper for ``test_loss_memory``).

A ``TorchDispatchMode`` sees every tensor an operator returns; each new storage adds its bytes until the storage
is freed (a ``weakref.finalize`` on it), so the running total is what the caching allocator would have
allocated, on the CPU, where ``torch.cuda.max_memory_allocated`` is not available.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveBytes(TorchDispatchMode):
    """``live``: bytes of the storages created under the mode and not freed yet; ``peak``: their maximum."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}

    def _count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key, size = storage.data_ptr(), storage.nbytes()
        if key in self._sizes or size == 0:
            return  # a view of a storage already counted
        self._sizes[key] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self._count(item)
        return out
