"""Builds habana_assist and its C extension habana_assist._core (a plain C11 core in csrc/, its folders by layer,
and the binding in csrc/bindings/).

Debian's setuptools, no build isolation: `pip install --no-build-isolation .` or, in place,
`/usr/bin/python3 setup.py build_ext --inplace`. HA_WERROR=1 turns warnings into errors (CI does).
"""
import glob
import os

from setuptools import Extension, setup

# -Wno-psabi: GCC notes an ABI change for 64-byte vectors passed by value, which only SIMDe's inlined AVX-512
# emulation (csrc/kernels/kernels_avx512_emulated.c) does; nothing crosses a library boundary.
flags = ["-std=c11", "-O2", "-fvisibility=hidden", "-ffp-contract=off", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
         "-Wno-psabi"]
if os.environ.get("HA_WERROR") == "1":
    flags.append("-Werror")

core = Extension(
    "habana_assist._core",
    sources=sorted(glob.glob("csrc/**/*.c", recursive=True)),  # the core's folders and csrc/bindings
    depends=sorted(glob.glob("csrc/**/*.h", recursive=True)),
    extra_compile_args=flags,
    libraries=["openblas"],  # Debian's libopenblas-dev: prompt prefill (csrc/model/blas.c)
    extra_link_args=["-pthread", "-lm"],
)

setup(ext_modules=[core])
