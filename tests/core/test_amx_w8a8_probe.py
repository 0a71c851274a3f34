"""benchmarks/amx_w8a8_probe.c, the w8a8 class's matmul through AMX tiles beside its definition and a VNNI loop on
HA_Q8P blocks: it builds as C11 under the sanitizers, and on this CPU it says what it can check and finds every bit
equal (VNNI where the CPU has AVX512-VNNI; the tiles too where it has AMX-INT8 and Linux grants the tile state)."""

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(ROOT, "benchmarks", "amx_w8a8_probe.c")


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def test_probe_builds_and_finds_every_bit_equal_on_this_cpu(tmp_path):
    cc = shutil.which("cc")
    if cc is None:
        pytest.fail("no C compiler: scripts/setup.sh installs gcc")
    exe = tmp_path / "probe"
    flags = ["-std=c11", "-O1", "-g", "-fsanitize=address,undefined", "-Wall", "-Wextra", "-Werror", "-Wno-psabi"]
    build = subprocess.run([cc, *flags, "-o", str(exe), PROBE, "-lm"], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"the probe should build as C11 under the sanitizers:\n{build.stderr}"
    run = subprocess.run([str(exe), "64"], capture_output=True, text=True, timeout=300)  # 64 MiB to time
    assert run.returncode == 0, f"exit status {run.returncode}:\n{run.stdout}\n{run.stderr}"
    flags = cpu_flags()
    vnni, amx = "avx512_vnni" in flags, {"amx_tile", "amx_int8"} <= flags
    assert f"amx_tile+amx_int8 {int(amx)}, avx512_vnni {int(vnni)}" in run.stdout, (flags & {"avx512_vnni"}, run.stdout)
    if not vnni:
        assert "needs AVX512-VNNI" in run.stdout, run.stdout
    elif amx and "refused the tile state" not in run.stdout:
        assert "AMX and VNNI both equal the definition bit for bit" in run.stdout, run.stdout
        assert "amx/vnni" in run.stdout, f"with the tiles, the probe should time them:\n{run.stdout}"
    else:
        assert "VNNI equals the definition bit for bit" in run.stdout, run.stdout
