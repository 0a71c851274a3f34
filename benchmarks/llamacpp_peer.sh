#!/bin/bash
# llama.cpp as a peer for benchmarks/bench_prefill.py and benchmarks/bench_peers.py: builds llama-bench, llama-cli,
# llama-speculative-simple and llama-quantize (CPU backend, native ISA) from a source snapshot and converts the shipped
# pair to GGUF (target: f32, bf16, q8_0; draft: f32, q8_0) with the snapshot's convert_hf_to_gguf.py. llama.cpp is not
# packaged by Debian: the snapshot comes from the workplace's mirror (e.g. the `fetch` tool's
# /work/.mirror/ggerganov+llama.cpp/repo, a git directory) or any checkout. The conversion runs in the reference
# environment (.venv-reference: scripts/reference_env.sh; PyPI's torch and safetensors) where it exists; otherwise
# with Debian's packages (cmake, g++, python3-numpy, python3-sentencepiece, python3-torch) from a patched copy (Debian's
# torch 1.13 lacks the float8 dtypes and torch.load's mmap argument; tqdm and safetensors are not packaged: a no-op
# tqdm, and the checkpoint's tensors rewritten as pytorch_model.bin) to f32, which llama-quantize rounds to the other
# types.
# Usage: bash benchmarks/llamacpp_peer.sh SNAPSHOT (a git directory or a source tree)
# Writes /tmp/habana_assist_bench/llama.cpp-build/bin/{llama-bench,llama-cli,llama-speculative-simple,
# llama-quantize} and /tmp/habana_assist_bench/{pycode-f32,pycode-bf16,pycode-q8_0,pycode-draft-f32,
# pycode-draft-q8_0}.gguf.
set -euo pipefail
SNAP=${1:?usage: bash benchmarks/llamacpp_peer.sh SNAPSHOT_DIR}
HERE=$(cd "$(dirname "$0")/.." && pwd)
OUT=/tmp/habana_assist_bench
SRC=$OUT/llama.cpp-src
mkdir -p "$OUT"
rm -rf "$SRC" && mkdir -p "$SRC/models"
if git --git-dir="$SNAP" rev-parse HEAD >/dev/null 2>&1; then
    # every top-level entry but models/ (large vocab files the snapshot may not hold; git names a missing one
    # on stderr even so)
    git --git-dir="$SNAP" archive HEAD $(git --git-dir="$SNAP" ls-tree --name-only HEAD | grep -v '^models$') 2>/dev/null |
        tar -x -C "$SRC"
else
    (cd "$SNAP" && tar -c --exclude=./models --exclude=./build .) | tar -x -C "$SRC"
fi
LOG=$OUT/llama.cpp-build.log
if ! { cmake -S "$SRC" -B "$OUT/llama.cpp-build" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DCMAKE_BUILD_TYPE=Release && cmake --build "$OUT/llama.cpp-build" -j"$(nproc)" --target llama-bench llama-cli llama-speculative-simple llama-quantize; } >"$LOG" 2>&1; then
    tail -20 "$LOG"
    echo "llamacpp_peer: the build failed; its log is $LOG" >&2
    exit 1
fi

VENV=$HERE/.venv-reference
if [ -x "$VENV/bin/python" ]; then
    for m in pycode pycode-draft; do
        types="f32 q8_0"; [ $m = pycode ] && types="f32 bf16 q8_0"
        for t in $types; do
            PYTHONPATH="$SRC/gguf-py" "$VENV/bin/python" "$SRC/convert_hf_to_gguf.py" "$HERE/habana_assist/pretrained/$m" \
                --outtype $t --outfile "$OUT/$m-$t.gguf" >>"$LOG" 2>&1 || { tail -20 "$LOG"; exit 1; }
        done
    done
    echo "llamacpp_peer: $OUT/llama.cpp-build/bin/ and $OUT/pycode*.gguf"
    exit 0
fi

# each checkpoint as pytorch_model.bin (float32), beside its config and tokenizer, converted to f32; llama-quantize
# rounds that to the other types (the f32 file holds the stored bfloat16 weights exactly)
STUBS=$OUT/pycode-bin-stubs
mkdir -p "$STUBS/tqdm"
cat > "$STUBS/tqdm/__init__.py" <<'EOF'
class tqdm:  # progress bars off
    def __init__(self, iterable=None, *a, **k): self.iterable = iterable
    def __iter__(self): return iter(self.iterable)
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def update(self, *a, **k): pass
    def close(self): pass
    def set_description(self, *a, **k): pass
    @staticmethod
    def write(*a, **k): pass
EOF
sed -e 's/torch\.float8_e4m3fn/getattr(torch, "float8_e4m3fn", torch.uint8)/g' \
    -e 's/torch\.float8_e5m2/getattr(torch, "float8_e5m2", torch.uint8)/g' \
    -e 's/, mmap=True, weights_only=True//' "$SRC/convert_hf_to_gguf.py" > "$SRC/convert_hf_to_gguf_debian.py"
for m in pycode pycode-draft; do
    BIN=$OUT/$m-bin
    mkdir -p "$BIN"
    cp "$HERE"/habana_assist/pretrained/$m/{config.json,generation_config.json,special_tokens_map.json,tokenizer.model,tokenizer_config.json} "$BIN/"
    /usr/bin/python3 - "$HERE/habana_assist/pretrained/$m/model.safetensors" "$BIN/pytorch_model.bin" <<'EOF'
import json, struct, sys
import numpy as np
import torch
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, base, out = json.loads(raw[8:8 + n]), 8 + n, {}
for name, v in header.items():
    if name == "__metadata__":
        continue
    s, e = v["data_offsets"]
    buf = raw[base + s:base + e]
    a = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32) if v["dtype"] == "BF16" \
        else np.frombuffer(buf, np.float32)
    out[name] = torch.from_numpy(a.reshape(v["shape"]).copy())
torch.save(out, sys.argv[2])
EOF
    PYTHONPATH="$SRC/gguf-py:$STUBS" /usr/bin/python3 "$SRC/convert_hf_to_gguf_debian.py" "$BIN" --outtype f32 \
        --outfile "$OUT/$m-f32.gguf" >>"$LOG" 2>&1 || { tail -20 "$LOG"; exit 1; }
    types="q8_0"; [ $m = pycode ] && types="bf16 q8_0"
    for t in $types; do
        "$OUT/llama.cpp-build/bin/llama-quantize" "$OUT/$m-f32.gguf" "$OUT/$m-$t.gguf" "${t^^}" >>"$LOG" 2>&1 ||
            { tail -20 "$LOG"; exit 1; }
    done
done
echo "llamacpp_peer: $OUT/llama.cpp-build/bin/ and $OUT/pycode*.gguf"
