"""Generation, laid out as Transformers' generation/: configuration_utils.py (GenerationConfig), utils.py (generate()
and its outputs), candidate_generator.py (the drafter), logits_process.py, stopping_criteria.py, streamers.py; ours
beside them: options.py (a call's options as the core reads them), assisted_costs.py (the cost schedule),
universal.py (a draft with another tokenizer), display.py (the notebook view)."""

from .configuration_utils import GenerationConfig  # noqa: F401 - re-exported
from .logits_process import LogitsProcessor, LogitsProcessorList  # noqa: F401 - re-exported
from .stopping_criteria import (EosTokenCriteria, MaxLengthCriteria, MaxTimeCriteria, StoppingCriteria,  # noqa: F401 - re-exported
                                StoppingCriteriaList, StopStringCriteria)
from .streamers import BaseStreamer, TextIteratorStreamer, TextStreamer  # noqa: F401 - re-exported
from .utils import GenerateDecoderOnlyOutput, GenerationMixin, TokenSource  # noqa: F401 - re-exported
