#!/usr/bin/env bash
# benchmarks/bench_external.py on a CUDA machine that is not Debian (the accelerator run): the torch target
# on the GPU, the native draft on the host's cores, and Transformers' own generate() where it is installed.
#
# Such a machine's python3 (a venv with torch) has no Debian OpenBLAS; its numpy wheel bundles one whose symbols
# carry a prefix and suffix (scipy_openblas64_: 64-bit integers). So _core is built here for that python3 with a
# three-function shim mapping the calls csrc/model/blas.c makes (cblas_sgemm, openblas_{get,set}_num_threads) onto
# them, and a minimal cblas.h; everything else is the same sources and flags as setup.py.
#
#     bash benchmarks/cuda_external.sh [bench_external.py's arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
work="$(mktemp -d)"
"$PY" - "$work" <<'EOF'
import ctypes, ctypes.util, glob, os, sys, sysconfig
import numpy
work = sys.argv[1]
include = sysconfig.get_paths()["include"]
if not os.path.exists(os.path.join(include, "Python.h")):
    sys.exit(f"cuda_external.sh: no Python.h under {include}: this python3 has no development headers")
libs = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs", "*openblas*.so*")))
libs += [lib for lib in [ctypes.util.find_library("openblas")] if lib]  # else the system's (Debian's: plain names)
found = None
for lib in libs:
    dll = ctypes.CDLL(lib)
    for prefix in ("scipy_", ""):
        for suffix in ("64_", ""):
            if all(hasattr(dll, f"{prefix}{name}{suffix}") for name in
                   ("cblas_sgemm", "openblas_get_num_threads", "openblas_set_num_threads")):
                found = found or (lib, prefix, suffix)
if not found:
    sys.exit(f"cuda_external.sh: no OpenBLAS with cblas_sgemm in numpy's wheel ({libs})")
lib, prefix, suffix = found
int_t = "long long" if suffix == "64_" else "int"
os.makedirs(os.path.join(work, "include"))
with open(os.path.join(work, "include", "cblas.h"), "w") as f:
    f.write("enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };\n"
            "enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };\n"
            "void cblas_sgemm(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, int, int, int, float,\n"
            "                 const float *, int, const float *, int, float, float *, int);\n")
sgemm, get, put = (f"{prefix}{n}{suffix}" for n in ("cblas_sgemm", "openblas_get_num_threads", "openblas_set_num_threads"))
shim = f"""#include <cblas.h>
void {sgemm}(int, int, int, {int_t}, {int_t}, {int_t}, float, const float *, {int_t}, const float *, {int_t}, float,
             float *, {int_t});
int {get}(void);
void {put}(int);
void cblas_sgemm(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {{
    {sgemm}(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}}
int openblas_get_num_threads(void) {{ return {get}(); }}
void openblas_set_num_threads(int n) {{ {put}(n); }}
"""
with open(os.path.join(work, "shim.c"), "w") as f:
    f.write(shim if (prefix, suffix) != ("", "") else "typedef int no_shim; /* the library's own names */\n")
with open(os.path.join(work, "vars"), "w") as f:
    f.write(f"INCLUDE='{include}'\nEXT='{sysconfig.get_config_var('EXT_SUFFIX')}'\nLIBDIR='{os.path.realpath(os.path.dirname(lib))}'\n"
            f"LIB='{os.path.basename(lib)}'\n")  # find_library gives a bare name: -l: finds it on the default path
print(f"cuda_external.sh: python {sys.version.split()[0]}, numpy {numpy.__version__}, OpenBLAS {os.path.basename(lib)} "
      f"as {sgemm}")
EOF
. "$work/vars"
FLAGS=(-std=c11 -O2 -fPIC -fvisibility=hidden -ffp-contract=off -Wall -Wextra -Wno-missing-field-initializers -Wno-psabi
       -pthread -Icsrc -I"$work/include" -I"$INCLUDE")
mkdir -p "$work/obj"
{ find csrc -name '*.c' | sort; echo "$work/shim.c"; } |  # the core's folders and csrc/bindings, as setup.py
    xargs -P "$(nproc)" -I{} sh -c 'gcc "$@" -c {} -o "'"$work"'/obj/$(echo {} | tr / _).o"' _ "${FLAGS[@]}"
gcc -shared -pthread "$work"/obj/*.o -o "habana_assist/_core$EXT" -L"$LIBDIR" -l:"$LIB" -Wl,-rpath,"$LIBDIR" -lm
"$PY" -c "import habana_assist as ha; print('cuda_external.sh: habana_assist', ha.__version__, 'kernels', ha.kernels_name(), 'threads', ha.get_num_threads())"
"$PY" -c "import torch; print('cuda_external.sh: torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
PYTHONUNBUFFERED=1 "$PY" benchmarks/bench_external.py --device cuda "$@"
