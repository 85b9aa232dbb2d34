"""Hugging Face architectures as gpuplan reads them: which ``model_type`` values it sizes and which it refuses,
how each builds its MLP, positions and norms, and its config class's defaults (transformers 5.17).
``hf_models`` counts parameters with these tables."""

from __future__ import annotations

from ..errors import JobError

FIELD = "job.model.hf_config"
GIVE_SHAPES = "give the model's params and shapes in job.model instead of hf_config"

# Architectures gpuplan does not model, by the model_type transformers 5.17 gives them
# (models/<type>/configuration_<type>.py), and what they are.
STATE_SPACE = frozenset({"falcon_mamba", "mamba", "mamba2", "rwkv", "xlstm"})
HYBRID = frozenset(
    {
        "bamba", "falcon_h1", "granitemoehybrid", "jamba", "kimi_linear", "lfm2", "lfm2_moe", "minimax",
        "nemotron_h", "olmo_hybrid", "qwen3_5_moe_text", "qwen3_5_text", "qwen3_next", "recurrent_gemma",
        "zamba", "zamba2",
    }
)  # fmt: skip
ENCODER_DECODER = frozenset(
    {
        "bart", "bigbird_pegasus", "blenderbot", "blenderbot-small", "fsmt", "led", "longt5", "m2m_100",
        "marian", "mbart", "mt5", "nllb-moe", "pegasus", "pegasus_x", "plbart", "prophetnet",
        "switch_transformers", "t5", "t5gemma", "umt5", "whisper",
    }
)  # fmt: skip
ENCODER = frozenset(
    {
        "albert", "bert", "big_bird", "camembert", "deberta", "deberta-v2", "distilbert", "electra", "funnel",
        "longformer", "megatron-bert", "modernbert", "mpnet", "roberta", "xlm-roberta",
    }
)  # fmt: skip
NOT_DECODER_ONLY = {
    **dict.fromkeys(STATE_SPACE, "a state-space (recurrent) model"),
    **dict.fromkeys(HYBRID, "a hybrid of state-space or linear-attention layers and attention layers"),
    **dict.fromkeys(ENCODER_DECODER, "an encoder-decoder model"),
    **dict.fromkeys(ENCODER, "an encoder-only model"),
}
# Layer kinds of ``layer_types`` that are not attention: transformers 5.17 configuration_utils.py
# ALLOWED_ATTN_LAYER_TYPES' recurrent kinds (Mamba, Gated DeltaNet, lightning attention: "linear_attention")
# and the legacy names it maps to them (_LEGACY_LAYER_TYPE_REMAP: "mamba", "conv").
RECURRENT_LAYER_KINDS = frozenset({"linear_attention", "mamba", "conv", "hybrid", "hybrid_sliding"})


def model_type(cfg: dict) -> str:
    """The config's ``model_type`` ('' where it gives none or a non-string)."""
    kind = cfg.get("model_type")
    return kind if isinstance(kind, str) else ""


def refuse_unmodelled(cfg: dict) -> None:
    """Refuse a config whose architecture is not a decoder-only transformer: counted as a Llama, Jamba
    (Mamba and attention layers) came to 92B where it has 52B."""
    kind = model_type(cfg)
    what = NOT_DECODER_ONLY.get(kind) or ("an encoder-decoder model" if cfg.get("is_encoder_decoder") is True else None)
    if what:
        raise JobError(
            f"model_type {kind!r} in this config.json is {what}, which gpuplan cannot size: its physics "
            f"models decoder-only transformers; {GIVE_SHAPES}",
            field=FIELD,
        )
    kinds = cfg.get("layer_types")
    listed = kinds if isinstance(kinds, list) else []
    recurrent = sorted({k for k in listed if isinstance(k, str) and k in RECURRENT_LAYER_KINDS})
    if recurrent:
        raise JobError(
            f"layer_types in this config.json lists {', '.join(map(repr, recurrent))} layers, which are not "
            f"attention (a state-space or linear-attention hybrid); gpuplan's physics models decoder-only "
            f"transformers: {GIVE_SHAPES}",
            field=FIELD,
        )


# The MLP as each architecture builds it, whatever its activation is called (StarCoder2 and GPTBigCode
# call gelu_pytorch_tanh between two matrices, Gemma inside a gate). Two matrices, up -> activation -> down
# (transformers 5.17 modeling_<type>.py): BioGptDecoderLayer fc1/fc2, BloomMLP and FalconMLP and
# GPTNeoXMLP and PersimmonMLP dense_h_to_4h/dense_4h_to_h, CodeGenMLP and GPTJMLP fc_in/fc_out, GPT2MLP and
# GPTBigCodeMLP and GPTNeoMLP and Starcoder2MLP and OpenAI's MLP c_fc/c_proj, MptMLP and NemotronMLP
# (squared ReLU) up_proj/down_proj, OPTDecoderLayer and PhiMLP and XGLMDecoderLayer fc1/fc2.
PLAIN_MLP_MODEL_TYPES = frozenset(
    {
        "biogpt", "bloom", "codegen", "falcon", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gptj", "mpt",
        "nemotron", "openai-gpt", "opt", "persimmon", "phi", "starcoder2", "xglm",
    }
)  # fmt: skip
# Gated, three matrices: gate_proj/up_proj/down_proj (LlamaMLP and its copies; Phi3MLP's fused gate_up_proj;
# the experts of Mixtral, Qwen-MoE, DeepSeek, GPT-OSS, Llama 4), DbrxExperts w1/v1/w2.
GATED_MLP_MODEL_TYPES = frozenset(
    {
        "cohere", "cohere2", "dbrx", "deepseek_v2", "deepseek_v3", "gemma", "gemma2", "gemma3", "gemma3_text",
        "glm", "glm4", "glm4_moe", "gpt_oss", "granite", "granitemoe", "llama", "llama4_text", "mistral",
        "mixtral", "olmo", "olmo2", "olmoe", "phi3", "phimoe", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
        "stablelm",
    }
)  # fmt: skip
# For an architecture in neither table: activations that name a gated unit.
GATED_ACTIVATIONS = ("silu", "swiglu", "gelu_pytorch_tanh", "geglu", "swish")

# Mixtures of experts, with the key their config.json gives the expert count by, whose MoE layers route to
# their experts whatever that count is (transformers 5.17 modeling_<type>.py: MixtralSparseMoeBlock,
# PhimoeSparseMoeBlock, OlmoeSparseMoeBlock, GraniteMoeMoE and GptOssMLP in every layer, DeepseekV2MoE,
# DeepseekV3MoE and Glm4MoeMoE from first_k_dense_replace on, Llama4TextMoe in its moe_layers, DbrxFFN): built
# with 0 experts, the router picks num_experts_per_tok of none (torch.topk fails), and with the count left
# out the config class's default (Mixtral 8, DeepSeek-V3 256) need not be this model's.
MOE_EXPERTS_KEY = {
    "dbrx": "ffn_config.moe_num_experts", "deepseek_v2": "n_routed_experts", "deepseek_v3": "n_routed_experts",
    "glm4_moe": "n_routed_experts", "gpt_oss": "num_local_experts", "granitemoe": "num_local_experts",
    "llama4_text": "num_local_experts", "mixtral": "num_local_experts", "olmoe": "num_experts",
    "phimoe": "num_local_experts", "qwen2_moe": "num_experts", "qwen3_moe": "num_experts",
}  # fmt: skip
# Those of them whose decoder layer is MoE only where the expert count is above 0 (Qwen2MoeDecoderLayer and
# Qwen3MoeDecoderLayer: ``config.num_experts > 0 and (layer_idx + 1) % config.decoder_sparse_step == 0``), so
# ``num_experts: 0`` builds a dense model, and is counted as one.
ZERO_EXPERTS_DENSE_MODEL_TYPES = frozenset({"qwen2_moe", "qwen3_moe"})
# Multi-head latent attention in every layer (DeepseekV2Attention, DeepseekV3Attention): kv_a_proj_with_mqa is
# h x (kv_lora_rank + qk_rope_head_dim) and kv_b_proj kv_lora_rank x heads (qk_nope_head_dim + v_head_dim), so a
# kv_lora_rank of 0 builds a zero-width latent; the queries are compressed to q_lora_rank unless it is None
# (DeepSeek-V2-Lite's ``q_lora_rank: null``), and 0 builds a zero-width q_a_proj.
MLA_MODEL_TYPES = frozenset({"deepseek_v2", "deepseek_v3"})

# Architectures with a learned absolute position table, P x h: the config keys of P, transformers 5.17's
# default for it, and the rows added (OPTLearnedPositionalEmbedding and BioGptLearnedPositionalEmbedding
# offset positions by 2). GPT2Model.wpe, GPTBigCodeModel.wpe, GPTNeoModel.wpe, OpenAIGPTModel.positions_embed,
# OPTDecoder.embed_positions, BioGptModel.embed_positions; the rest use rotary, ALiBi or sinusoids (no weights).
LEARNED_POSITIONS: dict[str, tuple[tuple[str, ...], int, int]] = {
    "gpt2": (("n_positions", "max_position_embeddings"), 1024, 0),
    "gpt_bigcode": (("n_positions", "max_position_embeddings"), 1024, 0),
    "openai-gpt": (("n_positions", "max_position_embeddings"), 512, 0),
    "gpt_neo": (("max_position_embeddings",), 2048, 0),
    "opt": (("max_position_embeddings",), 2048, 2),
    "biogpt": (("max_position_embeddings",), 1024, 2),
}

# Architectures with a per-head RMSNorm on queries and keys that their config.json does not flag
# (transformers' modeling_qwen3.py / modeling_qwen3_moe.py: Qwen3Attention.q_norm, k_norm).
QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe"})
# Decoder architectures whose transformers config class ties the LM head to the embeddings when a
# config.json does not say (``tie_word_embeddings`` defaults to True in their configuration_*.py, as read
# from transformers 5.17's classes); the rest default to untied. google/gemma-2-9b's config.json has no
# key: read as untied it counted 10.16B parameters where the model has 9.24B.
TIED_BY_DEFAULT = frozenset(
    {
        "biogpt", "bloom", "cohere", "cohere2", "cohere2_moe", "ctrl", "ernie4_5", "ernie4_5_moe", "falcon",
        "falcon_mamba", "gemma", "gemma2", "gemma3_text", "gemma3n_text", "gemma4_text", "gpt2", "gpt_bigcode",
        "gpt_neo", "jetmoe", "lfm2", "lfm2_moe", "mamba", "minicpm3", "mpt", "openai-gpt", "opt",
        "recurrent_gemma", "smollm3", "starcoder2", "vaultgemma", "xglm", "zamba", "zamba2",
    }
)  # fmt: skip


def tied_embeddings(cfg: dict) -> bool:
    """Whether the LM head shares the embedding matrix: the config's own word, else its architecture's default
    (``null`` reads as absent, as for every key)."""
    if cfg.get("tie_word_embeddings") is not None:
        return bool(cfg["tie_word_embeddings"])
    return cfg.get("model_type") in TIED_BY_DEFAULT


# Linear modules of a block where the architecture fuses projections (transformers 5.17 modeling_<type>.py; the
# unfused q, k, v, o, gate, up, down are 7): QWenAttention c_attn, c_proj and QWenMLP w1, w2, c_proj (Qwen-1's
# remote code); Phi3 qkv_proj, o_proj, gate_up_proj, down_proj; query_key_value, dense, dense_h_to_4h,
# dense_4h_to_h (BLOOM, Falcon, GPT-NeoX, Persimmon); GPT-2 and GPTBigCode c_attn, c_proj, c_fc, c_proj; MPT
# Wqkv, out_proj, up_proj, down_proj. DeepSpeed ZeRO-3 fetches each (physics/zero3_hooks.py).
LINEAR_MODULES_BY_MODEL_TYPE = {
    "qwen": 5, "phi3": 4, "bloom": 4, "falcon": 4, "gpt_neox": 4, "persimmon": 4, "gpt2": 4, "gpt_bigcode": 4,
    "mpt": 4,
}  # fmt: skip

# transformers' Gemma2RMSNorm / Gemma3RMSNorm: a norm after attention and after the MLP as well as before,
# each scaling by (1 + w) in fp32; GptOssRMSNorm multiplies its weight in fp32 before casting back.
SANDWICH_NORM_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text"})
FP32_NORM_WEIGHT_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "gpt_oss"})
# transformers' DeepseekV3TopkRouter computes its logits in fp32 (DeepSeek-V3 report, section 2.1.2: sigmoid
# affinities), as Megatron-Core's DeepSeek-V3 recipes do with --moe-router-dtype fp32.
FP32_ROUTER_MODEL_TYPES = frozenset({"deepseek_v3"})
