"""Writing files so that a reader never sees half of one: the one atomic writer every save goes through."""

import os


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
