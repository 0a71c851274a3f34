"""The package installs as README's install section says, from PyPI's packages and from Debian's:

- an sdist of a copy of the tree (`python -m build --sdist`), unpacked alone, builds a wheel with `pip wheel .`
  (build isolation: setuptools from PyPI), the one compile of the C core in this file;
- `pip install .` there, in a plain virtual environment (no system site packages), takes numpy 2.x and the other
  dependencies from PyPI: the demo, the command line and generate() run;
- the wheel installs into another fresh plain venv with numpy 1.x from PyPI and runs there; it has no avx512-emulated
  kernel variant, and HA_KERNELS=avx512-emulated is refused saying how to build one;
- README's Debian install (`--system-site-packages`, `--no-build-isolation --no-index`) runs on Debian's numpy;
- a missing OpenBLAS stops the build with a message naming the package.

The builds reuse the objects of the first (setup.py keeps objects that are up to date), so each install packages the
extension it built. PyPI is needed for all but the Debian install; where it cannot be reached those tests skip
saying why, except under CI (CI set), where that is a failure. Without PyPI the Debian install compiles instead.
"""

import json
import os
import shlex
import shutil
import subprocess
import sysconfig
import tarfile
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEBIAN_PYTHON = "/usr/bin/python3"  # README's commands name it: another interpreter may lack numpy
BUILD_TIMEOUT = 1800  # a compile from scratch on 2 shared cores
INSTALL_TIMEOUT = 600

# Run by each venv's python from another directory: the dependencies pyproject.toml declares import, the shipped
# pair loads from the install, and assisted greedy output equals plain greedy output.
CHECK = r"""
import json
import numpy as np
import jinja2, regex, sentencepiece, tqdm  # pyproject.toml's dependencies
import habana_assist as ha
tok = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft", dtype="int8")
inputs = tok(["def fibonacci(n):"], return_tensors="np")
plain = model.generate(**inputs, max_new_tokens=12, do_sample=False)
assisted = model.generate(**inputs, assistant_model=draft, max_new_tokens=12, do_sample=False)
print(json.dumps({"file": ha.__file__, "draft": draft.name_or_path, "numpy": np.__version__,
                  "kernels": ha.kernels_name(), "identical": bool(np.array_equal(plain, assisted)),
                  "new_tokens": int(plain.shape[1] - inputs["input_ids"].shape[1]),
                  "text": tok.decode(plain[0], skip_special_tokens=True)}))
"""


def _env():
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "HA_KERNELS", "HA_AVX512_EMULATED", "HA_BUILD_JOBS")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(cmd, cwd, timeout=INSTALL_TIMEOUT, env=None, check=True):
    r = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env or _env()
    )
    if check:
        assert r.returncode == 0, (
            f"{' '.join(map(str, cmd))} (in {cwd}) failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        )
    return r


def venv(path, system_site=False):
    run([DEBIAN_PYTHON, "-m", "venv", *(["--system-site-packages"] if system_site else []), path], cwd=path.parent)
    return path / "bin" / "python"


def check_install(py, venv_dir, cwd):
    """CHECK run by py from cwd; its result, after the checks every install shares."""
    out = json.loads(run([py, "-c", CHECK], cwd=cwd).stdout.splitlines()[-1])
    assert out["file"].startswith(str(venv_dir)), f"expected habana_assist imported from {venv_dir}, got {out['file']}"
    # the shipped pair is package data (habana_assist/pretrained/): installed with the package, not read from a checkout
    assert out["draft"].startswith(str(venv_dir)), (
        f"expected the shipped draft loaded from {venv_dir}, got {out['draft']}"
    )
    assert out["identical"] and out["new_tokens"] == 12, f"expected 12 new tokens, assisted == plain, got {out}"
    assert out["kernels"] in ("scalar", "avx2", "avx512"), f"expected a native kernel variant, got {out['kernels']}"
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A copy of the tree; from PyPI's `build`, its sdist, unpacked alone (source), and from that, `pip wheel .`'s
    wheel. Without PyPI: source is the copy itself, and wheel and sdist are None, with pypi_missing saying why."""
    work = tmp_path_factory.mktemp("install")
    tree = work / "tree"
    # The checkout as a user has it, an extension built in place included (the sdist must leave it out); not the
    # tests, the build outputs, the reference venv or the npm packages.
    shutil.copytree(
        REPO,
        tree,
        ignore=shutil.ignore_patterns(
            ".git", "build", "dist", "*.egg-info", ".venv*", "__pycache__", ".pytest_cache", "tests"
        ),
    )
    tools = venv(work / "tools")
    got = run([tools, "-m", "pip", "install", "-q", "build"], cwd=work, check=False)
    if got.returncode != 0:
        reason = f"PyPI cannot be reached (pip install build failed):\n{got.stderr[-1500:]}"
        assert not os.environ.get("CI"), f"CI needs PyPI for the pip install tests; {reason}"
        return {"work": work, "source": tree, "sdist": None, "wheel": None, "pypi_missing": reason}
    run([tools, "-m", "build", "--sdist", "--outdir", work / "dist", "."], cwd=tree, timeout=BUILD_TIMEOUT)
    (sdist,) = (work / "dist").glob("habana_assist-*.tar.gz")
    with tarfile.open(sdist) as t:
        t.extractall(work / "unpacked")  # our own archive, just made
    (source,) = (work / "unpacked").iterdir()
    # --no-cache-dir (here and for every install from a directory): pip would otherwise keep each run's wheel (tens of
    # MB) in its cache
    run(
        [tools, "-m", "pip", "wheel", "-q", "--no-cache-dir", "--no-deps", "-w", work / "wheels", "."],
        cwd=source,
        timeout=BUILD_TIMEOUT,
    )
    (wheel,) = (work / "wheels").glob("habana_assist-*.whl")
    return {"work": work, "source": source, "sdist": sdist, "wheel": wheel, "pypi_missing": None}


def needs_pypi(built):
    if built["pypi_missing"]:
        pytest.skip(built["pypi_missing"])


def test_sdist_holds_what_the_build_needs_and_no_build_output(built):
    needs_pypi(built)
    with tarfile.open(built["sdist"]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    tree_sources = {
        os.path.relpath(os.path.join(d, f), REPO)
        for d, _, fs in os.walk(os.path.join(REPO, "csrc"))
        for f in fs
        if f.endswith((".c", ".h"))
    }
    missing = sorted(tree_sources - names)
    assert not missing, f"expected every C source and header of csrc/ in the sdist, it lacks {missing}"
    for needed in (
        "setup.py",
        "pyproject.toml",
        "README.md",
        "habana_assist/py.typed",
        "habana_assist/_core.pyi",
        "habana_assist/pretrained/pycode/model.safetensors",
        "habana_assist/pretrained/pycode-draft/tokenizer.model",
        "habana_assist/pretrained/MODEL_CARD.md",
    ):
        assert needed in names, f"expected {needed} in the sdist, got {sorted(names)[:40]} ..."
    built_files = sorted(n for n in names if n.endswith((".so", ".o", ".pyc")) or n.startswith("build/"))
    assert not built_files, f"expected no build output in the sdist, got {built_files}"
    # the wheel was built from this sdist alone (the `built` fixture): it holds the extension and the shipped pair
    with zipfile.ZipFile(built["wheel"]) as z:
        wheel_names = z.namelist()
    assert any(n.startswith("habana_assist/_core") and n.endswith(".so") for n in wheel_names), (
        f"expected the extension habana_assist/_core*.so in the wheel, got {wheel_names[:20]} ..."
    )
    assert "habana_assist/pretrained/pycode/model.safetensors" in wheel_names, "expected the shipped pair in the wheel"
    for typed in ("habana_assist/py.typed", "habana_assist/_core.pyi"):  # PEP 561: type checkers read the hints
        assert typed in wheel_names, f"expected {typed} in the wheel, got {wheel_names[:20]} ..."


def test_pip_install_dot_into_a_plain_venv_runs_demo_cli_and_generate_on_pypi_numpy_2(built):
    needs_pypi(built)
    venv_dir = built["work"] / "plain"
    py = venv(venv_dir)
    # README's command, in the unpacked sdist: build isolation (setuptools from PyPI), dependencies from PyPI
    run([py, "-m", "pip", "install", "-q", "--no-cache-dir", "."], cwd=built["source"], timeout=BUILD_TIMEOUT)
    elsewhere = built["work"] / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    out = check_install(py, venv_dir, elsewhere)
    assert int(out["numpy"].split(".")[0]) >= 2, f"expected PyPI's numpy 2.x in a plain venv, got {out['numpy']}"
    cli = venv_dir / "bin" / "habana-assist"
    demo = run([cli, "demo", "--prompts", "1", "--max-new-tokens", "8"], cwd=elsewhere)
    assert "outputs identical: yes" in demo.stdout, f"expected the demo's summary to say identical, got:\n{demo.stdout}"
    gen = run([cli, "generate", "--prompt", "def fibonacci(n):", "--max-new-tokens", "8", "--no-stream"], cwd=elsewhere)
    assert gen.stdout.strip(), f"expected a completion from habana-assist generate, got:\n{gen.stdout}\n{gen.stderr}"


def test_the_wheel_runs_in_another_fresh_venv_on_pypi_numpy_1(built):
    needs_pypi(built)
    venv_dir = built["work"] / "wheel-numpy1"
    py = venv(venv_dir)
    run([py, "-m", "pip", "install", "-q", built["wheel"], "numpy<2"], cwd=built["work"])
    out = check_install(py, venv_dir, built["work"])
    assert out["numpy"].startswith("1."), f"expected numpy 1.x from PyPI, got {out['numpy']}"
    # a build without HA_AVX512_EMULATED=1 has no avx512-emulated variant: asking for it says how to get one
    env = dict(_env(), HA_KERNELS="avx512-emulated")
    r = run([py, "-c", "import habana_assist"], cwd=built["work"], env=env, check=False)
    assert r.returncode != 0 and "not in this build" in r.stderr and "HA_AVX512_EMULATED=1" in r.stderr, (
        f"expected an ImportError saying avx512-emulated is not built and how to build it, got:\n{r.stderr[-1500:]}"
    )


def test_pip_install_into_system_site_packages_venv_imports_from_anywhere(built):
    venv_dir = built["work"] / "debian"
    # README's Debian commands as written: Debian's Python, whose --system-site-packages reaches Debian's numpy,
    # setuptools, wheel and the other dependencies (--no-index: nothing fetched)
    py = venv(venv_dir, system_site=True)
    run(
        [py, "-m", "pip", "install", "-q", "--no-cache-dir", "--no-build-isolation", "--no-index", "."],
        cwd=built["source"],
        timeout=BUILD_TIMEOUT,
    )
    out = check_install(py, venv_dir, built["work"])
    debian_numpy = run([DEBIAN_PYTHON, "-c", "import numpy; print(numpy.__version__)"], cwd=built["work"])
    debian_numpy = debian_numpy.stdout.strip()
    assert out["numpy"] == debian_numpy, f"expected Debian's numpy {debian_numpy} in this venv, got {out['numpy']}"


@pytest.mark.parametrize("missing", ["header", "library"])
def test_a_build_without_openblas_stops_naming_the_package(tmp_path, missing):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, name), src)
    shutil.copytree(os.path.join(REPO, "csrc"), src / "csrc")
    (src / "habana_assist").mkdir()  # pyproject's version is habana_assist.__version__, read from this file
    shutil.copy(os.path.join(REPO, "habana_assist", "__init__.py"), src / "habana_assist")
    shadow = tmp_path / "shadow"  # searched before the system's directories: OpenBLAS as a machine without it has it
    shadow.mkdir()
    compiler = shlex.split(sysconfig.get_config_var("CC") or "gcc")[0]
    if missing == "header":
        (shadow / "cblas.h").write_text("#error cblas.h is not installed here\n")
        cc = f"{compiler} -I{shadow}"
    else:
        (shadow / "libopenblas.so").write_text("not a library\n")
        cc = f"{compiler} -L{shadow}"
    env = dict(_env(), CC=cc)
    r = run(
        [DEBIAN_PYTHON, "setup.py", "build_ext", "--build-lib", tmp_path / "lib", "--build-temp", tmp_path / "tmp"],
        cwd=src,
        env=env,
        check=False,
        timeout=120,
    )
    assert r.returncode != 0 and "libopenblas-dev" in r.stderr, (
        f"expected the build to stop naming libopenblas-dev, got rc={r.returncode}:\n{r.stderr[-2000:]}"
    )
    assert not list((tmp_path / "tmp").rglob("*.o")), "expected the check before any compile"
