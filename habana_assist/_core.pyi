# The extension module habana_assist._core (csrc/bindings/), as the type checker sees it: each function and type
# with the arguments its binding parses (module.c's table, functions.c, generate.c, external.c, and one file per
# type). Arrays cross through the buffer protocol: a numpy array (C-contiguous, of the element type named) or any
# object exporting such a buffer. Options cross as dicts by name (generate.c's GENERATE_KEYS, ASSIST_KEYS,
# SAMPLER_KEYS). Errors: habana_assist.errors' InvalidInputError, CacheCapacityError, UnsupportedModelError,
# OutOfMemoryError and CoreError (module.c raise_status), KeyboardInterrupt for Ctrl-C.
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, Optional, Protocol, Union, final

import numpy as np
from _typeshed import ReadableBuffer, WriteableBuffer, structseq

# numpy 1.24's stubs give ndarray no __buffer__, so arrays are named beside the buffer protocol.
_In = Union[ReadableBuffer, np.ndarray]
_Out = Union[WriteableBuffer, np.ndarray]

# The weight formats by name (args.c parse_dtype).
_DType = str  # "float32" | "bfloat16" | "float16" | "int8" | "int4" | "w8a8" | "bfloat16-pairs" | "*-panels"

COST_STATE: int  # floats of the cost schedule's learned state per (target, drafter) pair (ha.h HA_COST_STATE)
# The core's names of its num_assistant_tokens schedules, acceptance modes and token tree shapes, in its enums' order
# (generate.c).
SCHEDULES: tuple[str, ...]
ACCEPTANCES: tuple[str, ...]
TREE_SHAPES: tuple[str, ...]
# The columns of generate_assisted's tree_rounds record, by name in order ("start", "catch_up", "nodes", "path"; ha.h
# ha_tree_record's HA_TREE_* fields).
TREE_FIELDS: tuple[str, ...]

@final
class AssistedStats(structseq[int], tuple[int, int, int, int, int, int, int, int, int, int, int]):
    """generate_assisted()'s result: the steps taken and the call's statistics (ha.h ha_assist_stats), by name."""

    if sys.version_info >= (3, 10):
        __match_args__: Final = (
            "steps",
            "num_draft_tokens",
            "num_accepted_tokens",
            "num_target_passes",
            "num_draft_passes",
            "num_assistant_tokens",
            "num_rounds",
            "num_ahead_passes",
            "num_ahead_used",
            "num_sibling_tokens",
            "num_sibling_accepted",
        )

    @property
    def steps(self) -> int: ...
    @property
    def num_draft_tokens(self) -> int: ...
    @property
    def num_accepted_tokens(self) -> int: ...
    @property
    def num_target_passes(self) -> int: ...
    @property
    def num_draft_passes(self) -> int: ...
    @property
    def num_assistant_tokens(self) -> int: ...
    @property
    def num_rounds(self) -> int: ...
    @property
    def num_ahead_passes(self) -> int: ...
    @property
    def num_ahead_used(self) -> int: ...
    @property
    def num_sibling_tokens(self) -> int: ...
    @property
    def num_sibling_accepted(self) -> int: ...

class _Adapter(Protocol):
    """What external_context calls (habana_assist/integrations/external.py): append(seq, tokens, want) with int32
    rows and tokens and uint8 flags as bytes (want None: every row) returns the wanted rows' logits; crop(seq,
    length) takes a sequence back."""

    def append(self, seq: bytes, tokens: bytes, want: Optional[bytes]) -> Any: ...
    def crop(self, seq: int, length: int) -> Any: ...

@final
class Model:
    """Model(config, weights, layers): a decoder's weights viewed, not copied (csrc/ha.h ha_llama_config;
    habana_assist/modeling_utils.py fills them). Matrices are (array, dtype, cols[, rows]), vectors float32 1-D
    arrays, absent ones None or left out."""

    def __init__(
        self, config: Mapping[str, Any], weights: Mapping[str, Any], layers: Sequence[Mapping[str, Any]], /
    ) -> None: ...
    @property
    def weight_bytes(self) -> int: ...  # bytes of weights one decode step reads

@final
class Context:
    """Context(model, n_seq, capacity, blas_prefill=False): n_seq sequences' key-value cache of capacity positions
    over a Model; external_context() makes one over a Python model."""

    def __init__(self, model: Model, n_seq: int, capacity: int, blas_prefill: bool = ..., /) -> None: ...
    def append(self, seq: _In, tokens: _In, want: Optional[_In], logits: Optional[_Out], /) -> None: ...
    def crop(self, seq: int, n: int, /) -> None: ...
    def copy_from(self, src: Context, /) -> None: ...
    def kv_first(self, layer: int, seq: int, /) -> int: ...
    def read_kv(self, layer: int, seq: int, first: int, n: int, k: _Out, v: _Out, /) -> None: ...
    def write_kv(self, layer: int, seq: int, first: int, n: int, k: _In, v: _In, /) -> None: ...
    def set_length(self, seq: int, n: int, /) -> None: ...
    def record_hidden(self, out: _Out, n: int, /) -> None: ...
    def length(self, seq: int, /) -> int: ...
    def can_crop(self, seq: int, n: int, /) -> bool: ...
    @property
    def n_seq(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def max_rollback(self) -> int: ...
    @property
    def rope_switch(self) -> int: ...
    @property
    def max_tree(self) -> int: ...  # nodes per sequence one token-tree verification takes (0: none)

@final
class BPE:
    """BPE(merges, chars, ids, bytes, unk_id, fuse_unk, vocab_size): tokenizer.json's byte-pair merges in C
    (csrc/tokenizer/bpe.c); habana_assist/tokenization/tokenizer_json.py builds the tables."""

    def __init__(
        self, merges: _In, chars: _In, ids: _In, bytes: _In, unk_id: int, fuse_unk: bool, vocab_size: int, /
    ) -> None: ...
    def encode(self, word: str, /) -> tuple[int, ...]: ...

@final
class Sampler:
    """Sampler(vocab_size, options): generate()'s logits processors and sampling over one row's scores at a time
    (csrc/generation/sampling.c), its options a dict by name (SAMPLER_KEYS)."""

    def __init__(self, vocab_size: int, options: Mapping[str, Any], /) -> None: ...
    def process(self, scores: _Out, row: int, history: _In, step: int, /) -> None: ...
    def choose(self, scores: _In, row: int, position: int, /) -> int: ...

def generate(ctx: Context, options: Mapping[str, Any], /) -> int: ...  # the steps taken
def generate_assisted(
    target_ctx: Context, draft_ctx: Optional[Context], options: Mapping[str, Any], /
) -> AssistedStats: ...
def external_context(
    adapter: _Adapter, vocab_size: int, capacity: int, n_seq: int = ..., rope_switch: int = ..., /
) -> Context: ...
def quantize(src: _In, dtype: _DType, dst: _Out, to: _DType, /) -> None: ...
def pack(src: _In, dtype: _DType, dst: _Out, /) -> None: ...
def row_bytes(dtype: _DType, cols: int, /) -> int: ...
def set_num_threads(n: int, /) -> None: ...
def get_num_threads() -> int: ...
def kernels_name() -> str: ...
def pool_stats() -> dict[str, int]: ...
def select_kernels(name: str, /) -> None: ...
def blas_core() -> str: ...
def available_memory() -> float: ...  # bytes; -1 if unknown
def measure_read_bandwidth(nbytes: int, repeats: int, /) -> float: ...  # bytes/s
def measure_mac_rate(repeats: int, int8: bool = ..., w8a8: bool = ...) -> float: ...  # multiply-adds/s
def rng_uniform(seed: int, row: int, position: int, purpose: int, index: int, /) -> float: ...  # in (0, 1)
