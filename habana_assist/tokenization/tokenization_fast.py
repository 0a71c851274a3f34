"""The tokenizer.json backend of habana_assist.tokenization: PreTrainedTokenizerFast (Hugging Face tokenizers'
format, through habana_assist.tokenizer_json.TokenizerJSON; Transformers' fast tokenizers) and its handling of
tokenizer_config.json (added_tokens_decoder, additional and extra special tokens, add_bos_token/add_eos_token,
the keys it refuses). The shared surface is PreTrainedTokenizerBase in tokenization_utils_base.py, below this
module; tokenization_utils.py, above it, re-exports everything here; build one with AutoTokenizer.from_pretrained
or PreTrainedTokenizerFast.from_pretrained.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Optional

from ..errors import CheckpointError, InvalidInputError
from .offsets import text_ids_offsets
from .tokenization_utils_base import _VERY_LARGE_INTEGER, PreTrainedTokenizerBase, _int_list
from .tokenizer_files import (
    _SPECIAL_NAMES,
    TOKENIZER_JSON_FILE,
    _added_tokens_decoder,
    _additional_special_tokens,
    _flag,
    _special_token_texts,
    _token_spec,
    _token_text,
)
from .tokenizer_json import AddedToken, TokenizerJSON

# tokenizer_class values of tokenizer_config.json whose Transformers fast class always rewrites the post-processor
# from bos/eos and add_bos_token (default true) / add_eos_token (default false) (update_post_processor in __init__).
_LLAMA_CLASSES = frozenset(
    {
        "LlamaTokenizer",
        "LlamaTokenizerFast",
        "GemmaTokenizer",
        "GemmaTokenizerFast",
        "CodeLlamaTokenizer",
        "CodeLlamaTokenizerFast",
    }
)
# Classes that pad on the left unless tokenizer_config.json says otherwise (their padding_side class attribute).
_LEFT_PADDING_CLASSES = frozenset(
    {
        "LlamaTokenizer",
        "LlamaTokenizerFast",
        "GemmaTokenizer",
        "GemmaTokenizerFast",
        "CodeLlamaTokenizer",
        "CodeLlamaTokenizerFast",
        "CohereTokenizer",
        "CohereTokenizerFast",
    }
)
# Classes whose model_input_names leave out token_type_ids (PreTrainedTokenizerFast's default has them).
_NO_TYPE_IDS_CLASSES = _LLAMA_CLASSES | {
    "Qwen2Tokenizer",
    "Qwen2TokenizerFast",
    "GPT2Tokenizer",
    "GPT2TokenizerFast",
    "GPTNeoXTokenizerFast",
    "CodeGenTokenizer",
    "CodeGenTokenizerFast",
}
# Config keys with which Transformers rebuilds the normalizer or pre-tokenizer (BERT-style classes) or converts the
# slow tokenizer instead of reading tokenizer.json: not reproduced, so refused where set.
_REBUILDING_KEYS = ("do_lower_case", "strip_accents", "tokenize_chinese_chars", "from_slow")


class PreTrainedTokenizerFast(PreTrainedTokenizerBase):
    """A tokenizer.json tokenizer (Transformers' PreTrainedTokenizerFast and its Llama/Gemma/Qwen2/GPT-2 fast
    classes), backed by habana_assist.tokenizer_json.TokenizerJSON. Build it with AutoTokenizer.from_pretrained.

    From tokenizer_config.json (and special_tokens_map.json): bos/eos/unk/pad_token and additional_special_tokens
    (added to the vocabulary as special tokens where tokenizer.json lacks them, as Transformers does),
    added_tokens_decoder (tokens tokenizer.json lacks are added with their flags, at the ids the file gives),
    add_bos_token/add_eos_token (they rewrite the post-processor as Transformers' update_post_processor: always for
    the Llama and Gemma classes, where either key is set for the others), and the keys of
    PreTrainedTokenizerBase."""

    _FILE = TOKENIZER_JSON_FILE  # what from_pretrained reads

    _fast_truncation = True
    _default_max_length = _VERY_LARGE_INTEGER

    def __init__(
        self,
        json_file: str,
        config: Optional[dict[str, Any]] = None,
        special_tokens_map: Optional[dict[str, Any]] = None,
        arguments: Any = (),
    ) -> None:
        self._tok = TokenizerJSON.load(json_file)
        config = dict(config or {})
        self._loaded_config, self._loaded_special = copy.deepcopy(config), copy.deepcopy(dict(special_tokens_map or {}))
        self._class = config.get("tokenizer_class") or "PreTrainedTokenizerFast"
        if not isinstance(self._class, str):
            raise CheckpointError(f"tokenizer_config.json: tokenizer_class={self._class!r} must be a string")
        self.model_input_names = (
            ["input_ids", "attention_mask"]
            if self._class in _NO_TYPE_IDS_CLASSES
            else ["input_ids", "token_type_ids", "attention_mask"]
        )
        defaults = self._defaults_from_json(json_file)
        if self._class in _LEFT_PADDING_CLASSES:
            defaults.setdefault("padding_side", "left")
        self._read_common_config({**defaults, **config}, arguments)
        self._check_unreproduced(config, arguments)
        self._bound = 0
        self._add_config_tokens(config, json_file)
        tokens = _special_token_texts(config, special_tokens_map)
        if "pad_token" in defaults and "pad_token" not in tokens:
            tokens["pad_token"] = defaults["pad_token"]
        self._special_tokens = {name: tokens.get(name) for name in _SPECIAL_NAMES}
        self._additional_special_tokens = _additional_special_tokens(config, special_tokens_map)
        # Transformers adds every special token the tokenizer lacks as an added (special) token.
        specs, added = [], {t.content for t in self._tok.added_tokens}
        for name, value in [(n, config.get(n, (special_tokens_map or {}).get(n))) for n in _SPECIAL_NAMES]:
            text = self._special_tokens[name]
            if text is not None and not self._is_added(text, added):
                specs.append(_token_spec(value if isinstance(value, dict) else text, True, name))
        specs += [
            _token_spec(t, True, "additional_special_tokens")
            for t in self._additional_special_tokens
            if not self._is_added(t, added)
        ]
        self._add_new_tokens(specs)
        self._extra_special_tokens = self._extra_from(config)
        # add_bos_token / add_eos_token: Transformers' update_post_processor, where its class would call it.
        explicit = "add_bos_token" in config or "add_eos_token" in config
        self._manages_template = self._class in _LLAMA_CLASSES or explicit
        default_bos = self._class in _LLAMA_CLASSES
        self._add_bos_token = _flag(config, "add_bos_token", default_bos)
        self._add_eos_token = _flag(config, "add_eos_token", False)
        if self._manages_template:
            self._update_post_processor(source="tokenizer_config.json")

    def _defaults_from_json(self, json_file):
        """Transformers' fast __init__ takes truncation_side, padding_side and pad_token from tokenizer.json's
        truncation and padding where set (tokenizer_config.json's keys win)."""
        out = {}
        truncation, padding = self._tok.truncation, self._tok.padding
        if isinstance(truncation, dict) and truncation.get("direction") in ("Left", "Right"):
            out["truncation_side"] = truncation["direction"].lower()
        if isinstance(padding, dict):
            if padding.get("direction") in ("Left", "Right"):
                out["padding_side"] = padding["direction"].lower()
            if isinstance(padding.get("pad_token"), str):
                out["pad_token"] = padding["pad_token"]
        return out

    def _check_unreproduced(self, config, arguments):
        """CheckpointError (InvalidInputError for an argument) for config keys with which Transformers would
        tokenize differently from tokenizer.json and which are not reproduced here."""
        for key in _REBUILDING_KEYS:
            if config.get(key) not in (None, False):
                self._refuse(
                    key,
                    config[key],
                    arguments,
                    "Transformers rebuilds the tokenizer.json pipeline from it "
                    "(or converts the slow tokenizer), which this package does not reproduce",
                )
        value = config.get("add_prefix_space")
        if value not in (None, True, False):
            self._refuse("add_prefix_space", value, arguments, "it must be true, false or null")
        if value is not None:
            if self._class in _LLAMA_CLASSES:
                self._refuse(
                    "add_prefix_space",
                    value,
                    arguments,
                    f"Transformers' {self._class} then converts "
                    "tokenizer.model instead of reading tokenizer.json, which this package does not do",
                )
            pre = self._tok.to_dict().get("pre_tokenizer")
            if isinstance(pre, dict) and "add_prefix_space" in pre and pre["add_prefix_space"] != value:
                self._refuse(
                    "add_prefix_space",
                    value,
                    arguments,
                    "it differs from tokenizer.json's pre_tokenizer "
                    f"(add_prefix_space={pre['add_prefix_space']}), which Transformers would rewrite; "
                    "this package does not",
                )
        self.add_prefix_space, self.legacy = value, config.get("legacy")

    @staticmethod
    def _refuse(key, value, arguments, why):
        if key in arguments:
            raise InvalidInputError(
                f"{key}={value!r} is not supported for a tokenizer.json tokenizer: {why}; leave it out"
            )
        raise CheckpointError(
            f"tokenizer_config.json: {key}={value!r} is not supported: {why}; remove the key "
            "(or load tokenizer.model with use_fast=False)"
        )

    def _is_added(self, text, added=None):
        """Whether text is an added token (added: a set of their contents, to reuse across many questions)."""
        return text in (added if added is not None else {t.content for t in self._tok.added_tokens})

    def _add_config_tokens(self, config, json_file):
        """tokenizer_config.json's added_tokens_decoder {"id": {"content", flags}}: tokens tokenizer.json lacks
        are added with their flags; each must get (or have) the id the file gives it."""
        entries, added = _added_tokens_decoder(config), {t.content for t in self._tok.added_tokens}
        for want, value in entries:
            content = value["content"]
            have = self._tok.token_to_id(content)
            if have is not None and have != want:
                raise CheckpointError(
                    f"tokenizer_config.json: added_tokens_decoder gives {content!r} id {want} but "
                    f"{json_file} has it at id {have}; the files do not belong together"
                )
            if have is not None and content in added:
                continue
            flags = {f: value[f] for f in ("special", "single_word", "lstrip", "rstrip", "normalized") if f in value}
            self._tok.add_tokens([AddedToken(content, **flags)])
            got = self._tok.token_to_id(content)
            if got != want:
                raise CheckpointError(
                    f"tokenizer_config.json: added_tokens_decoder gives {content!r} id {want}, but "
                    f"added after {json_file}'s tokens it gets id {got} (ids must follow the "
                    "vocabulary without gaps); fix the ids"
                )
        self._bound = 0

    def _extra_from(self, config):
        """extra_special_tokens {name: token} (Transformers 4.50+: model-specific special tokens such as
        Gemma 3's image_token) -> {name: text}; each is an attribute (tok.image_token, tok.image_token_id) and
        a key of special_tokens_map."""
        extra = config.get("extra_special_tokens")
        if extra is None or isinstance(extra, list):
            return {}
        if not isinstance(extra, dict) or not all(
            isinstance(k, str) and k.endswith("_token") and isinstance(_token_text(v), str) for k, v in extra.items()
        ):
            raise CheckpointError(
                f"tokenizer_config.json: extra_special_tokens={extra!r} must map names ending in "
                "_token to token strings; fix the file"
            )
        out = {k: _token_text(v) for k, v in extra.items()}
        missing = [t for t in out.values() if self._tok.token_to_id(t) is None]
        if missing:
            raise CheckpointError(
                f"tokenizer_config.json: extra_special_tokens names {missing[0]!r}, which the "
                "tokenizer does not have; fix the file"
            )
        return out

    def __getattr__(self, name: str) -> Any:
        extra = self.__dict__.get("_extra_special_tokens") or {}
        if name in extra:
            return extra[name]
        if name.endswith("_id") and name[:-3] in extra:
            return self._tok.token_to_id(extra[name[:-3]])
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def special_tokens_map(self) -> dict[str, Any]:
        return {**super().special_tokens_map, **self._extra_special_tokens}

    @property
    def all_special_tokens(self) -> list[str]:
        """Transformers 5's order: the named ones (bos ... mask), the model's extra named ones (Gemma 3's image
        tokens), then the additional ones (add_special_tokens' additional_special_tokens among them)."""
        named = [t for t in self._special_tokens.values() if t is not None]
        return list(dict.fromkeys(named + list(self._extra_special_tokens.values()) + self._additional_special_tokens))

    # ---- add_bos_token / add_eos_token ------------------------------------------------------------------------

    @property
    def add_bos_token(self) -> bool:
        return self._add_bos_token

    @add_bos_token.setter
    def add_bos_token(self, value: bool) -> None:
        self._set_add_flags(bool(value), self._add_eos_token)

    @property
    def add_eos_token(self) -> bool:
        return self._add_eos_token

    @add_eos_token.setter
    def add_eos_token(self, value: bool) -> None:
        self._set_add_flags(self._add_bos_token, bool(value))

    def _set_add_flags(self, add_bos, add_eos):
        before = (self._add_bos_token, self._add_eos_token, self._manages_template)
        self._add_bos_token, self._add_eos_token, self._manages_template = add_bos, add_eos, True
        try:
            self._update_post_processor()
        except InvalidInputError:
            self._add_bos_token, self._add_eos_token, self._manages_template = before
            raise

    def _update_post_processor(self, source=None):
        """Transformers' update_post_processor: [bos] A [eos] ([bos] B [eos]) from the current tokens and flags."""
        for name, on in (("bos", self._add_bos_token), ("eos", self._add_eos_token)):
            if on and self._special_tokens[name + "_token"] is None:
                message = f"add_{name}_token is true but {name}_token is null"
                if source:
                    raise CheckpointError(f"{source}: {message}; set {name}_token or add_{name}_token=false")
                raise InvalidInputError(f"{message}; set tokenizer.{name}_token first")
        self._tok.set_template(
            self._special_tokens["bos_token"],
            self._special_tokens["eos_token"],
            self._add_bos_token,
            self._add_eos_token,
        )

    def _special_tokens_changed(self):
        if self._manages_template:
            self._update_post_processor()

    # ---- the backend --------------------------------------------------------------------------------------

    def _token_to_id(self, text):
        return self._tok.token_to_id(text)

    def _id_to_token(self, i):
        return self._tok.id_to_token(i)

    def _check_ids(self, ids):
        ids = _int_list(ids, "token ids")
        for i in ids:
            if self._tok.id_to_token(i) is None:
                raise InvalidInputError(
                    f"token id {i} is outside this tokenizer's vocabulary ({len(self)} tokens); "
                    "use the tokenizer that belongs to the model"
                )
        return ids

    def __len__(self) -> int:
        return len(self._tok)

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary without added tokens (Transformers' vocab_size); len(tok) counts them."""
        return self._tok.vocab_size

    def get_vocab(self) -> dict[str, int]:
        """{token: id}, added tokens included (Transformers' fast get_vocab)."""
        return self._tok.get_vocab()

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        """{id: AddedToken} of the added tokens, by id."""
        return {t.id: t for t in sorted(self._tok.added_tokens, key=lambda t: t.id)}

    def _add_new_tokens(self, tokens):
        return (
            self._tok.add_tokens(
                [
                    AddedToken(
                        t["content"],
                        single_word=t["single_word"],
                        lstrip=t["lstrip"],
                        rstrip=t["rstrip"],
                        normalized=t["normalized"],
                        special=t["special"],
                    )
                    for t in tokens
                ]
            )
            if tokens
            else 0
        )

    def _text_ids(self, text, split_special_tokens=False):
        """Rust tokenizers' encode; split_special_tokens as its encode_special_tokens (Transformers' fast
        split_special_tokens): special added tokens stay text, the others are still split out."""
        return self._tok.text_ids(text, split_special_tokens)

    def _text_ids_offsets(self, text, split_special_tokens=False):
        """_text_ids' ids and each token's character offsets in text (offsets.py), as Rust's encoding.offsets."""
        return text_ids_offsets(self._tok, text, split_special_tokens)

    def _tokens_to_string(self, tokens):
        """Transformers' fast convert_tokens_to_string: the tokens through tokenizer.json's decoder."""
        return self._tok.tokens_to_string(tokens)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return self._tok.num_special_tokens_to_add(pair)

    def _post_process(self, ids, pair_ids, add_special_tokens):
        return self._tok.post_process(ids, pair_ids, add_special_tokens, return_type_ids=True)

    def _decode_ids(self, ids, skip_special_tokens):
        """Rust tokenizers' decode: skip_special_tokens leaves out the special added tokens."""
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def _files_to_save(self, config):
        config.setdefault("tokenizer_class", self._class)
        if self._manages_template:
            config.update(add_bos_token=self._add_bos_token, add_eos_token=self._add_eos_token)
        config["added_tokens_decoder"] = {
            str(t.id): {k: v for k, v in t.to_dict().items() if k != "id"}
            for t in sorted(self._tok.added_tokens, key=lambda t: t.id)
        }
        data = json.dumps(self._tok.to_dict(), indent=2, ensure_ascii=False) + "\n"
        return [(TOKENIZER_JSON_FILE, data.encode("utf-8"))]
