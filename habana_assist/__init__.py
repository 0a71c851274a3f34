"""habana_assist: exact, fast assisted generation for Hugging Face checkpoints (Llama, Mistral, Qwen2/3, Phi-3/4,
Gemma 2/3, SmolLM3, GPT-2), on a C core.

    import habana_assist as ha
    model = ha.AutoModelForCausalLM.from_pretrained(path)
    out = model.generate(input_ids, max_new_tokens=32)
"""

from typing import TYPE_CHECKING

from . import errors
from ._core import kernels_name
from .cache_utils import Cache, DynamicCache, StaticCache
from .configuration_utils import AutoConfig, LlamaConfig, PretrainedConfig
from .errors import (
    CacheCapacityError,
    CheckpointError,
    CheckpointNotFoundError,
    CoreError,
    GenerationStoppedError,
    HabanaAssistError,
    HubError,
    InvalidInputError,
    OutOfMemoryError,
    UnsupportedModelError,
)
from .generation.assisted_costs import AssistedCosts
from .generation.configuration_utils import GenerationConfig
from .generation.display import plot_acceptance
from .generation.logits_process import LogitsProcessor, LogitsProcessorList
from .generation.stopping_criteria import (
    EosTokenCriteria,
    MaxLengthCriteria,
    MaxTimeCriteria,
    StoppingCriteria,
    StoppingCriteriaList,
    StopStringCriteria,
)
from .generation.streamers import BaseStreamer, TextIteratorStreamer, TextStreamer
from .generation.token_tree import TokenTree
from .generation.utils import GenerateDecoderOnlyOutput, TokenSource, set_seed
from .integrations.wrap import WrappedModel, wrap
from .modeling_utils import CausalLMOutput, PreTrainedCausalLM, get_num_threads, set_num_threads
from .models.auto import ARCHITECTURE_CLASSES, AutoModelForCausalLM
from .pipelines import TextGenerationPipeline, pipeline
from .tokenization.tokenization_utils import AddedToken, AutoTokenizer, BatchEncoding, LlamaTokenizer

# Qwen3ForCausalLM, GPT2LMHeadModel...: each supported architecture's class, as Transformers names it.
globals().update(ARCHITECTURE_CLASSES)
if TYPE_CHECKING:  # the same names for a type checker, which cannot read the line above: each a PreTrainedCausalLM
    GPT2LMHeadModel = PreTrainedCausalLM
    Gemma2ForCausalLM = PreTrainedCausalLM
    Gemma3ForCausalLM = PreTrainedCausalLM
    LlamaForCausalLM = PreTrainedCausalLM
    MistralForCausalLM = PreTrainedCausalLM
    Phi3ForCausalLM = PreTrainedCausalLM
    Qwen2ForCausalLM = PreTrainedCausalLM
    Qwen3ForCausalLM = PreTrainedCausalLM
    SmolLM3ForCausalLM = PreTrainedCausalLM

__version__ = "0.1.0"

__all__ = [
    "AutoModelForCausalLM",
    "AutoTokenizer",
    "LlamaTokenizer",
    "BatchEncoding",
    "AddedToken",
    *ARCHITECTURE_CLASSES,
    "TextStreamer",
    "TextIteratorStreamer",
    "BaseStreamer",
    "LlamaConfig",
    "PretrainedConfig",
    "AutoConfig",
    "GenerationConfig",
    "GenerateDecoderOnlyOutput",
    "TokenSource",
    "TokenTree",
    "plot_acceptance",
    "AssistedCosts",
    "CausalLMOutput",
    "Cache",
    "DynamicCache",
    "StaticCache",
    "PreTrainedCausalLM",
    "wrap",
    "WrappedModel",
    "set_seed",
    "set_num_threads",
    "get_num_threads",
    "kernels_name",
    "errors",
    "HabanaAssistError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "UnsupportedModelError",
    "InvalidInputError",
    "CacheCapacityError",
    "OutOfMemoryError",
    "GenerationStoppedError",
    "CoreError",
    "HubError",
    "LogitsProcessor",
    "LogitsProcessorList",
    "StoppingCriteria",
    "StoppingCriteriaList",
    "MaxLengthCriteria",
    "MaxTimeCriteria",
    "EosTokenCriteria",
    "StopStringCriteria",
    "pipeline",
    "TextGenerationPipeline",
]
