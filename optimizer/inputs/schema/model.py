"""The model being trained (``ModelSpec``): its parameter count alone, or its shapes, which must agree."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from .. import units
from .base import _Model
from .types import (
    Count,
)

# A model's params may differ from what its shapes hold by at most this factor either way. The shapes
# count the language model alone, so a vision tower or a multi-token-prediction head as large as it still
# passes (DeepSeek-V3's published 685B against 671B counted), while a typo of ten (7B shapes, 70B
# params) or a units slip (M for B) is refused.
PARAMS_SHAPES_RATIO_MAX = 2.0


class ModelSpec(_Model):
    """A transformer, by total parameters alone or by its shapes (which the physics prefers).

    In files, ``preset: llama-3.1-70b`` / ``hf_config: path/to/config.json`` / ``hub: meta-llama/Llama-3.1-70B``
    (or the bare name or id) stand for these fields:
    ``inputs.files`` expands them before validation (``inputs.hf_models.resolve``), so this schema
    reads no files."""

    @model_validator(mode="before")
    @classmethod
    def _presets_are_expanded_first(cls, data):
        if isinstance(data, str) or (isinstance(data, dict) and {"preset", "hf_config", "hub"} & set(data)):
            raise ValueError(
                "a preset, hf_config or hub id is expanded when a file is read: use optimizer.load_job, "
                "or optimizer.inputs.files.expand_models on the mapping first"
            )
        return data

    name: str | None = None
    params: Count = Field(gt=0, description="Total parameters (70B, 14e9).")
    active_params: Count | None = Field(None, gt=0, description="Parameters used per token (MoE).")
    layers: int | None = Field(None, ge=1)
    hidden: int | None = Field(None, ge=1)
    heads: int | None = Field(None, ge=1)
    kv_heads: int | None = Field(None, ge=1, description="Key/value heads (GQA); default heads.")
    head_dim: int | None = Field(None, ge=1, description="Default hidden / heads.")
    v_head_dim: int | None = Field(
        None, ge=1, description="Value head width where it differs from head_dim (DeepSeek MLA: 128 vs 192)."
    )
    q_lora_rank: int | None = Field(
        None, ge=1, description="MLA query compression rank (DeepSeek-V3: 1536): more activations kept per token."
    )
    kv_lora_rank: int | None = Field(
        None, ge=1, description="MLA key/value latent rank (DeepSeek-V3: 512): more activations kept per token."
    )
    sliding_window: int | None = Field(
        None, ge=1, description="Tokens a windowed layer attends to (GPT-OSS: 128, Mistral 7B v0.1: 4096)."
    )
    window_layers: int | None = Field(
        None, ge=0, description="Layers with the sliding window (GPT-OSS: every other one); default all of them."
    )
    ffn_hidden: int | None = Field(
        None,
        ge=1,
        description="MLP width: of the dense layers, or per expert for MoE when moe_ffn_hidden is not given.",
    )
    moe_ffn_hidden: int | None = Field(None, ge=1, description="Width of one routed (and shared) expert (MoE).")
    dense_layers: int = Field(0, ge=0, description="Layers with a dense MLP instead of experts (DeepSeek's first 3).")
    vocab: int | None = Field(None, ge=1)
    gated_mlp: bool = Field(True, description="SwiGLU-style gate+up+down (Llama, Qwen, Mistral).")
    tied_embeddings: bool = Field(
        False, description="The LM head shares the input embedding's matrix (config.json tie_word_embeddings)."
    )
    linear_modules: int | None = Field(
        None,
        ge=1,
        description="Linear modules of a block as the model's code defines them: 7 in transformers' Llama-family "
        "decoders (q, k, v, o, gate, up, down), fewer where projections are fused (Qwen-1: 5; Phi-3, GPT-NeoX, "
        "Falcon, MPT: 4); DeepSpeed ZeRO-3 fetches each in a hook of its own. Default 7, or 6 ungated.",
    )
    qk_norm: bool = Field(
        False, description="Per-head RMSNorm on queries and keys (Qwen3): more activations saved for backward."
    )
    sandwich_norms: bool = Field(
        False, description="RMSNorms after attention and after the MLP as well as before them (Gemma 2 and 3)."
    )
    norm_fp32_weight: bool = Field(
        False,
        description="The RMSNorm multiplies its weight in fp32 before casting back (Gemma's 1 + w, GPT-OSS): it "
        "keeps the normalised input in fp32 for backward.",
    )
    router_fp32: bool = Field(
        False,
        description="The MoE router's GEMM runs in fp32 (DeepSeek-V3; Megatron --moe-router-dtype fp32): it keeps "
        "an fp32 copy of each token's hidden state for backward.",
    )
    swiglu_limit: float | None = Field(
        None, gt=0, description="Clamped SwiGLU (GPT-OSS: gate and up clamped at this value; config.json swiglu_limit)."
    )
    experts: int | None = Field(None, ge=1)
    experts_per_token: int | None = Field(None, ge=1)
    shared_experts: int = Field(0, ge=0)
    config_path: str | None = Field(None, exclude=True)  # the config.json read for ``hf_config`` (an input)

    @model_validator(mode="after")
    def _shapes_consistent(self) -> ModelSpec:
        if self.active_params is not None and self.active_params > self.params:
            raise ValueError("active_params is larger than params; active parameters are a subset of the total")
        if self.heads and self.kv_heads and self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts_per_token and self.experts and self.experts_per_token > self.experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) is larger than experts ({self.experts}): each token "
                "visits some of a layer's routed experts; give the counts the model was trained with"
            )
        if (self.experts is None) != (self.experts_per_token is None):
            given, missing = ("experts", "experts_per_token") if self.experts else ("experts_per_token", "experts")
            raise ValueError(
                f"{given} is given without {missing}; a mixture of experts needs both: how many routed experts "
                "each MoE layer has (experts) and how many of them each token visits (experts_per_token)"
            )
        if self.experts is None:
            # fields of a mixture of experts that a dense model would drop without a word
            moe_only = {"shared_experts": self.shared_experts, "dense_layers": self.dense_layers}
            moe_only["moe_ffn_hidden"] = self.moe_ffn_hidden or 0
            moe_given = [f"{k} ({v})" for k, v in moe_only.items() if v]
            if moe_given:
                raise ValueError(
                    f"{' and '.join(moe_given)} {'describes' if len(moe_given) == 1 else 'describe'} a mixture of experts, "
                    "but no experts are given: give experts and experts_per_token, or leave these out for a dense model"
                )
        if self.q_lora_rank is not None and self.kv_lora_rank is None:
            raise ValueError(
                f"q_lora_rank ({self.q_lora_rank}) is given without kv_lora_rank: query compression is part of "
                "multi-head latent attention (DeepSeek-V3: q_lora_rank 1536, kv_lora_rank 512); give kv_lora_rank "
                "too, or leave q_lora_rank out"
            )
        if self.layers is not None and self.dense_layers > self.layers:
            raise ValueError(f"dense_layers ({self.dense_layers}) is more than layers ({self.layers})")
        if self.layers is not None and self.window_layers is not None and self.window_layers > self.layers:
            raise ValueError(f"window_layers ({self.window_layers}) is more than layers ({self.layers})")
        if self.has_shapes:
            counted = self.shape_params()
            if not 1 / PARAMS_SHAPES_RATIO_MAX <= self.params / counted <= PARAMS_SHAPES_RATIO_MAX:
                raise ValueError(
                    f"params is {units.fmt_count(self.params)}, but the shapes given (layers {self.layers}, hidden "
                    f"{self.hidden}, ffn_hidden {self.ffn_hidden}, vocab {self.vocab}"
                    + (f", {self.experts} experts" if self.experts else "")
                    + f") hold {units.fmt_count(counted)} parameters, and memory and time would be planned for "
                    "the wrong model: give the params of these shapes, or fix the shapes (a preset or hf_config "
                    "fills in both)"
                )
        return self

    def shape_params(self) -> float:
        """The parameters the shapes hold, counted as ``hf_models.count_params`` counts a config.json (the
        same within 0.03 % for every bundled preset; biases and norms are left out here)."""
        assert self.layers and self.hidden and self.heads and self.ffn_hidden and self.vocab
        h, heads = self.hidden, self.heads
        head_dim = self.head_dim or h // heads
        v_head_dim = self.v_head_dim or head_dim
        if self.kv_lora_rank:  # multi-head latent attention (DeepSeek-V2/V3)
            q_rank = self.q_lora_rank or 0
            q = h * q_rank + q_rank * heads * head_dim if q_rank else h * heads * head_dim
            attention = q + h * self.kv_lora_rank + self.kv_lora_rank * heads * (head_dim + v_head_dim)
        else:
            attention = h * heads * head_dim + 2 * h * (self.kv_heads or heads) * head_dim
        attention += heads * v_head_dim * h
        matrices = 3 if self.gated_mlp else 2
        if self.experts:
            width = self.moe_ffn_hidden or self.ffn_hidden
            moe_layers = self.layers - self.dense_layers
            per_moe_layer = (self.experts + self.shared_experts) * matrices * h * width + h * self.experts
            mlp = self.dense_layers * matrices * h * self.ffn_hidden + moe_layers * per_moe_layer
        else:
            mlp = self.layers * matrices * h * self.ffn_hidden
        return float(self.layers * attention + mlp + (1 if self.tied_embeddings else 2) * self.vocab * h)

    @property
    def has_shapes(self) -> bool:
        return all(v is not None for v in (self.layers, self.hidden, self.heads, self.ffn_hidden, self.vocab))
