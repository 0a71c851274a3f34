"""AutoTokenizer, over the two backends: tokenization_fast.py (tokenizer.json) and tokenization_spm.py
(tokenizer.model), both built on tokenization_utils_base.py (BatchEncoding, PreTrainedTokenizerBase and the loading
they inherit). AutoTokenizer.from_pretrained resolves the name, picks the backend from the files there and delegates
to its from_pretrained.

This module sits above the backends and re-exports their names and the base's, so every import from here keeps
working (`from habana_assist.tokenization.tokenization_utils import LlamaTokenizer, PreTrainedTokenizerBase`).
"""

from __future__ import annotations

import os
from typing import Any

from ..checkpoints.hub import TOKENIZER_FILES, pop_hub_arguments, resolve
from ..errors import CheckpointNotFoundError, InvalidInputError
from ..utils.types import PathLike
from .tokenization_fast import PreTrainedTokenizerFast
from .tokenization_spm import LlamaTokenizer
from .tokenization_utils_base import AddedToken, BatchEncoding, PreTrainedTokenizerBase, clean_up_tokenization
from .tokenizer_files import TOKENIZER_FILE, TOKENIZER_JSON_FILE, _read_directory

# The public names (pyflakes reads the re-exports as used).
__all__ = [
    "AddedToken",
    "AutoTokenizer",
    "BatchEncoding",
    "PreTrainedTokenizerBase",
    "PreTrainedTokenizerFast",
    "LlamaTokenizer",
    "clean_up_tokenization",
]


class AutoTokenizer:
    """Transformers-style entry point: from_pretrained(directory or shipped name) -> PreTrainedTokenizerFast where
    the directory has tokenizer.json, else LlamaTokenizer (tokenizer.model)."""

    def __init__(self) -> None:
        raise TypeError("use AutoTokenizer.from_pretrained(path)")

    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path: PathLike, *inputs: Any, **kwargs: Any
    ) -> PreTrainedTokenizerBase:
        """A directory (or a shipped model's name) -> a tokenizer. Which file: tokenizer.json where there is one
        (Transformers' fast tokenizer), else tokenizer.model; use_fast=False prefers tokenizer.model where both
        exist (Transformers' slow tokenizer), and still reads tokenizer.json where it is the only file.

        Args:
            pretrained_model_name_or_path: a local directory, a shipped name ("habana-assist/pycode") or a Hub
                repo id ("org/name"), resolved as every from_pretrained resolves a name (checkpoints/hub.py).
            *inputs: refused: Transformers hands extra positional arguments to the tokenizer's __init__; pass
                keyword arguments.
            **kwargs: as Transformers':

                - padding_side, truncation_side ("left"/"right"), model_max_length (int >= 1), add_bos_token,
                  add_eos_token, clean_up_tokenization_spaces, split_special_tokens (bool): override
                  tokenizer_config.json (and are saved by save_pretrained);
                - bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: as
                  add_special_tokens sets them (a token the vocabulary lacks is added with the next id, as
                  Transformers does); None unsets one;
                - add_prefix_space, legacy (True/False/None): see LlamaTokenizer._set_prefix_space; a
                  tokenizer.json tokenizer refuses an add_prefix_space that would rewrite its pre-tokenizer;
                - use_fast (True/False): which file, above;
                - revision, cache_dir, local_files_only, token (use_auth_token), force_download, proxies,
                  subfolder: where the files come from (checkpoints/hub.py); resume_download is accepted
                  (downloads always resume);
                - trust_remote_code: accepted (no code from a checkpoint is ever run).

                Anything else (Transformers would keep it as an init argument) raises InvalidInputError naming it.

        Returns:
            A PreTrainedTokenizerFast (tokenizer.json) or a LlamaTokenizer (tokenizer.model).

        Raises:
            CheckpointNotFoundError: no such directory, name or repo, or neither tokenizer.json nor
                tokenizer.model in it.
            CheckpointError: a malformed tokenizer file or tokenizer_config.json; the message names the file.
            InvalidInputError: an argument that is unknown, out of range or of the wrong type.
        """
        hub_arguments = pop_hub_arguments(kwargs, "AutoTokenizer.from_pretrained")
        directory = resolve(pretrained_model_name_or_path, TOKENIZER_FILES, **hub_arguments)
        if hub_arguments.get("subfolder") and not os.path.isdir(directory):
            raise InvalidInputError(f"subfolder={hub_arguments['subfolder']!r}: no such folder {directory}")
        pretrained_model_name_or_path = directory  # resolved once: the backend reads this directory
        has_json = os.path.exists(os.path.join(directory, TOKENIZER_JSON_FILE))
        has_model = os.path.exists(os.path.join(directory, TOKENIZER_FILE))
        if has_json and not (kwargs.get("use_fast", True) is False and has_model):
            return PreTrainedTokenizerFast.from_pretrained(pretrained_model_name_or_path, *inputs, **kwargs)
        if not has_model and not has_json:
            _read_directory(pretrained_model_name_or_path, inputs, kwargs)  # its argument errors come first
            raise CheckpointNotFoundError(
                f"{directory}: no {TOKENIZER_JSON_FILE} and no {TOKENIZER_FILE}; a "
                "checkpoint's tokenizer is one of these files"
            )
        return LlamaTokenizer.from_pretrained(pretrained_model_name_or_path, *inputs, **kwargs)
