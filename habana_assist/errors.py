"""The one exception hierarchy of habana_assist.

Every error raised on purpose by the package is a ``HabanaAssistError``; each class also derives from the
built-in exception a Transformers user would catch for the same mistake (``ValueError`` for bad input,
``FileNotFoundError`` for a missing file), so ``except ValueError`` keeps working.  The C binding maps the
core's status codes onto these classes in one place (csrc/bindings/module.c, ``raise_status``). The hints that
rewrite an error for the call that met it are here too (unsupported_family_hint). This module imports nothing of
the package: every layer may raise these.
"""


class HabanaAssistError(Exception):
    """Base class of every error habana_assist raises on purpose."""


class CheckpointError(HabanaAssistError, ValueError):
    """A checkpoint directory or file is malformed: the message names the file, the problem and the fix."""


class CheckpointNotFoundError(HabanaAssistError, FileNotFoundError):
    """A checkpoint directory or one of its files does not exist."""


class HubError(HabanaAssistError, OSError):
    """The Hub refused a request (a gated or private repo without a token) or a download came out wrong; the
    message says which and the fix (checkpoints/hub.py)."""


class UnsupportedModelError(HabanaAssistError, ValueError):
    """The checkpoint asks for an architecture or an option this package does not implement."""


class InvalidInputError(HabanaAssistError, ValueError):
    """An argument, a token id or a buffer handed to the core is out of its contract."""


class CacheCapacityError(HabanaAssistError, ValueError):
    """Appending would go past the KV cache capacity chosen when the cache was created."""


class OutOfMemoryError(HabanaAssistError, MemoryError):
    """A KV cache or an output would not fit in the memory this machine has left; refused before allocating."""


class GenerationStoppedError(HabanaAssistError, RuntimeError):
    """Raised to a streamer's consumer (TextIteratorStreamer) when the generation feeding it stopped with an
    error or an interrupt before its end; the cause is that error."""


class CoreError(HabanaAssistError, RuntimeError):
    """The C core reported an internal failure (a bug: please report it with the message)."""


def unsupported_family_hint(error: UnsupportedModelError, trust_remote_code: object) -> UnsupportedModelError:
    """An UnsupportedModelError raised while loading, saying that trust_remote_code=True cannot help: no code
    from a checkpoint is ever run, only the families listed (models/)."""
    if not trust_remote_code:
        return error
    return UnsupportedModelError(
        f"{error} (trust_remote_code=True changes nothing here: this package never runs "
        "a checkpoint's own code, it runs only the families it lists)"
    )
