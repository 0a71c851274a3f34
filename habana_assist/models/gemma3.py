"""Gemma 3's text model (Gemma3ForCausalLM, model_type gemma3_text): Gemma 2's layout with per-head q_norm and
k_norm; sliding layers (all but every sliding_window_pattern-th) with a rotary of their own base. Gemma 3 4B,
12B and 27B are Gemma3ForConditionalGeneration checkpoints, whose text model this is."""

from .family import Family
from .gemma2 import GEMMA_LIKE, TENSORS
from .llama import REQUIRED

FAMILY = Family(
    architecture="Gemma3ForCausalLM",
    model_type="gemma3_text",
    title="Gemma 3",
    required=REQUIRED,
    defaults={
        **GEMMA_LIKE,
        "max_position_embeddings": 131072,
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "rope_local_base_freq": 10000.0,
        "sliding_window_pattern": 6,
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "use_bidirectional_attention": False,
    },
    norm="rms_one_plus",
    eps="rms_norm_eps",
    act="hidden_activation",
    gated_mlp=True,
    attention_bias="field",
    mlp_bias=None,
    qk_norm=True,
    windows="pattern",
    rotary="local",
    tensors=TENSORS,
    # model.language_model.* and lm_head.* (Transformers >= 4.52 saves), or language_model.model.* and
    # language_model.lm_head.* (earlier)
    multimodal=("Gemma3ForConditionalGeneration",),
    multimodal_prefixes=(("model.language_model.", ""), ("language_model.model.", "language_model.")),
    transformers_lacks=("sliding_window_pattern", "_sliding_window_pattern"),
)
