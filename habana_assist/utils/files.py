"""Writing files so that a reader never sees half of one: the one atomic writer every save goes through, and the
JSON files written through it (config.json, the index of shards)."""

import json
import os

import numpy as np


def write_atomic(path, write):
    """write(f) into a file beside path (opened "wb"), renamed to path once complete; on any failure, Ctrl-C
    included, the partial file is removed and path is left as it was."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _json_default(value):
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def write_json(path, obj):
    """obj as indented JSON with sorted keys (numpy scalars and arrays as numbers and lists), written atomically."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"
    write_atomic(path, lambda f: f.write(text.encode("utf-8")))
