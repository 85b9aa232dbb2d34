"""A Hugging Face ``config.json`` checked before it is counted (``check_config``): an architecture gpuplan
models, every size a whole number in its ``units.LIMITS`` range, every name a string, every flag a boolean,
every layer list a list of its kind; and the keys gpuplan reads (``READ_KEYS``)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import JobError
from . import units
from .hf_architectures import (
    FIELD,
    LEARNED_POSITIONS,
    model_type,
    refuse_unmodelled,
)

# The config.json sizes counted here -> their range in ``units.LIMITS`` (a dotted key is nested: DBRX's
# ``attn_config.kv_n_heads``). Checked before counting: a ``num_hidden_layers: 1e12`` would otherwise loop
# over a trillion layers, and ``num_attention_heads: 0`` divide by zero.
_CONFIG_RANGES = {
    "hidden_size": "width",
    "d_model": "width",
    "n_embd": "width",
    "num_hidden_layers": "layers",
    "n_layer": "layers",
    "num_layers": "layers",
    "n_layers": "layers",
    "num_attention_heads": "heads",
    "n_head": "heads",
    "n_heads": "heads",
    "num_heads": "heads",
    "attention_heads": "heads",
    "num_key_value_heads": "heads",
    "num_kv_heads": "heads",
    "attn_config.kv_n_heads": "heads",
    "head_dim": "width",
    "vocab_size": "vocab",
    "intermediate_size": "width",
    "intermediate_size_mlp": "width",
    "ffn_dim": "width",
    "n_inner": "width",
    "ffn_hidden_size": "width",
    "ffn_config.ffn_hidden_size": "width",
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
    "ffn_config.moe_num_experts": "experts",
    "num_experts_per_tok": "experts",
    "moe_topk": "experts",
    "ffn_config.moe_top_k": "experts",
    "n_shared_experts": "experts",
    "first_k_dense_replace": "layers",
    "decoder_sparse_step": "layers",
    "interleave_moe_layer_step": "layers",
    "sliding_window": "seq_len",
    "n_positions": "seq_len",
}
# Keys whose 0 is not out of range here: the counting reads it (no dense prefix, no window, no shared expert;
# no experts for a dense or Qwen-MoE architecture) or refuses it naming the key (0 experts of a mixture of
# experts, a zero-width MLA latent or query compression).
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
# The config.json fields gpuplan reads as names (compared as strings), with an example of each.
_CONFIG_NAMES = {
    "model_type": "'llama'",
    "hidden_act": "'silu'",
    "hidden_activation": "'gelu_pytorch_tanh'",
    "activation_function": "'gelu_new'",
    "_name_or_path": "'meta-llama/Llama-3.1-8B'",
}
# The booleans read: a JSON true or false, as transformers' strict config classes require ("false" is a
# non-empty string, which Python reads as true: it tied Llama 3.1 8B's embeddings).
_CONFIG_FLAGS = (
    "tie_word_embeddings",
    "use_sliding_window",
    "attention_bias",
    "qkv_bias",
    "multi_query",
    "new_decoder_architecture",
)
# Lists of layer numbers (Qwen-MoE's dense layers, Llama 4's MoE layers).
_CONFIG_LAYER_LISTS = ("mlp_only_layers", "moe_layers")
# Every top-level key gpuplan reads from a config.json: a value it cannot parse elsewhere is no concern of it.
READ_KEYS = frozenset(
    {k.split(".")[0] for k in _CONFIG_RANGES}
    | set(_ZERO_IS_NONE)
    | set(_CONFIG_NAMES)
    | set(_CONFIG_FLAGS)
    | set(_CONFIG_LAYER_LISTS)
    | {"layer_types", "max_position_embeddings", "swiglu_limit", "text_config", "is_encoder_decoder"}
)


def lookup(cfg: dict, key: str) -> Any:
    """``cfg[key]``, a dotted key reading nested objects (``attn_config.kv_n_heads``); None where absent."""
    value: Any = cfg
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def refused(message: str, fix: str = "check that this is a model's config.json") -> JobError:
    return JobError(f"{message}; {fix}", field=FIELD)


def check_config(cfg: dict, source: str) -> None:
    """The architecture is one gpuplan models, every size ``count_params`` reads is a whole number in its
    ``units.LIMITS`` range, every name a string, every flag a boolean, every list a list of its kind."""
    try:
        refuse_unmodelled(cfg)
        _check_values(cfg)
    except JobError as exc:
        raise exc.located(source) from None


def _check_values(cfg: dict) -> None:
    ranges = dict(_CONFIG_RANGES)
    if model_type(cfg) in LEARNED_POSITIONS:  # read only where it sizes a position table
        ranges["max_position_embeddings"] = "seq_len"
    for key, kind in ranges.items():
        value = lookup(cfg, key)
        if value is None or (value == 0 and key in _ZERO_IS_NONE and not isinstance(value, bool)):
            continue
        limit = units.LIMITS[kind]
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole or not limit.allows(value):
            problem = (
                limit.text() if whole and not isinstance(value, bool) else f"is not a whole number; it {limit.text()}"
            )
            raise refused(f"{key} = {value!r} in this config.json {problem}")
    nested = cfg.get("text_config")
    if nested is not None and not isinstance(nested, dict):
        # read as absent, the error blamed a missing hidden_size
        raise refused(
            f"text_config in this config.json is {_a_json_type(nested)}, but it must be an object (a mapping "
            "of fields): a multimodal config nests its language model's config there",
            'write text_config as an object ({"model_type": ..., "hidden_size": ...}) or remove it',
        )
    for key, example in _CONFIG_NAMES.items():
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise refused(f"{key} = {cfg[key]!r} in this config.json is not a name (a string such as {example})")
    for key in _CONFIG_FLAGS:
        if cfg.get(key) is not None and not isinstance(cfg[key], bool):
            raise refused(
                f"{key} = {cfg[key]!r} in this config.json is not a boolean, which transformers refuses too",
                "write true or false, unquoted",
            )
    limit = units.LIMITS["activation_clamp"]
    clamp = cfg.get("swiglu_limit")
    if clamp is not None and (
        isinstance(clamp, bool) or not isinstance(clamp, (int, float)) or not limit.allows(clamp)
    ):
        shown = "is not a number; it " if isinstance(clamp, bool) or not isinstance(clamp, (int, float)) else ""
        raise refused(f"swiglu_limit = {clamp!r} in this config.json {shown}{limit.text()}")
    kinds = cfg.get("layer_types")
    if kinds is not None and not (
        isinstance(kinds, list) and len(kinds) <= units.LIMITS["layers"].high and all(isinstance(k, str) for k in kinds)
    ):
        raise refused(
            "layer_types in this config.json must be a list of layer kinds ('sliding_attention', 'full_attention')"
        )
    for key in _CONFIG_LAYER_LISTS:
        layers = cfg.get(key)
        if layers is not None and not (
            isinstance(layers, list)
            and len(layers) <= units.LIMITS["layers"].high
            and all(type(i) is int for i in layers)
        ):
            raise refused(f"{key} in this config.json must be a list of layer numbers")


def _a_json_type(value: Any) -> str:
    """``value`` as JSON calls its kind: 'the number 5', 'a list', 'the string "x"'."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {json.dumps(value)[:60]}"
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"
