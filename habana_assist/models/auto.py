"""The Auto classes: AutoModelForCausalLM.from_pretrained picks the checkpoint architecture's class (models/),
AutoConfig reads its config.json (configuration_utils.py)."""

import copy
import os
import warnings

import numpy as np

from .. import _core
from ..checkpoints.hub import CONFIG_FILES, MODEL_FILES, pop_hub_arguments, resolve
from ..checkpoints.loading import load_checkpoint
from ..configuration_utils import AutoConfig, SUPPORTED_ARCHITECTURES
from ..errors import InvalidInputError, UnsupportedModelError
from ..modeling_utils import PreTrainedCausalLM

__all__ = ["AutoConfig", "AutoModelForCausalLM", "ARCHITECTURE_CLASSES"]


def _is_cpu(device):
    return device is None or str(device) in ("cpu", "auto") or (isinstance(device, dict) and all(
        str(v) in ("cpu", "auto") for v in device.values()))


# from_pretrained arguments of Transformers that change nothing here: name -> (accepts(value), why not otherwise)
_LOAD_ARGUMENTS = {
    "device_map": (_is_cpu, "this package runs on the CPU only: pass device_map='cpu' or leave it unset"),
    "low_cpu_mem_usage": (lambda v: v in (None, True, False), "pass True or False (loading always streams here)"),
    "attn_implementation": (lambda v: v in (None, "eager", "sdpa"),
                            "one attention implementation runs here: pass 'eager', 'sdpa' or leave it unset"),
    "use_safetensors": (lambda v: v in (None, True), "only safetensors checkpoints are read here"),
    "trust_remote_code": (lambda v: v in (None, True, False), "pass True or False (no checkpoint code is ever run)"),
    "variant": (lambda v: v is None, "weight variants (model.<variant>.safetensors) are not read; pass the path "
                                     "of a checkpoint without one"),
}


def unsupported_family_hint(error, trust_remote_code):
    """An UnsupportedModelError raised while loading, saying that trust_remote_code=True cannot help: no code
    from a checkpoint is ever run, only the families listed (models/)."""
    if not trust_remote_code:
        return error
    return UnsupportedModelError(f"{error} (trust_remote_code=True changes nothing here: this package never runs "
                                 "a checkpoint's own code, it runs only the families it lists)")


def _check_load_arguments(kwargs):
    """Refuses a known from_pretrained argument whose value would change the result; -> the other keyword
    arguments (the config's overrides)."""
    overrides = {}
    for name, value in kwargs.items():
        if name not in _LOAD_ARGUMENTS:
            overrides[name] = value
            continue
        accepts, why = _LOAD_ARGUMENTS[name]
        if not accepts(value):
            raise InvalidInputError(f"from_pretrained({name}={value!r}) is not supported: {why}")
    return overrides


def _model_config(config, directory, overrides):
    """The config a model loads with: config= (a PretrainedConfig, copied; a Transformers config, read from its
    to_dict(); a path to a config.json or its directory), else the directory's config.json with the keyword
    overrides set (as Transformers: attributes its config has; any other keyword is refused, as Transformers' model
    constructor refuses it). With config= every keyword is refused, as Transformers passes them all to the model's
    constructor then."""
    if config is not None and overrides:
        raise InvalidInputError(
            f"from_pretrained(config=..., {', '.join(f'{k}=...' for k in sorted(overrides))}): with config= given, "
            "Transformers passes other keywords to the model's constructor, which refuses them; set them on the "
            "config instead (config.num_hidden_layers = 2) and pass only config=")
    if config is None:
        config, unused = AutoConfig.from_pretrained(directory, return_unused_kwargs=True, **overrides)
        overrides = {}
        if unused:
            rope = sorted(set(unused) & {"rope_theta", "partial_rotary_factor", "rope_local_base_freq"})
            hint = (f" ({', '.join(rope)}: Transformers 5 holds {'it' if len(rope) == 1 else 'them'} in "
                    "rope_parameters; pass rope_parameters={'rope_type': 'default', 'rope_theta': ...})"
                    if rope else "")
            raise InvalidInputError(
                f"from_pretrained() got {', '.join(repr(k) for k in sorted(unused))}: neither a loading argument (see "
                f"AutoModelForCausalLM.from_pretrained's docstring) nor an attribute of this "
                f"{config.family} config, so Transformers' model constructor refuses it too{hint}")
    elif isinstance(config, (str, os.PathLike)):
        config = AutoConfig.from_pretrained(config)
    elif isinstance(config, AutoConfig):
        config = copy.deepcopy(config)
    elif callable(getattr(config, "to_dict", None)) and isinstance(config.to_dict(), dict):
        config = AutoConfig.from_dict(config.to_dict())  # a Transformers config object
    else:
        raise InvalidInputError(f"config= must be a config (AutoConfig.from_pretrained(...)), a Transformers config "
                                f"or the path of a config.json; got {type(config).__name__}")
    return config


# One class per supported architecture, named as Transformers names it (LlamaForCausalLM, Qwen3ForCausalLM,
# GPT2LMHeadModel...), so that type(model).__name__ and isinstance checks read as they do with Transformers: each a
# sibling subclass of the neutral PreTrainedCausalLM (one C forward for every family; the differences are data).
ARCHITECTURE_CLASSES = {
    name: type(name, (PreTrainedCausalLM,), {
        "__module__": __name__, "__doc__": f"A {name} checkpoint on the C core (see PreTrainedCausalLM)."})
    for name in SUPPORTED_ARCHITECTURES}


def _model_class(config):
    """The class of config's architecture: the supported one its "architectures" names, else its model_type's."""
    for name in config.architectures or ():
        if name in ARCHITECTURE_CLASSES:
            return ARCHITECTURE_CLASSES[name]
    by_type = {model_type: name for name, model_type in SUPPORTED_ARCHITECTURES.items()}
    return ARCHITECTURE_CLASSES[by_type.get(config.family, "LlamaForCausalLM")]


class AutoModelForCausalLM:
    """Transformers-style entry point: from_pretrained(directory) -> the checkpoint architecture's class."""

    def __init__(self):
        raise TypeError("use AutoModelForCausalLM.from_pretrained(path)")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, dtype=None, max_cache_len=None, torch_dtype=None,
                        load_in_8bit=False, load_in_4bit=False, blas_prefill=False, repack=True, progress=None,
                        config=None, **kwargs):
        """Loads a Hugging Face checkpoint directory (config.json, model.safetensors or sharded index).

        Transformers' loading arguments that change nothing here are accepted with those values only (see
        _LOAD_ARGUMENTS): device_map None/"auto"/"cpu" (everything runs on the CPU), low_cpu_mem_usage (loading
        always streams), attn_implementation None/"eager"/"sdpa" (one attention implementation), use_safetensors
        None/True, trust_remote_code (no checkpoint code is ever run).

        pretrained_model_name_or_path: a local directory, a shipped name ("habana-assist/pycode") or a Hub repo
        id ("org/name"), resolved as checkpoints/hub.py says with the hub arguments revision, cache_dir,
        local_files_only, token (use_auth_token), force_download, proxies and subfolder: config.json,
        generation_config.json and the safetensors weights come from the Hugging Face cache, downloaded where it
        lacks them (progress= also decides the downloads' bars).

        dtype: None/"auto" keeps weights' stored dtype (memory-mapped, not copied, with repack=False);
        "float32", "bfloat16" or "float16" converts once at load; "int8" and "int4" quantize the matrices at load (a
        float32 scale per 64 int8 or 32 int4 weights; each matmul rounds its input activations to int16, one scale per
        token); "w8a8" quantizes them as "int8" does and rounds each matmul's input to int8 per token and group of 64
        (the densest class: VNNI's vpdpbusd; docs/kernels-and-performance.md); "bfloat16-pairs" rounds the matrices to
        bfloat16 (a bfloat16 checkpoint's bits kept) and each matmul's input to bfloat16 per token, summed in
        vdpbf16ps's order (that instruction where the CPU has AVX512_BF16, an exact emulation elsewhere).
        Compute is float32, apart from integer weights' products (exact int32 sums, scaled in float32).
        max_cache_len bounds prompt + new tokens (default: config.max_position_embeddings). torch_dtype is an
        alias of dtype, load_in_8bit=True of "int8", load_in_4bit=True of "int4".

        blas_prefill=True computes prompts through OpenBLAS in blocks of 128 tokens (those that start an
        empty cache). Greedy and coupled assisted generation still equal plain generation bit for bit, but
        those prompt rows are not bitwise the ones a token-by-token forward gives (they agree to float32
        rounding; with integer weights OpenBLAS multiplies float32 activations, not int16). False (the
        default; None means the same) keeps every row batch-invariant (what OpenBLAS gains or loses against the
        kernels is measured in docs/benchmarks.md). True warns (RuntimeWarning) where OpenBLAS runs older kernels
        than the CPU has (Debian 12's falls back to Prescott's on CPUs newer than itself), naming the
        OPENBLAS_CORETYPE fix.

        repack=True (the default) copies float matrices at load into panels of 16 rows (csrc/ha.h) for kernels
        that read each weight once for up to 6 tokens; each output is then one chain of fused multiply-adds in
        index order (faster decode and verification than row-major weights: docs/benchmarks.md). repack=False
        keeps float weights row-major, as stored (views of the file's memory map: no copy at load, pages shared
        between processes), with kernels that sum 8-lane blocks; logits differ from repacked ones by float32
        rounding only.

        progress: a tqdm bar over the bytes of weights read and converted (progress.py): None (the default) shows
        one for checkpoints of 512 MiB or more (HA_PROGRESS=0 in the environment turns that off), True always,
        False never.

        config: a config to load the weights for instead of the checkpoint's config.json, as Transformers' config=:
        a PretrainedConfig (copied), a Transformers config object (read from its to_dict()) or the path of a
        config.json. Other keyword arguments override config.json's attributes, as Transformers' (num_hidden_layers=1,
        use_cache=False, output_hidden_states=True, rope_parameters={...}); a keyword that names no attribute of
        Transformers' config (rope_theta: Transformers 5 holds it in rope_parameters) is refused, as Transformers'
        model constructor refuses it, and so is every override beside config=. output_attentions=True is refused
        (no attention weights here). Stored weights the config does not use (fewer layers) warn, naming them."""
        hub_arguments = pop_hub_arguments(kwargs, "from_pretrained")
        overrides = _check_load_arguments(kwargs)
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
        if max_cache_len is not None and (not isinstance(max_cache_len, (int, np.integer))
                                          or isinstance(max_cache_len, bool) or max_cache_len < 1):
            raise InvalidInputError(f"max_cache_len={max_cache_len!r} must be a positive integer")
        if blas_prefill is not None and not isinstance(blas_prefill, (bool, np.bool_)):
            raise InvalidInputError(f"blas_prefill={blas_prefill!r} must be True or False")
        if blas_prefill:
            _warn_if_blas_generic()
        try:
            if overrides or config is not None:  # checked before any weights are downloaded
                config = _model_config(config, None if config is not None else resolve(
                    pretrained_model_name_or_path, CONFIG_FILES, **hub_arguments), overrides)
            directory = resolve(pretrained_model_name_or_path, MODEL_FILES, progress=progress, **hub_arguments)
            checkpoint = load_checkpoint(directory, dtype if dtype is not None else torch_dtype, repack, progress,
                                         config=config)
        except UnsupportedModelError as e:
            raise unsupported_family_hint(e, kwargs.get("trust_remote_code")) from None
        return _model_class(checkpoint.config)(checkpoint, max_cache_len, blas_prefill)


# OpenBLAS's cores with AVX2 sgemm kernels or wider. OpenBLAS picks its core once, when the process loads it (numpy
# does, before habana_assist); Debian 12's 0.3.21 falls back to "Prescott" (SSE3) on CPUs newer than itself, whose
# sgemm is several times slower (docs/benchmarks.md).
_BLAS_AVX2_CORES = {"Haswell", "Zen", "Excavator", "SkylakeX", "Cooperlake", "SapphireRapids"}


def _warn_if_blas_generic():
    """A RuntimeWarning naming the fix when OpenBLAS runs older kernels than this CPU has (our own variant shows
    what it has: "avx512" and "avx2" are chosen from cpuid, so the core named in the fix runs here)."""
    core, ours = _core.blas_core(), _core.kernels_name()
    if ours in ("avx2", "avx512") and core not in _BLAS_AVX2_CORES:
        want = "SkylakeX" if ours == "avx512" else "Haswell"
        warnings.warn(f"blas_prefill=True: OpenBLAS did not recognize this CPU and runs its {core} kernels, several "
                      f"times slower than the CPU allows; start Python with OPENBLAS_CORETYPE={want} in the "
                      "environment (OpenBLAS reads it once, when numpy first loads it)", RuntimeWarning, stacklevel=3)
