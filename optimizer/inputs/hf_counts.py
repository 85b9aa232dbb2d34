"""A Hugging Face ``config.json`` counted: its shapes and parameters as ``job.model`` fields (``model_fields``).

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

from typing import Any

from .hf_architectures import (
    FP32_NORM_WEIGHT_MODEL_TYPES,
    FP32_ROUTER_MODEL_TYPES,
    GATED_ACTIVATIONS,
    GATED_MLP_MODEL_TYPES,
    LEARNED_POSITIONS,
    LINEAR_MODULES_BY_MODEL_TYPE,
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
from .hf_config_checks import lookup, refused


def _first(cfg: dict, *keys: str) -> str | None:
    """The first of ``keys`` the config gives a value for (``null`` reads as absent)."""
    return next((k for k in keys if lookup(cfg, k) is not None), None)


def _whole(
    cfg: dict, *keys: str, default: int | None = None, why: str = "which gpuplan needs to size the model"
) -> int:
    """The first of ``keys`` given, as an int; ``default`` where none is, else refused naming them."""
    key = _first(cfg, *keys)
    if key is not None:
        return int(lookup(cfg, key))
    if default is not None:
        return default
    others = f" (nor {' or '.join(keys[1:])})" if len(keys) > 1 else ""
    raise refused(f"this config.json gives no {keys[0]}{others}, {why}")


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
        raise refused(
            f"this config.json gives no kv_lora_rank, which sizes a {kind} model's {mla}: the keys and values "
            "are compressed to a latent that wide (transformers' default of 512 need not be this model's)",
            fix,
        )
    if rank == 0:
        whose = f"a {kind} model's attention is {mla}" if kind in MLA_MODEL_TYPES else f"it reads as {mla}"
        raise refused(
            f"kv_lora_rank = 0 in this config.json, but {whose}, whose keys and values are compressed to a "
            "latent kv_lora_rank wide: transformers builds a zero-width layer from 0, and planned as plain "
            "attention the config's head widths were dropped",
            fix if kind in MLA_MODEL_TYPES or dims else f"{fix}, or remove the key for plain attention",
        )
    if not rank:
        return False
    if cfg.get("q_lora_rank") == 0:
        raise refused(
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
        raise refused(
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
        raise refused(
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
        raise refused(
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
        raise refused(
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
    top_k = lookup(cfg, top_key) if top_key else None
    if not moe and not top_k:
        return  # a dense architecture with an unused expert count of 0
    kind = model_type(cfg)
    if top_k:
        why = f"but {top_key} = {top_k!r}: each token would be routed to {top_k!r} of no experts"
    else:
        why = f"but every MoE layer of a {kind} model routes each token to its experts"
    raise refused(
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
        raise refused(
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
    if cfg.get("model_type") in LINEAR_MODULES_BY_MODEL_TYPE:
        fields["linear_modules"] = LINEAR_MODULES_BY_MODEL_TYPE[cfg["model_type"]]
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
