"""Input that contradicts itself, or the figures it is checked against, is refused (issue 40).

Every case is a file a user could write whose parts disagree: a mixture of experts without experts, a
latent attention without a latent, a nested config that is no mapping, a SKU name given two definitions,
memory figures a GPU cannot have, a Kubernetes GPU block that says otherwise than the constraints. Each is
refused with exit 2 in one paragraph naming the file, the field (both sides where there are two) and the
fix; none is planned one way or the other without a word.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
from paths import ROOT
from typer.testing import CliRunner

from optimizer import cli, load_catalog, load_job
from optimizer.inputs.hf_models import model_fields, resolve

runner = CliRunner()


def invoke(args: list) -> typing.Any:
    result = runner.invoke(cli.app, [str(a) for a in args])
    assert "Traceback" not in result.output, result.output
    assert result.exit_code != 1, result.output  # exit 1 is for bugs only
    return result


def refused(args: list, *expect: str) -> str:
    """A command that must fail as bad input: exit 2, one paragraph holding every ``expect`` text."""
    result = invoke(args)
    assert result.exit_code == 2, result.output
    text = result.output
    assert text.startswith("error: ") and text.count("\n") == 1, text
    for fragment in expect:
        assert fragment in text, (fragment, text)
    return text


def answered(args: list) -> str:
    result = invoke(args)
    assert result.exit_code == 0, result.output
    return result.output


def write(tmp_path: Path, name: str, content: str | dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(content) if isinstance(content, dict) else content)
    return path


def job_text(model: str = "{params: 14B}", extra: str = "", catalog: str = "nodus-2026-11") -> str:
    return f"catalog: {catalog}\njob:\n  name: c\n  model: {model}\n  tokens: 1B\n  activation_reserve: 0\n{extra}"


# --------------------------------------------------------------------------- 1. a mixture of no experts

MIXTRAL = {
    "model_type": "mixtral",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
}


@pytest.mark.parametrize(
    ("changes", "expect"),
    [
        # planned as a 7.2B dense model (exit 0); transformers' router would pick 2 of none
        ({"num_local_experts": 0}, ["num_local_experts = 0", "num_experts_per_tok = 2", "no experts"]),
        # every Mixtral layer is MoE: 0 experts is no model, whatever the top-k
        ({"num_local_experts": 0, "num_experts_per_tok": None}, ["num_local_experts = 0", "mixtral"]),
        # left out, transformers builds MixtralConfig's 8 experts, where gpuplan counted a dense model
        ({"num_local_experts": None}, ["no num_local_experts", "mixtral"]),
        ({"num_experts_per_tok": 9}, ["num_local_experts = 8", "num_experts_per_tok is 9"]),
    ],
    ids=["zero-experts", "zero-experts-no-top-k", "experts-left-out", "top-k-above-experts"],
)
def test_a_mixture_of_experts_needs_experts(tmp_path, changes, expect):
    cfg = {k: v for k, v in {**MIXTRAL, **changes}.items() if v is not None}
    path = write(tmp_path, "cfg.json", cfg)
    refused(["model", path], "cfg.json", "job.model.hf_config", *expect)


def test_zero_experts_with_a_top_k_is_refused_for_any_architecture(tmp_path):
    cfg = {**MIXTRAL, "model_type": "my_moe", "num_experts": 0, "num_experts_per_tok": 4}
    del cfg["num_local_experts"]
    refused(["model", write(tmp_path, "cfg.json", cfg)], "num_experts = 0", "num_experts_per_tok = 4")


def test_qwen_moe_with_zero_experts_is_the_dense_model_transformers_builds():
    """Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer build a sparse block only where ``num_experts > 0``: 0 is a
    dense model in transformers, so it is counted as one (not refused)."""
    cfg = {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 0,
        "num_experts_per_tok": 8,
        "vocab_size": 1000,
    }
    fields = model_fields(cfg)
    assert "experts" not in fields and "experts_per_token" not in fields


def test_a_dense_architecture_may_carry_an_unused_zero_expert_count(tmp_path):
    cfg = {**MIXTRAL, "model_type": "llama", "num_experts": 0}
    del cfg["num_local_experts"], cfg["num_experts_per_tok"]
    answered(["model", write(tmp_path, "cfg.json", cfg)])


@pytest.mark.parametrize(
    ("model", "expect"),
    [
        ("{params: 14B, experts: 0, experts_per_token: 2}", ["job.model.experts", "at least 1"]),
        ("{params: 14B, experts: 2, experts_per_token: 4}", ["job.model", "experts_per_token (4)", "experts (2)"]),
        ("{params: 14B, experts_per_token: 2}", ["job.model", "experts_per_token is given without experts"]),
        ("{preset: mixtral-8x7b, experts_per_token: 9}", ["job.model", "experts_per_token (9)", "experts (8)"]),
        # dropped without a word by a dense model
        ("{params: 14B, shared_experts: 2}", ["job.model", "shared_experts (2)", "no experts are given"]),
        ("{params: 14B, moe_ffn_hidden: 2048}", ["job.model", "moe_ffn_hidden (2048)", "no experts are given"]),
        ("{params: 14B, dense_layers: 3}", ["job.model", "dense_layers (3)", "no experts are given"]),
    ],
    ids=[
        "zero",
        "top-k-above",
        "top-k-alone",
        "preset-top-k-above",
        "shared-alone",
        "expert-width-alone",
        "dense-alone",
    ],
)
def test_job_file_experts_must_make_a_mixture(tmp_path, model, expect):
    job = write(tmp_path, "job.yaml", job_text(model))
    refused(["solve", job], "job.yaml", *expect)


# --------------------------------------------------------------------------- 2. a latent of no width

DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "vocab_size": 129280,
}


@pytest.mark.parametrize(
    ("changes", "expect"),
    [
        # read as plain attention with heads of 7168 / 128 = 56, the MLA head widths dropped
        ({"kv_lora_rank": 0}, ["kv_lora_rank = 0", "multi-head latent attention", "qk_nope_head_dim 128", "512"]),
        ({"kv_lora_rank": None}, ["no kv_lora_rank", "deepseek_v3", "multi-head latent attention"]),
        # DeepseekV3Attention: q_a_proj is h x q_lora_rank unless q_lora_rank is None
        ({"q_lora_rank": 0}, ["q_lora_rank = 0", "null", "zero-width"]),
        ({"kv_lora_rank": 0, "model_type": "my_mla"}, ["kv_lora_rank = 0", "qk_rope_head_dim 64"]),
    ],
    ids=["kv-rank-zero", "kv-rank-left-out", "q-rank-zero", "kv-rank-zero-other-architecture"],
)
def test_latent_attention_needs_a_latent(tmp_path, changes, expect):
    cfg = {k: v for k, v in {**DEEPSEEK_V3, **changes}.items() if v is not None}
    refused(["model", write(tmp_path, "cfg.json", cfg)], "cfg.json", "job.model.hf_config", *expect)


def test_q_lora_rank_null_is_no_query_compression(tmp_path):
    """DeepSeek-V2-Lite writes ``q_lora_rank: null``: plain q_proj (DeepseekV2Attention), counted so."""
    with_q = resolve({"hf_config": str(write(tmp_path, "a.json", DEEPSEEK_V3))})
    without = resolve({"hf_config": str(write(tmp_path, "b.json", {**DEEPSEEK_V3, "q_lora_rank": None}))})
    assert with_q["q_lora_rank"] == 1536 and "q_lora_rank" not in without
    assert without["head_dim"] == with_q["head_dim"] == 192 and without["kv_lora_rank"] == 512


def test_job_file_q_lora_rank_needs_kv_lora_rank(tmp_path):
    job = write(tmp_path, "job.yaml", job_text("{params: 14B, q_lora_rank: 1536}"))
    refused(["solve", job], "job.yaml", "job.model", "q_lora_rank (1536) is given without kv_lora_rank")


# --------------------------------------------------------------------------- 3. a nested config that is no mapping


@pytest.mark.parametrize("value", [5, [1, 2], "text", True], ids=["number", "list", "string", "boolean"])
def test_text_config_must_be_an_object(tmp_path, value):
    cfg = {"model_type": "llava", "text_config": value, "vocab_size": 32000}
    text = refused(["model", write(tmp_path, "cfg.json", cfg)], "cfg.json", "job.model.hf_config", "text_config")
    assert "must be an object" in text and "hidden_size" not in text.split(";")[0]


def test_text_config_via_a_job_file(tmp_path):
    write(tmp_path, "cfg.json", {"model_type": "llava", "text_config": 5, "vocab_size": 32000})
    job = write(tmp_path, "job.yaml", job_text("{hf_config: cfg.json}"))
    refused(["solve", job], "cfg.json", "job.model.hf_config", "text_config", "must be an object")


# --------------------------------------------------------------------------- 4. one SKU name, one definition

SKU_80GB = "{name: B200, memory: 80GB, hbm_bandwidth_gb_per_s: 3000, dense_bf16_tflops: 900, intra_node_bandwidth_gb_per_s: 900}"


@pytest.mark.parametrize(
    ("files", "where", "expect"),
    [
        # the bundled B200 (180 GB) replaced by an 80 GB one without a word
        (
            {
                "cat.yaml": f"hardware: hardware\nskus:\n  - {SKU_80GB}\noffers:\n  - {{name: mine, sku: B200, price: 2}}\n"
            },
            "cat.yaml, field 'skus[0]'",
            ["B200 is already defined in", "hardware.yaml skus[", "memory 180 GB vs 80 GB", "B200-80GB"],
        ),
        # nodus-b200, an offer of the included catalog, planned on 8 GB
        (
            {"cat.yaml": f"include: [nodus-2026-11]\nskus:\n  - {SKU_80GB.replace('80GB', '8GB')}\n"},
            "cat.yaml, field 'skus[0]'",
            ["B200 is already defined in", "hardware.yaml", "memory 180 GB vs 8 GB", "B200-8GB"],
        ),
        # an inline SKU of an included catalog, redefined by the includer
        (
            {
                "sub.yaml": f"skus:\n  - {SKU_80GB.replace('B200', 'X1')}\noffers:\n  - {{name: x1, sku: X1, price: 2}}\n",
                "cat.yaml": f"include: [sub.yaml]\nskus:\n  - {SKU_80GB.replace('B200', 'X1').replace('80GB', '8GB')}\n",
            },
            "cat.yaml, field 'skus[0]'",
            ["X1 is already defined in", "sub.yaml skus[0]", "memory 80 GB vs 8 GB"],
        ),
        # a hardware file of one's own beside an included catalog's bundled one
        (
            {
                "hw.yaml": f"skus:\n  - {SKU_80GB}\n",
                "cat.yaml": "include: [nodus-2026-11]\nhardware: hw.yaml\n",
            },
            "hw.yaml, field 'skus[0]'",
            ["B200 is already defined in", "hardware.yaml skus["],
        ),
        # a name that is another SKU's alias: blamed on the catalog's own SKU, not on the bundled file
        (
            {"cat.yaml": f"hardware: hardware\nskus:\n  - {SKU_80GB.replace('B200', 'H100')}\n"},
            "cat.yaml, field 'skus[0]'",
            ["'h100' names two SKUs", "H100-SXM", "hardware.yaml skus["],
        ),
    ],
    ids=[
        "inline-beside-hardware",
        "inline-beside-include",
        "inline-beside-included-inline",
        "two-hardware-files",
        "alias",
    ],
)
@pytest.mark.parametrize("command", ["catalog", "solve"])
def test_a_sku_name_has_one_definition(tmp_path, files, where, expect, command):
    for name, content in files.items():
        write(tmp_path, name, content)
    cat = tmp_path / "cat.yaml"
    if command == "catalog":
        args = ["catalog", cat]
    else:
        args = ["solve", write(tmp_path, "job.yaml", job_text()), "--catalog", cat]
    refused(args, where, *expect)


def test_the_same_definition_reached_twice_is_one_definition(tmp_path):
    """default includes two catalogs that both use the bundled hardware file; a catalog naming that file
    beside an include of it, or copying a SKU as it is, defines nothing twice."""
    answered(["catalog", "default"])
    hardware = (ROOT / "catalogs" / "hardware.yaml").read_text()
    write(tmp_path, "hw.yaml", hardware)
    cat = write(tmp_path, "cat.yaml", "include: [nodus-2026-11, public-2026-11]\nhardware: hw.yaml\n")
    answered(["catalog", cat])


# --------------------------------------------------------------------------- 5. memory a GPU cannot have


def sku_row(**fields: str) -> str:
    row = {
        "name": "X1",
        "memory": "8GB",
        "hbm_bandwidth_gb_per_s": "3000",
        "dense_bf16_tflops": "900",
        "intra_node_bandwidth_gb_per_s": "900",
        **fields,
    }
    return "{" + ", ".join(f"{k}: {v}" for k, v in row.items()) + "}"


@pytest.mark.parametrize(
    ("catalog", "field", "expect"),
    [
        # an 8 GB card reporting 40 GiB: planned on 40 GiB
        (
            f"skus:\n  - {sku_row(memory_reported='40GiB')}\noffers:\n  - {{name: x1, sku: X1, price: 2}}\n",
            "skus[0].memory_reported",
            ["memory_reported 42.9 GB = 40.0 GiB", "5.37 x the label (memory 8.0 GB", "(got '40GiB')"],
        ),
        (
            f"skus:\n  - {sku_row(memory='80GB', memory_reported='7GB')}\n",
            "skus[0].memory_reported",
            ["memory_reported 7.0 GB", "less than a tenth of the label (80.0 GB", "unit"],
        ),
        (f"skus:\n  - {sku_row(memory='1e-9GB')}\n", "skus[0].memory", ["memory 1 byte", "less than 1 GiB"]),
        # a node's memory on one B200
        (
            "hardware: hardware\noffers:\n  - {name: b, sku: B200, price: 2, memory_delivered: 2TB}\n",
            "offers[0].memory_delivered",
            ["memory_delivered 2,000.0 GB", "10.4 x what a B200 reports", "memory_reported 192.3 GB", "node's total"],
        ),
        (
            "hardware: hardware\noffers:\n  - {name: b, sku: B200, price: 2, memory_delivered: 1e-9GB}\n",
            "offers[0].memory_delivered",
            ["memory_delivered 1 byte", "less than a tenth of the label (180.0 GB"],
        ),
        # no reported figure (every bundled SKU has one): the label is the reference
        (
            f"skus:\n  - {sku_row(memory='96GB')}\noffers:\n  - {{name: x1, sku: X1, price: 2, memory_delivered: 200GB}}\n",
            "offers[0].memory_delivered",
            ["memory_delivered 200.0 GB", "X1's label (its memory 96.0 GB"],
        ),
        (
            f"skus:\n  - {sku_row(memory='8GB')}\noffers:\n  - {{name: x1, sku: X1, price: 2, memory_delivered: 0.5GiB}}\n",
            "offers[0].memory_delivered",
            ["memory_delivered 0.5 GB", "less than 1 GiB"],
        ),
    ],
    ids=[
        "reported-above-label",
        "reported-far-below-label",
        "label-below-a-gib",
        "delivered-above-reported",
        "delivered-a-byte",
        "delivered-above-label",
        "delivered-below-a-gib",
    ],
)
def test_memory_figures_must_fit_the_label(tmp_path, catalog, field, expect):
    cat = write(tmp_path, "cat.yaml", catalog)
    refused(["catalog", cat], "cat.yaml", f"field '{field}'", *expect)
    refused(["solve", write(tmp_path, "job.yaml", job_text()), "--catalog", cat], f"field '{field}'")


def test_every_bundled_figure_is_within_the_rules():
    """Every bundled SKU reports at most 1.1 x its label (the most is 1.074: GiB written as GB), every bundled
    offer delivers at most what its GPU reports, and none is below a tenth of its label."""
    from optimizer.inputs import schema

    for name in ("default", "hardware", "seed-003-rtx-vs-b200"):
        catalog = load_catalog(name)
        skus = {s.name: s for s in catalog.skus}
        for sku in catalog.skus:
            if sku.memory_reported_bytes:
                ratio = sku.memory_reported_bytes / sku.memory_label_bytes
                assert 0.9 < ratio <= 1.08, (sku.name, ratio)
        for offer in catalog.offers:
            sku = skus[offer.sku]
            if offer.memory_delivered_bytes:
                reference = sku.memory_reported_bytes or sku.memory_label_bytes
                assert offer.memory_delivered_bytes <= schema.MEMORY_ABOVE_LABEL_MAX * reference, offer.name


def test_a_figure_just_within_the_tolerance_is_taken(tmp_path):
    """GiB written where the label says GB (80 GiB on an 80 GB card, 1.074 x) is what GPUs report."""
    cat = write(tmp_path, "cat.yaml", f"skus:\n  - {sku_row(memory='80GB', memory_reported='80GiB')}\n")
    answered(["catalog", cat])


# --------------------------------------------------------------------------- 6. the seed's Kubernetes block


@pytest.mark.parametrize(
    ("spec", "constraints", "expect"),
    [
        # planned on the H100-SXM, the GPU constraints.gpu.types excludes
        (
            "{type: H100-SXM}",
            "{types: [B200]}",
            ["spec.resources.gpu.type (H100-SXM)", "constraints.gpu.types ([B200])"],
        ),
        ("{count: 8}", "{count: 4}", ["spec.resources.gpu.count (8)", "constraints.gpu.count (4)"]),
        ("{minMemory: 80GB}", "{min_memory: 160GiB}", ["spec.resources.gpu.minMemory (80GB)", "min_memory (160GiB)"]),
        ("{minMemory: 80 gigs}", "{min_memory: 80GB}", ["spec.resources.gpu.minMemory", "'gigs'"]),
    ],
    ids=["type", "count", "min-memory", "min-memory-unreadable"],
)
def test_the_kubernetes_block_and_the_constraints_must_agree(tmp_path, spec, constraints, expect):
    extra = f"spec: {{resources: {{gpu: {spec}}}}}\nconstraints: {{gpu: {constraints}}}\n"
    job = write(tmp_path, "job.yaml", job_text(extra=extra))
    text = refused(["solve", job], "job.yaml", "field 'spec.resources.gpu.", *expect)
    assert "disagree" in text or "unit" in text


@pytest.mark.parametrize(
    ("spec", "constraints", "filters"),
    [
        ("{type: b200}", "{types: [B200, H200]}", {"types": ["b200"]}),  # the one type both allow
        ("{count: 8}", "{count: 8}", {"count": 8}),
        ("{minMemory: 80GB}", "{min_memory: 80e9}", {"min_memory_bytes": 80e9}),
        ("{type: B200, count: 8}", "{min_memory: 100GB}", {"types": ["B200"], "count": 8, "min_memory_bytes": 1e11}),
    ],
    ids=["type-among-types", "count", "min-memory-in-other-units", "different-filters"],
)
def test_a_kubernetes_block_that_agrees_is_taken(tmp_path, spec, constraints, filters):
    extra = f"spec: {{resources: {{gpu: {spec}}}}}\nconstraints: {{gpu: {constraints}}}\n"
    problem = load_job(write(tmp_path, "job.yaml", job_text(extra=extra)))
    for key, value in filters.items():
        assert getattr(problem.constraints.gpu, key) == value, key
