"""Runs the user scripts of tests/reference/scripts/ in ONE process, with one library: Transformers as written, or
habana_assist with the scripts' import lines changed. Started in the reference environment's python by
tests/reference/test_same_script.py (through the hf_reference fixture), once per library.

    python scripts_runner.py WORKDIR

WORKDIR/jobs.json: {"library": "transformers" | "habana_assist", "package_parent": directory holding the
habana_assist under test (put first on sys.path; habana_assist only), "env": {name: value} set in os.environ
(the models' directories), "scripts": [path, ...]}. Each script runs in a fresh namespace, in a working directory
of its own (WORKDIR/<library>/<script name>), after every random generator is seeded with 0, with its stdout
captured. WORKDIR/results.json: {script name: {"stdout", "error" ("Type: message" or null), "where" (the line of
the script that raised), "result", "seconds"}}: "result" is the script's variable `result` (a dict of what it
computed), each tensor or array saved as WORKDIR/<n>.npy and named by {"__npy__": "<n>.npy"}; "seconds" what the
script took (reported, never asserted). A script that raises is recorded and the next one runs. For habana_assist,
"__package__" names the directory the package was imported from.
"""

import contextlib
import io
import json
import os
import random
import re
import sys
import time
import traceback
import warnings

IMPORT_LINE = re.compile(r"^from transformers(\.[\w.]+)? import ", re.MULTILINE)


def swap_import(source, library):
    """The script's source for `library`: for habana_assist, its `from transformers[.module] import ...` lines
    name habana_assist[.module] instead (the first line of them is the one users change; a submodule import such
    as transformers.generation.streamers is changed alike). A script that names transformers anywhere else (an
    `import transformers`, a comment) is refused: the swap would miss it."""
    imports = IMPORT_LINE.findall(source)
    if not imports or len(imports) != len(re.findall(r"\btransformers\b", source)):
        raise ValueError("a script must name transformers only in `from transformers import ...` lines")
    if library == "transformers":
        return source
    return IMPORT_LINE.sub(lambda m: f"from habana_assist{m.group(1) or ''} import ", source)


class Arrays:
    """Numbers of the results as .npy files in the work directory, tensors and arrays alike."""

    def __init__(self, work):
        self.work, self.n = work, 0

    def plain(self, value):
        """A result value as JSON: arrays (numpy, torch) as files, containers recursively, scalars as they are,
        anything else as {"__repr__": its type and repr} (which the test compares as text)."""
        import numpy as np

        if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
            value = value.detach()
            value = value.float().numpy() if value.is_floating_point() else value.numpy()
        if isinstance(value, np.ndarray) or isinstance(value, np.generic):
            name = f"{self.n}.npy"
            self.n += 1
            np.save(os.path.join(self.work, name), np.asarray(value))
            return {"__npy__": name}
        if isinstance(value, dict):
            return {str(k): self.plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.plain(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return {"__repr__": f"{type(value).__name__}: {value!r}"}


def run_script(path, library, work, arrays):
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        source = swap_import(f.read(), library)
    cwd = os.path.join(work, library, name[:-3])
    os.makedirs(cwd, exist_ok=True)
    namespace = {"__name__": "__main__", "__file__": path}
    out, error, where = io.StringIO(), None, None
    _seed_everything()
    started = time.perf_counter()
    old_cwd = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # both libraries warn in their own words; the outputs are compared
            exec(compile(source, path, "exec"), namespace)
    except BaseException as e:  # noqa: BLE001 - each script's failure is its result; the corpus goes on
        error = f"{type(e).__name__}: {e}"
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
        where = f"line {frames[-1].lineno}: {frames[-1].line}" if frames else None
    finally:
        os.chdir(old_cwd)
    try:
        result = arrays.plain(namespace.get("result"))
    except Exception as e:  # noqa: BLE001 - an unrecordable result is reported, not raised
        result, error = None, error or f"result not recordable: {type(e).__name__}: {e}"
    return {
        "stdout": out.getvalue(),
        "error": error,
        "where": where,
        "result": result,
        "seconds": round(time.perf_counter() - started, 2),
    }


def _seed_everything():
    import numpy as np
    import torch

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


def main(work):
    with open(os.path.join(work, "jobs.json")) as f:
        job = json.load(f)
    library = job["library"]
    if library == "habana_assist":
        sys.path.insert(0, job["package_parent"])
    os.environ.update(job["env"])
    import torch

    torch.set_num_threads(1)
    if library == "transformers":  # the habana_assist run never imports it: the scripts' import line is all
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    arrays = Arrays(work)
    results = {os.path.basename(p): run_script(p, library, work, arrays) for p in job["scripts"]}
    if library == "habana_assist":  # the package under test, not some other copy
        import habana_assist

        results["__package__"] = os.path.dirname(os.path.dirname(os.path.abspath(habana_assist.__file__)))
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
