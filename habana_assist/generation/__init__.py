"""Generation, laid out as Transformers' generation/: configuration_utils.py (GenerationConfig), utils.py (generate()),
outputs.py (its outputs), candidate_generator.py (the drafter), logits_process.py, stopping_criteria.py,
streamers.py; ours beside them: options.py (a call's options as the core reads them), assisted_costs.py (the cost
schedule), universal.py (a draft with another tokenizer), token_source.py (how each token was decided), token_tree.py
(the trees verified), display.py (the notebook view).

Layers, bottom first (a module imports only those below it): configuration_utils, logits_process,
stopping_criteria, streamers, options, assisted_costs, token_source, token_tree; display; outputs, universal;
candidate_generator; utils."""

from .configuration_utils import GenerationConfig
from .logits_process import LogitsProcessor, LogitsProcessorList
from .outputs import GenerateDecoderOnlyOutput, TokenSource, TokenTree
from .stopping_criteria import (
    EosTokenCriteria,
    MaxLengthCriteria,
    MaxTimeCriteria,
    StoppingCriteria,
    StoppingCriteriaList,
    StopStringCriteria,
)
from .streamers import BaseStreamer, TextIteratorStreamer, TextStreamer
from .utils import GenerationMixin

# The names re-exported here
__all__ = [
    "GenerationConfig",
    "LogitsProcessor",
    "LogitsProcessorList",
    "EosTokenCriteria",
    "MaxLengthCriteria",
    "MaxTimeCriteria",
    "StoppingCriteria",
    "StoppingCriteriaList",
    "StopStringCriteria",
    "BaseStreamer",
    "TextIteratorStreamer",
    "TextStreamer",
    "GenerateDecoderOnlyOutput",
    "TokenSource",
    "TokenTree",
    "GenerationMixin",
]
