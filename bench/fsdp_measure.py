"""Measure real training steps of a small Llama-style model under PyTorch FSDP: peak memory and tokens/s.

Runs where PyTorch is (the device machine has it; gpuplan itself is not needed there) and writes JSON
for ``bench/fsdp_compare.py``, which puts gpuplan's predictions beside it:

    python3 bench/fsdp_measure.py --out measured.json            # on the GPU machine
    python bench/fsdp_compare.py measured.json                    # here: predicted vs measured

The model is written out here (RMSNorm, grouped-query attention through scaled_dot_product_attention,
SwiGLU MLP, untied embeddings) so that its shapes are exactly what gpuplan is told. FSDP2
(``fully_shard``) with bf16 compute and fp32 sharded parameters, gradients and AdamW state (16 bytes
per parameter, as gpuplan counts), one process per GPU; each configuration varies micro-batch and
activation recompute. On a CPU (no CUDA) it runs a tiny configuration to check the code path.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, 1e-5)


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.attn_norm, self.mlp_norm = RMSNorm(hidden), RMSNorm(hidden)
        self.q = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, layers, hidden, heads, kv_heads, ffn, vocab, recompute: bool):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.recompute = recompute

    def forward(self, tokens, targets):
        x = self.embed(tokens)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.recompute else block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def run(cfg: dict, micro_batch: int, recompute: bool, steps: int, device: torch.device) -> dict:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    model = Model(cfg["layers"], cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["ffn"], cfg["vocab"], recompute)
    params = sum(p.numel() for p in model.parameters())
    model.to(device)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, cfg["vocab"], (micro_batch, cfg["seq"]), device=device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
    times = []
    for step in range(steps + 3):
        t0 = time.perf_counter()
        loss = model(tokens, tokens)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= 3:  # warm-up: allocator, kernels, optimizer state
            times.append(time.perf_counter() - t0)
    step_s = sorted(times)[len(times) // 2]
    out = {
        "micro_batch": micro_batch,
        "recompute": "full" if recompute else "none",
        "params": params,
        "step_s": step_s,
        "tokens_per_s": micro_batch * cfg["seq"] / step_s,
    }
    if device.type == "cuda":
        out["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        out["gpu"] = torch.cuda.get_device_name()
    del model, opt
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="fsdp_measured.json")
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    # A 1.3B-parameter Llama-shaped model on the GPU; a tiny one on a CPU (code-path check only).
    cfg = (
        dict(layers=24, hidden=2048, heads=16, kv_heads=4, ffn=5632, vocab=32000, seq=4096)
        if cuda
        else dict(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=256, seq=32)
    )
    settings = [(1, False), (2, False), (4, False), (4, True), (8, True)] if cuda else [(1, False), (2, True)]
    results = []
    for micro_batch, recompute in settings:
        try:
            results.append(run(cfg, micro_batch, recompute, args.steps if cuda else 2, device))
        except torch.OutOfMemoryError:
            results.append({"micro_batch": micro_batch, "recompute": "full" if recompute else "none", "oom": True})
        if cuda:
            torch.cuda.empty_cache()
        print(json.dumps(results[-1]), flush=True)
    with open(args.out, "w") as f:
        json.dump({"model": cfg, "results": results, "torch": torch.__version__}, f, indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
