"""Tokenizers: tokenization_utils.py (the shared surface, AutoTokenizer, BatchEncoding), tokenization_fast.py over
tokenizer.json (tokenizer_json.py), tokenization_spm.py over SentencePiece's tokenizer.model, tokenizer_files.py
(the config files they read and write), chat_template.py."""

from .tokenization_utils import AutoTokenizer, BatchEncoding, PreTrainedTokenizerBase  # noqa: F401 - re-exported
from .tokenization_fast import PreTrainedTokenizerFast  # noqa: F401 - re-exported
from .tokenization_spm import LlamaTokenizer  # noqa: F401 - re-exported
