"""Real Hugging Face config.json files, read the way transformers builds their models.

Each test reads a published config (tests/data/hf/, sources in SOURCES.md there) and checks the
parameters gpuplan counts against an independent figure: the count of the model transformers 5.17
builds from the same file on the meta device (written down here, and recomputed where transformers is
installed), or the figure its authors publish. Architectures gpuplan's physics does not model
(state-space hybrids, encoder-decoders) and malformed configs are refused with exit 2, one paragraph
naming the file, the key and the fix.
"""

from __future__ import annotations

import json
import shutil

import pytest
from paths import DATA
from typer.testing import CliRunner

from optimizer import load_job
from optimizer.cli import app
from optimizer.inputs import hf_architectures
from optimizer.inputs.hf_models import count_params, resolve
from optimizer.inputs.schema import ModelSpec

HF = DATA / "hf"
LLAMA_8B = DATA / "llama-3.1-8b-config.json"
runner = CliRunner()

# What transformers 5.17 builds from each file: sum(p.numel() for p in model.parameters()) of
# AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)) under torch.device("meta"); active
# is the total less the routed experts a token does not visit ((E - k) / E of the expert weights).
TRANSFORMERS_COUNT = {
    "falcon-7b": (6_921_720_704, None),
    "falcon-40b": (41_303_293_952, None),
    "starcoder2-7b": (7_173_923_840, None),
    "gpt-bigcode": (1_124_886_528, None),
    "gpt2": (124_439_808, None),
    "llama-4-scout-text": (107_769_861_120, 17_172_894_720),
    "llama-4-maverick-text": (400_711_848_960, 17_184_691_200),
    "dbrx-instruct": (131_596_523_520, 36_469_708_800),
}


def spec_of(name: str) -> ModelSpec:
    return ModelSpec.model_validate(resolve({"hf_config": str(HF / f"{name}.json")}))


def refused(args: list, *expect: str, absent: tuple[str, ...] = ()) -> str:
    """A command that must fail as bad input: exit 2, one paragraph with every ``expect`` text."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for fragment in expect:
        assert fragment in result.output, (fragment, result.output)
    for fragment in absent:
        assert fragment not in result.output, (fragment, result.output)
    return result.output


def llama(**changes) -> str:
    """Llama 3.1 8B's config.json with some keys changed (None removes the key)."""
    cfg = json.loads(LLAMA_8B.read_text())
    cfg.update(changes)
    return json.dumps({k: v for k, v in cfg.items() if v is not None})


def job_text(model: str) -> str:
    return f"catalog: nodus-2026-11\njob:\n  model: {model}\n  method: lora\n  tokens: 100M\n"


# --------------------------------------------------------------------------- counts


def test_falcon_has_one_kv_head_with_multi_query_and_a_plain_gelu_mlp():
    """Falcon-7B: multi_query: true gives 1 KV head (num_kv_heads: 71 is ignored without
    new_decoder_architecture) and its MLP is dense_h_to_4h, GELU, dense_4h_to_h: 2 matrices, not a gated 3.
    Counted as 71 KV heads and SwiGLU it was 10.87B (+57 %); transformers builds 6.92B."""
    falcon = spec_of("falcon-7b")
    assert (falcon.kv_heads, falcon.gated_mlp, falcon.tied_embeddings) == (1, False, True)
    assert falcon.params == pytest.approx(6_921_720_704, rel=0.005)
    # Falcon-40B's new_decoder_architecture gives its KV heads as num_kv_heads (8 of 128): 41.30B, not 64.96B
    falcon_40b = spec_of("falcon-40b")
    assert (falcon_40b.kv_heads, falcon_40b.gated_mlp) == (8, False)
    assert falcon_40b.params == pytest.approx(41_303_293_952, rel=0.005)


def test_starcoder_mlps_are_two_matrices_whatever_the_activation_is_called():
    """StarCoder2 and GPTBigCode call gelu_pytorch_tanh between c_fc and c_proj: not a gate. Read as
    gated, starcoder2-7b was 9.89B (+38 %, published 7.17B) and the GPTBigCode 1.71B (+52 %)."""
    starcoder2 = spec_of("starcoder2-7b")
    assert starcoder2.gated_mlp is False
    assert starcoder2.params == pytest.approx(7.17e9, rel=0.005)  # the StarCoder2 paper's 7.17B
    bigcode = spec_of("gpt-bigcode")
    # multi_query: true is one KV head (GPTBigCodeAttention: kv_heads = 1 if multi_query)
    assert (bigcode.gated_mlp, bigcode.kv_heads, bigcode.heads) == (False, 1, 16)
    assert bigcode.params == pytest.approx(1_124_886_528, rel=0.005)
    # Gemma's MLP is gated with the same activation name (the 2.51B of the Gemma report, Table 1)
    gemma_2b = {"model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 8,
                "num_key_value_heads": 1, "head_dim": 256, "intermediate_size": 16384, "vocab_size": 256000,
                "hidden_activation": "gelu_pytorch_tanh"}  # fmt: skip
    assert count_params(gemma_2b)["gated_mlp"] is True


def test_gpt2_counts_its_learned_position_embeddings():
    """GPT-2 small: 124,439,808 parameters, of which wpe, 1,024 positions x 768, is 786,432 (0.63 %)."""
    gpt2 = count_params(json.loads((HF / "gpt2.json").read_text()))
    assert gpt2["params"] == pytest.approx(124_439_808, rel=0.001)


def test_llama_4_has_an_always_on_shared_expert_and_interleaves_dense_layers():
    """Llama 4 Scout: every layer MoE, 16 experts and one shared expert, both 8,192 wide; Maverick:
    interleave_moe_layer_step 2, so 24 MoE layers of 128 experts and 24 dense layers 16,384 wide
    (intermediate_size_mlp). Meta publishes 17B active for both, 400B total for Maverick (109B for Scout
    counts its vision encoder). Before: Scout 101.7B / 11.1B active, Maverick 778B / 11.2B."""
    scout = spec_of("llama-4-scout-text")
    assert scout.params == pytest.approx(107_769_861_120, rel=0.005)
    assert scout.active_params == pytest.approx(17e9, rel=0.02)
    assert (scout.experts, scout.shared_experts, scout.dense_layers, scout.moe_ffn_hidden) == (16, 1, 0, 8192)
    maverick = spec_of("llama-4-maverick-text")
    assert maverick.params == pytest.approx(400e9, rel=0.005)
    assert maverick.active_params == pytest.approx(17e9, rel=0.02)
    assert (maverick.experts, maverick.shared_experts, maverick.dense_layers) == (128, 1, 24)
    assert (maverick.ffn_hidden, maverick.moe_ffn_hidden) == (16384, 8192)
    # the shapes the physics reads hold the same model
    for spec in (scout, maverick):
        assert spec.shape_params() == pytest.approx(spec.params, rel=0.001)


def test_dbrx_is_read_from_its_own_keys():
    """DBRX names its shapes d_model, n_heads, n_layers, attn_config.kv_n_heads and ffn_config.*; its 16
    experts are gated (w1, v1, w2). Databricks publishes 132B total, 36B active."""
    dbrx = spec_of("dbrx-instruct")
    assert (dbrx.hidden, dbrx.heads, dbrx.kv_heads, dbrx.layers) == (6144, 48, 8, 40)
    assert (dbrx.experts, dbrx.experts_per_token, dbrx.moe_ffn_hidden, dbrx.gated_mlp) == (16, 4, 10752, True)
    assert dbrx.params == pytest.approx(132e9, rel=0.005)
    assert dbrx.active_params == pytest.approx(36e9, rel=0.02)


@pytest.mark.parametrize("name", sorted(TRANSFORMERS_COUNT))
def test_counts_match_what_transformers_builds(name, tmp_path):
    """The written-down counts are what transformers builds now (skipped where it is not installed)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    shutil.copy(HF / f"{name}.json", tmp_path / "config.json")
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    built = sum(p.numel() for p in model.parameters())
    total, active = TRANSFORMERS_COUNT[name]
    assert built == total
    counted = count_params(json.loads((HF / f"{name}.json").read_text()))
    assert counted["params"] == pytest.approx(total, rel=0.005)
    if active is not None:
        assert counted["active_params"] == pytest.approx(active, rel=0.005)


# Where a default config of transformers 5.17 does not build as it stands (a None its class leaves).
DEFAULT_FIXES = {
    "dbrx": {"attn_config": {"kv_n_heads": 8, "rope_theta": 500000.0}},
    "deepseek_v2": {"num_experts_per_tok": 6},
    "nemotron": {"num_key_value_heads": 8},
}


@pytest.mark.parametrize(
    "model_type",
    sorted(
        hf_architectures.PLAIN_MLP_MODEL_TYPES
        | hf_architectures.GATED_MLP_MODEL_TYPES
        | set(hf_architectures.LEARNED_POSITIONS)
    ),
)
def test_each_architecture_gpuplan_names_is_counted_as_transformers_builds_it(model_type):
    """Every model_type whose MLP (gated or two matrices) or position table gpuplan takes from its name: the
    default config transformers writes for it counts within 0.2 % of the model it builds (what is left is
    biases, which gpuplan leaves out). A wrong entry in a table is off by a third of the MLP."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.AutoConfig.for_model(model_type, **DEFAULT_FIXES.get(model_type, {})).get_text_config()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    built = sum(p.numel() for p in model.parameters())
    assert count_params(config.to_dict())["params"] == pytest.approx(built, rel=0.002)


def test_the_architecture_tables_spell_model_types_as_transformers_does():
    mapping = pytest.importorskip("transformers.models.auto.configuration_auto").CONFIG_MAPPING_NAMES
    tables = (
        hf_architectures.STATE_SPACE,
        hf_architectures.HYBRID,
        hf_architectures.ENCODER_DECODER,
        hf_architectures.ENCODER,
        hf_architectures.PLAIN_MLP_MODEL_TYPES,
        hf_architectures.GATED_MLP_MODEL_TYPES,
        hf_architectures.LEARNED_POSITIONS,
    )
    assert [t for table in tables for t in table if t not in mapping] == []


# --------------------------------------------------------------------------- architectures not modelled


@pytest.mark.parametrize(
    ("name", "model_type"),
    [("jamba-v0.1", "jamba"), ("nemotron-h-56b", "nemotron_h")],
)
def test_state_space_hybrids_are_refused_not_counted_as_llama(name, model_type):
    """Jamba interleaves Mamba and attention layers: counted as a Llama it was 92B where it has 52B.
    Nemotron-H's config also holds Infinity in time_step_limit, a key gpuplan never reads: the refusal is
    for the architecture, not a request to edit that key."""
    refused(
        ["model", HF / f"{name}.json"],
        f"{name}.json",
        "model_type",
        repr(model_type),
        "decoder-only",
        "job.model",
        absent=("write a finite number",),
    )


@pytest.mark.parametrize(
    "config",
    [
        {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280},
        {"model_type": "t5", "d_model": 512, "num_layers": 6, "num_heads": 8, "vocab_size": 32128},
        {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "vocab_size": 30522},
        {"model_type": "my_seq2seq", "is_encoder_decoder": True, "hidden_size": 512, "num_hidden_layers": 6,
         "num_attention_heads": 8, "vocab_size": 32000},
    ],
    ids=["mamba", "t5", "bert", "is_encoder_decoder"],
)  # fmt: skip
def test_other_architectures_are_refused(config, tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    refused(["model", tmp_path / "cfg.json"], "cfg.json", "decoder-only", "job.model")


def test_recurrent_layer_kinds_in_layer_types_are_refused(tmp_path):
    """A config whose layer_types lists linear-attention (Mamba, Gated DeltaNet) layers is a hybrid, whatever
    its model_type (here one gpuplan has never heard of)."""
    kinds = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8
    (tmp_path / "cfg.json").write_text(llama(model_type="new_hybrid", layer_types=kinds))
    refused(["model", tmp_path / "cfg.json"], "cfg.json", "layer_types", "linear_attention")


def test_infinity_in_a_key_gpuplan_never_reads_is_read_as_null(tmp_path):
    """Python's json.dump writes float('inf') as Infinity, which JSON does not allow: Nemotron-H's
    time_step_limit holds one. Where it sits in a key gpuplan never reads, the config is read (the message
    told the user to write a finite number there); in a key it reads, it is refused as before, and the rest
    of the file is read as strictly as ever."""
    (tmp_path / "cfg.json").write_text(llama(time_step_limit=[0.0, float("inf")], note=float("nan")))
    assert "Infinity" in (tmp_path / "cfg.json").read_text()
    result = runner.invoke(app, ["model", str(tmp_path / "cfg.json"), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params"] == pytest.approx(8.03e9, rel=0.005)
    (tmp_path / "cfg.json").write_text(llama(hidden_size=float("inf")))
    refused(["model", tmp_path / "cfg.json"], "cfg.json", "Infinity")
    (tmp_path / "cfg.json").write_text(llama(time_step_limit=[0.0, float("inf")])[:-1] + ', "vocab_size": 5}')
    refused(["model", tmp_path / "cfg.json"], "cfg.json", "duplicate key 'vocab_size'")


# --------------------------------------------------------------------------- values of the wrong type


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tie_word_embeddings", "false"),
        ("use_sliding_window", "false"),
        ("attention_bias", "false"),
        ("tie_word_embeddings", 1),
        ("swiglu_limit", True),
        ("swiglu_limit", "abc"),
        ("swiglu_limit", [7]),
    ],
)
def test_a_key_of_the_wrong_type_is_refused(key, value, tmp_path):
    """transformers refuses "false" for a boolean (a non-empty string is truthy: it tied Llama 3.1 8B's
    embeddings) and true for a number (it became a clamp of 1.0)."""
    (tmp_path / "cfg.json").write_text(llama(**{key: value}))
    refused(["model", tmp_path / "cfg.json"], "cfg.json", key, absent=("cannot size the model",))


def test_layer_types_must_list_every_layer(tmp_path):
    """transformers refuses a layer_types list whose length is not num_hidden_layers."""
    (tmp_path / "cfg.json").write_text(llama(sliding_window=4096, layer_types=["sliding_attention"]))
    refused(["model", tmp_path / "cfg.json"], "cfg.json", "layer_types", "num_hidden_layers", "32")


# --------------------------------------------------------------------------- messages


def test_preset_and_hf_config_together_ask_for_one_of_them(tmp_path):
    (tmp_path / "cfg.json").write_text(llama())
    (tmp_path / "job.yaml").write_text(job_text("{hf_config: cfg.json, preset: llama-3.1-8b}"))
    refused(
        ["solve", tmp_path / "job.yaml"],
        "job.yaml",
        "preset",
        "hf_config",
        "only one",
        absent=("optimizer.load_job", "expand_models"),
    )


@pytest.mark.parametrize(
    ("changes", "keys"),
    [
        ({"num_key_value_heads": 7}, ["num_attention_heads", "num_key_value_heads"]),
        ({"num_local_experts": 8}, ["num_local_experts", "num_experts_per_tok"]),
        ({"num_attention_heads": 5000, "num_key_value_heads": 8}, ["num_attention_heads", "hidden_size"]),
        ({"_name_or_path": 123}, ["_name_or_path"]),
    ],
    ids=["kv-heads-not-dividing", "experts-without-top-k", "heads-wider-than-hidden", "name-not-text"],
)
def test_a_config_error_names_the_config_and_its_key_not_the_job(changes, keys, tmp_path):
    """Checked while the config is read, not once the job is validated (which would name job.yaml and gpuplan's
    fields: kv_heads, experts_per_token, head_dim, name): the user has to fix the config.json, under its own keys."""
    (tmp_path / "cfg.json").write_text(llama(**changes))
    (tmp_path / "job.yaml").write_text(job_text("{hf_config: cfg.json}"))
    refused(["solve", tmp_path / "job.yaml"], "cfg.json", *keys, absent=("job.yaml",))


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"hidden_size": None}, "hidden_size"),
        ({"vocab_size": None}, "vocab_size"),
        ({"kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64}, "v_head_dim"),
        ({"kv_lora_rank": 512, "qk_nope_head_dim": None, "qk_rope_head_dim": 64, "v_head_dim": 128}, "qk_nope_head_dim"),
    ],
    ids=["hidden", "vocab", "mla-v-head-dim", "mla-nope"],
)  # fmt: skip
def test_a_missing_key_is_named(changes, key, tmp_path):
    """The message was "cannot size the model from this config (KeyError: 'v_head_dim'); it needs
    hidden_size, num_hidden_layers, num_attention_heads and vocab_size" whatever was missing."""
    (tmp_path / "cfg.json").write_text(llama(**changes))
    refused(["model", tmp_path / "cfg.json"], "cfg.json", key, absent=("cannot size the model", "Error:"))


# --------------------------------------------------------------------------- what `gpuplan model` reads


def test_model_reads_a_hugging_face_folder_and_any_existing_file(tmp_path, monkeypatch):
    """`gpuplan model Llama-3.1-8B` (a folder holding config.json, as Hugging Face lays a model out) and
    `gpuplan model misc/llama.JSON` were taken for preset names ("unknown model preset")."""
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text(llama())
    (tmp_path / "llama.JSON").write_text(llama())
    (tmp_path / "llama-config").write_text(llama())
    monkeypatch.chdir(tmp_path)
    for given in ("Llama-3.1-8B", str(folder), "llama.JSON", "llama-config"):
        result = runner.invoke(app, ["model", given, "--format", "json"])
        assert result.exit_code == 0, (given, result.output)
        assert json.loads(result.stdout)["params"] == pytest.approx(8.03e9, rel=0.005)
    assert json.loads(runner.invoke(app, ["model", "Llama-3.1-8B", "--format", "json"]).stdout)["name"] == (
        "Llama-3.1-8B"
    )
    # a job file's hf_config may name the folder too
    (tmp_path / "job.yaml").write_text(job_text("{hf_config: Llama-3.1-8B}"))
    assert load_job(tmp_path / "job.yaml").job.model.params == pytest.approx(8.03e9, rel=0.005)
    # a name that is no file is still a preset name; a folder without a config.json is said to be one
    refused(["model", "llama-9"], "unknown model preset")
    (tmp_path / "empty").mkdir()
    refused(["model", "empty"], "empty", "directory without a config.json")
