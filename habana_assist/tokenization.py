"""SentencePiece tokenizers in a Hugging Face checkpoint directory, with Transformers' call conventions.

AutoTokenizer.from_pretrained(path) reads tokenizer.model (through Debian's python3-sentencepiece),
tokenizer_config.json (add_bos_token, add_eos_token, padding_side, truncation_side, model_max_length, special
tokens) and special_tokens_map.json. Ids are exactly sentencepiece's; bos/eos are added as the config says.
save_pretrained(directory) writes those three files back, so that from_pretrained(directory) gives a tokenizer
that encodes and decodes alike.
"""

import copy
import json
import os

import numpy as np

from .errors import CheckpointError, CheckpointNotFoundError, InvalidInputError
from .hub import resolve
from .tensors import is_torch_tensor, to_numpy

TOKENIZER_FILE = "tokenizer.model"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")
_DEFAULT_MAX_LENGTH = 1 << 30  # model_max_length when tokenizer_config.json has none


class BatchEncoding(dict):
    """{"input_ids": ..., "attention_mask": ...} that also reads as attributes, so generate(**inputs) works."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device):
        """Transformers' inputs.to(model.device): torch tensors moved with their .to(device); numpy arrays and
        lists live on the CPU, so only "cpu" is accepted for them."""
        out = BatchEncoding()
        for key, value in self.items():
            if is_torch_tensor(value):
                out[key] = value.to(device)
            elif str(device) != "cpu":
                raise InvalidInputError(f"BatchEncoding.to({device!r}): {key} is not a torch tensor and stays on the "
                                        "CPU; this package computes on the CPU: use .to('cpu') or leave .to() out")
            else:
                out[key] = value
        return out


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


def _proto_fields(data):
    """Top-level fields of serialized protobuf bytes -> [(field number, bytes for a length-delimited field or
    None)]; ValueError where the bytes are not protobuf."""
    fields, i = [], 0

    def varint():
        nonlocal i
        value, shift = 0, 0
        while True:
            if i >= len(data) or shift > 63:
                raise ValueError("bad varint")
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(data):
        key = varint()
        wire, value = key & 7, None
        if wire == 0:
            varint()
        elif wire == 1 or wire == 5:
            i += 8 if wire == 1 else 4
        elif wire == 2:
            n = varint()
            value, i = data[i:i + n], i + n
        else:
            raise ValueError("a protobuf group or a bad wire type")
        if i > len(data):
            raise ValueError("truncated")
        fields.append((key >> 3, value))
    return fields


def _bad_piece(proto):
    """The index of the first piece of a serialized sentencepiece ModelProto (pieces: field 1, each a message
    whose field 1 is the piece's text) that is empty or holds a NUL byte, or None; None too where the bytes
    are not protobuf, which sentencepiece rejects itself."""
    try:
        pieces = [value for number, value in _proto_fields(proto) if number == 1 and value is not None]
        for index, piece in enumerate(pieces):
            texts = [value for number, value in _proto_fields(piece) if number == 1 and value is not None]
            if not texts or not texts[-1] or b"\0" in texts[-1]:  # the last occurrence wins; absent means ""
                return index
    except ValueError:
        return None
    return None


def _encodable(text):
    """Whether text is valid Unicode that UTF-8 can carry (JSON's "\\ud800" gives a lone surrogate that it cannot)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _token_text(value):
    """A special token in tokenizer_config.json is a string or {"content": string, ...}."""
    return value.get("content") if isinstance(value, dict) else value


class LlamaTokenizer:
    """A SentencePiece tokenizer (Llama's kind). Build it with AutoTokenizer.from_pretrained(path)."""

    def __init__(self, model_file, config=None, special_tokens_map=None):
        try:
            import sentencepiece
        except ImportError:
            raise ImportError("habana_assist's tokenizer needs sentencepiece: apt-get install python3-sentencepiece "
                              "(scripts/setup.sh does)") from None
        self.sp = sentencepiece.SentencePieceProcessor()
        try:
            with open(model_file, "rb") as f:
                proto = f.read()
            bad = _bad_piece(proto)
            if bad is not None:  # sentencepiece would abort the process (its trie's keys are non-empty C strings)
                raise CheckpointError(f"{model_file}: piece {bad} is empty or holds a NUL byte, so it is not a "
                                      "SentencePiece model or it is corrupt; re-download it")
            self.sp.load_from_serialized_proto(proto)
            self._proto = proto  # written back byte for byte by save_pretrained
        except (OSError, RuntimeError) as e:
            raise CheckpointError(f"{model_file} is not a SentencePiece model ({e}); re-download it") from None
        for i in range(self.sp.get_piece_size()):  # sentencepiece loads such pieces; id_to_piece would raise later
            try:
                self.sp.id_to_piece(i)
            except UnicodeDecodeError:
                raise CheckpointError(f"{model_file}: piece {i} is not valid UTF-8, so it is not a SentencePiece "
                                      "model or it is corrupt; re-download it") from None
        config = dict(config or {})
        # As read, for save_pretrained: it writes them back with what the script changed since.
        self._loaded_config, self._loaded_special = copy.deepcopy(config), copy.deepcopy(dict(special_tokens_map or {}))
        tokens = {**{k: _token_text(v) for k, v in (special_tokens_map or {}).items()},
                  **{k: _token_text(config[k]) for k in ("bos_token", "eos_token", "unk_token", "pad_token") if k in config}}
        for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
            text = tokens.get(name)
            if text is not None and not (isinstance(text, str) and _encodable(text)):
                source = "tokenizer_config.json" if name in config else "special_tokens_map.json"
                raise CheckpointError(f"{source}: {name} is {text!r}; expected a string (or {{\"content\": string}}) "
                                      "of valid UTF-8 — fix the file")
        self.add_bos_token = bool(config.get("add_bos_token", True))
        self.add_eos_token = bool(config.get("add_eos_token", False))
        self.padding_side = config.get("padding_side", "right")
        self.truncation_side = config.get("truncation_side", "right")
        max_length = config.get("model_max_length")
        if max_length is None:
            max_length = _DEFAULT_MAX_LENGTH
        elif isinstance(max_length, float) and max_length.is_integer():  # e.g. 1e+30 written as a float
            max_length = int(max_length)
        if not (isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= 1):
            raise CheckpointError(f"tokenizer_config.json: model_max_length={config['model_max_length']!r} must be a "
                                  "positive integer; fix the file")
        self.model_max_length = max_length
        for side in ("padding_side", "truncation_side"):
            if getattr(self, side) not in ("left", "right"):
                raise CheckpointError(f"tokenizer_config.json: {side}={getattr(self, side)!r} must be 'left' or 'right'")
        defaults = {"bos_token": self.sp.bos_id(), "eos_token": self.sp.eos_id(), "unk_token": self.sp.unk_id(),
                    "pad_token": self.sp.pad_id()}
        for name, default in defaults.items():
            text = tokens.get(name)
            tid = self.sp.piece_to_id(text) if text else default
            if text and (tid == self.sp.unk_id() and text != self.sp.id_to_piece(self.sp.unk_id())):
                raise CheckpointError(f"the {name} {text!r} of tokenizer_config.json is not in {model_file}; fix the config")
            tid = tid if tid is not None and tid >= 0 else None
            setattr(self, name + "_id", tid)
            setattr(self, name, self.sp.id_to_piece(tid) if tid is not None else None)
        self._loaded_tokens = {name: (getattr(self, name), getattr(self, name + "_id")) for name in _SPECIAL_NAMES}
        self._special = {t for t in (self.bos_token_id, self.eos_token_id, self.unk_token_id, self.pad_token_id)
                         if t is not None} | {i for i in range(self.sp.get_piece_size()) if self.sp.is_control(i)}

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path):
        directory = resolve(pretrained_model_name_or_path)
        model_file = os.path.join(directory, TOKENIZER_FILE)
        if not os.path.exists(model_file):
            raise CheckpointNotFoundError(f"{directory}: no {TOKENIZER_FILE}; this package reads SentencePiece "
                                          "tokenizers (tokenizer.model) only")
        return cls(model_file, _read_json(os.path.join(directory, TOKENIZER_CONFIG_FILE)),
                   _read_json(os.path.join(directory, SPECIAL_TOKENS_MAP_FILE)))

    def __len__(self):
        return self.sp.get_piece_size()

    @property
    def vocab_size(self):
        return self.sp.get_piece_size()

    def __repr__(self):
        return (f"LlamaTokenizer(vocab_size={self.vocab_size}, bos={self.bos_token!r}, eos={self.eos_token!r}, "
                f"pad={self.pad_token!r}, padding_side={self.padding_side!r})")

    # ---- text -> ids ----------------------------------------------------------------------------------------

    def encode(self, text, add_special_tokens=True):
        """str -> list of ids (<s> first when the config says add_bos_token)."""
        if not isinstance(text, str):
            raise InvalidInputError(f"encode takes a str, got {type(text).__name__}")
        ids = self.sp.encode(text)
        if add_special_tokens:
            ids = ([self.bos_token_id] if self.add_bos_token and self.bos_token_id is not None else []) + ids + \
                  ([self.eos_token_id] if self.add_eos_token and self.eos_token_id is not None else [])
        return ids

    def _encode_truncated(self, text, add_special_tokens, limit):
        """encode(), keeping at most `limit` ids: the text's tokens are cut on truncation_side, <s> and </s> stay."""
        if limit is None:
            return self.encode(text, add_special_tokens)
        bos = [self.bos_token_id] if add_special_tokens and self.add_bos_token and self.bos_token_id is not None else []
        eos = [self.eos_token_id] if add_special_tokens and self.add_eos_token and self.eos_token_id is not None else []
        body, room = self.sp.encode(text), max(0, limit - len(bos) - len(eos))
        body = body[:room] if self.truncation_side == "right" else body[max(0, len(body) - room):]
        return (bos + body + eos)[:limit] if self.truncation_side == "right" else (bos + body + eos)[-limit:]

    def __call__(self, text, padding=False, truncation=False, max_length=None, return_tensors=None,
                 add_special_tokens=True, return_attention_mask=True):
        """str or list of str -> BatchEncoding(input_ids, attention_mask), Transformers' semantics.

        padding: False, True / "longest", or "max_length"; on the tokenizer's padding_side. truncation with
        max_length (default model_max_length) cuts on truncation_side. return_tensors="np" gives int64 arrays
        (batch, seq), "pt" torch int64 tensors (batch, seq) where torch is importable; None gives lists (a flat
        list for a single str)."""
        single = isinstance(text, str)
        texts = [text] if single else text
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts) or not texts:
            raise InvalidInputError("the tokenizer takes a str or a non-empty list of str")
        if return_tensors not in (None, "np", "pt"):
            raise InvalidInputError(f"return_tensors={return_tensors!r} is not supported; use 'np' (numpy), 'pt' "
                                    "(torch) or None (lists)")
        torch = _import_torch() if return_tensors == "pt" else None
        if padding is True:
            padding = "longest"
        if padding not in (False, "longest", "max_length", "do_not_pad"):
            raise InvalidInputError(f"padding={padding!r}; use False, True ('longest') or 'max_length'")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise InvalidInputError(f"max_length={max_length!r} must be a positive integer")
        limit = (max_length or self.model_max_length) if truncation else None
        ids = [self._encode_truncated(t, add_special_tokens, limit) for t in texts]
        width = max(len(s) for s in ids)
        if padding == "max_length":
            if max_length is None:
                raise InvalidInputError("padding='max_length' needs max_length")
            width = max(width, max_length)
        masks = [[1] * len(s) for s in ids]
        if padding in ("longest", "max_length"):
            if self.pad_token_id is None:
                raise InvalidInputError("this tokenizer has no pad token; set tokenizer.pad_token_id (e.g. to "
                                        "tokenizer.eos_token_id) before padding")
            for i, s in enumerate(ids):
                fill = width - len(s)
                if self.padding_side == "left":
                    ids[i], masks[i] = [self.pad_token_id] * fill + s, [0] * fill + masks[i]
                else:
                    ids[i], masks[i] = s + [self.pad_token_id] * fill, masks[i] + [0] * fill
        if return_tensors is not None:
            if len({len(s) for s in ids}) > 1:
                raise InvalidInputError("the texts have different lengths; pass padding=True to make one array")
            as_tensor = torch.from_numpy if torch is not None else (lambda a: a)
            out = BatchEncoding(input_ids=as_tensor(np.array(ids, dtype=np.int64)))
            if return_attention_mask:
                out["attention_mask"] = as_tensor(np.array(masks, dtype=np.int64))
            return out
        out = BatchEncoding(input_ids=ids[0] if single else ids)
        if return_attention_mask:
            out["attention_mask"] = masks[0] if single else masks
        return out

    # ---- ids -> text ----------------------------------------------------------------------------------------

    def _check_ids(self, ids):
        a = to_numpy(ids, "token ids")[0] if is_torch_tensor(ids) else np.asarray(ids)
        if a.dtype == object or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise InvalidInputError(f"token ids must be integers, got dtype {a.dtype}")
        if a.size and (a.min() < 0 or a.max() >= self.vocab_size):
            raise InvalidInputError(f"token id {int(a.min() if a.min() < 0 else a.max())} is outside [0, "
                                    f"{self.vocab_size}); use the tokenizer that belongs to the model")
        return [int(i) for i in a.reshape(-1)]

    def decode(self, ids, skip_special_tokens=False):
        """ids (an int, a list, a 1-D numpy array or torch tensor) -> str; special tokens written as their text
        unless skipped."""
        out, run = [], []
        for i in self._check_ids(ids):
            if i in self._special:
                out.append(self.sp.decode(run))
                run = []
                if not skip_special_tokens:
                    out.append(self.sp.id_to_piece(i))
            else:
                run.append(i)
        out.append(self.sp.decode(run))
        return "".join(out)

    def batch_decode(self, sequences, skip_special_tokens=False):
        """(batch, seq) ids (a numpy array, a torch tensor, or a list of rows, which may differ in length) ->
        list of str."""
        seqs = sequences if isinstance(sequences, (list, tuple)) else to_numpy(sequences, "sequences")[0]
        return [self.decode(s, skip_special_tokens=skip_special_tokens) for s in seqs]

    def convert_ids_to_tokens(self, ids):
        return [self.sp.id_to_piece(i) for i in self._check_ids(ids)]

    def convert_tokens_to_ids(self, tokens):
        return [self.sp.piece_to_id(t) for t in tokens]

    def get_vocab(self):
        """{piece: id} for every id of the vocabulary."""
        return {self.sp.id_to_piece(i): i for i in range(self.sp.get_piece_size())}

    # ---- saving ---------------------------------------------------------------------------------------------

    def _current_token(self, name):
        """The special token `name` as a script left it: pad_token = "</s>" and pad_token_id = 2 both count
        (whichever changed since loading; the text if both did), None if unset."""
        text, tid = getattr(self, name), getattr(self, name + "_id")
        loaded_text, loaded_id = self._loaded_tokens[name]
        if text == loaded_text and tid != loaded_id:
            if tid is None:
                return None
            if not (isinstance(tid, (int, np.integer)) and 0 <= tid < self.vocab_size):
                raise InvalidInputError(f"save_pretrained: {name}_id={tid!r} is not a token id of this vocabulary "
                                        f"[0, {self.vocab_size}); set it to an id, or set {name} to a token")
            return self.sp.id_to_piece(int(tid))
        if text is None or text == loaded_text:
            return text
        if not (isinstance(text, str) and _encodable(text)):
            raise InvalidInputError(f"save_pretrained: {name}={text!r} must be a str (a token of the vocabulary) or "
                                    "None")
        if self.sp.piece_to_id(text) == self.sp.unk_id() and text != self.sp.id_to_piece(self.sp.unk_id()):
            raise InvalidInputError(f"save_pretrained: {name}={text!r} is not a token of this vocabulary, so the saved "
                                    f"tokenizer would not load; set it to one (e.g. {name} = tokenizer.eos_token)")
        return text

    def save_pretrained(self, save_directory, legacy_format=None, filename_prefix=None, push_to_hub=False, **kwargs):
        """Writes tokenizer.model (the bytes that were loaded), tokenizer_config.json and special_tokens_map.json
        into save_directory (created if needed), as read at load with what the script changed since (special
        tokens, padding_side, truncation_side, add_bos_token, add_eos_token, model_max_length). from_pretrained
        (save_directory) then encodes and decodes alike. -> (tokenizer_config.json, special_tokens_map.json,
        tokenizer.model) paths, Transformers' order."""
        if push_to_hub:
            raise InvalidInputError("save_pretrained: push_to_hub=True is not supported (no model hub is reachable "
                                    "from this package); save locally and upload the directory yourself")
        if legacy_format is False:
            raise InvalidInputError("save_pretrained: legacy_format=False writes only tokenizer.json, which a "
                                    "SentencePiece tokenizer does not have; leave legacy_format unset")
        if filename_prefix is not None:
            raise InvalidInputError(f"save_pretrained: filename_prefix={filename_prefix!r} would name files that "
                                    "from_pretrained does not read; leave it unset")
        if kwargs:
            raise InvalidInputError(f"save_pretrained: unexpected argument(s) {', '.join(sorted(kwargs))}; it takes "
                                    "save_directory (and Transformers' legacy_format)")
        if not isinstance(save_directory, (str, os.PathLike)):
            raise InvalidInputError(f"save_pretrained: save_directory={save_directory!r} must be a path")
        save_directory = os.fspath(save_directory)
        if os.path.isfile(save_directory):
            raise InvalidInputError(f"save_pretrained: {save_directory} is a file; pass a directory")
        tokens = {name: self._current_token(name) for name in _SPECIAL_NAMES}
        special = copy.deepcopy(self._loaded_special)
        config = copy.deepcopy(self._loaded_config)
        for name, text in tokens.items():
            if text is None:
                special.pop(name, None)
                config[name] = None  # null: Transformers' way of writing an unset token
                continue
            for saved in (special, config):
                if _token_text(saved.get(name)) != text:  # kept as loaded ({"content": ...} too) if unchanged
                    saved[name] = text
        config.setdefault("tokenizer_class", "LlamaTokenizer")
        config.update(add_bos_token=bool(self.add_bos_token), add_eos_token=bool(self.add_eos_token),
                      padding_side=self.padding_side, truncation_side=self.truncation_side)
        if "model_max_length" in config or self.model_max_length != _DEFAULT_MAX_LENGTH:
            config["model_max_length"] = self.model_max_length
        chat_template = getattr(self, "chat_template", None)
        if chat_template is not None:
            config["chat_template"] = chat_template

        os.makedirs(save_directory, exist_ok=True)
        paths = (os.path.join(save_directory, TOKENIZER_CONFIG_FILE),
                 os.path.join(save_directory, SPECIAL_TOKENS_MAP_FILE),
                 os.path.join(save_directory, TOKENIZER_FILE))
        for path, data in zip(paths, (_json_bytes(config), _json_bytes(special), self._proto)):
            _write_file(path, data)
        return paths


def _json_bytes(obj):
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _write_file(path, data):
    """Writes data to path through a file beside it, renamed into place: never a half-written file."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _import_torch():
    """torch, for return_tensors="pt"; InvalidInputError saying how to get it where it is not importable."""
    try:
        import torch
    except ImportError:
        raise InvalidInputError("return_tensors='pt' needs PyTorch (torch), which is not importable here; install "
                                "Debian's python3-torch, or use return_tensors='np'") from None
    return torch


class AutoTokenizer:
    """Transformers-style entry point: from_pretrained(directory or shipped name) -> LlamaTokenizer."""

    def __init__(self):
        raise TypeError("use AutoTokenizer.from_pretrained(path)")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path):
        return LlamaTokenizer.from_pretrained(pretrained_model_name_or_path)
