#!/usr/bin/python3
"""Collects the shipped pair's training corpus from Debian's packages: the Python standard library of this
machine (its evaluation split, stdlib_split, held out as before) and the pure-Python source of the Debian
packages in TRAIN_PACKAGES; the packages in HELD_OUT_PACKAGES are kept out entirely, for evaluation.

Packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x` into --cache (nothing is
installed, so the machine's own Python stays as it was). From each package every *.py file is taken except
test suites, vendored copies of other projects (which would leak held-out packages such as requests into
training) and files that are data rather than code (see keep()). Exact duplicates (after trailing whitespace)
are dropped, first file wins, in a sorted order, so the result is deterministic for the same package versions.

Writes to --out:
  train.bin.xz     the training documents, UTF-8, separated by NUL bytes, in a seeded shuffled order
  held_out.bin.xz  the held-out documents, likewise (held-out packages, then held-out stdlib files)
  manifest.json    per package: Debian version, licenses (from its copyright file), files and bytes kept
Usage: /usr/bin/python3 training/collect_corpus.py --out DIR [--cache DIR]
"""

import argparse
import glob
import hashlib
import json
import lzma
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Large pure-Python (or mostly Python) packages of Debian 12, for training.
TRAIN_PACKAGES = """
python3-django python3-sympy python3-twisted python3-matplotlib python3-sphinx python3-docutils python3-pygments
python3-networkx python3-pandas python3-sqlalchemy python3-nltk python3-openpyxl python3-reportlab python3-astropy
python3-sklearn python3-statsmodels python3-mypy python3-astroid python3-jedi python3-parso python3-ipython
python3-hypothesis python3-babel python3-botocore python3-setuptools python3-pip python3-numpy python3-scipy
python3-dask python3-xarray python3-paramiko python3-pyglet python3-bs4 python3-flask python3-pexpect python3-future
python3-mako python3-pycparser python3-scrapy python3-nbformat python3-notebook python3-jupyter-client
python3-traitlets python3-prompt-toolkit python3-rich python3-isort python3-coverage python3-markdown
python3-html5lib python3-pyasn1 python3-ldap3 python3-dnspython python3-aiohttp python3-trio python3-httpx
python3-simpy python3-pyparsing python3-fonttools python3-skimage python3-pymongo python3-celery python3-kombu
python3-dulwich mercurial meson scons python3-numba python3-pydantic python3-cherrypy3 python3-pyramid python3-webob
python3-peewee python3-nbconvert python3-jsonschema python3-openssl python3-traits python3-mpmath python3-biopython
python3-rdflib python3-owslib python3-geopandas python3-pyproj python3-seaborn python3-plotly python3-vispy
python3-pyqtgraph python3-ruamel.yaml python3-virtualenv python3-poetry python3-numpydoc python3-pyx python3-xlrd
python3-xlsxwriter python3-docx python3-odf python3-pypdf2 python3-debian ansible-core python3-buildbot
python3-urllib3 python3-attr python3-yaml
""".split()
# Kept out of training (and their vendored copies with them): the held-out evaluation.
HELD_OUT_PACKAGES = (
    "python3-requests python3-jinja2 python3-click python3-tornado python3-werkzeug python3-sqlparse".split()
)
# Vendored or bundled copies of the held-out packages live under these directories (pip/_vendor/requests,
# botocore/vendored/requests, ...): no file under one is kept.
SKIP_DIRS = (
    "test",
    "tests",
    "testing",
    "_vendor",
    "vendor",
    "vendored",
    "_vendored",
    "__pycache__",
    "examples",
    "benchmarks",
    "docs",
)
MAX_PACKAGE_BYTES = 12_000_000  # one package (ansible-core, sympy) may not crowd out the rest
MAX_FILE_BYTES = 400_000  # beyond this a .py file is almost always generated tables


def log(msg):
    print(msg, flush=True)


def keep(rel, text):
    """Whether a .py file (path relative to its package root, its text) is code worth learning from."""
    parts = rel.split("/")
    if any(p in SKIP_DIRS for p in parts[:-1]) or parts[-1].startswith("test_") or parts[-1].endswith("_test.py"):
        return False
    if "\0" in text or not text.strip() or len(text) > MAX_FILE_BYTES:
        return False
    lines = text.split("\n")
    # generated data: very long lines, or mostly numbers and punctuation
    if max(len(line) for line in lines) > 1000 or len(text) / len(lines) > 120:
        return False
    letters = sum(c.isalpha() for c in text)
    return letters > 0.35 * len(text.replace(" ", ""))


def fetch(packages, cache):
    """{package: unpacked directory}, downloading each .deb once into cache."""
    debs = os.path.join(cache, "debs")
    os.makedirs(debs, exist_ok=True)
    missing = [p for p in packages if not glob.glob(os.path.join(debs, f"{p}_*.deb"))]
    if missing:
        log(f"apt-get download {len(missing)} packages")
        subprocess.run(["apt-get", "download", *missing], cwd=debs, check=True, stdout=subprocess.DEVNULL)
    out = {}
    for p in packages:
        deb = sorted(glob.glob(os.path.join(debs, f"{p}_*.deb")))[-1]
        root = os.path.join(cache, "unpacked", p)
        if not os.path.isdir(root):
            os.makedirs(root + ".part", exist_ok=True)
            subprocess.run(["dpkg-deb", "-x", deb, root + ".part"], check=True)
            os.rename(root + ".part", root)
        out[p] = (root, os.path.basename(deb).split("_")[1].replace("%3a", ":"))
    return out


def licenses(root, package):
    """The License: short names of a Debian copyright file (DEP-5), sorted; or the first line saying so."""
    path = os.path.join(root, "usr/share/doc", package, "copyright")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return ["(no copyright file)"]
    found = sorted({m.strip() for m in re.findall(r"^License:[ \t]*(\S[^\n]*)", text, re.M)})
    return found or [next((line for line in text.split("\n") if "licen" in line.lower()), "(see copyright)")[:120]]


def package_files(root):
    """[(path relative to dist-packages or the unpack root, absolute path)] of .py files, sorted."""
    found = []
    for base in sorted(
        glob.glob(os.path.join(root, "usr/lib/python3*/dist-packages")) + glob.glob(os.path.join(root, "usr/share/*/"))
    ):
        for path in sorted(glob.glob(os.path.join(base, "**", "*.py"), recursive=True)):
            found.append((os.path.relpath(path, base), path))
    return found


def content_key(text):
    """What makes two files duplicates: the same lines, trailing whitespace aside."""
    return hashlib.sha1("\n".join(line.rstrip() for line in text.split("\n")).encode()).digest()


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def collect(packages, seen, cap):
    """-> ([texts], {package: summary}); seen (content hashes) is updated."""
    docs, summary = [], {}
    for name, (root, version) in packages.items():
        kept = nbytes = 0
        for rel, path in package_files(root):
            text = read(path)
            if not keep(rel, text):
                continue
            h = content_key(text)
            if h in seen:
                continue
            if cap and nbytes + len(text) > cap:
                break
            seen.add(h)
            docs.append(text)
            kept, nbytes = kept + 1, nbytes + len(text.encode())
        summary[name] = {"version": version, "licenses": licenses(root, name), "files": kept, "bytes": nbytes}
        log(f"  {name} {version}: {kept} files, {nbytes / 1e6:.1f} MB")
    return docs, summary


def write_docs(path, docs):
    data = "\0".join(docs).encode("utf-8")
    with lzma.open(path, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
        f.write(data)
    return len(data)


def read_docs(path):
    """The documents of a file written by write_docs (used by the trainer and the evaluation)."""
    with lzma.open(path, "rb") as f:
        return f.read().decode("utf-8").split("\0")


def read_held_out(corpus):
    """-> (package documents, their package names, standard-library documents) of a corpus directory: the first
    sum(files) documents of held_out.bin.xz are the held-out packages' (manifest.json), the rest the stdlib's."""
    with open(os.path.join(corpus, "manifest.json")) as f:
        packages = json.load(f)["held_out"]["packages"]
    docs = read_docs(os.path.join(corpus, "held_out.bin.xz"))
    names = [name for name, p in packages.items() for _ in range(p["files"])]
    if len(names) > len(docs):
        raise SystemExit(f"manifest.json counts {len(names)} held-out package files; held_out.bin.xz has {len(docs)}")
    return docs[: len(names)], names, docs[len(names) :]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--cache", default="/tmp/habana-assist-corpus")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    from habana_assist.pretrained.stdlib_split import stdlib_files  # here, so that read_docs needs no habana_assist

    os.makedirs(args.out, exist_ok=True)
    pkgs = fetch(TRAIN_PACKAGES + HELD_OUT_PACKAGES, args.cache)
    held_pkgs = {p: pkgs[p] for p in HELD_OUT_PACKAGES}
    seen = set()
    log("held out:")
    held_docs, held_summary = collect(held_pkgs, seen, 0)
    stdlib_train, stdlib_held = stdlib_files()
    for path in stdlib_held:
        text = read(path)
        seen.add(content_key(text))
        held_docs.append(text)
    log("training:")
    train_docs = []
    for path in stdlib_train:
        text = read(path)
        h = content_key(text)
        if h not in seen and "\0" not in text:
            seen.add(h)
            train_docs.append(text)
    n_stdlib, stdlib_bytes = len(train_docs), sum(len(t.encode()) for t in train_docs)
    log(f"  stdlib (Python {sys.version.split()[0]}): {len(train_docs)} files, {stdlib_bytes / 1e6:.1f} MB")
    docs, train_summary = collect({p: pkgs[p] for p in TRAIN_PACKAGES}, seen, MAX_PACKAGE_BYTES)
    train_docs += docs
    order = np.random.default_rng(args.seed).permutation(len(train_docs))
    n_train = write_docs(os.path.join(args.out, "train.bin.xz"), [train_docs[i] for i in order])
    n_held = write_docs(os.path.join(args.out, "held_out.bin.xz"), held_docs)
    manifest = {
        "seed": args.seed,
        "python": sys.version.split()[0],
        "stdlib": {
            "files": n_stdlib,
            "bytes": stdlib_bytes,
            "held_out_files": len(stdlib_held),
            "licenses": ["PSF-2.0"],
        },
        "train": {"files": len(train_docs), "bytes": n_train, "packages": train_summary},
        "held_out": {"files": len(held_docs), "bytes": n_held, "packages": held_summary},
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    log(
        f"train: {len(train_docs)} files, {n_train / 1e6:.1f} MB; held out: {len(held_docs)} files, "
        f"{n_held / 1e6:.1f} MB -> {args.out}"
    )


if __name__ == "__main__":
    main()
