"""Tokenizers, bottom layer first: tokenizer_json.py (tokenizer.json's pipeline) and tokenizer_files.py (the config
files they read and write); tokenization_utils_base.py (the shared surface, BatchEncoding, loading); the backends
tokenization_fast.py over tokenizer.json and tokenization_spm.py over SentencePiece's tokenizer.model;
tokenization_utils.py (AutoTokenizer, which picks a backend; every name re-exported); chat_template.py."""

from .tokenization_fast import PreTrainedTokenizerFast
from .tokenization_spm import LlamaTokenizer
from .tokenization_utils import AutoTokenizer, BatchEncoding, PreTrainedTokenizerBase

# The names re-exported here
__all__ = ["AutoTokenizer", "BatchEncoding", "PreTrainedTokenizerBase", "PreTrainedTokenizerFast", "LlamaTokenizer"]
