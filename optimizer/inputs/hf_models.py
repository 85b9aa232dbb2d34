"""Models described the way Hugging Face does: bundled presets and offline ``config.json`` import.

Parameter counts from the shapes (what each tensor of a decoder block holds):
- embeddings V h, plus an LM head V h unless ``tie_word_embeddings``, plus a learned position table P h
  for the architectures that have one (GPT-2's ``wpe``);
- attention: q h (a d), k and v h (kv d) each (GQA; Falcon's and GPT-BigCode's ``multi_query`` is one KV
  head), o (a d) h; DeepSeek's multi-head latent attention (MLA) instead: q = h r_q + r_q a (d_nope +
  d_rope), kv = h (r_kv + d_rope) + r_kv a (d_nope + d_v), o = a d_v h, with the low-rank norms;
- MLP: 3 h f when gated (SwiGLU/GeGLU: gate, up, down), else 2 h f, as each architecture's modeling file
  builds it (the activation's name decides only for architectures not listed); MoE layers hold every
  routed expert (3 h f_e each), the shared experts and a router h E; only experts_per_token of them are
  active;
- norms: 2 h per block (+ q/k norms for Qwen3), h at the end.
Active parameters (what FLOPs count) are the total less the routed experts a token does not visit.

Only decoder-only transformers are counted: a state-space or hybrid model (Mamba, Jamba, Nemotron-H), an
encoder or an encoder-decoder is refused, as gpuplan's physics models none of them.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from ..errors import GpuplanError, JobError, did_you_mean
from . import units
from .bundled import MODEL_PRESETS, bundled_dir
from .hf_architectures import (
    FIELD,
    FP32_NORM_WEIGHT_MODEL_TYPES,
    FP32_ROUTER_MODEL_TYPES,
    GATED_ACTIVATIONS,
    GATED_MLP_MODEL_TYPES,
    GIVE_SHAPES,
    LEARNED_POSITIONS,
    MLA_MODEL_TYPES,
    MOE_EXPERTS_KEY,
    PLAIN_MLP_MODEL_TYPES,
    QK_NORM_MODEL_TYPES,
    SANDWICH_NORM_MODEL_TYPES,
    ZERO_EXPERTS_DENSE_MODEL_TYPES,
    model_type,
    refuse_unmodelled,
    tied_embeddings,
)
from .hub import check_revision, hub_config, is_repo_id
from .reader import load_json, read_bundled_yaml, read_json_file, read_text

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
_READ_KEYS = frozenset(
    {k.split(".")[0] for k in _CONFIG_RANGES}
    | set(_ZERO_IS_NONE)
    | set(_CONFIG_NAMES)
    | set(_CONFIG_FLAGS)
    | set(_CONFIG_LAYER_LISTS)
    | {"layer_types", "max_position_embeddings", "swiglu_limit", "text_config", "is_encoder_decoder"}
)


def _lookup(cfg: dict, key: str) -> Any:
    """``cfg[key]``, a dotted key reading nested objects (``attn_config.kv_n_heads``); None where absent."""
    value: Any = cfg
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _refused(message: str, fix: str = "check that this is a model's config.json") -> JobError:
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
        value = _lookup(cfg, key)
        if value is None or (value == 0 and key in _ZERO_IS_NONE and not isinstance(value, bool)):
            continue
        limit = units.LIMITS[kind]
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole or not limit.allows(value):
            problem = (
                limit.text() if whole and not isinstance(value, bool) else f"is not a whole number; it {limit.text()}"
            )
            raise _refused(f"{key} = {value!r} in this config.json {problem}")
    nested = cfg.get("text_config")
    if nested is not None and not isinstance(nested, dict):
        # read as absent, the error blamed a missing hidden_size
        raise _refused(
            f"text_config in this config.json is {_a_json_type(nested)}, but it must be an object (a mapping "
            "of fields): a multimodal config nests its language model's config there",
            'write text_config as an object ({"model_type": ..., "hidden_size": ...}) or remove it',
        )
    for key, example in _CONFIG_NAMES.items():
        if cfg.get(key) is not None and not isinstance(cfg[key], str):
            raise _refused(f"{key} = {cfg[key]!r} in this config.json is not a name (a string such as {example})")
    for key in _CONFIG_FLAGS:
        if cfg.get(key) is not None and not isinstance(cfg[key], bool):
            raise _refused(
                f"{key} = {cfg[key]!r} in this config.json is not a boolean, which transformers refuses too",
                "write true or false, unquoted",
            )
    limit = units.LIMITS["activation_clamp"]
    clamp = cfg.get("swiglu_limit")
    if clamp is not None and (
        isinstance(clamp, bool) or not isinstance(clamp, (int, float)) or not limit.allows(clamp)
    ):
        shown = "is not a number; it " if isinstance(clamp, bool) or not isinstance(clamp, (int, float)) else ""
        raise _refused(f"swiglu_limit = {clamp!r} in this config.json {shown}{limit.text()}")
    kinds = cfg.get("layer_types")
    if kinds is not None and not (
        isinstance(kinds, list) and len(kinds) <= units.LIMITS["layers"].high and all(isinstance(k, str) for k in kinds)
    ):
        raise _refused(
            "layer_types in this config.json must be a list of layer kinds ('sliding_attention', 'full_attention')"
        )
    for key in _CONFIG_LAYER_LISTS:
        layers = cfg.get(key)
        if layers is not None and not (
            isinstance(layers, list)
            and len(layers) <= units.LIMITS["layers"].high
            and all(type(i) is int for i in layers)
        ):
            raise _refused(f"{key} in this config.json must be a list of layer numbers")


def _a_json_type(value: Any) -> str:
    """``value`` as JSON calls its kind: 'the number 5', 'a list', 'the string "x"'."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {json.dumps(value)[:60]}"
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"


def _presets_file() -> Path:
    return bundled_dir("catalogs") / f"{MODEL_PRESETS}.yaml"


@functools.cache
def presets() -> dict[str, dict]:
    """The bundled model presets, read once per process (a portfolio may name a preset per job)."""
    return read_bundled_yaml(_presets_file(), "model presets")


def _first(cfg: dict, *keys: str) -> str | None:
    """The first of ``keys`` the config gives a value for (``null`` reads as absent)."""
    return next((k for k in keys if _lookup(cfg, k) is not None), None)


def _whole(
    cfg: dict, *keys: str, default: int | None = None, why: str = "which gpuplan needs to size the model"
) -> int:
    """The first of ``keys`` given, as an int; ``default`` where none is, else refused naming them."""
    key = _first(cfg, *keys)
    if key is not None:
        return int(_lookup(cfg, key))
    if default is not None:
        return default
    others = f" (nor {' or '.join(keys[1:])})" if len(keys) > 1 else ""
    raise _refused(f"this config.json gives no {keys[0]}{others}, {why}")


def _flag(cfg: dict, key: str, default: bool) -> bool:
    value = cfg.get(key)
    return default if value is None else bool(value)


def gated_mlp(cfg: dict) -> bool:
    """Whether the MLP is gated (3 matrices): by the architecture where gpuplan knows it, else by the
    activation's name."""
    kind = model_type(cfg)
    if kind in PLAIN_MLP_MODEL_TYPES:
        return False
    if kind in GATED_MLP_MODEL_TYPES:
        return True
    key = _first(cfg, "hidden_act", "hidden_activation", "activation_function")
    return key is None or str(cfg[key]) in GATED_ACTIVATIONS  # none named: Llama's SwiGLU, transformers' default


def _kv_heads(cfg: dict, heads: int) -> tuple[int, str]:
    """(key/value heads, the config key that gives them)."""
    kind = model_type(cfg)
    # FalconAttention: num_kv_heads if new_decoder_architecture or not multi_query, else 1 (FalconConfig:
    # multi_query defaults to true, so falcon-7b's num_kv_heads: 71 is not read)
    if kind == "falcon" and not _flag(cfg, "new_decoder_architecture", False) and _flag(cfg, "multi_query", True):
        return 1, "multi_query"
    # GPTBigCodeAttention: kv_heads = 1 if multi_query else num_heads (GPTBigCodeConfig: multi_query defaults to true)
    if kind == "gpt_bigcode":
        return (1 if _flag(cfg, "multi_query", True) else heads), "multi_query"
    # DbrxAttention: attn_config.kv_n_heads (DbrxAttentionConfig's default of 1 is not DBRX's 8: required)
    if kind == "dbrx":
        return _whole(cfg, "attn_config.kv_n_heads"), "attn_config.kv_n_heads"
    key = _first(cfg, "num_key_value_heads", "num_kv_heads")
    return (int(cfg[key]), key) if key else (heads, "num_attention_heads")


def _latent_attention(cfg: dict) -> bool:
    """Whether attention is multi-head latent attention (MLA): a DeepSeek architecture, or a kv_lora_rank given.
    A rank of 0 is refused, not read as plain attention: it dropped the config's MLA head widths and sized heads
    of hidden / heads (56 for DeepSeek-V3, whose query heads are 192 wide), and transformers builds a zero-width
    latent from it (``hf_architectures.MLA_MODEL_TYPES``); a q_lora_rank of 0 likewise, where None is no query
    compression."""
    rank, kind = cfg.get("kv_lora_rank"), model_type(cfg)
    dims = ", ".join(f"{k} {cfg[k]}" for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim") if k in cfg)
    mla = f"multi-head latent attention ({dims})" if dims else "multi-head latent attention"
    fix = "give kv_lora_rank as the model was trained (DeepSeek-V2 and V3: 512)"
    if rank is None and kind in MLA_MODEL_TYPES:
        raise _refused(
            f"this config.json gives no kv_lora_rank, which sizes a {kind} model's {mla}: the keys and values "
            "are compressed to a latent that wide (transformers' default of 512 need not be this model's)",
            fix,
        )
    if rank == 0:
        whose = f"a {kind} model's attention is {mla}" if kind in MLA_MODEL_TYPES else f"it reads as {mla}"
        raise _refused(
            f"kv_lora_rank = 0 in this config.json, but {whose}, whose keys and values are compressed to a "
            "latent kv_lora_rank wide: transformers builds a zero-width layer from 0, and planned as plain "
            "attention the config's head widths were dropped",
            fix if kind in MLA_MODEL_TYPES or dims else f"{fix}, or remove the key for plain attention",
        )
    if not rank:
        return False
    if cfg.get("q_lora_rank") == 0:
        raise _refused(
            "q_lora_rank = 0 in this config.json: transformers compresses the queries to q_lora_rank unless it is "
            "null, so 0 builds a zero-width q_a_proj",
            "write null for no query compression (as DeepSeek-V2-Lite does), or give the rank (DeepSeek-V3: 1536)",
        )
    return True


def _attention(cfg: dict, h: int, heads: int, keys: tuple[str, str]) -> tuple[int, dict[str, Any]]:
    """The parameters of one attention block, and the shapes the physics reads (``keys``: the config's
    names for the hidden size and the heads, for messages)."""
    hidden_key, heads_key = keys
    kv_heads, kv_key = _kv_heads(cfg, heads)
    if heads % kv_heads:
        raise _refused(
            f"{heads_key} ({heads}) in this config.json is not a multiple of {kv_key} ({kv_heads}): each "
            "key/value head serves a whole group of query heads",
            "correct whichever of the two is wrong",
        )
    if _latent_attention(cfg):  # DeepSeek multi-head latent attention
        why = "which sizes its multi-head latent attention (kv_lora_rank)"
        r_q, r_kv = int(cfg.get("q_lora_rank") or 0), int(cfg["kv_lora_rank"])
        d_nope = _whole(cfg, "qk_nope_head_dim", why=why)
        d_rope = _whole(cfg, "qk_rope_head_dim", why=why)
        d_v = _whole(cfg, "v_head_dim", why=why)
        q = (h * r_q + r_q + r_q * heads * (d_nope + d_rope)) if r_q else h * heads * (d_nope + d_rope)
        kv = h * (r_kv + d_rope) + r_kv + r_kv * heads * (d_nope + d_v)
        # the latent cache stores r_kv + d_rope per token
        shapes = {"kv_heads": kv_heads, "head_dim": d_nope + d_rope, "v_head_dim": d_v, "kv_width": r_kv + d_rope}
        return q + kv + heads * d_v * h, shapes
    head_dim = _whole(cfg, "head_dim", default=h // heads)
    if not head_dim:
        raise _refused(
            f"{heads_key} ({heads}) in this config.json is more than its {hidden_key} ({h}) and it gives no "
            "head_dim, so each head would be 0 wide",
            f"check {heads_key}, or give head_dim",
        )
    attention = h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h
    if cfg.get("attention_bias") or cfg.get("qkv_bias"):
        attention += heads * head_dim + 2 * kv_heads * head_dim
    if model_type(cfg).startswith("qwen3"):
        attention += 2 * head_dim  # q_norm, k_norm
    return attention, {"kv_heads": kv_heads, "head_dim": head_dim, "v_head_dim": None, "kv_width": kv_heads * head_dim}


def _mlp_shapes(cfg: dict, h: int, layers: int) -> dict[str, int]:
    """MLP widths, routed and shared experts, and how many layers are MoE."""
    kind = model_type(cfg)
    experts_keys: tuple[str, ...] = ("num_experts", "num_local_experts", "n_routed_experts")
    top_k_keys: tuple[str, ...] = ("num_experts_per_tok", "moe_topk")
    required: int | None = 0
    if kind == "llama4_text":
        # Llama4TextDecoderLayer: a dense layer is Llama4TextMLP(intermediate_size_mlp); a MoE layer routes to
        # experts intermediate_size wide and always runs a shared expert as wide (Llama4TextMoe.shared_expert);
        # the defaults are Llama4TextConfig's
        ffn = _whole(cfg, "intermediate_size_mlp", default=16384)
        expert_ffn = _whole(cfg, "intermediate_size", default=8192)
    elif kind == "dbrx":
        # DbrxExperts: ffn_config.moe_num_experts gated experts in every layer, moe_top_k of them per token
        # (DbrxFFNConfig's defaults, 4 experts of 3,584, are not DBRX's: each is required)
        ffn = expert_ffn = _whole(cfg, "ffn_config.ffn_hidden_size")
        experts_keys, top_k_keys, required = ("ffn_config.moe_num_experts",), ("ffn_config.moe_top_k",), None
    else:
        ffn = _whole(cfg, "intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size", default=4 * h)
        expert_ffn = _whole(cfg, "moe_intermediate_size", default=ffn)
    moe = kind in MOE_EXPERTS_KEY
    if moe:  # the architecture's own key first, as messages name it
        experts_keys = (MOE_EXPERTS_KEY[kind], *(k for k in experts_keys if k != MOE_EXPERTS_KEY[kind]))
    experts_key = _first(cfg, *experts_keys)
    if moe and experts_key is None:
        raise _refused(
            f"this config.json gives no {experts_keys[0]}, which a {kind} model needs: each of its MoE layers "
            "routes to that many experts (transformers' default need not be this model's)",
            f"give {experts_keys[0]} as the model was trained",
        )
    experts = _whole(cfg, *experts_keys, default=required)
    if experts_key is not None and experts == 0 and kind not in ZERO_EXPERTS_DENSE_MODEL_TYPES:
        _refuse_no_experts(cfg, experts_key, top_k_keys, moe)
    top_k = _whole(cfg, *top_k_keys, default=required) if experts else 0
    if experts and not 0 < top_k <= experts:
        given = _first(cfg, *top_k_keys)
        raise _refused(
            f"{experts_key} = {experts} in this config.json, but {given or top_k_keys[0]} is "
            f"{'missing' if given is None else top_k}: a mixture of experts routes each token to 1 to {experts} "
            "of them (gpuplan's experts_per_token)",
            f"give {given or top_k_keys[0]} as the model was trained",
        )
    shared = _whole(cfg, "n_shared_experts", default=0)
    shared_ffn = shared * expert_ffn
    if cfg.get("shared_expert_intermediate_size"):
        shared, shared_ffn = 1, int(cfg["shared_expert_intermediate_size"])
    if kind == "llama4_text" and experts:
        shared, shared_ffn = 1, expert_ffn
    dense_prefix = _whole(cfg, "first_k_dense_replace", default=0)
    # Qwen2MoeDecoderLayer and Llama4TextConfig.moe_layers: layer i is MoE when (i + 1) % step == 0
    step = _whole(cfg, "decoder_sparse_step", "interleave_moe_layer_step", default=1) or 1
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    listed = cfg.get("moe_layers") if kind == "llama4_text" else None  # given, it overrides the step
    if not experts:
        moe_layers = 0
    elif isinstance(listed, list):
        moe_layers = len(set(listed) & set(range(layers)))
    else:
        moe_layers = sum(1 for i in range(layers) if i >= dense_prefix and i not in mlp_only and (i + 1) % step == 0)
    return {
        "ffn": ffn,
        "expert_ffn": expert_ffn,
        "experts": experts,
        "top_k": top_k,
        "shared": shared,
        "shared_ffn": shared_ffn,
        "moe_layers": moe_layers,
    }


def _refuse_no_experts(cfg: dict, experts_key: str, top_k_keys: tuple[str, ...], moe: bool) -> None:
    """A mixture of experts with 0 experts: each token routed to some of none, which transformers cannot build
    (planned as a dense model, it was sized and timed for another model)."""
    top_key = _first(cfg, *top_k_keys)
    top_k = _lookup(cfg, top_key) if top_key else None
    if not moe and not top_k:
        return  # a dense architecture with an unused expert count of 0
    kind = model_type(cfg)
    if top_k:
        why = f"but {top_key} = {top_k!r}: each token would be routed to {top_k!r} of no experts"
    else:
        why = f"but every MoE layer of a {kind} model routes each token to its experts"
    raise _refused(
        f"{experts_key} = 0 in this config.json, {why}, and transformers cannot build such a model",
        f"give {experts_key} as the model was trained (Mixtral 8x7B: num_local_experts 8)",
    )


def _position_params(cfg: dict, h: int) -> int:
    """A learned absolute position table's parameters, for the architectures that have one."""
    rule = LEARNED_POSITIONS.get(model_type(cfg))
    if rule is None:
        return 0
    keys, default, offset = rule
    return (_whole(cfg, *keys, default=default) + offset) * h


def count_params(cfg: dict) -> dict[str, Any]:
    """Total and active parameters, with the shapes gpuplan's physics uses, from a HF-style config."""
    refuse_unmodelled(cfg)
    hidden_keys = ("hidden_size", "d_model", "n_embd")
    h = _whole(cfg, *hidden_keys)
    layers_keys = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    layers = _whole(cfg, *layers_keys)
    heads_keys = ("num_attention_heads", "n_head", "n_heads", "num_heads", "attention_heads")
    heads = _whole(cfg, *heads_keys)
    vocab = _whole(cfg, "vocab_size")
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and len(kinds) != layers:  # as transformers' validate_layer_type refuses it
        raise _refused(
            f"layer_types in this config.json has {len(kinds)} entries, but {_first(cfg, *layers_keys)} is "
            f"{layers}, which transformers refuses too",
            "give one layer kind per layer",
        )
    attention, shapes = _attention(cfg, h, heads, (_first(cfg, *hidden_keys) or "", _first(cfg, *heads_keys) or ""))
    window, window_layers = _sliding_window(cfg, layers)
    mlp = _mlp_shapes(cfg, h, layers)
    gated = gated_mlp(cfg)
    per_mlp = 3 if gated else 2
    ffn, expert_ffn, experts, moe_layers = mlp["ffn"], mlp["expert_ffn"], mlp["experts"], mlp["moe_layers"]

    dense_mlp = per_mlp * h * ffn
    routed = experts * per_mlp * h * expert_ffn
    moe_mlp = routed + per_mlp * h * mlp["shared_ffn"] + h * experts
    norms = 2 * h
    blocks = layers * (attention + norms) + (layers - moe_layers) * dense_mlp + moe_layers * moe_mlp
    embeddings = vocab * h * (1 if tied_embeddings(cfg) else 2) + _position_params(cfg, h)
    total = blocks + embeddings + h
    inactive = moe_layers * (experts - mlp["top_k"]) * per_mlp * h * expert_ffn
    return {
        "params": float(total),
        "active_params": float(total - inactive),
        "layers": layers,
        "hidden": h,
        "heads": heads,
        "kv_heads": shapes["kv_heads"],
        "head_dim": shapes["head_dim"],
        "ffn_hidden": ffn if experts and moe_layers < layers else (expert_ffn if experts else ffn),
        "moe_ffn_hidden": expert_ffn if experts else None,
        "dense_layers": layers - moe_layers if experts else 0,
        "vocab": vocab,
        "gated_mlp": gated,
        "experts": experts or None,
        "experts_per_token": mlp["top_k"] or None,
        "shared_experts": mlp["shared"],
        "kv_width": shapes["kv_width"],
        "v_head_dim": shapes["v_head_dim"],
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
    if cfg.get("model_type") in QK_NORM_MODEL_TYPES:
        fields["qk_norm"] = True
    if cfg.get("model_type") in SANDWICH_NORM_MODEL_TYPES:
        fields["sandwich_norms"] = True
    if cfg.get("model_type") in FP32_NORM_WEIGHT_MODEL_TYPES:
        fields["norm_fp32_weight"] = True
    if cfg.get("model_type") in FP32_ROUTER_MODEL_TYPES:
        fields["router_fp32"] = True
    if cfg.get("swiglu_limit"):
        fields["swiglu_limit"] = float(cfg["swiglu_limit"])
    if name:
        fields["name"] = name
    return fields


def config_file(path: Path) -> Path:
    """A Hugging Face model folder stands for the config.json in it (whatever kind of file that is: the reader
    refuses a FIFO or a device by name, where 'a directory without a config.json' would be wrong)."""
    inside = path / "config.json"
    return inside if os.path.isdir(path) and os.path.lexists(inside) else path


def model_reference(name: str) -> dict[str, str]:
    """What a model name names (``gpuplan model NAME``, ``job.model: NAME``): a config.json (an existing
    file, a Hugging Face model folder, or a path ending in .json, in any case), else a preset, else a Hub
    model id (``owner/name``). A file wins over a preset of the same name, as it does for catalogs."""
    if os.path.exists(name) or name.lower().endswith(".json"):  # a stat: a FIFO is named here, not opened
        return {"hf_config": name}
    if name.lower() not in presets() and is_repo_id(name):
        return {"hub": name}
    return {"preset": name}


# The keys of job.model that each name a whole model, to be expanded into its fields.
MODEL_SOURCES = ("preset", "hf_config", "hub")


# A JSON string (skipped) or a bare non-finite number, as Python's json.dump writes float('inf') and NaN.
_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|-?Infinity|NaN')


def _holds_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _non_finite_as_null(path: Path) -> Any:
    """The config read with its Infinity and NaN as null where they sit only in keys gpuplan never reads
    (Nemotron-H's ``time_step_limit: [0.0, Infinity]``), every other value as strictly as ever; None where
    there are none, or one sits in a key gpuplan reads."""
    try:
        text = read_text(path, "config.json")
        loose = json.loads(text)  # Python's reader takes Infinity and NaN: only to see where they are
    except (GpuplanError, ValueError, RecursionError):
        return None
    patched = _NON_FINITE.sub(lambda m: m.group() if m.group().startswith('"') else "null", text)
    if patched == text or not isinstance(loose, dict):
        return None
    if any(_holds_non_finite(value) for key, value in loose.items() if key in _READ_KEYS):
        return None
    return load_json(patched, str(path))


def read_hf_config(path: str | Path) -> dict:
    """A Hugging Face ``config.json`` (or the folder holding it): a JSON object, read with ``inputs.reader``'s
    bounds, of an architecture gpuplan models and values of the kinds it reads."""
    path = config_file(Path(path))
    if os.path.isdir(path):
        raise JobError(
            "this is a directory without a config.json in it; give a Hugging Face model directory or the path "
            "of a config.json",
            source=str(path),
            field=FIELD,
        )
    try:
        try:
            cfg = read_json_file(path, "config.json")
        except GpuplanError:
            cfg = _non_finite_as_null(path)
            if cfg is None:
                raise
    except GpuplanError as exc:
        raise JobError(exc.reason, source=exc.source or str(path), field=FIELD) from None
    if not isinstance(cfg, dict):
        raise JobError(
            f"a config.json is a JSON object of fields, got a {type(cfg).__name__}", source=str(path), field=FIELD
        )
    check_config(cfg, str(path))
    return cfg


def resolve(spec: dict | str, base: Path | None = None) -> dict:
    """``job.model`` with ``preset:``, ``hf_config:`` or ``hub:`` (a Hugging Face model id) expanded to shapes
    and counts (explicit keys win)."""
    if isinstance(spec, str):
        # a name in a job file: a preset, else a Hub model id (a config.json is given as {hf_config: PATH})
        spec = {"hub": spec} if spec.lower() not in presets() and is_repo_id(spec) else {"preset": spec}
    if not isinstance(spec, dict) or not (set(MODEL_SOURCES) & set(spec)):
        return spec
    given = [key for key in MODEL_SOURCES if key in spec]
    if len(given) > 1:
        raise JobError(
            f"{' and '.join(given)} are all given, and each names a whole model: give only one of them",
            field="job.model",
        )
    if "revision" in spec and "hub" not in spec:
        raise JobError(
            "revision pins a Hugging Face Hub model's config.json (model: {hub: owner/name, revision: ...}); "
            f"a {given[0]} has none: drop it",
            field="job.model.revision",
        )
    spec = dict(spec)
    if "hub" in spec:
        return _from_hub(spec)
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
                field=FIELD,
            )
        path = Path(given)
        if base is not None and not path.is_absolute():
            path = base / path
        fields = _from_config(config_file(path), spec.get("name"))
    return {**fields, **spec}


def _from_hub(spec: dict) -> dict:
    """``job.model: {hub: owner/name, revision: ...}``: the model's config.json from the Hub's cache (or the Hub)."""
    repo, revision = spec.pop("hub"), spec.pop("revision", None)
    if not isinstance(repo, str) or not is_repo_id(repo):
        raise JobError(
            f"hub is a Hugging Face model id, owner/name (e.g. hub: meta-llama/Llama-3.1-8B), got {repo!r}",
            field="job.model.hub",
        )
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise JobError(
            f"revision is a branch, tag or commit of {repo} (e.g. revision: main), got {revision!r}",
            field="job.model.revision",
        )
    if revision is not None:
        check_revision(revision, repo)  # by the Hub's rules, before any path in its cache is built
    fields = _from_config(hub_config(repo, revision), spec.get("name") or repo)
    return {**fields, **spec}


def _from_config(path: Path, name: str | None) -> dict:
    """A config.json's model fields, named ``name`` (else by the config or its folder), with its path."""
    cfg = read_hf_config(path)
    if isinstance(cfg.get("text_config"), dict) and "hidden_size" not in cfg:
        # a multimodal model's config (Gemma 3, Llama 4, Qwen2.5-VL): the language model is nested
        raise GpuplanError(
            "this config nests its language model under 'text_config' (a multimodal model); gpuplan plans "
            "the language model: save the text_config part as its own config.json (with its model_type) "
            "and give that, or give the model's shapes in job.model",
            source=str(path),
            field=FIELD,
        )
    try:
        # a Hugging Face folder's config.json is named for its folder; any other file for itself
        named = path.parent.name if path.name == "config.json" else path.stem
        fields = model_fields(cfg, name=name or cfg.get("_name_or_path") or named)
    except GpuplanError as exc:
        raise exc.located(str(path), FIELD) from None
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # a backstop: check_config comes first
        raise GpuplanError(
            f"cannot size the model from this config.json ({exc.__class__.__name__}: {exc}); check that it "
            f"is a decoder model's config.json, or {GIVE_SHAPES}",
            source=str(path),
            field=FIELD,
        ) from None
    fields["config_path"] = str(path)
    return fields
