"""habana_assist: exact, fast assisted generation for Hugging Face Llama-family checkpoints, on a C core.

    import habana_assist as ha
    model = ha.AutoModelForCausalLM.from_pretrained(path)
    out = model.generate(input_ids, max_new_tokens=32)
"""

from . import errors
from ._core import kernels_name
from .configuration import LlamaConfig
from .errors import (CacheCapacityError, CheckpointError, CheckpointNotFoundError, CoreError, GenerationStoppedError,
                     HabanaAssistError, InvalidInputError, OutOfMemoryError, UnsupportedModelError)
from .generation import GenerateDecoderOnlyOutput, GenerationConfig
from .processing import LogitsProcessor, LogitsProcessorList
from .stopping import (EosTokenCriteria, MaxLengthCriteria, MaxTimeCriteria, StoppingCriteria, StoppingCriteriaList,
                       StopStringCriteria)
from .streamers import BaseStreamer, TextIteratorStreamer, TextStreamer
from .tokenization import AutoTokenizer, BatchEncoding, LlamaTokenizer
from .modeling import (AutoModelForCausalLM, Cache, CausalLMOutput, LlamaForCausalLM, get_num_threads, set_num_threads,
                       set_seed)

__version__ = "0.1.0"

__all__ = [
    "AutoModelForCausalLM", "LlamaForCausalLM", "AutoTokenizer", "LlamaTokenizer", "BatchEncoding",
    "TextStreamer", "TextIteratorStreamer", "BaseStreamer", "LlamaConfig", "GenerationConfig", "GenerateDecoderOnlyOutput",
    "CausalLMOutput", "Cache", "set_seed", "set_num_threads", "get_num_threads", "kernels_name", "errors",
    "HabanaAssistError", "CheckpointError", "CheckpointNotFoundError", "UnsupportedModelError", "InvalidInputError",
    "CacheCapacityError", "OutOfMemoryError", "GenerationStoppedError", "CoreError",
    "LogitsProcessor", "LogitsProcessorList", "StoppingCriteria", "StoppingCriteriaList", "MaxLengthCriteria",
    "MaxTimeCriteria", "EosTokenCriteria", "StopStringCriteria",
]
