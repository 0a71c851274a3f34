"""Every kernel variant this CPU has passes the exactness suites: the default run uses the best variant;
here each variant is forced through HA_KERNELS in a child pytest run of the bitwise and reference tests.
On a CPU without AVX-512, avx512-emulated runs the AVX-512 source through SIMDe (libsimde-dev); on one with AVX-512
VNNI but no AVX-VNNI, avx-vnni-evex runs the AVX-VNNI source with the EVEX form of its instruction. The AVX-VNNI
variants, AVX2's table but for w8a8, run the suites' w8a8 tests only (kernel_variants.W8A8_ONLY)."""

import os
import re
import subprocess

import pytest
from kernel_variants import W8A8_ONLY, available_variants
from package_under_test import PACKAGE_PARENT, PYTHON, child_env

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = [
    "generation/test_cache_exactness.py",
    "models/test_logits_reference.py",
    "generation/test_assisted_exactness.py",
    "models/test_model_families.py",
    "models/test_sliding_ring.py",
]


@pytest.mark.parametrize("variant", available_variants())
def test_exactness_suites_pass_on_every_kernel_variant(variant):
    suites = [os.path.join(TESTS, s) for s in SUITES]
    missing = [s for s in suites if not os.path.exists(s)]
    assert not missing, f"expected the exactness suites at {missing}; update SUITES where a suite moved"
    only = ["-k", "w8a8"] if variant in W8A8_ONLY else []
    r = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", *only, *suites],
        env=child_env(HA_KERNELS=variant),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, f"HA_KERNELS={variant}: expected the exactness suites to pass, got:\n{r.stdout[-4000:]}"
    assert " passed" in r.stdout, f"HA_KERNELS={variant}: expected tests to run, got:\n{r.stdout[-2000:]}"
    passed = re.search(r"(\d+) passed", r.stdout)
    if only:  # the suites' w8a8 tests: the quantized families' logits and exact generations
        assert passed and int(passed.group(1)) >= 40, (
            f"HA_KERNELS={variant}: expected the suites' w8a8 tests (48 when written) to pass, got:\n{r.stdout[-2000:]}"
        )


def import_forcing(variant, code="import habana_assist"):
    """A child Python importing the package with HA_KERNELS=variant and running code."""
    return subprocess.run(
        [PYTHON, "-c", code],
        env=child_env(HA_KERNELS=variant),
        capture_output=True,
        text=True,
        cwd=PACKAGE_PARENT,
        timeout=60,
    )


def test_forcing_an_unknown_variant_fails_the_import_with_a_clear_message():
    r = import_forcing("avx9000")
    assert r.returncode != 0 and "HA_KERNELS=avx9000" in r.stderr and "scalar" in r.stderr, (
        f"expected an ImportError naming HA_KERNELS and the variants, got rc={r.returncode}:\n{r.stderr[-1500:]}"
    )


def test_forcing_avx_vnni_runs_it_or_fails_the_import_naming_the_missing_feature():
    """HA_KERNELS=avx-vnni on a CPU with AVX-VNNI runs it; on one without, the import fails naming AVX-VNNI."""
    r = import_forcing("avx-vnni", "import habana_assist as ha; print(ha.kernels_name())")
    if "avx-vnni" in available_variants():
        assert r.returncode == 0 and r.stdout.split() == ["avx-vnni"], f"rc={r.returncode}:\n{r.stderr[-1500:]}"
    else:
        assert r.returncode != 0 and "HA_KERNELS=avx-vnni" in r.stderr and "needs AVX-VNNI" in r.stderr, (
            f"expected an ImportError naming AVX-VNNI, got rc={r.returncode}:\n{r.stderr[-1500:]}"
        )


def test_the_avx_vnni_variants_run_exactly_where_the_cpu_has_their_instruction():
    """avx-vnni where the CPU has AVX-VNNI, avx-vnni-evex where it has AVX-512 VNNI and VL (the same instruction
    EVEX-encoded), each with AVX2, FMA and F16C (Linux lists a feature only where the OS saves its registers)."""
    with open("/proc/cpuinfo") as f:
        flags = set(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []))
    names, avx2 = available_variants(), {"avx2", "fma", "f16c"} <= flags
    assert ("avx-vnni" in names) == (avx2 and "avx_vnni" in flags), f"cpu flags {sorted(flags)}: got {names}"
    want_evex = avx2 and {"avx512f", "avx512_vnni", "avx512vl"} <= flags
    assert ("avx-vnni-evex" in names) == want_evex, f"cpu flags {sorted(flags)}: got {names}"


def test_the_avx512_source_runs_here_natively_or_emulated():
    names = available_variants()
    if "avx2" not in names:
        pytest.skip("this CPU has no AVX2, which the AVX-512 emulation runs on")
    assert "avx512" in names or "avx512-emulated" in names, (
        f"expected the AVX-512 kernels to run here natively or through SIMDe, got only {names}: the build did not find "
        "<simde/x86/avx512.h>; install Debian's libsimde-dev (scripts/setup.sh does) and rebuild"
    )
