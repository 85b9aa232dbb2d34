"""Optimizer offload (ZeRO-Offload): the optimizer state leaves the GPU for CPU memory, at the price
of PCIe transfers and a CPU Adam step; the host's memory bounds it."""

import json

import numpy as np
import pytest

from optimizer import CheckRequest, check, load_job
from optimizer.inputs.schema import JobSpec, ModelSpec
from optimizer.physics.layout import Cluster, Layout, Offload, RunSettings
from optimizer.physics.shapes import ModelShape
from optimizer.physics.time import step_time
from optimizer.planning.model_state import training_state
from optimizer.present.exports import export


@pytest.fixture
def llama70b(problems):
    return load_job(problems / "llama-70b-within-5-days.yaml")


def test_offload_makes_a_70b_full_fine_tune_fit_one_h100_node(llama70b):
    # 70.55B x 16 bytes = 1,129 GB of state against 8 x 80 GB: no layout fits without offload ...
    assert not check(llama70b, CheckRequest("H100", 8, compare=False)).fits
    # ... with the 12 bytes/param optimizer state in CPU memory (846 GB of the node's 2 TB) it does.
    plan = check(llama70b, CheckRequest("H100", 8, offload="optimizer", compare=False)).plan
    assert plan.fits and plan.strategy.offload == "optimizer" and plan.memory_gib.optimizer == 0.0


def test_host_memory_bounds_offload(llama70b):
    small_host = llama70b.model_copy(
        update={"assumptions": llama70b.assumptions.model_copy(update={"host_memory_per_node_bytes": 500e9})}
    )
    assert not check(small_host, CheckRequest("H100", 8, offload="optimizer", compare=False)).fits  # 846 GB > 500 GB


def test_offload_costs_time_by_hand():
    shape = ModelShape(params=70e9, active_params=70e9)
    train = training_state(JobSpec(model=ModelSpec(params=70e9), tokens=1e9), shape)
    hw = Cluster(
        **{
            k: np.asarray(v, float)
            for k, v in dict(
                peak_flops=2.25e15,
                hbm_bytes_per_s=8e12,
                intra_bytes_per_s=1.8e12,
                network_bytes_per_s=50e9,
                gpus_per_node=8,
                compute_efficiency=0.5,
            ).items()
        },
        host_link_bytes_per_s=25e9,
        host_memory_bytes_per_s=20e9,
    )
    layout = dict(dp=8, zero=3, shard=8)
    settings = RunSettings(seq_len=4096)
    on_gpu = step_time(shape, train, hw, Layout(**layout), settings)
    offloaded = step_time(shape, train, hw, Layout(**layout, offload=Offload.OPTIMIZER), settings)
    # per step each GPU moves 2 + 2 bytes per local parameter over PCIe (25 GB/s) and streams
    # 2 x (12 + 4) bytes per local parameter through host memory (20 GB/s), instead of its GPU update:
    # 2 x (12 + 2 + 2) bytes per local parameter through HBM (8 TB/s)
    local = 70e9 / 8
    expected = 4 * local / 25e9 + 32 * local / 20e9 - 32 * local / 8e12
    assert float(offloaded.step_s - on_gpu.step_s) == pytest.approx(expected)


def test_auto_offload_only_when_it_pays(llama70b):
    auto = llama70b.model_copy(update={"job": llama70b.job.model_copy(update={"offload": "auto"})})
    assert (
        check(auto, CheckRequest("B200", 16, compare=False)).plan.strategy.offload == "none"
    )  # fits on GPU: faster there
    assert (
        check(auto, CheckRequest("H100", 8, compare=False)).plan.strategy.offload == "optimizer"
    )  # the only way to fit


def test_deepspeed_export_offloads(llama70b):
    plan = check(llama70b, CheckRequest("H100", 8, offload="optimizer", compare=False)).plan
    assert json.loads(export(plan, "deepspeed"))["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
