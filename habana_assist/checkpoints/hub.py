"""Names of the models shipped inside the package, and the rule for everything else: a local directory.

No model hub is ever reached. "habana-assist/pycode" and "habana-assist/pycode-draft" name the trained pair
in habana_assist/pretrained/ (see its MODEL_CARD.md); any other string or path is a local directory.
"""

import os

from ..errors import CheckpointNotFoundError

MODELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pretrained")
SHIPPED = {"habana-assist/pycode": "pycode", "habana-assist/pycode-draft": "pycode-draft"}


def resolve(name_or_path):
    """-> the directory of a shipped model or of a local checkpoint; CheckpointNotFoundError if there is none."""
    path = os.fspath(name_or_path)
    if path in SHIPPED:
        directory = os.path.join(MODELS_DIR, SHIPPED[path])
        if not os.path.isdir(directory):
            raise CheckpointNotFoundError(f"{path} is not installed with this copy of habana_assist (expected "
                                          f"{directory}); reinstall the package or pass a local directory")
        return directory
    if not os.path.isdir(path):
        shipped = ", ".join(sorted(SHIPPED))
        raise CheckpointNotFoundError(f"{path}: no such directory. habana_assist never downloads from a model hub: pass "
                                      f"a local checkpoint directory, or one of the shipped models ({shipped})")
    return path
