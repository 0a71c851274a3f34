"""The native causal LM of every supported family on the C core: the base class (from_pretrained, forward,
save_pretrained), its KV cache objects and outputs. generate() comes from generation/utils.py's GenerationMixin;
each architecture's class from models/.

Batches follow Transformers' conventions: attention_mask marks real tokens, positions count from each row's first
real token, so a padded row computes exactly what it computes alone.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

import numpy as np

from . import _core
from .cache_utils import Cache, DynamicCache, StaticCache
from .checkpoints import state_dict as _state_dict
from .checkpoints.hub import CONFIG_FILES, MODEL_FILES, pop_hub_arguments, resolve
from .checkpoints.loading import (
    check_load_arguments,
    expected_weights,
    load_checkpoint,
    load_config,
    warn_if_blas_generic,
)
from .checkpoints.safetensors import save_file
from .checkpoints.saving import save_model
from .configuration_utils import SUPPORTED_ARCHITECTURES, PretrainedConfig
from .errors import InvalidInputError, UnsupportedModelError, unsupported_family_hint
from .generation import assisted_costs as _assisted_costs
from .generation.configuration_utils import GenerationConfig
from .generation.utils import GenerationMixin
from .utils.generic import ModelOutput
from .utils.inputs import check_fits, checked_attention_mask, numpy_inputs
from .utils.tensors import convert_output, cpu_device, dtype_object, to_numpy
from .utils.types import PathLike, Tensor, TokenIds

if TYPE_CHECKING:
    from .checkpoints.loading import Checkpoint

_QUANTIZED = ("int8", "w8a8", "int4")
_FLOAT_DTYPES = ("float32", "float16", "bfloat16")
# load_state_dict's result, as torch's Module.load_state_dict returns it


class IncompatibleKeys(NamedTuple):
    """load_state_dict's result, as torch's Module.load_state_dict returns it."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _is_dtype(value):
    """Whether model.to()'s argument names a dtype (torch's, numpy's, or a name such as "float16"), not a device."""
    if isinstance(value, str):
        return value.removeprefix("torch.") in (
            "float32",
            "float16",
            "bfloat16",
            "float64",
            "half",
            "float",
            "double",
            "int8",
            "int32",
            "int64",
            "uint8",
        )
    if str(value).startswith("torch."):
        return True
    try:
        np.dtype(value)
    except TypeError:
        return False
    return True


def _float_dtype_name(value):
    """torch.float16, np.float16, "float16", "half"... -> "float16" (one of _FLOAT_DTYPES), else None."""
    if isinstance(value, str):
        name = value
    else:
        try:
            name = np.dtype(value).name
        except TypeError:
            name = str(value)
    name = name.removeprefix("torch.")
    return (
        {"half": "float16", "float": "float32"}.get(name, name) if name in _FLOAT_DTYPES + ("half", "float") else None
    )


def set_num_threads(n: int) -> None:
    """Threads used by every core call, the calling thread included."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise InvalidInputError(f"num_threads={n!r} must be a positive integer")
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    """Threads used by every core call (set_num_threads)."""
    return _core.get_num_threads()


@dataclass
class CausalLMOutput(ModelOutput):
    """Transformers' CausalLMOutputWithPast: loss (a 0-d float32, with labels=), logits float32 (batch, seq, vocab)
    (0 at padded positions; the last logits_to_keep positions only, where given), cache (the Cache, with
    use_cache; Transformers 5.24's name, its older past_key_values reads it too), hidden_states (with
    output_hidden_states: n_layers + 1 arrays (batch, seq, hidden_size)), attentions (never filled:
    output_attentions=True is refused)."""

    loss: Optional[np.ndarray] = None
    logits: Optional[np.ndarray] = None
    cache: Optional[Cache] = None
    hidden_states: Optional[tuple[np.ndarray, ...]] = None
    attentions: None = None


def _logits_to_keep(logits_to_keep: Any, num_logits_to_keep: Any) -> Union[int, np.ndarray]:
    """logits_to_keep (or its older name num_logits_to_keep) -> an int >= 0 (0: all) or an int64 array of
    positions."""
    if num_logits_to_keep is not None:
        if logits_to_keep not in (0, None) and logits_to_keep is not num_logits_to_keep:
            raise InvalidInputError("logits_to_keep and num_logits_to_keep are one argument; pass logits_to_keep")
        logits_to_keep = num_logits_to_keep
    if logits_to_keep is None:
        return 0
    if isinstance(logits_to_keep, (int, np.integer)) and not isinstance(logits_to_keep, bool):
        if logits_to_keep < 0:
            raise InvalidInputError(f"logits_to_keep={logits_to_keep} must be >= 0 (0 keeps every position)")
        return int(logits_to_keep)
    positions, _ = to_numpy(logits_to_keep, "logits_to_keep")
    if positions.ndim != 1 or positions.dtype.kind not in "iu":
        raise InvalidInputError("logits_to_keep must be an int or a 1-d integer array of sequence positions")
    return positions.astype(np.int64)


def _check_positions(position_ids, cache_position, past, mask):
    """position_ids (batch or 1, seq) and cache_position (seq,) are accepted where they equal what the cache
    implies: a real token's position counts the real tokens of its row before it (so a padded row computes what
    it computes alone); cache_position counts columns, padding included."""
    B, S = mask.shape
    if cache_position is not None:
        given, _ = to_numpy(cache_position, "cache_position")
        expected = np.arange(past.shape[1], past.shape[1] + S)
        if given.shape != (S,) or not np.array_equal(given, expected):
            raise InvalidInputError(
                f"cache_position must be the columns after the {past.shape[1]} the cache has "
                f"seen, arange({past.shape[1]}, {past.shape[1] + S}); leave it unset"
            )
    if position_ids is not None:
        given, _ = to_numpy(position_ids, "position_ids")
        if given.ndim == 1:
            given = given[None]
        if given.ndim != 2 or given.shape[1] != S or given.shape[0] not in (1, B):
            raise InvalidInputError(f"position_ids must be (batch, seq) = ({B}, {S})")
        expected = past.sum(axis=1, keepdims=True) + np.cumsum(mask, axis=1) - 1
        given = np.broadcast_to(given, (B, S))
        if not np.array_equal(given[mask], expected[mask]):
            raise InvalidInputError(
                "position_ids disagree with the positions this model gives: each row's real tokens count from its "
                "first real token, after what the cache holds (attention_mask.cumsum(-1) - 1, as generate() "
                "computes them); other positions are not supported: leave position_ids unset"
            )


def _causal_lm_loss(logits, labels, mask, vocab_size):
    """Transformers' ForCausalLMLoss: logits (B, S, V) at positions t predict labels at t + 1; labels -100 are not
    counted; the mean over counted tokens (float32, computed in float64). NaN where none is counted, as torch's
    cross_entropy gives."""
    labels, _ = to_numpy(labels, "labels")
    B, S, _ = logits.shape
    if labels.shape != (B, S) or labels.dtype.kind not in "iu":
        raise InvalidInputError(
            f"labels must be integer token ids of input_ids' shape ({B}, {S}), -100 where not counted"
        )
    target = labels[:, 1:].astype(np.int64)
    counted = target != -100
    if ((target < 0) & counted).any() or (target >= vocab_size).any():
        raise InvalidInputError(f"labels must be ids in [0, {vocab_size}) or -100 (not counted)")
    if (counted & ~mask[:, :-1]).any():
        raise InvalidInputError(
            "labels: a counted label follows a padded position, whose logits are not computed "
            "here; set labels to -100 there (as at the padding itself)"
        )
    if not counted.any():
        return np.array(np.nan, dtype=np.float32)
    scores = logits[:, :-1][counted].astype(np.float64)
    top = scores.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(scores - top).sum(axis=1)) + top[:, 0]
    picked = scores[np.arange(scores.shape[0]), target[counted]]
    return np.array((log_z - picked).mean(), dtype=np.float32)


# architecture -> its class (LlamaForCausalLM, GPT2LMHeadModel...: models/auto.py declares them, each registering
# itself through PreTrainedCausalLM.__init_subclass__), which from_pretrained builds.
_ARCHITECTURE_CLASSES = {}


def _architecture(config):
    """The architecture config loads as: the supported one its "architectures" names, else its model_type's."""
    for name in config.architectures or ():
        if name in _ARCHITECTURE_CLASSES:
            return name
    by_type = {model_type: name for name, model_type in SUPPORTED_ARCHITECTURES.items()}
    return by_type.get(config.family, "LlamaForCausalLM")


class PreTrainedCausalLM(GenerationMixin):
    """The neutral base of every native causal LM: a decoder of any supported family on the C core. Each
    architecture (LlamaForCausalLM, GPT2LMHeadModel, ...: models/) is a sibling subclass of it, and
    type(model).__name__ is the checkpoint's architecture. Build one with AutoModelForCausalLM.from_pretrained;
    generate() and its helpers come from GenerationMixin (generation/utils.py)."""

    def __init__(
        self, checkpoint: Checkpoint, max_cache_len: Optional[int] = None, blas_prefill: Optional[bool] = False
    ) -> None:
        cfg, w = checkpoint.config, checkpoint.weights
        if cfg.output_attentions:
            raise InvalidInputError(
                "output_attentions=True (in the config) is not supported: attention weights are "
                "never materialized by the core; leave output_attentions unset (or False)"
            )
        self.config = cfg
        self.name_or_path = checkpoint.path
        specs = expected_weights(cfg)
        layer_matrices = [spec.name for spec in specs if spec.is_matrix and spec.layer is not None]
        # how the layers' matrices are held (else the embedding): "float32" | "bfloat16" | "float16" | "int8" | "w8a8"
        # | "int4"
        self.weight_dtype = w[layer_matrices[0] if layer_matrices else specs[0].name].dtype
        # model.dtype's name: the float dtype the model is held in; with int8 / int4 that of the weights left
        # unquantized, as Transformers' dtype of a bitsandbytes model (its first floating-point parameter's)
        self._float_dtype = (
            self.weight_dtype if self.weight_dtype not in _QUANTIZED + ("bfloat16-pairs",) else checkpoint.float_dtype
        )
        cfg.torch_dtype = self._float_dtype  # as Transformers: the config says the dtype the model was loaded in
        if "dtype" in cfg.__dict__:
            cfg.dtype = self._float_dtype
        self.blas_prefill = bool(blas_prefill)  # None: False
        self.repacked = any(weight.panels for weight in w.values())  # float matrices in panels (repack=True)
        self.max_cache_len = int(max_cache_len or cfg.max_position_embeddings)
        gc_path = os.path.join(checkpoint.path, "generation_config.json")
        self.generation_config = (
            GenerationConfig.from_pretrained(checkpoint.path)
            if os.path.exists(gc_path)
            else GenerationConfig.from_model_config(cfg)
        )

        def mat(name):
            weight = w[name]
            if weight.panels:
                return (weight.array, weight.dtype + "-panels", weight.cols, weight.rows)
            if weight.rows is not None:  # w8a8: rows rounded up to whole panels in the array
                return (weight.array, weight.dtype, weight.cols, weight.rows)
            return (weight.array, weight.dtype, weight.cols)

        # The core's fields (csrc/ha.h): the config's switches and per-layer settings, then each tensor under
        # the role the loader gives it.
        core_cfg = cfg.core_config(checkpoint.float_dtype)
        parts: dict[str, Any] = {}
        layers = [dict(settings) for settings in cfg.layer_settings()]
        for spec in specs:
            value = mat(spec.name) if spec.is_matrix else w[spec.name].array
            (parts if spec.layer is None else layers[spec.layer])[spec.role] = value
        if "lm_head" not in parts:  # tied: the embedding's own buffer
            parts["lm_head"] = parts["embed"]
        self._core = _core.Model(core_cfg, parts, layers)
        self._weights = w  # name -> loading.Weight, for save_pretrained, num_parameters and state_dict
        # what an early-exit draft (assistant_early_exit=N) is built from: the same buffers, N layers
        self._parts = (core_cfg, parts, layers)
        self._early_exit: dict[int, _core.Model] = {}  # N -> _core.Model over the first N layers
        self._costs = _assisted_costs.CostTable()  # drafter -> AssistedCosts (the cost schedule's)

    def __init_subclass__(cls, architecture=None, **kwargs):
        """class LlamaForCausalLM(PreTrainedCausalLM, architecture="LlamaForCausalLM"): the class from_pretrained
        builds for that architecture (models/auto.py declares one per supported architecture)."""
        super().__init_subclass__(**kwargs)
        if architecture is not None:
            _ARCHITECTURE_CLASSES[architecture] = cls

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: PathLike,
        *model_args: Any,
        dtype: Optional[Any] = None,
        max_cache_len: Optional[int] = None,
        torch_dtype: Optional[Any] = None,
        load_in_8bit: bool = False,
        load_in_4bit: bool = False,
        blas_prefill: Optional[bool] = False,
        repack: bool = True,
        progress: Optional[bool] = None,
        config: Union[PathLike, PretrainedConfig, Any, None] = None,
        **kwargs: Any,
    ) -> PreTrainedCausalLM:
        """Loads a Hugging Face checkpoint directory (config.json, model.safetensors or sharded index) into the class
        of its architecture, whichever class this is called on (AutoModelForCausalLM.from_pretrained is this method;
        Transformers' LlamaForCausalLM.from_pretrained).

        Args:
            pretrained_model_name_or_path: a local directory, a shipped name ("habana-assist/pycode") or a Hub repo
                id ("org/name"), resolved as checkpoints/hub.py says with the hub arguments in **kwargs:
                config.json, generation_config.json and the safetensors weights come from the Hugging Face cache,
                downloaded where it lacks them (progress= also decides the downloads' bars).
            dtype: None/"auto" keeps weights' stored dtype (memory-mapped, not copied, with repack=False);
                "float32", "bfloat16" or "float16" (or the torch dtypes) converts once at load; "int8" and "int4"
                quantize the matrices at load (a float32 scale per 64 int8 or 32 int4 weights; each matmul rounds
                its input activations to int16, one scale per token); "w8a8" (ours) quantizes them as "int8" does
                and rounds each matmul's input to int8 per token and group of 64 (the densest class: VNNI's
                vpdpbusd; docs/kernels-and-performance.md); "bfloat16-pairs" (ours) rounds the matrices to bfloat16
                (a bfloat16 checkpoint's bits kept) and each matmul's input to bfloat16 per token, summed in
                vdpbf16ps's order (that instruction where the CPU has AVX512_BF16, an exact emulation elsewhere).
                Compute is float32, apart from integer weights' products (exact int32 sums, scaled in float32).
                The second positional argument is dtype here (Transformers hands its *model_args to the model's
                __init__, which this package's models do not take).
            max_cache_len: (ours) bounds prompt + new tokens per row (default: config.max_position_embeddings).
            torch_dtype: dtype's older name (Transformers 4); both given must agree.
            load_in_8bit: True is dtype="int8" (the weights quantized here, not by bitsandbytes).
            load_in_4bit: True is dtype="int4"; load_in_8bit and load_in_4bit together raise.
            blas_prefill: (ours) True computes prompts through OpenBLAS in blocks of 128 tokens (those that start
                an empty cache). Greedy and coupled assisted generation still equal plain generation bit for bit,
                but those prompt rows are not bitwise the ones a token-by-token forward gives (they agree to
                float32 rounding; with integer weights OpenBLAS multiplies float32 activations, not int16). False
                (the default; None means the same) keeps every row batch-invariant (what OpenBLAS gains or loses
                against the kernels is measured in docs/benchmarks.md). True warns (RuntimeWarning) where OpenBLAS
                runs older kernels than the CPU has (Debian 12's falls back to Prescott's on CPUs newer than
                itself), naming the OPENBLAS_CORETYPE fix.
            repack: (ours) True (the default) copies float matrices at load into panels of 16 rows (csrc/ha.h) for
                kernels that read each weight once for up to 6 tokens; each output is then one chain of fused
                multiply-adds in index order (faster decode and verification than row-major weights:
                docs/benchmarks.md). False keeps float weights row-major, as stored (views of the file's memory
                map: no copy at load, pages shared between processes), with kernels that sum 8-lane blocks; logits
                differ from repacked ones by float32 rounding only.
            progress: (ours) a tqdm bar over the bytes of weights read and converted (utils/progress.py): None (the
                default) shows one for checkpoints of 512 MiB or more (HA_PROGRESS=0 in the environment turns
                that off), True always, False never.
            config: a config to load the weights for instead of the checkpoint's config.json, as Transformers'
                config=: a PretrainedConfig (copied), a Transformers config object (read from its to_dict()) or
                the path of a config.json. With config=, every config override in **kwargs is refused.
            *model_args: refused: Transformers hands extra positional arguments to the model's constructor, which
                takes none here; pass dtype and the rest as keywords.
            **kwargs: the hub arguments revision, cache_dir, local_files_only, token (use_auth_token), force_download,
                proxies and subfolder (resume_download accepted: downloads always resume). Transformers' loading
                arguments that change nothing here, with those values only (checkpoints/loading.py's _LOAD_ARGUMENTS):
                device_map None, "auto", "cpu" or a dict of them (everything runs on the CPU), low_cpu_mem_usage
                (loading always streams), attn_implementation None/"eager"/"sdpa" (one attention implementation),
                use_safetensors None/True, trust_remote_code (no checkpoint code is ever run), variant None,
                ignore_mismatched_sizes False (a mismatched shape is refused, naming the tensor), weights_only
                (safetensors hold weights only), disable_mmap False, fusion_config None, output_loading_info False,
                key_mapping None, quantization_config None; other values of these are refused, naming the argument
                (quantization_config: dtype="int8", "w8a8" or "int4" instead). Any other
                keyword overrides config.json's attribute of that name, as Transformers' (num_hidden_layers=1,
                use_cache=False, output_hidden_states=True, rope_parameters={...}); a keyword that names no attribute of
                Transformers' config (rope_theta: Transformers 5 holds it in rope_parameters) is refused, as
                Transformers' model constructor refuses it. output_attentions=True is refused (no attention weights
                here).
                Stored weights the config does not use (fewer layers) warn, naming them.

        Returns:
            The model, an instance of its architecture's class (LlamaForCausalLM, Qwen3ForCausalLM...), ready for
            generate() and forward().

        Raises:
            CheckpointNotFoundError: no such directory, shipped name, Hub repo, revision or file (or offline
                without the files in the cache).
            CheckpointError: a malformed config.json, safetensors file or index; the message names the file.
            UnsupportedModelError: an architecture or option this package does not implement.
            HubError: the Hub refused the request (a gated repo without a token) or a download came out wrong.
            InvalidInputError: an argument out of range, refused or unknown, or two that disagree.
        """
        if model_args:
            raise InvalidInputError(
                f"from_pretrained: {len(model_args)} positional argument(s) after the path ({model_args[0]!r}...); "
                "Transformers hands them to the model's constructor, which takes none here: pass dtype=, "
                "max_cache_len= and the rest as keywords"
            )
        hub_arguments = pop_hub_arguments(kwargs, "from_pretrained")
        overrides = check_load_arguments(kwargs)
        if load_in_8bit and load_in_4bit:
            raise InvalidInputError("load_in_8bit=True and load_in_4bit=True disagree; pass only one")
        for flag, name in ((load_in_8bit, "int8"), (load_in_4bit, "int4")):
            if not flag:
                continue
            for arg, value in (("dtype", dtype), ("torch_dtype", torch_dtype)):
                if value not in (None, name):
                    raise InvalidInputError(f"load_in_{name[3:]}bit=True and {arg}={value!r} disagree; pass only one")
            dtype = name
        if dtype is not None and torch_dtype is not None and dtype != torch_dtype:
            raise InvalidInputError(f"dtype={dtype!r} and torch_dtype={torch_dtype!r} disagree; pass only dtype")
        if max_cache_len is not None and (
            not isinstance(max_cache_len, (int, np.integer)) or isinstance(max_cache_len, bool) or max_cache_len < 1
        ):
            raise InvalidInputError(f"max_cache_len={max_cache_len!r} must be a positive integer")
        if blas_prefill is not None and not isinstance(blas_prefill, (bool, np.bool_)):
            raise InvalidInputError(f"blas_prefill={blas_prefill!r} must be True or False")
        if blas_prefill:
            warn_if_blas_generic()
        try:
            if overrides or config is not None:  # checked before any weights are downloaded
                config = load_config(
                    config,
                    None
                    if config is not None
                    else resolve(pretrained_model_name_or_path, CONFIG_FILES, **hub_arguments),
                    overrides,
                )
            directory = resolve(pretrained_model_name_or_path, MODEL_FILES, progress=progress, **hub_arguments)
            checkpoint = load_checkpoint(
                directory, dtype if dtype is not None else torch_dtype, repack, progress, config=config
            )
        except UnsupportedModelError as e:
            raise unsupported_family_hint(e, kwargs.get("trust_remote_code")) from None
        return _ARCHITECTURE_CLASSES[_architecture(checkpoint.config)](checkpoint, max_cache_len, blas_prefill)

    def _early_exit_core(self, n_layers):
        """A core model of this model's first n_layers layers, its final norm and its head, over the same weight
        buffers (no copy): Transformers' assistant_early_exit draft (LayerSkip's self-speculation)."""
        if n_layers not in self._early_exit:
            core_cfg, parts, layers = self._parts
            self._early_exit[n_layers] = _core.Model(dict(core_cfg, n_layers=n_layers), parts, layers[:n_layers])
        return self._early_exit[n_layers]

    def assisted_costs(
        self,
        assistant_model: Optional[PreTrainedCausalLM] = None,
        remeasure: bool = False,
        assistant_early_exit: Optional[int] = None,
        batch_size: int = 1,
    ) -> _assisted_costs.AssistedCosts:
        """The costs num_assistant_tokens_schedule="cost" chooses K from: an AssistedCosts of one draft step of
        assistant_model (or of this model's first assistant_early_exit layers; 0.0 for prompt lookup, when both are
        None; also for 2..8 rows drafting together, and each as a round's first step, right after the target's
        append) and one append of T = 1..64 tokens to this model (timed
        for T = 1..16, 24, 32, 48, 64; straight lines between), in seconds, the T tokens spread over batch_size
        sequences (16 at most), as a batch of that many rows verifies them. Measured on first use (its time grows
        with the model's size: docs/generation.md) and kept on this model for the batch size and thread count it
        was measured with; remeasure=True measures again. Beside measured costs the schedule keeps the
        acceptance it counted, which its next calls with this drafter go on from (not with rejection sampling)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise InvalidInputError(
                f"batch_size={batch_size!r} must be an integer >= 1 (the rows of a generate() call)"
            )
        drafter = self._drafter(assistant_model, assistant_early_exit)
        costs = None if remeasure else self._costs.get(drafter, int(batch_size))
        if costs is None:
            draft_core = (
                None
                if drafter is None
                else (self._early_exit_core(drafter) if isinstance(drafter, int) else drafter._core)
            )
            costs = _assisted_costs.measure(
                self,
                draft_core,
                self.max_cache_len if isinstance(drafter, int) or drafter is None else drafter.max_cache_len,
                rows=_assisted_costs.measured_rows(int(batch_size)),
                drafts=None if remeasure else self._costs.drafts(drafter),
            )
            self._costs.put(drafter, costs, measured=True, batch_size=int(batch_size))
        return costs

    def set_assisted_costs(
        self,
        costs: _assisted_costs.AssistedCosts,
        assistant_model: Optional[PreTrainedCausalLM] = None,
        assistant_early_exit: Optional[int] = None,
    ) -> None:
        """Pins the costs of this model with assistant_model (or its early exit, or prompt lookup) that
        num_assistant_tokens_schedule="cost" uses: an AssistedCosts (e.g. one assisted_costs() returned and saved),
        so K choices no longer depend on a measurement, nor on earlier calls (each call counts acceptance anew)."""
        if not isinstance(costs, _assisted_costs.AssistedCosts):
            raise InvalidInputError(
                f"costs must be an AssistedCosts (ha.AssistedCosts(draft_step=..., target=(...))), "
                f"got {type(costs).__name__}"
            )
        self._costs.put(self._drafter(assistant_model, assistant_early_exit), costs, measured=False)

    def _drafter(self, assistant_model, assistant_early_exit):
        """The cost table's key: the draft model, the early-exit depth, or None for prompt lookup."""
        if assistant_early_exit is not None:
            if (
                isinstance(assistant_early_exit, bool)
                or not isinstance(assistant_early_exit, (int, np.integer))
                or not 1 <= assistant_early_exit <= self.config.num_hidden_layers
            ):
                raise InvalidInputError(
                    f"assistant_early_exit={assistant_early_exit!r} must be 1..{self.config.num_hidden_layers}"
                )
            return int(assistant_early_exit)
        if assistant_model is not None and not isinstance(assistant_model, PreTrainedCausalLM):
            raise InvalidInputError(
                f"assistant_model must be a model from AutoModelForCausalLM.from_pretrained or "
                f"habana_assist.wrap(model), got {type(assistant_model).__name__}"
            )
        return assistant_model

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name_or_path!r}, architecture={self.config.architectures}, "
            f"dtype={self.weight_dtype}, layers={self.config.num_hidden_layers})"
        )

    @property
    def vocab_size(self) -> int:
        return int(self.config.vocab_size)

    # ---- the rest of the model surface scripts written for Transformers touch ----------------------------

    @property
    def dtype(self) -> Any:
        """The dtype the model is held in, as torch.dtype where torch is importable (torch.bfloat16), else its name
        ("bfloat16"). For an int8 / int4 model, the dtype of the weights left unquantized (the untied embedding, the
        norms), as Transformers reports a bitsandbytes model's; weight_dtype says how the matrices are held."""
        return dtype_object(self._float_dtype)

    @property
    def device(self) -> Any:
        """torch.device("cpu") where torch is importable, else CPUDevice (the string "cpu", with .type "cpu")."""
        return cpu_device()

    @property
    def training(self) -> bool:
        """False, as torch's module after eval(): this model only runs inference (train() is refused)."""
        return False

    @property
    def is_quantized(self) -> bool:
        """Whether the matrices are integers (dtype="int8" / "w8a8" / "int4", load_in_8bit / load_in_4bit), as
        Transformers'."""
        return self.weight_dtype in _QUANTIZED

    @property
    def is_loaded_in_8bit(self) -> bool:
        return self.weight_dtype in ("int8", "w8a8")

    @property
    def is_loaded_in_4bit(self) -> bool:
        return self.weight_dtype == "int4"

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        """The checkpoint's tensors, each once (a tied head not again), in Transformers' state_dict order: torch
        Parameters (requires_grad=False; not to be written into) where torch is importable, else read-only numpy
        arrays. Views of the model's buffers where it holds a tensor in the checkpoint's layout, else copies made as
        they are yielded (float matrices in panels, the default; int8 / int4 matrices, dequantized): see
        checkpoints/state_dict.py."""
        for _, tensor in self.named_parameters():
            yield tensor

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """(name, tensor) of parameters(), under Transformers' names (the state_dict keys of the checkpoint)."""
        return _state_dict.named_parameters(self, prefix, remove_duplicate)

    def state_dict(
        self, destination: Optional[dict[str, Tensor]] = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Tensor]:
        """{name: tensor} of every checkpoint tensor, a tied lm_head.weight included (the embedding's own tensor), as
        Transformers' state_dict: torch tensors sharing the parameters' memory (keep_vars=True: the Parameters), or
        numpy arrays. destination: a dict to fill and return."""
        out = _state_dict.state_dict(self, prefix, keep_vars)
        if destination is None:
            return out
        destination.update(out)
        return destination

    def load_state_dict(
        self, state_dict: Mapping[str, Tensor], strict: bool = True, assign: bool = False
    ) -> IncompatibleKeys:
        """torch's Module.load_state_dict: the weights of state_dict ({name: torch tensor or numpy array}, names and
        shapes as state_dict() gives them, e.g. a Transformers model's of the same config) in place of this model's.
        strict: every name this model has, and no other, or RuntimeError naming them (torch's message); strict=False
        keeps this model's own weights for the missing ones. Returns (missing_keys, unexpected_keys) as torch does.
        The weights are held as this model holds its own (weight_dtype: float classes round them to it, quantized
        ones quantize them again), as from_pretrained of a checkpoint of them would: it costs a save of them into a
        temporary directory and a load from it; caches filled before are refused after. assign is torch's choice of
        copying or assigning parameters; both mean the same here."""
        if not hasattr(state_dict, "keys"):
            raise InvalidInputError(
                f"load_state_dict takes a mapping of names to tensors, not {type(state_dict).__name__}"
            )
        own = self.state_dict()
        missing = sorted(k for k in own if k not in state_dict)
        unexpected = sorted(k for k in state_dict if k not in own)
        if strict and (missing or unexpected):
            parts = [f"Missing key(s) in state_dict: {', '.join(repr(k) for k in missing)}."] if missing else []
            parts += (
                [f"Unexpected key(s) in state_dict: {', '.join(repr(k) for k in unexpected)}."] if unexpected else []
            )
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(parts))
        arrays = {}
        for name, current in own.items():
            value = state_dict[name] if name in state_dict else current
            array = value.detach().float().cpu().numpy() if hasattr(value, "detach") else np.asarray(value, np.float32)
            if tuple(array.shape) != tuple(current.shape):
                raise RuntimeError(
                    f"Error(s) in loading state_dict for {type(self).__name__}:\n\tsize mismatch for "
                    f"{name}: copying a param with shape {tuple(array.shape)} from checkpoint, the "
                    f"shape in current model is {tuple(current.shape)}."
                )
            arrays[name] = np.ascontiguousarray(array, dtype=np.float32)
        if self.config.tie_word_embeddings:
            arrays.pop("lm_head.weight", None)  # the embedding's own tensor, as checkpoints of tied models leave it

        def write(tmp):
            self.config.save_pretrained(tmp)
            save_file(arrays, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})

        self._reload(write, self.weight_dtype)
        return IncompatibleKeys(missing, unexpected)

    def _reload(self, write, dtype):
        """This model, in place, as from_pretrained(directory, dtype=dtype) with this model's other load options
        loads the checkpoint write(directory) lays out in a temporary directory: the object, its generation_config
        and name stay; caches filled before are refused after, as they hold the old weights' keys. A matrix the load
        keeps mapped from the file stays readable after the directory is removed (the mapping holds the file)."""
        with tempfile.TemporaryDirectory(prefix="habana-assist-reload-") as tmp:
            write(tmp)
            loaded = PreTrainedCausalLM.from_pretrained(
                tmp,
                dtype=dtype,
                max_cache_len=self.max_cache_len,
                blas_prefill=self.blas_prefill,
                repack=self.repacked,
                progress=False,
            )
        kept = {"generation_config": self.generation_config, "name_or_path": self.name_or_path}
        self.__dict__.update(loaded.__dict__)
        self.__dict__.update(kept)

    def get_input_embeddings(self) -> Any:
        """The token embedding: a torch.nn.Embedding over the embedding's parameter where torch is importable, else a
        small Embedding (weight, num_embeddings, embedding_dim, called with ids)."""
        return _state_dict.embeddings(self, output=False)

    def get_output_embeddings(self) -> Any:
        """The head: a torch.nn.Linear without bias over lm_head's parameter (a tied head's weight is the input
        embedding's own object), else a small Linear (weight, in_features, out_features, called with hidden states)."""
        return _state_dict.embeddings(self, output=True)

    def eval(self) -> PreTrainedCausalLM:
        """Inference is all this model does (no dropout, no gradients): returns self, as torch's eval()."""
        return self

    def train(self, mode: bool = True) -> PreTrainedCausalLM:
        if mode:
            raise InvalidInputError("this model only runs inference; training is not supported (use model.eval())")
        return self

    def requires_grad_(self, requires_grad: bool = True) -> PreTrainedCausalLM:
        """torch's requires_grad_: False (freezing the weights, as scripts do before inference) returns self: no
        weight ever takes a gradient here; True is refused (inference only)."""
        if requires_grad:
            raise InvalidInputError(
                "requires_grad_(True): this model only runs inference (its weights take no "
                "gradients, no training here); requires_grad_(False) is accepted"
            )
        return self

    def float(self) -> PreTrainedCausalLM:
        """torch's float(): the model's float weights in float32, in place (returns self); see _convert."""
        return self._convert("float32", "float()")

    def half(self) -> PreTrainedCausalLM:
        """torch's half(): float16 weights, in place (returns self); see _convert."""
        return self._convert("float16", "half()")

    def bfloat16(self) -> PreTrainedCausalLM:
        """torch's bfloat16(): bfloat16 weights, in place (returns self); see _convert."""
        return self._convert("bfloat16", "bfloat16()")

    def double(self) -> PreTrainedCausalLM:
        raise InvalidInputError(
            "model.double(): float64 weights are not supported here; the float dtypes are "
            f"{', '.join(_FLOAT_DTYPES)} (model.float(), model.half(), model.bfloat16(), or "
            "from_pretrained(path, dtype=...))"
        )

    def _convert(self, dtype, call):
        """Transformers' model.half() / float() / bfloat16() on this model: the weights it holds now, rounded to
        dtype (a no-op, returning self, where they are in it already), as from_pretrained(path, dtype=dtype) holds
        a checkpoint of those weights: float matrices and vectors in dtype, computed in float32 (the numerics
        classes of docs/models.md), not torch's float16 arithmetic. In place: the model object stays (caches
        filled before are refused after, as they hold the old weights' keys); its generation_config and name
        stay. Quantized (int8, w8a8, int4) and bfloat16-pairs models are refused: load them again with dtype=.
        Costs a save of the model into a temporary directory and a load from it."""
        if self.weight_dtype not in _FLOAT_DTYPES:
            raise InvalidInputError(
                f"model.{call}: this model's matrices are held as {self.weight_dtype!r} (chosen at "
                f"load), which {call} cannot change; load it with from_pretrained(path, "
                f"dtype={dtype!r}) instead"
            )
        if self.weight_dtype == dtype and self._float_dtype == dtype:
            return self
        self._reload(self.save_pretrained, dtype)
        return self

    def to(self, *args: Any, **kwargs: Any) -> PreTrainedCausalLM:
        """model.to("cpu") (or torch.device("cpu")) returns self; another device is refused. A float dtype
        (torch.float16, "bfloat16", dtype=torch.float32) converts as model.half() / bfloat16() / float() do."""
        dtype = kwargs.pop("dtype", None)
        devices = [kwargs.pop("device")] if kwargs.get("device") is not None else []
        kwargs.pop("device", None)
        for flag in ("non_blocking", "memory_format"):  # torch's Module.to: nothing to move or lay out on the CPU
            kwargs.pop(flag, None)
        if kwargs:
            raise InvalidInputError(f"model.to(): unexpected argument(s) {', '.join(sorted(kwargs))}")
        for value in args:
            if _is_dtype(value):
                dtype = value
            else:
                devices.append(value)
        for value in devices:
            if str(value).split(":")[0] != "cpu":
                raise InvalidInputError(f"model.to({value!r}): this model runs on the CPU only; use model.to('cpu')")
        if dtype is not None:
            name = _float_dtype_name(dtype)
            if name is None:
                raise InvalidInputError(
                    f"model.to({dtype!r}): the float dtypes here are {', '.join(_FLOAT_DTYPES)}; "
                    "or load with from_pretrained(path, dtype=...)"
                )
            return self._convert(name, f"to({dtype!r})")
        return self

    def cpu(self) -> PreTrainedCausalLM:
        return self

    def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False) -> int:
        """Parameters as Transformers counts them: each tensor of the checkpoint once (a tied head not again);
        exclude_embeddings leaves out the embeddings (the token embedding, and GPT-2's learned positions), as
        Transformers' count does: nn.Embedding modules only, so an untied head stays."""
        embeddings = {
            id(self._weights[spec.name].array)
            for spec in expected_weights(self.config)
            if spec.role in ("embed", "pos_embed")
        }
        total, seen = 0, set()
        for weight in self._weights.values():
            if id(weight.array) in seen or (exclude_embeddings and id(weight.array) in embeddings):
                continue  # a tied head is the embedding's own tensor
            seen.add(id(weight.array))
            if weight.array.ndim == 1:
                total += weight.array.size
            else:
                total += (weight.rows if weight.rows is not None else weight.array.shape[0]) * weight.cols
        return int(total)

    def can_generate(self) -> bool:
        return True

    def resize_token_embeddings(
        self, new_num_tokens: Optional[int] = None, pad_to_multiple_of: Optional[int] = None, mean_resizing: bool = True
    ) -> Any:
        """Transformers' resize_token_embeddings, for what fixed weights allow: a size the embedding already has
        room for (e.g. len(tokenizer) after adding tokens that fit in its spare rows, as Qwen's have) changes
        nothing, and every row stays (Transformers would cut the embedding down to that size; here logits keep
        vocab_size columns); a larger one raises InvalidInputError, as the weights cannot grow. new_num_tokens
        None keeps the size; pad_to_multiple_of rounds it up first, as in Transformers. -> an object with
        nn.Embedding's num_embeddings and embedding_dim (there is no torch module to return)."""
        size = self.vocab_size if new_num_tokens is None else new_num_tokens
        for name, value in (("new_num_tokens", size), ("pad_to_multiple_of", pad_to_multiple_of)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
                raise InvalidInputError(f"resize_token_embeddings: {name}={value!r} must be a positive integer")
        if pad_to_multiple_of:
            size = -(-int(size) // int(pad_to_multiple_of)) * int(pad_to_multiple_of)
        if size > self.vocab_size:
            raise InvalidInputError(
                f"resize_token_embeddings({size}): this model's token embedding has {self.vocab_size} rows and its "
                "weights are fixed (read from the checkpoint, no training here), so it cannot grow to give new tokens "
                "rows; generate() refuses ids >= vocab_size. Use tokens the vocabulary has (e.g. "
                "tokenizer.pad_token = tokenizer.eos_token), or add rows and train them with Transformers, then load "
                "that checkpoint"
            )
        return types.SimpleNamespace(num_embeddings=self.vocab_size, embedding_dim=self.config.hidden_size)

    def save_pretrained(self, save_directory: PathLike, **kwargs: Any) -> None:
        """Writes config.json, generation_config.json and model.safetensors (shards and an index above
        max_shard_size) that from_pretrained loads back to bitwise-equal logits; see saving.save_model."""
        return save_model(self, save_directory, **kwargs)

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one decode step reads."""
        return self._core.weight_bytes

    def create_cache(self, batch_size: int = 1, max_cache_len: Optional[int] = None) -> StaticCache:
        """A StaticCache bound to this model, for batch_size rows of up to max_cache_len positions (default: the
        model's max_cache_len)."""
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidInputError(f"batch_size={batch_size!r} must be a positive integer")
        cache = StaticCache(max_cache_len=self.max_cache_len if max_cache_len is None else max_cache_len)
        cache._bind(self, int(batch_size))
        return cache

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """model(...) is model.forward(...), as a torch module's call.

        Args:
            *args: forward's arguments by position (input_ids first).
            **kwargs: forward's arguments by name.

        Returns:
            What forward returns: a CausalLMOutput, or a tuple where return_dict is False.
        """
        return self.forward(*args, **kwargs)

    def forward(
        self,
        input_ids: Optional[TokenIds] = None,
        attention_mask: Optional[TokenIds] = None,
        past_key_values: Union[Cache, tuple[tuple[Tensor, Tensor], ...], None] = None,
        use_cache: Optional[bool] = None,
        labels: Optional[TokenIds] = None,
        return_dict: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        output_attentions: Optional[bool] = None,
        position_ids: Optional[TokenIds] = None,
        cache_position: Optional[TokenIds] = None,
        logits_to_keep: Union[int, TokenIds] = 0,
        num_logits_to_keep: Optional[int] = None,
        inputs_embeds: Optional[Tensor] = None,
        cache: Union[Cache, tuple[tuple[Tensor, Tensor], ...], None] = None,
        **kwargs: Any,
    ) -> Union[CausalLMOutput, tuple[Any, ...]]:
        """Transformers' causal-LM forward: the logits (and loss, cache, hidden states) of a batch of tokens.

        Args:
            input_ids: int (batch, seq): the tokens, a numpy array, a list or a torch tensor (torch in, torch out).
                Required (inputs_embeds is refused).
            attention_mask: int or bool (batch, seq), or (batch, past columns + seq) with a cache, as Transformers
                takes it: 1 for real tokens, 0 for padding. Default: all ones.
            past_key_values: a Cache (DynamicCache, StaticCache, model.create_cache()) that this forward extends, or
                Transformers' legacy per-layer (key, value) tuples.
            use_cache: return the cache as `cache` (a new DynamicCache where none was passed); default
                config.use_cache (True).
            labels: int (batch, seq): the loss as Transformers computes it (logits shifted by one, ignore_index
                -100, the mean over counted tokens); a counted label must follow a real token (its logits are not
                computed after padding).
            return_dict: False returns a tuple of the output's filled fields; None takes config.return_dict.
            output_hidden_states: n_layers + 1 arrays float32 (batch, seq, hidden_size): the embeddings, each
                layer's output, the last one after the final norm (zeros at padded positions); None takes the
                config's.
            output_attentions: True is refused (the core never materializes attention weights); None takes the
                config's, which must be False.
            position_ids: int (batch, seq): accepted where it equals what the cache implies (positions count each
                row's real tokens); anything else raises.
            cache_position: int (seq,): accepted where it equals what the cache implies (it counts columns);
                anything else raises.
            logits_to_keep: an int k > 0 keeps the last k positions' logits (0, the default: all), an array of
                positions those.
            num_logits_to_keep: logits_to_keep's older name (Transformers 4).
            inputs_embeds: refused (the core embeds token ids itself); pass input_ids.
            cache: Transformers 5.24's name for past_key_values; pass one of the two.
            **kwargs: none accepted: any other name raises InvalidInputError naming it.

        Returns:
            CausalLMOutput with logits float32 (batch, seq or kept, vocab), loss (with labels), cache (with
            use_cache) and hidden_states (with output_hidden_states); a tuple of its filled fields where return_dict
            (or config.return_dict) is False.

        Raises:
            InvalidInputError: a malformed or out-of-range argument, a refused one, or a mask that disagrees with the
                cache; the message names it and the fix.
            CacheCapacityError: a StaticCache's rows would pass its max_cache_len (a DynamicCache grows).
        """
        cfg = self.config
        output_hidden_states = cfg.output_hidden_states if output_hidden_states is None else output_hidden_states
        output_attentions = cfg.output_attentions if output_attentions is None else output_attentions
        return_dict = cfg.return_dict if return_dict is None else return_dict
        if kwargs:
            code = PreTrainedCausalLM.forward.__code__  # the named parameters, after self
            raise InvalidInputError(
                f"forward() got {', '.join(sorted(kwargs))}: not an argument of this model's forward (it takes "
                f"{', '.join(code.co_varnames[1 : code.co_argcount])})"
            )
        if inputs_embeds is not None:
            raise InvalidInputError("inputs_embeds is not supported: the core embeds token ids itself; pass input_ids")
        if output_attentions:
            raise InvalidInputError(
                "output_attentions=True is not supported: attention weights are never "
                "materialized by the core; leave it unset"
            )
        if input_ids is None:
            raise InvalidInputError("input_ids is required: pass token ids of shape (batch, seq)")
        keep = _logits_to_keep(logits_to_keep, num_logits_to_keep)
        ids, attention_mask, kind = numpy_inputs(input_ids, attention_mask, self.vocab_size)
        B, S = ids.shape
        use_cache = getattr(self.config, "use_cache", True) if use_cache is None else use_cache
        if cache is not None and past_key_values is not None:
            raise InvalidInputError(
                "cache and past_key_values are one argument (Transformers 5.24 renamed "
                "past_key_values to cache): pass one of them"
            )
        cache = past_key_values if cache is None else cache
        if cache is not None and not isinstance(cache, Cache):
            if not isinstance(cache, (tuple, list)):
                raise InvalidInputError(
                    f"past_key_values must be a Cache (DynamicCache(), StaticCache(...), "
                    f"model.create_cache()) or legacy (key, value) tuples, not "
                    f"{type(cache).__name__}"
                )
            cache = DynamicCache.from_legacy_cache(cache)
        if cache is None and use_cache:
            cache = DynamicCache()
        if cache is not None:
            cache._bind(self, B, S)
            if kind == "torch":
                cache._kind = "torch"
        past = cache._mask if cache is not None else np.zeros((B, 0), dtype=bool)
        if past.shape[1] and attention_mask is not None and np.shape(attention_mask) == (B, past.shape[1] + S):
            # Transformers' convention with a cache: the mask covers the past columns and the new ones.
            full = checked_attention_mask(attention_mask, (B, past.shape[1] + S))
            if not (full[:, : past.shape[1]] == past).all():
                raise InvalidInputError("attention_mask disagrees with the mask of the tokens already in the cache")
            attention_mask = full[:, past.shape[1] :]
        mask = checked_attention_mask(attention_mask, ids.shape)
        _check_positions(position_ids, cache_position, past, mask)
        rows, cols = np.nonzero(mask)  # row-major: each row's tokens in order
        check_fits(
            f"the logits of {B} rows x {S} tokens x vocab {self.vocab_size} (and the core's copy of them)",
            4 * (B * S + rows.size) * self.vocab_size,
            "pass fewer tokens at a time",
        )
        d, n_layers = self._parts[0]["hidden_size"], self._parts[0]["n_layers"]
        hidden = (
            np.zeros((n_layers + 1, rows.size, d), dtype=np.float32) if output_hidden_states and rows.size else None
        )
        logits = np.zeros((B, S, self.vocab_size), dtype=np.float32)
        out = np.empty((rows.size, self.vocab_size), dtype=np.float32)
        with cache._exclusive() if cache is not None else contextlib.nullcontext():
            if cache is not None:
                cache._make_room(int((past.sum(axis=1) + mask.sum(axis=1)).max()))
            ctx = cache._ctx if cache is not None else _core.Context(self._core, B, max(S, 1), self.blas_prefill)
            assert ctx is not None, "the cache was bound above"
            if rows.size:
                if hidden is not None:
                    ctx.record_hidden(hidden, rows.size)
                try:
                    ctx.append(rows.astype(np.int32), np.ascontiguousarray(ids[rows, cols]), None, out)
                except KeyboardInterrupt:
                    if cache is not None and any(ctx.length(b) != n for b, n in enumerate(cache._mask.sum(axis=1))):
                        # a stopped append that had overwritten a row's sliding-window ring empties that row
                        # (csrc/ha.h, ha_lm.append): this cache starts over, empty, rather than hold rows apart
                        for b in range(B):
                            ctx.crop(b, 0)
                        cache._mask = np.zeros((B, 0), dtype=bool)
                        cache._tokens = np.zeros((B, 0), dtype=np.int64)
                    raise
            if cache is not None:
                cache._mask = np.concatenate([cache._mask, mask], axis=1)
                cache._tokens = np.concatenate([cache._tokens, np.where(mask, ids, -1)], axis=1)
        logits[rows, cols] = out
        loss = None if labels is None else _causal_lm_loss(logits, labels, mask, self.vocab_size)
        hidden_states = None
        if output_hidden_states:
            hidden_states = tuple(np.zeros((B, S, d), dtype=np.float32) for _ in range(n_layers + 1))
            for layer, h in enumerate(hidden_states):
                if hidden is not None:
                    h[rows, cols] = hidden[layer]
        if isinstance(keep, int) and keep > 0:
            logits = logits[:, -keep:]
        elif not isinstance(keep, int):
            if labels is not None:
                raise InvalidInputError(
                    "logits_to_keep as positions with labels: the loss needs every position's "
                    "logits; leave logits_to_keep unset"
                )
            if keep.size and (keep.min() < -S or keep.max() >= S):
                raise InvalidInputError(f"logits_to_keep holds positions outside the sequence's {S}")
            logits = logits[:, keep]
        output = CausalLMOutput(
            loss=loss, logits=logits, cache=cache if use_cache else None, hidden_states=hidden_states
        )
        output = convert_output(output, kind)
        if return_dict is False:
            return output.to_tuple()
        return output

    def _context(self, batch_size, capacity, draft=False, argmax_only=False):
        """The core's model interface and cache for one generate() call, as target or draft (external.py's
        models give their own; argmax_only is for theirs)."""
        return _core.Context(self._core, batch_size, capacity, self.blas_prefill)
