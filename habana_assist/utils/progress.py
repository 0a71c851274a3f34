"""Progress bars (tqdm, Debian's python3-tqdm) for long work: loading a checkpoint (bytes read, converted,
packed or quantized) and generation (tokens decided).

Whether a bar is shown is decided from the size of the work, never from time, so the same call always
behaves the same: progress=None (the default) shows one for a load of at least MIN_BYTES of weights and for a
generation of at least MIN_TOKENS new tokens (batch x max_new_tokens) without a streamer (streamed text is its
own progress); True always, False never. The environment variable HA_PROGRESS=0 (or false, off) turns the
default off and HA_PROGRESS=1 (true, on) on for every size; an explicit progress= argument wins over it. Bars
go to stderr: a terminal redraws the line, a notebook shows the same text (a widget where ipywidgets is
installed). Without tqdm the default shows nothing and progress=True raises ImportError.
"""

import os
import sys

from ..errors import InvalidInputError

MIN_BYTES = 512 << 20  # a checkpoint load of this many bytes of weights or more shows a bar by default
MIN_TOKENS = 1024  # a generation of this many new tokens (batch x max_new_tokens) or more
_ENV = {"0": False, "false": False, "off": False, "no": False, "1": True, "true": True, "on": True, "yes": True}


def wanted(progress, size, minimum):
    """Whether work of `size` (bytes or tokens) shows a bar, for the caller's progress argument."""
    if progress is not None and not isinstance(progress, bool):
        raise InvalidInputError(f"progress={progress!r} must be True, False or None (shown for large work)")
    if progress is not None:
        return progress
    env = os.environ.get("HA_PROGRESS")
    if env is not None and env.strip().lower() not in _ENV:
        raise InvalidInputError(
            f"HA_PROGRESS={env!r} must be 0 or 1 (or false/true, off/on); unset it for the "
            "default (a bar for large work only)"
        )
    if env is not None and env.strip() != "":
        return _ENV[env.strip().lower()]
    return size >= minimum


def _tqdm_class(required):
    try:
        import tqdm.std
    except ImportError:
        if required:
            raise ImportError(
                "progress=True needs tqdm: apt-get install python3-tqdm (Debian's package), or pip install tqdm"
            ) from None
        return None
    if "ipykernel" in sys.modules:  # in a notebook: tqdm's widget where ipywidgets can draw it
        try:
            import ipywidgets  # noqa: F401 - tqdm.notebook's widgets need it: imported to learn it is there
            import tqdm.notebook

            return tqdm.notebook.tqdm
        except ImportError:
            pass
    return tqdm.std.tqdm


def bar(progress, size, minimum, total, desc, unit):
    """A tqdm bar over `total` units, or None where none is to be shown (see the module docstring)."""
    if not wanted(progress, size, minimum):
        return None
    cls = _tqdm_class(progress is True)
    if cls is None:
        return None
    scale = unit == "B"
    return cls(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=scale,
        unit_divisor=1024 if scale else 1000,
        file=sys.stderr,
        leave=True,
        dynamic_ncols=True,
    )
