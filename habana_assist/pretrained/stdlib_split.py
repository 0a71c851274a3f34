"""The data split of the shipped pair: Python standard library files on this machine, test suites left out,
sorted; a file is held out for evaluation when the SHA-1 of its path (relative to the library) is 0 mod 20.
Used by the training recipe (training/collect_corpus.py: these held-out files stay out of the corpus) and by the
demo's prompts, so both agree."""

import glob
import hashlib
import os


def stdlib_files():
    """-> (training files, held-out files), each sorted."""
    root = os.path.dirname(os.__file__)
    skip = ("/test/", "/tests/", "/idle_test/", "/site-packages/", "/dist-packages/", "/__pycache__/")
    files = sorted(
        f
        for f in glob.glob(os.path.join(root, "**", "*.py"), recursive=True)
        if not any(s in f.replace(root, "") + "/" for s in skip) and "/test_" not in f
    )
    held = [f for f in files if int(hashlib.sha1(os.path.relpath(f, root).encode()).hexdigest(), 16) % 20 == 0]
    return [f for f in files if f not in held], held
