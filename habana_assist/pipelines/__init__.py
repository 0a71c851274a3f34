"""pipeline("text-generation", ...): Transformers' factory, for the one task this package runs.

    import habana_assist as ha
    generate = ha.pipeline("text-generation", model="habana-assist/pycode",
                           assistant_model="habana-assist/pycode-draft")
    generate("def fib(n):", max_new_tokens=32, do_sample=False)   # [{"generated_text": "def fib(n):\\n ..."}]

Loading follows Transformers' pipelines/__init__.py: the model and the tokenizer may be names (a local
directory, a shipped name such as "habana-assist/pycode", or a Hub id, as AutoModelForCausalLM.from_pretrained
and AutoTokenizer.from_pretrained take them) or objects; the tokenizer defaults to the model's name (else to
config's, when that is a name). Everything runs on the CPU: device and device_map accept only the CPU.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional, Union

from ..configuration_utils import AutoConfig
from ..errors import InvalidInputError
from ..models.auto import AutoModelForCausalLM
from ..tokenization.tokenization_utils import AutoTokenizer
from .text_generation import ReturnType, TextGenerationPipeline, check_cpu

if TYPE_CHECKING:
    from ..configuration_utils import PretrainedConfig
    from ..modeling_utils import PreTrainedCausalLM
    from ..tokenization.tokenization_utils import PreTrainedTokenizerBase
    from ..utils.types import PathLike

__all__ = ["pipeline", "TextGenerationPipeline", "ReturnType", "SUPPORTED_TASKS", "get_supported_tasks"]

SUPPORTED_TASKS = {"text-generation": TextGenerationPipeline}

# from_pretrained arguments that the tokenizer takes too (Transformers hands the tokenizer every model_kwarg but
# the dtype; its tokenizers keep unknown ones, ours refuse them, so only these go to both).
_SHARED_LOAD_ARGUMENTS = (
    "revision",
    "token",
    "use_auth_token",
    "cache_dir",
    "local_files_only",
    "force_download",
    "resume_download",
    "proxies",
    "trust_remote_code",
)


def get_supported_tasks() -> list[str]:
    """-> the task names pipeline() accepts: ["text-generation"]."""
    return sorted(SUPPORTED_TASKS)


def pipeline(
    task: Optional[str] = None,
    model: Union[PathLike, PreTrainedCausalLM, None] = None,
    config: Union[PathLike, PretrainedConfig, None] = None,
    tokenizer: Union[PathLike, tuple[str, dict[str, Any]], PreTrainedTokenizerBase, None] = None,
    feature_extractor: Any = None,
    image_processor: Any = None,
    video_processor: Any = None,
    processor: Any = None,
    revision: Optional[str] = None,
    use_fast: bool = True,
    token: Union[str, bool, None] = None,
    device: Any = None,
    device_map: Any = None,
    dtype: Any = "auto",
    trust_remote_code: Optional[bool] = None,
    model_kwargs: Optional[dict[str, Any]] = None,
    pipeline_class: Optional[type[TextGenerationPipeline]] = None,
    **kwargs: Any,
) -> TextGenerationPipeline:
    """Transformers' pipeline() for task "text-generation" -> a TextGenerationPipeline.

    Args:
        task: "text-generation", or None, which infers it (Transformers asks the Hub for the model's pipeline_tag;
            text generation is the only task here, so that is the answer). Any other task raises InvalidInputError.
        model: a name (directory, shipped name or Hub id: AutoModelForCausalLM.from_pretrained(model,
            **model_kwargs, dtype=dtype, revision=, token=, trust_remote_code=)) or a loaded model
            (AutoModelForCausalLM.from_pretrained, ha.wrap(torch_model)). Required: Transformers would download its
            task default, HuggingFaceTB/SmolLM3-3B.
        config: a name or a PretrainedConfig. As in Transformers it chooses no weights: a name is where the
            tokenizer comes from when model is an object; its architectures must name the loaded model's class.
        tokenizer: a name (AutoTokenizer.from_pretrained(tokenizer, use_fast=, revision=, token=,
            trust_remote_code=)), a (name, {from_pretrained kwargs}) tuple, or a tokenizer object; default: the
            model's name, else config's name; a model object without either raises InvalidInputError, as
            Transformers raises.
        feature_extractor: refused unless None: text generation reads text through a tokenizer only.
        image_processor: refused unless None, as feature_extractor.
        video_processor: refused unless None, as feature_extractor.
        processor: refused unless None, as feature_extractor.
        revision: the Hub revision (branch, tag or commit) of the model and the tokenizer, as from_pretrained's.
        use_fast: True (the default) reads tokenizer.json where the checkpoint has one, False prefers
            tokenizer.model (AutoTokenizer.from_pretrained's use_fast).
        token: the Hub token for the model and the tokenizer (a string, True for the stored one, False for none).
        device: the CPU only (None, "cpu", -1, "auto", torch.device("cpu")); anything else (e.g. "cuda", 0) raises
            InvalidInputError.
        device_map: the CPU only: None, "cpu", "auto" or a device_map whose values are all "cpu"; passing it here
            and in model_kwargs raises, as in Transformers.
        dtype: the weights' dtype at load ("auto", the default: as stored; "float32", "bfloat16", "float16",
            "int8", "int4", or a torch dtype); with a loaded model, only "auto". torch_dtype (its older name, in
            **kwargs) is used where dtype is "auto"; passing dtype here and in model_kwargs raises.
        trust_remote_code: accepted, for the model and the tokenizer (no code from a checkpoint is ever run).
        model_kwargs: more from_pretrained arguments (max_cache_len, blas_prefill...); its hub arguments reach the
            tokenizer too. With a loaded model, any loading argument raises.
        pipeline_class: TextGenerationPipeline (the default) or a subclass of it; anything else raises.
        **kwargs: TextGenerationPipeline's: assistant_model (a name, loaded as model.weight_dtype with its
            tokenizer, or a model), assistant_tokenizer, batch_size, pipeline defaults such as return_full_text or
            prefix, and any generate() argument (max_new_tokens, do_sample...), which becomes the pipeline's
            default for every call; torch_dtype (above) and framework (None or "pt", Transformers 4's) too.
            Unknown arguments raise InvalidInputError naming them.

    Returns:
        A TextGenerationPipeline (or pipeline_class's instance): pipe(prompts or chats, **generate arguments) ->
        [{"generated_text": ...}] per input.

    Raises:
        InvalidInputError: an unsupported task, device or argument, a missing model, or arguments that conflict.
        CheckpointNotFoundError, CheckpointError, UnsupportedModelError, HubError: as from_pretrained raises
            them, loading a model or tokenizer by name.
    """
    if task is None and model is None:
        raise InvalidInputError(
            "pipeline() needs a task or a model; pass pipeline('text-generation', "
            "model='habana-assist/pycode') or another checkpoint"
        )
    if task is not None and task not in SUPPORTED_TASKS:
        raise InvalidInputError(
            f"task={task!r} is not supported: habana_assist implements only 'text-generation' "
            "(decoder-only causal language models); for other tasks use transformers.pipeline"
        )
    task = "text-generation"  # the only task; Transformers would ask the Hub for the model's pipeline_tag
    if model is None:
        raise InvalidInputError(
            "pipeline('text-generation') needs model=: pass a checkpoint directory, a shipped "
            "name such as 'habana-assist/pycode', or a Hub id (Transformers would download its "
            "default, 'HuggingFaceTB/SmolLM3-3B'; pass that name to get it)"
        )
    if pipeline_class is not None and not (
        isinstance(pipeline_class, type) and issubclass(pipeline_class, TextGenerationPipeline)
    ):
        raise InvalidInputError(
            f"pipeline_class={pipeline_class!r} must be TextGenerationPipeline or a subclass of "
            "it; leave it unset for the default"
        )
    others = {
        "feature_extractor": feature_extractor,
        "image_processor": image_processor,
        "processor": processor,
        "video_processor": video_processor,
    }
    for name, value in others.items():
        if value is not None:
            raise InvalidInputError(
                f"{name}= is not used by 'text-generation', which reads text through a "
                "tokenizer only; pass tokenizer= instead, or leave it unset"
            )
    framework = kwargs.pop("framework", None)  # Transformers 4's argument, gone in 5; "pt" is the only one
    if framework not in (None, "pt"):
        raise InvalidInputError(
            f"framework={framework!r} is not supported: the model runs on this package's C core; "
            "pass framework='pt' or leave it unset"
        )
    if model_kwargs is None:
        model_kwargs = {}
    if not isinstance(model_kwargs, dict):
        raise InvalidInputError(
            f"model_kwargs must be a dict of from_pretrained arguments, got {type(model_kwargs).__name__}"
        )
    model_kwargs = dict(model_kwargs)
    if isinstance(model, os.PathLike):
        model = os.fspath(model)

    check_cpu("device", device)
    if device_map is not None:
        if "device_map" in model_kwargs:
            raise InvalidInputError(
                'You cannot use both `pipeline(... device_map=..., model_kwargs={"device_map":...'
                "})` as those arguments might conflict; use only one"
            )
        check_cpu("device_map", device_map)
        model_kwargs["device_map"] = device_map
    if "device_map" in model_kwargs:
        check_cpu("model_kwargs['device_map']", model_kwargs["device_map"])

    torch_dtype = kwargs.pop("torch_dtype", None)  # Transformers: the old name, used where dtype is left "auto"
    if torch_dtype is not None and _is_auto(dtype):
        dtype = torch_dtype
    if "torch_dtype" in model_kwargs or "dtype" in model_kwargs:
        if not _is_auto(dtype):
            raise InvalidInputError(
                'You cannot use both `pipeline(... dtype=..., model_kwargs={"dtype":...})` as '
                "those arguments might conflict; use only one"
            )
        dtype = None  # model_kwargs' own
    if dtype is not None:
        model_kwargs["dtype"] = dtype

    hub_kwargs: dict[str, Any] = {"revision": revision, "token": token, "trust_remote_code": trust_remote_code}
    hub_kwargs = {k: v for k, v in hub_kwargs.items() if v is not None}
    config_name: Optional[PathLike] = None  # where the tokenizer comes from when model is an object
    if isinstance(config, (str, os.PathLike)):
        config_name = config
    if isinstance(model, str):
        model_name = model
        model = AutoModelForCausalLM.from_pretrained(model, **hub_kwargs, **model_kwargs)
    else:
        model_name = None
        loading = sorted(
            k
            for k, v in model_kwargs.items()  # device_map: checked above, and the model runs on the CPU
            if k != "device_map" and not (k == "dtype" and _is_auto(v))
        )
        if loading:
            raise InvalidInputError(
                f"{', '.join(loading)} configure loading, but model is already loaded "
                f"({type(model).__name__}); pass the model's name instead, or load it with "
                "AutoModelForCausalLM.from_pretrained(name, ...) yourself"
            )
    _check_config(config, model)

    if tokenizer is None:
        tokenizer = model_name if model_name is not None else config_name
        if tokenizer is None:
            raise InvalidInputError(
                "Impossible to guess which tokenizer to use: the model was passed as an object. "
                "Pass tokenizer= (a tokenizer from AutoTokenizer.from_pretrained, or its name)"
            )
    if isinstance(tokenizer, (str, os.PathLike, tuple)):
        tokenizer = _load_tokenizer(tokenizer, use_fast, hub_kwargs, model_kwargs)

    cls = pipeline_class or SUPPORTED_TASKS[task]
    return cls(model=model, tokenizer=tokenizer, task=task, device=device, **kwargs)


def _is_auto(dtype: Any) -> bool:
    return dtype is None or (isinstance(dtype, str) and dtype == "auto")


def _check_config(config: Any, model: Any) -> None:
    """config chooses no weights here (nor in Transformers, where it picks the class of model's name): its
    architectures must name model's class, so that a config that disagrees is not silently ignored."""
    if config is None:
        return
    if isinstance(config, (str, os.PathLike)):
        config = AutoConfig.from_pretrained(config)
    architectures = getattr(config, "architectures", None)
    if architectures is None:
        raise InvalidInputError(f"config must be a name or a PretrainedConfig, got {type(config).__name__}")
    if architectures and type(model).__name__ not in architectures and getattr(model, "config", None) != config:
        raise InvalidInputError(
            f"config names {architectures}, but the model is a {type(model).__name__}; pass the "
            "model's own config, or leave config unset"
        )


def _load_tokenizer(
    tokenizer: Union[PathLike, tuple[str, dict[str, Any]]],
    use_fast: bool,
    hub_kwargs: dict[str, Any],
    model_kwargs: dict[str, Any],
) -> PreTrainedTokenizerBase:
    """A tokenizer name, or Transformers' (name, {from_pretrained kwargs}) tuple -> AutoTokenizer.from_pretrained."""
    name: PathLike
    if isinstance(tokenizer, tuple):
        if len(tokenizer) != 2 or not isinstance(tokenizer[1], dict):
            raise InvalidInputError("tokenizer as a tuple must be (name, {from_pretrained keyword arguments})")
        name, kwargs = tokenizer[0], dict(tokenizer[1])
        kwargs.setdefault("use_fast", use_fast)
    else:
        name = tokenizer
        kwargs = {k: v for k, v in model_kwargs.items() if k in _SHARED_LOAD_ARGUMENTS}
        kwargs["use_fast"] = use_fast
    return AutoTokenizer.from_pretrained(name, **{**hub_kwargs, **kwargs})
