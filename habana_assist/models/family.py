"""What a family row holds (Family) and how its tensors are described (Tensor), with what every family shares: the
core's roles, the dims of the shapes, the conditions on config.json.

Pure data and small functions of a config: this module imports nothing from the package, and the family modules
(llama.py, gpt2.py...) import only this module and each other, so that configuration_utils.py, loading.py and
saving.py can all read the registry (models/__init__.py) without an import cycle. A dim or a condition is called
with the PretrainedConfig being read (its derived properties qkv_bias, o_bias, mlp_biases, qk_norm included).
"""

import dataclasses
from types import MappingProxyType
from typing import Callable, Mapping, Optional, Tuple

__all__ = [
    "Family",
    "Tensor",
    "MODEL_ROLES",
    "LAYER_ROLES",
    "field_dim",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "head_dim",
    "query_heads",
    "key_value_heads",
    "qkv_bias",
    "o_bias",
    "mlp_biases",
    "qk_norm",
    "untied",
    "layer_tensors",
]

# The keys of the core's weights dict (csrc/bindings/model.c, WEIGHT_KEYS), in the order they are loaded: the
# model-level tensors before the layers, then those after them.
MODEL_ROLES = ("embed", "pos_embed", "final_norm", "final_norm_bias", "lm_head")
# The keys of the core's layer dicts (bindings/model.c, LAYER_MATRIX_KEYS and LAYER_VECTOR_KEYS) in the order a layer
# applies them: the order loading reads and checks a layer's tensors (a first missing or misshapen tensor is
# reported in it), whatever order Transformers saves them in.
LAYER_ROLES = (
    "attn_norm",
    "attn_norm_bias",
    "wq",
    "bq",
    "wk",
    "bk",
    "wv",
    "bv",
    "wqkv",
    "bqkv",
    "q_norm",
    "k_norm",
    "wo",
    "bo",
    "post_attn_norm",
    "ffn_norm",
    "ffn_norm_bias",
    "w_gate",
    "b_gate",
    "w_up",
    "b_up",
    "w_gate_up",
    "w_down",
    "b_down",
    "post_ffn_norm",
)


# ---- dims: config -> (size, "the config.json fields it comes from"), one per axis of a stored shape ------------


def field_dim(name):
    """The dim that is config.json's field `name` itself."""

    def dim(c):
        value = getattr(c, name)
        return value, f"{name}={value}"

    dim.__name__ = name
    return dim


vocab_size = field_dim("vocab_size")
hidden_size = field_dim("hidden_size")
intermediate_size = field_dim("intermediate_size")
head_dim = field_dim("head_dim")


def query_heads(c):
    """The query heads' width: num_attention_heads * head_dim."""
    return (c.num_attention_heads * c.head_dim, f"num_attention_heads={c.num_attention_heads} * head_dim={c.head_dim}")


def key_value_heads(c):
    """The key (or value) heads' width: num_key_value_heads * head_dim."""
    return (c.num_key_value_heads * c.head_dim, f"num_key_value_heads={c.num_key_value_heads} * head_dim={c.head_dim}")


# ---- conditions: config -> whether the checkpoint holds a tensor ------------------------------------------------


def qkv_bias(c):
    """q, k and v projections have biases (the row's attention_bias rule)."""
    return c.qkv_bias


def o_bias(c):
    """The attention output projection has a bias (the row's attention_bias rule)."""
    return c.o_bias


def mlp_biases(c):
    """The MLP's projections have biases (the row's mlp_bias rule)."""
    return c.mlp_biases


def qk_norm(c):
    """Attention has per-head q_norm and k_norm (the row's qk_norm)."""
    return c.qk_norm


def untied(c):
    """The output layer is a tensor of its own: a tied one (tie_word_embeddings) is the embedding, not saved."""
    return not c.tie_word_embeddings


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One tensor of a family's checkpoint, as Transformers names and stores it."""

    name: str  # the name Transformers saves it under; "{i}" stands for the layer index in a layer's tensors
    shape: Tuple[Callable, ...]  # the STORED shape: one dim per axis (2: a matrix, 1: a vector)
    role: str  # the core's key for it: MODEL_ROLES for a model-level tensor, LAYER_ROLES for a layer's
    transposed: bool = False  # a Conv1D matrix stored (in, out) (GPT-2), which the core holds (out, in)
    when: Optional[Callable] = None  # a condition: the checkpoint holds it iff when(config); None: always

    def __post_init__(self):
        roles = LAYER_ROLES if self.per_layer else MODEL_ROLES
        if self.role not in roles:
            raise ValueError(f"Tensor {self.name!r}: role {self.role!r} is not one of {roles}")
        if len(self.shape) not in (1, 2) or (self.transposed and len(self.shape) != 2):
            raise ValueError(f"Tensor {self.name!r}: a shape of 1 or 2 dims, transposed only for a matrix")

    @property
    def per_layer(self):
        """Whether each layer has one (the name holds "{i}")."""
        return "{i}" in self.name

    @property
    def is_matrix(self):
        return len(self.shape) == 2


@dataclasses.dataclass(frozen=True, init=False, eq=False)
class Family:
    """One supported family: everything this package knows of it, as data. Built by keyword only (a new field
    cannot shift the others); see llama.py for a full row and models/__init__.py for how to add one."""

    architecture: str  # config.json's "architectures" entry: Transformers' class (LlamaForCausalLM...)
    model_type: str  # config.json's "model_type", the family's name here (config.family)
    title: str  # the family's name in messages ("GPT-2")
    required: Tuple[str, ...]  # shape fields config.json must give: a default would describe some other model
    # Transformers' defaults (its configuration_*.py) of the fields read here; head_dim None: hidden_size //
    # num_attention_heads; a field listed here is one the family reads (and validates)
    defaults: Mapping[str, object]
    norm: str  # the core's norm kind: "rms" | "rms_one_plus" (Gemma: x * (1 + w)) | "layer" (LayerNorm, a bias)
    eps: str  # the field holding the norm's epsilon
    act: str  # the field naming the activation (a key of configuration_utils.SUPPORTED_ACTIVATIONS)
    gated_mlp: bool  # down(act(gate(x)) * up(x)); False: down(act(up(x))) (GPT-2's c_fc, c_proj)
    # which attention projections have biases: "qkv" (q, k, v always, o never), "field" (q, k, v and o iff
    # attention_bias), "always" (all four), None (none)
    attention_bias: Optional[str]
    mlp_bias: Optional[str]  # which MLP projections have biases: "field" (all iff mlp_bias), "always", None (none)
    qk_norm: bool  # per-head RMS norms of q and k before rotary (self_attn.q_norm / k_norm)
    # which layers slide (given sliding_window): "all" (every layer), "from_layer" (layer_types, else i >=
    # max_window_layers; only with use_sliding_window, else sliding_window reads null), "nope" (layer_types,
    # else the layers without rotary; only with use_sliding_window), "alternate" (layer_types, else even
    # layers), "pattern" (layer_types, else (i + 1) % sliding_window_pattern != 0), None (none)
    windows: Optional[str]
    # positions: "full" (rotary over each head, every layer), "partial" (rotary over int(head_dim *
    # partial_rotary_factor) of each head), "local" (the sliding layers' rotary has its own base,
    # rope_local_base_freq), "nope" (no_rope_layers, else every no_rope_layer_interval-th layer, have none), None
    # (no rotary: learned positions, the pos_embed tensor)
    rotary: Optional[str]
    # the tensors, in Transformers' state_dict order (checkpoints.saving.state_dict_names): each layer's tensors
    # one after the other, the model-level tensors before and after them
    tensors: Tuple[Tensor, ...]
    # older names of rope types in rope_scaling: {"su": "longrope"}
    rope_type_aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # the family's own names of generic fields (Transformers' attribute_map): {"hidden_size": "n_embd"}; config
    # reads the generic name through to the stored one, and takes a generic one given as the stored one
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # generic fields the family does not store, as functions of the config's dict: {"head_dim": ...}
    computed: Mapping[str, Callable] = dataclasses.field(default_factory=dict)
    # checkpoints exist with and without this prefix on every name but lm_head.weight's (GPT-2's "transformer.")
    optional_prefix: str = ""
    # multimodal architectures whose config.json nests this family's config in "text_config" (only the text
    # model is read), and how their files name its tensors: (prefix of a "model." name's rest, prefix of any
    # other name), the layouts tried in turn
    multimodal: Tuple[str, ...] = ()
    multimodal_prefixes: Tuple[Tuple[str, str], ...] = ()
    # regular expressions of stored tensors the family's checkpoints may hold beside its weights, loaded by no one
    # and not reported as unused (Transformers' _keys_to_ignore_on_load_unexpected: GPT-2's attention masks);
    # rotary_emb.inv_freq is ignored for every family
    ignore_unexpected: Tuple[str, ...] = ()
    # defaults above that Transformers 5's config class of this model_type does not hold as attributes (its
    # from_pretrained returns them as unused keyword arguments, unless config.json has them); rope_theta,
    # partial_rotary_factor and rope_local_base_freq never are (Transformers 5 holds them in rope_parameters)
    transformers_lacks: Tuple[str, ...] = ()

    def __init__(self, **fields):
        for f in dataclasses.fields(self):
            if f.name in fields:
                value = fields.pop(f.name)
            elif f.default is not dataclasses.MISSING:
                value = f.default
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                raise TypeError(f"Family: field {f.name!r} missing")
            if isinstance(value, dict):
                value = MappingProxyType(dict(value))
            object.__setattr__(self, f.name, value)
        if fields:
            raise TypeError(f"Family: unknown field(s) {', '.join(sorted(fields))}")
        layered = [t.per_layer for t in self.tensors]
        first = layered.index(True) if True in layered else len(layered)
        if True in layered[first + layered[first:].count(True) :]:
            raise ValueError(f"Family {self.model_type}: a layer's tensors must be listed one after the other")

    def tensor(self, role):
        """The tensor of a model-level role ("embed"...)."""
        return next(t for t in self.tensors if t.role == role and not t.per_layer)


def layer_tensors(family, config):
    """-> (before, layers, after): the tensors config's checkpoint holds (conditions applied), in Transformers'
    state_dict order: before and after the layers [(name, Tensor)], layers one list [(name, Tensor)] per layer."""
    held = [t for t in family.tensors if t.when is None or t.when(config)]
    layer = [t for t in held if t.per_layer]
    first = next((k for k, t in enumerate(held) if t.per_layer), len(held))
    before = [(t.name, t) for t in held[:first] if not t.per_layer]
    after = [(t.name, t) for t in held[first:] if not t.per_layer]
    layers = [[(t.name.format(i=i), t) for t in layer] for i in range(config.num_hidden_layers)]
    return before, layers, after
