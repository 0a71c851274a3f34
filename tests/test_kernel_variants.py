"""Every kernel variant this CPU has passes the exactness suites: the default run uses the best variant;
here each variant is forced through HA_KERNELS in a child pytest run of the bitwise and reference tests."""
import os
import subprocess
import sys

import pytest

import habana_assist as ha
from habana_assist import _core

TESTS = os.path.dirname(os.path.abspath(__file__))
SUITES = ["test_cache_exactness.py", "test_logits_reference.py", "test_assisted_exactness.py"]


def available_variants():
    names = []
    current = ha.kernels_name()
    for name in ("scalar", "avx2"):
        try:
            _core.select_kernels(name)
            names.append(name)
        except ha.UnsupportedModelError:
            pass
    _core.select_kernels(current)
    return names


@pytest.mark.parametrize("variant", available_variants())
def test_exactness_suites_pass_on_every_kernel_variant(variant):
    suites = [os.path.join(TESTS, s) for s in SUITES if os.path.exists(os.path.join(TESTS, s))]
    env = dict(os.environ, HA_KERNELS=variant)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suites], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"HA_KERNELS={variant}: expected the exactness suites to pass, got:\n{r.stdout[-4000:]}"
    assert " passed" in r.stdout, f"HA_KERNELS={variant}: expected tests to run, got:\n{r.stdout[-2000:]}"


def test_forcing_an_unknown_variant_fails_the_import_with_a_clear_message():
    r = subprocess.run([sys.executable, "-c", "import habana_assist"], env=dict(os.environ, HA_KERNELS="avx9000"),
                       capture_output=True, text=True, cwd=os.path.dirname(TESTS), timeout=60)
    assert r.returncode != 0 and "HA_KERNELS=avx9000" in r.stderr and "scalar" in r.stderr, \
        f"expected an ImportError naming HA_KERNELS and the variants, got rc={r.returncode}:\n{r.stderr[-1500:]}"
