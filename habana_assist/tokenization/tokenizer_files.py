"""A checkpoint's tokenizer files, as the tokenizers of habana_assist.tokenization read and write them: the file names,
tokenizer_config.json and special_tokens_map.json (special tokens, added_tokens_decoder, additional special tokens,
the chat template; from_pretrained's keyword arguments as overrides of the config's keys), and atomic JSON writes.
Nothing here tokenizes; tokenization_utils_base.py (PreTrainedTokenizerBase) and the two backends use it.
"""

import json
import os

from ..checkpoints.hub import TOKENIZER_FILES, pop_hub_arguments, resolve
from ..errors import CheckpointError, InvalidInputError
from ..utils.files import write_atomic
from .tokenizer_json import _encodable

TOKENIZER_FILE = "tokenizer.model"
TOKENIZER_JSON_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
ADDED_TOKENS_FILE = "added_tokens.json"  # Transformers' slow tokenizers' {content: id} of the ids past the model
# Transformers' SPECIAL_TOKENS_ATTRIBUTES (without additional_special_tokens), in its order.
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# Unset, these are written as null by save_pretrained (the others only where the loaded config had them).
_NULL_WHEN_UNSET = ("bos_token", "eos_token", "unk_token", "pad_token")
# from_pretrained's keyword arguments: read as tokenizer_config.json's keys; set as special tokens; ignored.
_CONFIG_ARGUMENTS = frozenset(
    {
        "padding_side",
        "truncation_side",
        "model_max_length",
        "add_bos_token",
        "add_eos_token",
        "add_prefix_space",
        "legacy",
        "clean_up_tokenization_spaces",
        "split_special_tokens",
    }
)
_TOKEN_ARGUMENTS = frozenset(_SPECIAL_NAMES)
_TOKEN_FLAGS = ("special", "single_word", "lstrip", "rstrip", "normalized")  # an AddedToken's flags
_IGNORED_ARGUMENTS = frozenset({"use_fast", "trust_remote_code"})


def _check_config_arguments(overrides):
    """InvalidInputError for a from_pretrained argument that tokenizer_config.json could not hold either."""
    for key, value in overrides.items():
        if key in ("padding_side", "truncation_side") and value not in ("left", "right"):
            raise InvalidInputError(f"{key}={value!r}; use 'left' or 'right'")
        if key in (
            "add_bos_token",
            "add_eos_token",
            "clean_up_tokenization_spaces",
            "split_special_tokens",
        ) and not isinstance(value, bool):
            raise InvalidInputError(f"{key}={value!r}; pass True or False")
        if key == "model_max_length" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise InvalidInputError(f"model_max_length={value!r}; pass a positive integer")


def _read_json(path):
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError) as e:  # ValueError: bad UTF-8 or JSON, an int of > 4300 digits
        raise CheckpointError(f"{path} is not valid JSON ({e}); fix or delete the file") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} must hold a JSON object; fix or delete the file")
    return data


def _token_text(value):
    """A special token in tokenizer_config.json is a string or {"content": string, ...}."""
    return value.get("content") if isinstance(value, dict) else value


def _flag(config, key, default, source=TOKENIZER_CONFIG_FILE):
    """A true/false key of a config file, or CheckpointError naming it."""
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise CheckpointError(f"{source}: {key}={value!r} must be true or false; fix the file")
    return value


def _chat_template(value, source):
    """tokenizer_config.json's chat_template -> tok.chat_template as Transformers exposes it: None, a str, or
    {name: template} from the list form [{"name": ..., "template": ...}]."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str) for t in value
    ):
        return {t["name"]: t["template"] for t in value}
    raise CheckpointError(
        f'{source}: chat_template must be a string or a list of {{"name": ..., "template": '
        "...}} objects; fix the file"
    )


def _token_spec(value, special, where):
    """A token to add (a str, or an object/dict with content and tokenizers' AddedToken flags) -> {content,
    special, single_word, lstrip, rstrip, normalized}; Transformers' defaults: normalized = not special."""
    if isinstance(value, str):
        content, flags = value, {}
    elif isinstance(value, dict):
        content, flags = value.get("content"), value
    else:
        content = getattr(value, "content", None)
        flags = {
            k: getattr(value, k)
            for k in ("special", "single_word", "lstrip", "rstrip", "normalized")
            if hasattr(value, k)
        }
    if not isinstance(content, str) or not content or not _encodable(content):
        raise InvalidInputError(f"{where}: {value!r} is not a token (a non-empty str, or an AddedToken)")
    spec = {
        "content": content,
        "special": bool(flags.get("special", special) or special),
        "single_word": bool(flags.get("single_word", False)),
        "lstrip": bool(flags.get("lstrip", False)),
        "rstrip": bool(flags.get("rstrip", False)),
    }
    spec["normalized"] = bool(flags.get("normalized", not spec["special"]))
    spec["flags_given"] = not isinstance(value, str)  # an AddedToken (or dict) re-adds an added token's flags
    return spec


def _added_tokens_decoder(config):
    """tokenizer_config.json's added_tokens_decoder {"id": {"content": ..., flags}} -> [(id, entry)] by id;
    CheckpointError naming the entry that is not a token."""
    table = config.get("added_tokens_decoder") or {}
    if not isinstance(table, dict):
        raise CheckpointError("tokenizer_config.json: added_tokens_decoder must be an object {id: token}")
    entries = []
    for key, value in table.items():
        if not (
            isinstance(key, str)
            and key.isdigit()
            and isinstance(value, dict)
            and isinstance(value.get("content"), str)
            and value["content"]
            and _encodable(value["content"])
        ):
            raise CheckpointError(
                f"tokenizer_config.json: added_tokens_decoder[{key!r}] = {value!r}: expected "
                'a token id and {"content": non-empty string, ...}; fix the file'
            )
        for flag in _TOKEN_FLAGS:
            if not isinstance(value.get(flag, False), bool):
                raise CheckpointError(
                    f"tokenizer_config.json: added_tokens_decoder[{key!r}].{flag}="
                    f"{value[flag]!r} must be true or false; fix the file"
                )
        entries.append((int(key), value))
    return sorted(entries, key=lambda e: e[0])


def _added_tokens_json(directory, special_texts):
    """Transformers' legacy added_tokens.json in directory ({content: id}), where a config has no
    added_tokens_decoder -> [(id, entry)] as _added_tokens_decoder gives them: special where the content is one of
    special_texts (then not normalized), no lstrip/rstrip; [] where there is no such file."""
    path = os.path.join(directory, ADDED_TOKENS_FILE)
    if not os.path.exists(path):
        return []
    table = _read_json(path)
    if not all(
        isinstance(k, str) and k and _encodable(k) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in table.items()
    ):
        raise CheckpointError(f"{path} must map token strings to ids >= 0; fix or delete the file")
    return sorted(
        (
            (v, {"content": k, "special": k in special_texts, "normalized": k not in special_texts})
            for k, v in table.items()
        ),
        key=lambda e: e[0],
    )


def _additional_special_tokens(config, special_tokens_map):
    """additional_special_tokens of tokenizer_config.json (else special_tokens_map.json; Transformers 5 writes the
    list as extra_special_tokens) -> [text], each once; CheckpointError for a value that is not a list of tokens."""
    value = config.get("additional_special_tokens", (special_tokens_map or {}).get("additional_special_tokens"))
    extra = config.get("extra_special_tokens")
    if value is None and isinstance(extra, list):
        value = extra
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(_token_text(t), str) and _token_text(t) and _encodable(_token_text(t)) for t in value
    ):
        raise CheckpointError(
            f"tokenizer_config.json: additional_special_tokens={value!r} must be a list of "
            'tokens (strings or {"content": string}); fix the file'
        )
    return list(dict.fromkeys(_token_text(t) for t in value))


def _special_token_texts(config, special_tokens_map):
    """{name: text or None} of bos/eos/unk/pad: special_tokens_map.json's, overridden by tokenizer_config.json's
    (null there unsets); CheckpointError naming the file for a value that is not a token string."""
    special_tokens_map = special_tokens_map or {}
    tokens = {
        **{k: _token_text(v) for k, v in special_tokens_map.items() if k in _SPECIAL_NAMES},
        **{k: _token_text(config[k]) for k in _SPECIAL_NAMES if k in config},
    }
    for name in _SPECIAL_NAMES:
        text = tokens.get(name)
        if text is not None and not (isinstance(text, str) and _encodable(text)):
            source = TOKENIZER_CONFIG_FILE if name in config else SPECIAL_TOKENS_MAP_FILE
            raise CheckpointError(
                f'{source}: {name} is {text!r}; expected a string (or {{"content": string}}) '
                "of valid UTF-8 — fix the file"
            )
    return tokens


def _read_directory(pretrained_model_name_or_path, inputs, kwargs):
    """from_pretrained's path and keyword arguments -> (directory, config with the arguments' overrides,
    special_tokens_map.json, the overrides); InvalidInputError for an argument it does not take."""
    if inputs:
        raise InvalidInputError(
            f"from_pretrained takes the path and keyword arguments only; got {len(inputs)} more positional argument(s)"
        )
    hub_arguments = pop_hub_arguments(kwargs, "AutoTokenizer.from_pretrained")
    unknown = sorted(set(kwargs) - _CONFIG_ARGUMENTS - _TOKEN_ARGUMENTS - _IGNORED_ARGUMENTS)
    if unknown:
        raise InvalidInputError(
            f"AutoTokenizer.from_pretrained: {', '.join(f'{k}={kwargs[k]!r}' for k in unknown)} is not supported "
            "(it would change tokenization in a way this package does not reproduce); leave it out. Accepted: "
            f"{', '.join(sorted(_CONFIG_ARGUMENTS | _TOKEN_ARGUMENTS | {'subfolder', 'use_fast'}))} and the hub "
            "arguments"
        )
    use_fast = kwargs.get("use_fast", True)
    if not isinstance(use_fast, bool):
        raise InvalidInputError(
            f"use_fast={use_fast!r}; pass True (tokenizer.json where the checkpoint has one) or False (tokenizer.model)"
        )
    overrides = {k: kwargs[k] for k in _CONFIG_ARGUMENTS if k in kwargs}
    _check_config_arguments(overrides)
    directory = resolve(pretrained_model_name_or_path, TOKENIZER_FILES, **hub_arguments)
    if hub_arguments.get("subfolder") and not os.path.isdir(directory):
        raise InvalidInputError(f"subfolder={hub_arguments['subfolder']!r}: no such folder {directory}")
    config = {**_read_json(os.path.join(directory, TOKENIZER_CONFIG_FILE)), **overrides}
    template_file = os.path.join(directory, CHAT_TEMPLATE_FILE)
    if os.path.exists(template_file):  # Transformers: chat_template.jinja overrides the config's template
        try:
            with open(template_file, encoding="utf-8") as f:
                config["chat_template"] = f.read()
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{template_file} cannot be read as UTF-8 text ({e}); fix or delete it") from None
    return directory, config, _read_json(os.path.join(directory, SPECIAL_TOKENS_MAP_FILE)), overrides


def _json_bytes(obj):
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _write_file(path, data):
    """Writes data to path through a file beside it, renamed into place: never a half-written file."""
    write_atomic(path, lambda f: f.write(data))
