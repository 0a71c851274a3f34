"""Builds habana_assist and its C extension habana_assist._core (a plain C11 core in csrc/, its folders by layer,
and the binding in csrc/bindings/).

`pip install .` (build isolation: setuptools from PyPI) or, against Debian's setuptools, `pip install
--no-build-isolation .`; in place, `/usr/bin/python3 setup.py build_ext --inplace` (scripts/setup.sh builds so).
The extension reads numpy arrays through the buffer protocol only, so the build needs no numpy. It needs a C
compiler, Python's headers and OpenBLAS (on Debian: gcc, python3-dev, libopenblas-dev); a missing one stops the
build with a message naming the package.

The sources compile in parallel (HA_BUILD_JOBS, default every core this process may run on), and an object whose
source and headers (as the compiler listed them, -MMD) are older than it is reused, so a change recompiles only
what it touches. Environment:
  HA_WERROR=1            warnings are errors (scripts/setup.sh and CI)
  HA_AVX512_EMULATED=1   also build the kernel variant "avx512-emulated" (the AVX-512 source on SIMDe, run by
                         the tests on CPUs without AVX-512; needs libsimde-dev, and a minute of one core); 0 leaves
                         it out; unset, it is kept where this tree's build/ holds its object up to date, else left
                         out. Without it, HA_KERNELS=avx512-emulated is refused at import, saying how to build it.
  HA_BUILD_JOBS=N        compile N sources at a time
"""

import glob
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import PlatformError

EMULATED = "csrc/kernels/kernels_avx512_emulated.c"
# Compiled first so that the longest compiles do not start last (CPU seconds measured: docs/contributing.md).
SLOWEST_FIRST = [EMULATED, "csrc/kernels/kernels_avx512.c", "csrc/kernels/kernels_avx2.c"]

# -Wno-psabi: GCC notes an ABI change for 64-byte vectors passed by value, which only SIMDe's inlined AVX-512
# emulation (csrc/kernels/kernels_avx512_emulated.c) does; nothing crosses a library boundary. -g0: Python's
# CFLAGS ask for debug information, which costs compile time and makes the extension several times larger; the
# symbol table stays.
flags = [
    "-std=c11",
    "-O2",
    "-g0",
    "-fvisibility=hidden",
    "-ffp-contract=off",
    "-Wall",
    "-Wextra",
    "-Wno-missing-field-initializers",
    "-Wno-psabi",
]
if os.environ.get("HA_WERROR") == "1":
    flags.append("-Werror")
# After the flags above, for one file each. The AVX-512 emulation at -O1: -O2's optimisation of SIMDe's inlined
# intrinsics is most of the whole build's compile time, for a variant only the tests run, whose results no -O level
# changes (IEEE arithmetic without -ffast-math or contraction).
FILE_FLAGS = {EMULATED: ["-O1"]}


class BuildError(PlatformError):
    """A build that cannot succeed here, with the fix (setuptools prints `error: ` and the message, no traceback)."""


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _make_deps(text):
    """The prerequisites of the make rule gcc's -MMD writes (`obj: src hdr ...`, lines continued by a backslash,
    spaces and # escaped by a backslash, $ doubled)."""
    rest = text.replace("\\\n", " ").split(": ", 1)[-1]
    words = re.split(r"(?<!\\)\s+", rest.strip())
    return [re.sub(r"\\([ #])", r"\1", w).replace("$$", "$") for w in words if w]


def _up_to_date(obj):
    """Whether obj is newer than its source and every header the compiler listed for it (obj.d)."""
    made = _mtime(obj)
    try:
        with open(obj + ".d") as f:
            deps = _make_deps(f.read())
    except OSError:
        return False
    if made is None or not deps:
        return False
    times = [_mtime(d) for d in deps]
    return all(t is not None and t <= made for t in times)


def _jobs(requested):
    env = os.environ.get("HA_BUILD_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise BuildError(
                f"HA_BUILD_JOBS={env!r} must be a positive number of parallel compiles; unset it for one per core"
            )
        return int(env)
    if requested:
        return max(1, int(requested))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class BuildCore(build_ext):
    """build_ext that compiles in parallel, reuses up-to-date objects, checks the system packages first, and
    decides whether the avx512-emulated variant is built (module docstring)."""

    def build_extension(self, ext):
        # The stamp: what build_temp's objects were compiled with (compiler, flags, macros) and what the extension was
        # linked from. Other flags recompile every object; other sources only link anew.
        stamp = os.path.join(self.build_temp, "habana_core.json")
        try:
            with open(stamp) as f:
                built = json.load(f)
        except (OSError, ValueError):
            built = None  # a fresh build_temp beside a built extension (scripts/test.sh's install): its dates decide
        compiled_with = {
            "compiler": list(self.compiler.compiler_so),
            "flags": list(ext.extra_compile_args),
            "file_flags": FILE_FLAGS,
            "macros": [list(m) for m in ext.define_macros],
        }
        same_flags = built is not None and built.get("compiled_with") == compiled_with
        ext.sources = self._sources(ext, keep_emulated=same_flags)
        config = {"compiled_with": compiled_with, "sources": ext.sources}
        self._recompile = self.force or (built is not None and not same_flags)
        objects = [self._object(s) for s in ext.sources]
        ext_path = self.get_ext_fullpath(ext.name)
        if self._recompile or any(not _up_to_date(o) for o in objects) or not os.path.exists(ext_path):
            self._check_system(ext)
        self.compiler.compile = self._parallel_compile
        force = self.force
        # link anew, whatever the dates: build_ext's check (self.force) and the compiler's own (compiler.force)
        self.force = self.compiler.force = self._recompile or (built is not None and built != config)
        try:
            super().build_extension(ext)
        finally:
            self.force = self.compiler.force = force
        os.makedirs(self.build_temp, exist_ok=True)
        with open(stamp, "w") as f:
            json.dump(config, f)

    def _object(self, source):
        return self.compiler.object_filenames([source], output_dir=self.build_temp)[0]

    def _sources(self, ext, keep_emulated):
        want = os.environ.get("HA_AVX512_EMULATED", "").strip()
        if want not in ("", "0", "1"):
            raise BuildError(
                f"HA_AVX512_EMULATED={want!r} must be 1 (build the avx512-emulated kernel variant), 0 "
                "(leave it out) or unset (keep it where this build/ holds it up to date)"
            )
        sources = [s for s in ext.sources if s != EMULATED]
        if want == "1" or (want == "" and keep_emulated and _up_to_date(self._object(EMULATED))):
            sources.append(EMULATED)
        return sorted(sources)

    def _probe(self, code, link_args=None):
        """Compiles (and with link_args, links) a probe program with the build's compiler; None, or its errors."""
        with tempfile.TemporaryDirectory(prefix="habana-assist-probe-") as tmp:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write(code)
            cc = list(self.compiler.compiler_so)
            cmd = cc + ["-c", src, "-o", os.path.join(tmp, "probe.o")]
            if link_args is not None:
                cmd = cc + [src, "-o", os.path.join(tmp, "probe"), *link_args]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True)
            except OSError as e:
                return str(e)
            return None if r.returncode == 0 else (r.stdout + r.stderr).strip()

    def _check_system(self, ext):
        """What the build needs from the system, each missing one named with its package."""
        if self.compiler.compiler_type != "unix":
            raise BuildError(
                f"habana_assist builds with gcc on Linux (x86-64); this build's compiler is "
                f"{self.compiler.compiler_type!r}"
            )
        cc = self.compiler.compiler_so[0]
        err = self._probe("int main(void) { return 0; }\n")
        if err is not None:
            raise BuildError(
                f"the C compiler {cc!r} does not work here ({err.splitlines()[-1] if err else ''}): "
                "install gcc (Debian/Ubuntu: apt-get install gcc libc6-dev), or name another in CC"
            )
        include = sysconfig.get_paths()["include"]
        if not os.path.exists(os.path.join(include, "Python.h")):
            raise BuildError(
                f"Python's C headers are missing ({include}/Python.h): install them for "
                f"{sys.executable} (Debian/Ubuntu: apt-get install python3-dev)"
            )
        if self._probe("#include <cblas.h>\nint main(void) { return 0; }\n") is not None:
            raise BuildError(
                "OpenBLAS's header cblas.h is missing: the C core's prompt prefill calls OpenBLAS. "
                "Install it (Debian/Ubuntu: apt-get install libopenblas-dev)"
            )
        libs = ["-l" + lib for lib in ext.libraries]
        err = self._probe(
            "char *openblas_get_corename(void);\nint main(void) { return openblas_get_corename() == 0; }\n",
            libs + ext.extra_link_args,
        )
        if err is not None:
            raise BuildError(
                "the OpenBLAS library does not link (-lopenblas): the C core's prompt prefill calls "
                "OpenBLAS. Install it (Debian/Ubuntu: apt-get install libopenblas-dev)\n" + err
            )
        if EMULATED in ext.sources and not _up_to_date(self._object(EMULATED)):
            if self._probe("#if !__has_include(<simde/x86/avx512.h>)\n#error no SIMDe\n#endif\n") is not None:
                raise BuildError(
                    "HA_AVX512_EMULATED=1 builds the avx512-emulated kernel variant on SIMDe's headers, "
                    "which are missing: install them (Debian/Ubuntu: apt-get install libsimde-dev), or "
                    "unset HA_AVX512_EMULATED to build without that variant"
                )

    def _parallel_compile(
        self,
        sources,
        output_dir=None,
        macros=None,
        include_dirs=None,
        debug=0,
        extra_preargs=None,
        extra_postargs=None,
        depends=None,
    ):
        """CCompiler.compile, with the sources compiled HA_BUILD_JOBS at a time, the slowest first, and objects that
        are up to date (-MMD's list of what each read) left as they are."""
        cc = self.compiler
        macros, objects, extra, pp_opts, build = cc._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = cc._get_cc_args(pp_opts, debug, extra_preargs)
        rank = {s: i for i, s in enumerate(SLOWEST_FIRST)}
        todo = [o for o in objects if self._recompile or not _up_to_date(o)]
        todo.sort(key=lambda o: (rank.get(build[o][0], len(rank)), -(os.path.getsize(build[o][0]))))

        def one(obj):
            src, ext = build[obj]
            for stale in (obj, obj + ".d"):  # a failed compile must not leave an older object that looks current
                if os.path.exists(stale):
                    os.remove(stale)
            cc._compile(
                obj, src, ext, cc_args, list(extra) + FILE_FLAGS.get(src, []) + ["-MMD", "-MF", obj + ".d"], pp_opts
            )

        with ThreadPoolExecutor(_jobs(self.parallel)) as pool:
            futures = [pool.submit(one, o) for o in todo]
            errors = []
            for f in futures:
                try:
                    f.result()
                except Exception as e:  # every compile's errors are printed; the build then fails on the first
                    errors.append(e)
        if errors:
            raise errors[0]
        return objects


core = Extension(
    "habana_assist._core",
    sources=sorted(glob.glob("csrc/**/*.c", recursive=True)),  # the core's folders and csrc/bindings
    depends=sorted(glob.glob("csrc/**/*.h", recursive=True)),
    extra_compile_args=flags,
    libraries=["openblas"],  # Debian's libopenblas-dev: prompt prefill (csrc/model/blas.c)
    extra_link_args=["-pthread", "-lm"],
)

setup(ext_modules=[core], cmdclass={"build_ext": BuildCore})
