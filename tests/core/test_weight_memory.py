"""Where a load puts the weights it makes (loading._Arena): on Linux, anonymous private mappings of its own
advised for transparent huge pages (MADV_HUGEPAGE), the arrays laid out together in them; with HA_HUGE_PAGES=0
(or without MADV_HUGEPAGE), plain numpy arrays. Either way the same weights, bitwise, and the same logits.
(Whether the kernel then backs the advised memory with huge pages is its choice, not asserted here; the KV
cache's mappings are tested in tests/c, test_streamed_buffers_hold_their_size_at_huge_page_boundaries.)"""

import mmap
import os

import numpy as np
import pytest
from checkpoints import maps_file, memory_chain, write_random_checkpoint
from family_checkpoints import write_family_checkpoint

import habana_assist as ha

IDS = np.array([[3, 17, 42, 5, 9, 11]])
# every way a load makes its own copy of a matrix: packed (as stored, converted), quantized, row-major converted,
# and GPT-2's Conv1D matrices transposed (with repack=False as stored, the transposed copy is the Weight's own)
CASES = [
    ("llama", {}),
    ("llama", {"dtype": "float32"}),
    ("llama", {"dtype": "int8"}),
    ("llama", {"dtype": "int4"}),
    ("llama", {"dtype": "float32", "repack": False}),
    ("gpt2", {}),
    ("gpt2", {"repack": False}),
]
CASE_IDS = ["packed", "float32", "int8", "int4", "float32-row-major", "gpt2-packed", "gpt2-row-major"]


def _thp():
    """Whether this kernel has transparent huge pages and shows mappings' flags (a kernel built without them
    refuses the advice, which the load ignores; some sandboxes' /proc has no VmFlags)."""
    if not os.path.isdir("/sys/kernel/mm/transparent_hugepage"):
        return False
    with open("/proc/self/smaps") as f:
        return any(line.startswith("VmFlags:") for line in f)


THP = _thp()


def advised_ranges():
    """[(start, end)] of this process's mappings whose VmFlags hold "hg" (advised MADV_HUGEPAGE)."""
    ranges, start = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = head.split("-")
                start = (int(lo, 16), int(hi, 16))
            elif head == "VmFlags:" and "hg" in line.split()[1:]:
                ranges.append(start)
    return ranges


def matrices(model):
    """The model's matrix arrays that the load made (two dimensions, not views of the file)."""
    return {name: w.array for name, w in model._weights.items() if w.array.ndim == 2 and not maps_file(w.array)}


@pytest.mark.parametrize("family, kwargs", CASES, ids=CASE_IDS)
def test_weights_in_huge_page_memory_equal_plain_arrays_bitwise(tmp_path, monkeypatch, family, kwargs):
    if family == "gpt2":
        write_family_checkpoint(tmp_path, "gpt2", dtype="BF16", seed=3)
    else:
        write_random_checkpoint(tmp_path, dtype="BF16", seed=3, hidden_size=64, intermediate_size=160)
    monkeypatch.setenv("HA_HUGE_PAGES", "0")
    plain = ha.AutoModelForCausalLM.from_pretrained(tmp_path, **kwargs)
    monkeypatch.delenv("HA_HUGE_PAGES")
    huge = ha.AutoModelForCausalLM.from_pretrained(tmp_path, **kwargs)
    a, b = matrices(plain), matrices(huge)
    assert sorted(a) == sorted(b) and a, f"expected the same matrices, got {sorted(a)} and {sorted(b)}"
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert np.array_equal(a[name].view(np.uint8), b[name].view(np.uint8)), f"{name}: bytes differ"
        assert b[name].flags.c_contiguous and not b[name].flags.writeable, f"{name}: not C-contiguous and read-only"
        assert b[name].ctypes.data % 64 == 0, f"{name} at {b[name].ctypes.data:#x}, expected a 64-byte boundary"
    assert np.array_equal(plain(IDS).logits, huge(IDS).logits), "logits differ between the two loads"
    for name in a:
        assert not isinstance(memory_chain(a[name])[-1], mmap.mmap), (
            f"{name}: HA_HUGE_PAGES=0 still gave a mapping of its own"
        )
    if hasattr(mmap, "MADV_HUGEPAGE") and THP:
        advised = advised_ranges()
        for name in b:
            at = b[name].ctypes.data
            assert isinstance(memory_chain(b[name])[-1], mmap.mmap), f"{name}: expected in the load's own mapping"
            assert any(lo <= at < hi for lo, hi in advised), f"{name} at {at:#x}: not in memory advised for huge pages"
