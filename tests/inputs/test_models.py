"""Models the way Hugging Face describes them: config.json import and presets, checked against the
parameter counts their authors publish."""

import json

import pytest
from paths import DATA
from typer.testing import CliRunner

from optimizer import load_job, plan
from optimizer.cli import app
from optimizer.inputs.hf_models import count_params, model_fields, presets, resolve
from optimizer.inputs.schema import ModelSpec
from optimizer.inputs.units import parse_count


def test_llama_3_1_8b_config_gives_8_03b():
    spec = ModelSpec.model_validate(resolve({"hf_config": str(DATA / "llama-3.1-8b-config.json")}))
    assert spec.params == pytest.approx(8.03e9, rel=0.005)
    assert (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.ffn_hidden, spec.vocab) == (
        32,
        4096,
        32,
        8,
        14336,
        128256,
    )


def test_qwen3_30b_a3b_total_and_active():
    spec = ModelSpec.model_validate(resolve({"hf_config": str(DATA / "qwen3-30b-a3b-config.json")}))
    assert spec.params == pytest.approx(30.5e9, rel=0.005)
    assert spec.active_params == pytest.approx(3.3e9, rel=0.02)
    assert (spec.experts, spec.experts_per_token, spec.ffn_hidden) == (128, 8, 768)


def test_norm_and_activation_details_come_from_the_model_type():
    # Gemma 2 normalises before and after attention and the MLP with (1 + w) in fp32; GPT-OSS clamps its
    # SwiGLU at swiglu_limit and multiplies its norm weight in fp32; Llama does neither. They change the
    # activations kept for backward (tests/validation/test_torch_accounting.py measures them), not the parameters.
    gemma = ModelSpec.model_validate(resolve("gemma-2-9b"))
    gpt_oss = ModelSpec.model_validate(resolve("gpt-oss-20b"))
    llama = ModelSpec.model_validate(resolve("llama-3.1-8b"))
    assert (gemma.sandwich_norms, gemma.norm_fp32_weight, gemma.swiglu_limit) == (True, True, None)
    assert (gpt_oss.sandwich_norms, gpt_oss.norm_fp32_weight, gpt_oss.swiglu_limit) == (False, True, 7.0)
    assert (llama.sandwich_norms, llama.norm_fp32_weight, llama.swiglu_limit) == (False, False, None)


@pytest.mark.parametrize("name", sorted(presets()))
def test_every_preset_matches_its_published_count(name):
    entry = presets()[name]
    counted = count_params(entry["config"])
    # published counts are rounded to 2-3 significant figures
    assert counted["params"] == pytest.approx(parse_count(entry["published"]["params"]), rel=0.006)
    if "active_params" in entry["published"]:
        assert counted["active_params"] == pytest.approx(parse_count(entry["published"]["active_params"]), rel=0.02)
    if "active_params_without_input_embedding" in entry["published"]:  # OpenAI's convention for gpt-oss
        without = counted["active_params"] - counted["vocab"] * counted["hidden"]
        assert without == pytest.approx(
            parse_count(entry["published"]["active_params_without_input_embedding"]), rel=0.01
        )


@pytest.mark.parametrize("name", sorted(presets()))
def test_the_shapes_alone_hold_each_presets_published_count(name):
    # what a job that writes params and shapes by hand is checked against (ModelSpec.shape_params)
    entry = presets()[name]
    model = ModelSpec.model_validate(model_fields(entry["config"], name))
    assert model.shape_params() == pytest.approx(parse_count(entry["published"]["params"]), rel=0.006)
    assert model.shape_params() == pytest.approx(count_params(entry["config"])["params"], rel=5e-4)


def test_params_that_contradict_the_shapes_are_refused():
    llama_8b = dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256)
    for wrong in ("1B", "80B", "8.03M"):
        with pytest.raises(ValueError, match="hold 8.03B parameters"):
            ModelSpec.model_validate({"params": wrong, **llama_8b})
    # within a factor of two passes: a vision tower or an MTP head outside the shapes' count
    assert ModelSpec.model_validate({"params": "10.6B", **llama_8b}).params == 10.6e9


def test_job_file_with_preset_and_relative_hf_config(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text((DATA / "llama-3.1-8b-config.json").read_text())
    for model in ("{preset: llama-3.1-8b}", "{hf_config: cfg/config.json}"):
        job = tmp_path / "job.yaml"
        job.write_text(f"catalog: nodus-2026-11\njob:\n  model: {model}\n  method: lora\n  tokens: 100M\n")
        answer = plan(load_job(job))
        assert answer.status == "optimal"
        assert answer.best.memory_gib.activations > 0  # shapes came through


def test_model_commands():
    runner = CliRunner()
    r = runner.invoke(app, ["model", str(DATA / "qwen3-30b-a3b-config.json"), "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {"params", "active_params", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"} <= set(data)
    r = runner.invoke(app, ["models", "--format", "json"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)["models"]) >= 11


def test_bad_model_inputs_exit_2(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["model", "llama-9"])
    assert r.exit_code == 2 and "unknown model preset" in r.output
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    r = runner.invoke(app, ["model", str(bad)])
    assert r.exit_code == 2 and "malformed JSON" in r.output and "line 1" in r.output


@pytest.mark.parametrize(
    ("config", "published"),
    [
        # google/gemma-2-9b's config.json names no tie_word_embeddings; Gemma2Config ties by default
        ({k: v for k, v in presets()["gemma-2-9b"]["config"].items() if k != "tie_word_embeddings"}, 9.24e9),
        # google/gemma-2b likewise; the Gemma report (Table 1): 524,550,144 embedding + 1,981,884,416 other
        (
            {
                "model_type": "gemma",
                "hidden_size": 2048,
                "num_hidden_layers": 18,
                "num_attention_heads": 8,
                "num_key_value_heads": 1,
                "head_dim": 256,
                "intermediate_size": 16384,
                "vocab_size": 256000,
                "hidden_activation": "gelu_pytorch_tanh",
            },
            524_550_144 + 1_981_884_416,
        ),
    ],
    ids=["gemma-2-9b", "gemma-2b"],
)
def test_a_config_without_tie_word_embeddings_takes_its_architectures_default(config, published):
    """Read as untied, gemma-2-9b counted 10.16B and gemma-2b 3.03B."""
    counted = count_params(config)
    assert counted["params"] == pytest.approx(published, rel=0.003)
    assert model_fields(config)["tied_embeddings"] is True
    llama = json.loads((DATA / "llama-3.1-8b-config.json").read_text())
    assert "tied_embeddings" not in model_fields({k: v for k, v in llama.items() if k != "tie_word_embeddings"})


def test_a_config_is_named_for_its_folder_or_its_file(tmp_path):
    """A config file that is not a folder's config.json is named for its file, not its folder ("data")."""
    assert ModelSpec.model_validate(resolve({"hf_config": str(DATA / "qwen3-30b-a3b-config.json")})).name == (
        "qwen3-30b-a3b-config"
    )
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text((DATA / "llama-3.1-8b-config.json").read_text())
    assert ModelSpec.model_validate(resolve({"hf_config": str(folder / "config.json")})).name == "Llama-3.1-8B"
