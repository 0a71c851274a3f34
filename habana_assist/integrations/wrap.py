"""habana_assist.wrap(model): a model of another framework with this package's generate() (external.py holds the
adapter behind the core's model interface)."""

from __future__ import annotations

from typing import Any, NoReturn, Optional

from ..errors import InvalidInputError
from ..generation.configuration_utils import GenerationConfig
from ..modeling_utils import PreTrainedCausalLM
from . import external as _external


class WrappedModel(_external.ExternalModel, PreTrainedCausalLM):
    """A model of another framework with this package's generate() (habana_assist.wrap; external.py). Its device and
    dtype are the wrapped model's; parameters(), state_dict(), the embeddings and num_parameters() are its own."""

    def __init__(
        self,
        model: Any,
        vocab_size: Optional[int] = None,
        max_cache_len: Optional[int] = None,
        generation_config: Optional[GenerationConfig] = None,
        reduce_logits: Optional[bool] = None,
        overlap: Optional[bool] = None,
    ) -> None:
        super().__init__(
            model,
            vocab_size=vocab_size,
            max_cache_len=max_cache_len,
            generation_config=generation_config,
            reduce_logits=reduce_logits,
            overlap=overlap,
        )
        if self.generation_config is None:  # the model config's special tokens
            config = self.config
            self.generation_config = GenerationConfig(
                **{
                    k: getattr(config, k)
                    for k in ("bos_token_id", "eos_token_id", "pad_token_id")
                    if getattr(config, k, None) is not None
                }
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    def _unsupported(self, what: str) -> NoReturn:
        raise InvalidInputError(
            f"{what} is for native models; this one is wrapped ({type(self.model).__name__}): use "
            "its own framework for that"
        )

    def assisted_costs(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("assisted_costs()")

    def set_assisted_costs(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("set_assisted_costs()")

    def save_pretrained(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("save_pretrained()")

    def create_cache(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("create_cache()")

    def _delegate(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The wrapped model's own method `name` (a torch model's parameters(), state_dict()...), else refused."""
        method = getattr(self.model, name, None)
        if not callable(method):
            self._unsupported(f"{name}()")
        return method(*args, **kwargs)

    def num_parameters(self, *args: Any, **kwargs: Any) -> Any:
        return self._delegate("num_parameters", args, kwargs)

    def parameters(self, *args: Any, **kwargs: Any) -> Any:
        return self._delegate("parameters", args, kwargs)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Any:
        return self._delegate("named_parameters", args, kwargs)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._delegate("state_dict", args, kwargs)

    def get_input_embeddings(self) -> Any:
        return self._delegate("get_input_embeddings", (), {})

    def get_output_embeddings(self) -> Any:
        return self._delegate("get_output_embeddings", (), {})

    @property
    def weight_dtype(self) -> Optional[str]:
        """The wrapped model's dtype's name ("float16"), or None."""
        dtype = self.dtype
        return None if dtype is None else str(dtype).removeprefix("torch.")

    @property
    def is_quantized(self) -> bool:
        return bool(getattr(self.model, "is_quantized", False))

    @property
    def is_loaded_in_8bit(self) -> bool:
        return bool(getattr(self.model, "is_loaded_in_8bit", False))

    @property
    def is_loaded_in_4bit(self) -> bool:
        return bool(getattr(self.model, "is_loaded_in_4bit", False))

    def to(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._unsupported("to()")

    @property
    def weight_bytes(self) -> NoReturn:
        self._unsupported("weight_bytes")


def wrap(
    model: Any,
    vocab_size: Optional[int] = None,
    max_cache_len: Optional[int] = None,
    generation_config: Optional[GenerationConfig] = None,
    reduce_logits: Optional[bool] = None,
    overlap: Optional[bool] = None,
) -> WrappedModel:
    """A model of another framework that follows Transformers' causal-LM calling convention, with generate() (and
    usable as assistant_model=) run by this package's loop; see habana_assist/integrations/external.py. vocab_size and
    max_cache_len default to model.config's vocab_size and max_position_embeddings; generation_config to one
    with its config's special tokens. reduce_logits: where a greedy call reads only the argmax, send each
    position's top two from the device instead of its whole row: None on an accelerator, True always, False
    never. overlap: as the target with a native draft, draft the next round ahead while its forward runs: None
    where it is not on the CPU, True always, False never (the same output either way)."""
    if isinstance(model, PreTrainedCausalLM):
        raise InvalidInputError("wrap() is for models of other frameworks; this one is already a habana_assist model")
    return WrappedModel(
        model,
        vocab_size=vocab_size,
        max_cache_len=max_cache_len,
        generation_config=generation_config,
        reduce_logits=reduce_logits,
        overlap=overlap,
    )


_external.register_wrap(wrap)  # generate() wraps another framework's assistant_model with it
