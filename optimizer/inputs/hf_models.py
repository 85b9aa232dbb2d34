"""Models described the way Hugging Face does: bundled presets and offline ``config.json`` import.

Parameter counts from the shapes (what each tensor of a decoder block holds):
- embeddings V h, plus an LM head V h unless ``tie_word_embeddings``;
- attention: q h (a d), k and v h (kv d) each (GQA), o (a d) h; DeepSeek's multi-head latent attention
  (MLA) instead: q = h r_q + r_q a (d_nope + d_rope), kv = h (r_kv + d_rope) + r_kv a (d_nope + d_v),
  o = a d_v h, with the low-rank norms;
- MLP: 3 h f when gated (SwiGLU/GeGLU: gate, up, down), else 2 h f; MoE layers hold every routed expert
  (3 h f_e each), the shared experts and a router h E; only experts_per_token of them are active;
- norms: 2 h per block (+ q/k norms for Qwen3), h at the end.
Active parameters (what FLOPs count) are the total less the routed experts a token does not visit.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from ..errors import GpuplanError, JobError, did_you_mean
from . import units
from .bundled import MODEL_PRESETS, bundled_dir
from .reader import read_json_file, read_yaml_file

_GATED = ("silu", "swiglu", "gelu_pytorch_tanh", "geglu", "swish")
# Architectures with a per-head RMSNorm on queries and keys that their config.json does not flag
# (transformers' modeling_qwen3.py / modeling_qwen3_moe.py: Qwen3Attention.q_norm, k_norm).
_QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe"})
# Decoder architectures whose transformers config class ties the LM head to the embeddings when a
# config.json does not say (``tie_word_embeddings`` defaults to True in their configuration_*.py, as read
# from transformers 5.17's classes); the rest default to untied. google/gemma-2-9b's config.json has no
# key: read as untied it counted 10.16B parameters where the model has 9.24B.
_TIED_BY_DEFAULT = frozenset(
    {
        "biogpt", "bloom", "cohere", "cohere2", "cohere2_moe", "ctrl", "ernie4_5", "ernie4_5_moe", "falcon",
        "falcon_mamba", "gemma", "gemma2", "gemma3_text", "gemma3n_text", "gemma4_text", "gpt2", "gpt_bigcode",
        "gpt_neo", "jetmoe", "lfm2", "lfm2_moe", "mamba", "minicpm3", "mpt", "openai-gpt", "opt",
        "recurrent_gemma", "smollm3", "starcoder2", "vaultgemma", "xglm", "zamba", "zamba2",
    }
)  # fmt: skip


def tied_embeddings(cfg: dict) -> bool:
    """Whether the LM head shares the embedding matrix: the config's own word, else its architecture's default."""
    if "tie_word_embeddings" in cfg:
        return bool(cfg["tie_word_embeddings"])
    return cfg.get("model_type") in _TIED_BY_DEFAULT


# transformers' Gemma2RMSNorm / Gemma3RMSNorm: a norm after attention and after the MLP as well as before,
# each scaling by (1 + w) in fp32; GptOssRMSNorm multiplies its weight in fp32 before casting back.
_SANDWICH_NORM_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text"})
_FP32_NORM_WEIGHT_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "gpt_oss"})
# transformers' DeepseekV3TopkRouter computes its logits in fp32 (DeepSeek-V3 report, section 2.1.2: sigmoid
# affinities), as Megatron-Core's DeepSeek-V3 recipes do with --moe-router-dtype fp32.
_FP32_ROUTER_MODEL_TYPES = frozenset({"deepseek_v3"})

# The config.json sizes counted here -> their range in ``units.LIMITS``. Checked before counting: a
# ``num_hidden_layers: 1e12`` would otherwise loop over a trillion layers, and ``num_attention_heads: 0``
# divide by zero.
_CONFIG_RANGES = {
    "hidden_size": "width",
    "d_model": "width",
    "n_embd": "width",
    "num_hidden_layers": "layers",
    "n_layer": "layers",
    "num_layers": "layers",
    "num_attention_heads": "heads",
    "n_head": "heads",
    "num_key_value_heads": "heads",
    "head_dim": "width",
    "vocab_size": "vocab",
    "intermediate_size": "width",
    "ffn_dim": "width",
    "n_inner": "width",
    "moe_intermediate_size": "width",
    "shared_expert_intermediate_size": "width",
    "kv_lora_rank": "width",
    "q_lora_rank": "width",
    "qk_nope_head_dim": "width",
    "qk_rope_head_dim": "width",
    "v_head_dim": "width",
    "num_experts": "experts",
    "num_local_experts": "experts",
    "n_routed_experts": "experts",
    "num_experts_per_tok": "experts",
    "moe_topk": "experts",
    "n_shared_experts": "experts",
    "first_k_dense_replace": "layers",
    "decoder_sparse_step": "layers",
    "sliding_window": "seq_len",
}
# Keys where 0 means "none" (no experts, no q-LoRA, no dense prefix), as Hugging Face writes them.
_ZERO_IS_NONE = frozenset(
    {
        "num_experts",
        "num_local_experts",
        "n_routed_experts",
        "num_experts_per_tok",
        "moe_topk",
        "n_shared_experts",
        "q_lora_rank",
        "kv_lora_rank",
        "first_k_dense_replace",
        "decoder_sparse_step",
        "shared_expert_intermediate_size",
        "sliding_window",
    }
)


# The config.json fields gpuplan reads as names (compared as strings).
_CONFIG_NAMES = ("model_type", "hidden_act", "hidden_activation", "activation_function")


def check_config(cfg: dict, source: str) -> None:
    """Every size ``count_params`` reads is a whole number in its ``units.LIMITS`` range, every name a string."""
    for key, kind in _CONFIG_RANGES.items():
        value = cfg.get(key)
        if value is None or (value == 0 and key in _ZERO_IS_NONE and not isinstance(value, bool)):
            continue
        limit = units.LIMITS[kind]
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole or not limit.allows(value):
            problem = (
                limit.text() if whole and not isinstance(value, bool) else f"is not a whole number; it {limit.text()}"
            )
            raise JobError(
                f"{key} = {value!r} in this config.json {problem}; check that this is a model's config.json",
                source=source,
                field="job.model.hf_config",
            )
    for key in _CONFIG_NAMES:
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise JobError(
                f"{key} = {cfg[key]!r} in this config.json is not a name (a string such as 'llama' or 'silu'); "
                "check that this is a model's config.json",
                source=source,
                field="job.model.hf_config",
            )
    kinds = cfg.get("layer_types")
    if kinds is not None and not (
        isinstance(kinds, list) and len(kinds) <= units.LIMITS["layers"].high and all(isinstance(k, str) for k in kinds)
    ):
        raise JobError(
            "layer_types in this config.json must be a list of layer kinds ('sliding_attention', "
            "'full_attention'); check that this is a model's config.json",
            source=source,
            field="job.model.hf_config",
        )
    layers = cfg.get("mlp_only_layers")
    if layers is not None and not (
        isinstance(layers, list) and len(layers) <= units.LIMITS["layers"].high and all(type(i) is int for i in layers)
    ):
        raise JobError(
            "mlp_only_layers in this config.json must be a list of layer numbers; check that this is a "
            "model's config.json",
            source=source,
            field="job.model.hf_config",
        )


def _presets_file() -> Path:
    return bundled_dir("catalogs") / f"{MODEL_PRESETS}.yaml"


@functools.cache
def presets() -> dict[str, dict]:
    """The bundled model presets, read once per process (a portfolio may name a preset per job)."""
    return read_yaml_file(_presets_file(), "model presets")


def _get(cfg: dict, *names, default=None):
    for name in names:
        if cfg.get(name) is not None:
            return cfg[name]
    return default


def count_params(cfg: dict) -> dict[str, Any]:
    """Total and active parameters, with the shapes gpuplan's physics uses, from a HF-style config."""
    h = int(_get(cfg, "hidden_size", "d_model", "n_embd"))
    layers = int(_get(cfg, "num_hidden_layers", "n_layer", "num_layers"))
    heads = int(_get(cfg, "num_attention_heads", "n_head"))
    kv_heads = int(_get(cfg, "num_key_value_heads", default=heads))
    head_dim = int(_get(cfg, "head_dim", default=h // heads))
    vocab = int(_get(cfg, "vocab_size"))
    ffn = int(_get(cfg, "intermediate_size", "ffn_dim", "n_inner", default=4 * h))
    act = str(_get(cfg, "hidden_act", "hidden_activation", "activation_function", default="silu"))
    gated = act in _GATED or cfg.get("model_type") in (
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen3",
        "gemma",
        "gemma2",
    )
    per_mlp = 3 if gated else 2

    if cfg.get("kv_lora_rank"):  # DeepSeek multi-head latent attention
        r_q, r_kv = int(cfg.get("q_lora_rank") or 0), int(cfg["kv_lora_rank"])
        d_nope, d_rope, d_v = int(cfg["qk_nope_head_dim"]), int(cfg["qk_rope_head_dim"]), int(cfg["v_head_dim"])
        q = (h * r_q + r_q + r_q * heads * (d_nope + d_rope)) if r_q else h * heads * (d_nope + d_rope)
        kv = h * (r_kv + d_rope) + r_kv + r_kv * heads * (d_nope + d_v)
        attention = q + kv + heads * d_v * h
        head_dim = d_nope + d_rope
        v_head_dim = d_v
        kv_width = r_kv + d_rope  # what the latent cache stores per token
    else:
        attention = h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h
        if cfg.get("attention_bias") or cfg.get("qkv_bias"):
            attention += heads * head_dim + 2 * kv_heads * head_dim
        if (cfg.get("model_type") or "").startswith("qwen3"):
            attention += 2 * head_dim  # q_norm, k_norm
        kv_width = kv_heads * head_dim
        v_head_dim = None
    window, window_layers = _sliding_window(cfg, layers)

    experts = int(_get(cfg, "num_experts", "num_local_experts", "n_routed_experts", default=0) or 0)
    top_k = int(_get(cfg, "num_experts_per_tok", "moe_topk", default=0) or 0)
    expert_ffn = int(_get(cfg, "moe_intermediate_size", default=ffn))
    shared = int(_get(cfg, "n_shared_experts", default=0) or 0)
    shared_ffn = shared * expert_ffn
    if cfg.get("shared_expert_intermediate_size"):
        shared, shared_ffn = 1, int(cfg["shared_expert_intermediate_size"])
    dense_layers = int(cfg.get("first_k_dense_replace", 0) or 0)
    sparse_step = int(cfg.get("decoder_sparse_step", 1) or 1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    moe_layers = [
        i for i in range(layers) if experts and i >= dense_layers and i not in mlp_only and (i + 1) % sparse_step == 0
    ]

    dense_mlp = per_mlp * h * ffn
    routed = experts * per_mlp * h * expert_ffn
    moe_mlp = routed + per_mlp * h * shared_ffn + h * experts
    norms = 2 * h
    blocks = layers * (attention + norms) + (layers - len(moe_layers)) * dense_mlp + len(moe_layers) * moe_mlp
    embeddings = vocab * h * (1 if tied_embeddings(cfg) else 2)
    total = blocks + embeddings + h
    inactive = len(moe_layers) * (experts - top_k) * per_mlp * h * expert_ffn if experts else 0
    return {
        "params": float(total),
        "active_params": float(total - inactive),
        "layers": layers,
        "hidden": h,
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "ffn_hidden": ffn if experts and len(moe_layers) < layers else (expert_ffn if experts else ffn),
        "moe_ffn_hidden": expert_ffn if experts else None,
        "dense_layers": layers - len(moe_layers) if experts else 0,
        "vocab": vocab,
        "gated_mlp": gated,
        "experts": experts or None,
        "experts_per_token": top_k or None,
        "shared_experts": shared,
        "kv_width": kv_width,
        "v_head_dim": v_head_dim,
        "sliding_window": window,
        "window_layers": window_layers,
        "q_lora_rank": int(cfg["q_lora_rank"]) if cfg.get("kv_lora_rank") and cfg.get("q_lora_rank") else None,
        "kv_lora_rank": int(cfg["kv_lora_rank"]) if cfg.get("kv_lora_rank") else None,
    }


# Models whose config.json gives a sliding window without ``layer_types`` and alternate windowed and full
# layers: Gemma 2 (Gemma Team 2024, "Gemma 2", section 2: local and global attention in every other layer)
# and GPT-OSS (OpenAI gpt-oss model card, 2025: "alternating dense and locally banded sparse attention").
_ALTERNATING_WINDOW = ("gemma2", "gpt_oss")


def _sliding_window(cfg: dict, layers: int) -> tuple[int | None, int | None]:
    """(window in tokens, layers that use it): from ``layer_types`` when the config lists them, else every
    other layer for the alternating families, else every layer; none where the config switches the window
    off (Qwen2's ``use_sliding_window: false``)."""
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return None, None
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and kinds:
        count = sum(1 for k in kinds[:layers] if str(k).startswith("sliding"))
    elif cfg.get("model_type") in _ALTERNATING_WINDOW:
        count = layers // 2
    else:
        count = layers
    return (int(window), count) if count else (None, None)


def model_fields(cfg: dict, name: str | None = None) -> dict[str, Any]:
    """The ``job.model`` fields for a HF-style config (what ``ModelSpec`` takes)."""
    counted = count_params(cfg)
    fields = {k: v for k, v in counted.items() if k != "kv_width" and v is not None}
    if fields["active_params"] == fields["params"]:
        fields.pop("active_params")
    if not fields.get("experts"):
        fields.pop("shared_experts", None)
        fields.pop("dense_layers", None)
    if tied_embeddings(cfg):
        fields["tied_embeddings"] = True
    if cfg.get("model_type") in _QK_NORM_MODEL_TYPES:
        fields["qk_norm"] = True
    if cfg.get("model_type") in _SANDWICH_NORM_MODEL_TYPES:
        fields["sandwich_norms"] = True
    if cfg.get("model_type") in _FP32_NORM_WEIGHT_MODEL_TYPES:
        fields["norm_fp32_weight"] = True
    if cfg.get("model_type") in _FP32_ROUTER_MODEL_TYPES:
        fields["router_fp32"] = True
    if cfg.get("swiglu_limit"):
        fields["swiglu_limit"] = float(cfg["swiglu_limit"])
    if name:
        fields["name"] = name
    return fields


def read_hf_config(path: str | Path) -> dict:
    """A Hugging Face ``config.json``: a JSON object, read with ``inputs.reader``'s bounds."""
    try:
        cfg = read_json_file(path, "config.json")
    except GpuplanError as exc:
        raise JobError(exc.reason, source=exc.source or str(path), field="job.model.hf_config") from None
    if not isinstance(cfg, dict):
        raise JobError(
            f"a config.json is a JSON object of fields, got a {type(cfg).__name__}",
            source=str(path),
            field="job.model.hf_config",
        )
    check_config(cfg, str(path))
    return cfg


def resolve(spec: dict | str, base: Path | None = None) -> dict:
    """``job.model`` with ``preset:`` or ``hf_config:`` expanded to shapes and counts (explicit keys win)."""
    if isinstance(spec, str):
        spec = {"preset": spec}
    if not isinstance(spec, dict) or not ({"preset", "hf_config"} & set(spec)):
        return spec
    spec = dict(spec)
    if "preset" in spec:
        name = str(spec.pop("preset"))
        table = presets()
        key = name.lower()
        if key not in table:
            raise JobError(
                f"unknown model preset {name!r}; run 'gpuplan models' for the list.{did_you_mean(name, list(table))}",
                field="job.model.preset",
            )
        fields = model_fields(table[key]["config"], name=key)
    else:
        given = spec.pop("hf_config")
        if not isinstance(given, str) or not given:
            raise JobError(
                f"hf_config is the path of a Hugging Face config.json (e.g. hf_config: llama/config.json), "
                f"got {given!r}",
                field="job.model.hf_config",
            )
        path = Path(given)
        if base is not None and not path.is_absolute():
            path = base / path
        cfg = read_hf_config(path)
        if isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg:
            # a multimodal model's config (Gemma 3, Llama 4, Qwen2.5-VL): the language model is nested
            raise GpuplanError(
                "this config nests its language model under 'text_config' (a multimodal model); gpuplan plans "
                "the language model: save the text_config part as its own config.json (with its model_type) "
                "and give that, or give the model's shapes in job.model",
                source=str(path),
                field="job.model.hf_config",
            )
        try:
            # a Hugging Face folder's config.json is named for its folder; any other file for itself
            named = path.parent.name if path.name == "config.json" else path.stem
            fields = model_fields(cfg, name=spec.get("name") or cfg.get("_name_or_path") or named)
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            raise GpuplanError(
                f"cannot size the model from this config ({exc.__class__.__name__}: {exc}); "
                "it needs hidden_size, num_hidden_layers, num_attention_heads and vocab_size",
                source=str(path),
                field="job.model.hf_config",
            ) from None
        fields["config_path"] = str(path)
    return {**fields, **spec}
