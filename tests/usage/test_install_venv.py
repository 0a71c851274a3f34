"""README's virtual-environment install works: pip builds and installs the package without PyPI, and
`import habana_assist` then works from any directory."""
import os
import shutil
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_pip_install_into_system_site_packages_venv_imports_from_anywhere(tmp_path):
    venv = tmp_path / "venv"
    # README's command as written: Debian's Python, not sys.executable (another interpreter, or a venv's), since
    # --system-site-packages must reach Debian's numpy, setuptools and wheel (pip can fetch nothing here). REPO is
    # the checkout on purpose: its sources are what this test installs.
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], cwd=tmp_path)
    py = str(venv / "bin" / "python")
    # pip builds a local directory in place (build/ and *.egg-info beside setup.py), where scripts/setup.sh also
    # builds: a copy of the sources keeps this build apart from another test run's or a rebuild going on at once.
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", ".venv*", "__pycache__",
                                                             "*.so", ".pytest_cache", "tests"))
    run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", str(src)], cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = run([py, "-c", "import habana_assist as ha, numpy; print(ha.__file__); "
               "print(ha.kernels_name()); print(ha.AutoModelForCausalLM.__name__); "
               "print(ha.AutoModelForCausalLM.from_pretrained('habana-assist/pycode-draft').name_or_path)"],
              cwd=elsewhere)
    path, kernels, name, draft = out.split()
    assert path.startswith(str(venv)), f"expected habana_assist imported from the venv {venv}, got {path}"
    assert kernels in ("scalar", "avx2", "avx512") and name == "AutoModelForCausalLM", f"unexpected import result: {out!r}"
    # the shipped pair is package data (habana_assist/pretrained/): installed with the package, not read from here
    assert draft.startswith(str(venv)), f"expected the shipped draft loaded from the venv {venv}, got {draft}"
