"""The core's thread pool on shared cores: its default honours the CPUs a cgroup quota allows, its results never
depend on the thread count while another process keeps a core busy, a pool whose workers went to sleep wakes
for the next call (and pool_stats() counts that wake), and a forked child gets a pool of its own. No test here
depends on speed (the benchmark, benchmarks/bench_decode.py --busy, measures that); a hang is a failure, bounded by
a subprocess timeout."""

import os
import subprocess
import textwrap

import numpy as np
import pytest
from checkpoints import write_random_checkpoint
from package_under_test import PACKAGE_PARENT, PYTHON, child_env

import habana_assist as ha

TIMEOUT = 120  # seconds for a child: a hang is a failure, not a stuck test run
# Large enough that a decode step's feed-forward and output layer go to the pool (forward.c's SMALL_JOB).
MODEL = dict(
    vocab_size=1024,
    hidden_size=256,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    intermediate_size=1024,
    max_position_embeddings=512,
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("pool_model")
    write_random_checkpoint(str(path), seed=41, **MODEL)
    return str(path)


@pytest.fixture
def restore_threads():
    old = ha.get_num_threads()
    yield
    ha.set_num_threads(old)


@pytest.fixture
def busy_process():
    """One process spinning on no core in particular, for the duration of a test."""
    hog = subprocess.Popen([PYTHON, "-c", "while True: pass"])
    yield hog
    hog.kill()
    hog.wait()


def run_child(code, timeout=TIMEOUT, **env):
    """Runs code in a fresh interpreter (HA_NUM_THREADS unset unless env sets it); -> its stdout, stripped."""
    base = {k: v for k, v in os.environ.items() if k not in ("HA_NUM_THREADS", "HA_CGROUP_ROOT")}
    try:
        r = subprocess.run(
            [PYTHON, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=PACKAGE_PARENT,
            env=child_env(base, **env),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung: no exit within {timeout} s", pytrace=False)
    assert r.returncode == 0, f"the child expected to exit 0, got {r.returncode}; stderr:\n{r.stderr[-3000:]}"
    return r.stdout.strip()


# ---- the default thread count ---------------------------------------------------------------------------

AFFINITY = len(os.sched_getaffinity(0))
DEFAULT_THREADS = "import habana_assist as ha; print(ha.get_num_threads())"


@pytest.mark.parametrize(
    "cpu_max, quota",
    [("max 100000", None), ("100000 100000", 1), ("50000 100000", 1), ("150000 100000", 2), ("800000 100000", 8)],
)
def test_default_threads_honour_a_cgroup_v2_cpu_quota(tmp_path, cpu_max, quota):
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    want = AFFINITY if quota is None else min(quota, AFFINITY)
    got = int(run_child(DEFAULT_THREADS, HA_CGROUP_ROOT=str(tmp_path)))
    assert got == want, (
        f"cpu.max {cpu_max!r} with {AFFINITY} CPUs in the affinity mask: expected {want} default threads, got {got}"
    )


def test_num_threads_variable_wins_over_a_cgroup_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    got = int(run_child(DEFAULT_THREADS, HA_CGROUP_ROOT=str(tmp_path), HA_NUM_THREADS="3"))
    assert got == 3, f"HA_NUM_THREADS=3 under a 1-CPU quota: expected 3 threads, got {got}"


def test_default_threads_without_cgroup_files_are_the_affinity_mask(tmp_path):
    got = int(run_child(DEFAULT_THREADS, HA_CGROUP_ROOT=str(tmp_path)))
    assert got == AFFINITY, f"no cgroup files: expected the affinity mask's {AFFINITY} CPUs, got {got}"


# ---- results on a busy machine --------------------------------------------------------------------------


def test_generate_is_bitwise_identical_with_1_and_n_threads_beside_a_busy_process(
    model_dir, busy_process, restore_threads
):
    m = ha.AutoModelForCausalLM.from_pretrained(model_dir)
    prompt = np.random.default_rng(5).integers(3, MODEL["vocab_size"], size=(1, 40))

    def outputs():
        return {
            "greedy tokens": m.generate(prompt, max_new_tokens=48, eos_token_id=None),
            "prompt logits": m(prompt).logits,
            "sampled tokens": m.generate(
                prompt, max_new_tokens=24, do_sample=True, temperature=0.8, seed=3, eos_token_id=None
            ),
        }

    ha.set_num_threads(1)
    want = outputs()
    for n in (2, 3, 2):
        ha.set_num_threads(n)
        for name, got in outputs().items():
            assert got.tobytes() == want[name].tobytes(), (
                f"{name} with {n} threads beside a busy process differ from 1 thread's"
            )


# ---- sleeping workers and fork --------------------------------------------------------------------------


def test_a_pool_whose_workers_slept_wakes_for_the_next_call(model_dir):
    code = f"""
        import time
        import numpy as np
        import habana_assist as ha
        ha.set_num_threads(2)
        m = ha.AutoModelForCausalLM.from_pretrained({model_dir!r})
        prompt = np.arange(3, 35)[None]
        first = m.generate(prompt, max_new_tokens=16, eos_token_id=None)
        for pause in (0.001, 0.05, 0.3):  # past the workers' spin: they sleep, and must wake
            time.sleep(pause)
            again = m.generate(prompt, max_new_tokens=16, eos_token_id=None)
            assert again.tobytes() == first.tobytes(), f"after a {{pause}} s pause the output changed"
        print("ok")
    """
    assert run_child(code) == "ok"


def test_a_child_forked_while_the_pools_workers_sleep_runs_the_core(model_dir):
    code = f"""
        import os, time
        import numpy as np
        import habana_assist as ha
        ha.set_num_threads(2)
        m = ha.AutoModelForCausalLM.from_pretrained({model_dir!r})
        prompt = np.arange(3, 35)[None]
        want = m.generate(prompt, max_new_tokens=12, eos_token_id=None)
        time.sleep(0.2)  # the parent's workers asleep on their futex
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            got = m.generate(prompt, max_new_tokens=12, eos_token_id=None)
            os.write(w, b"same" if got.tobytes() == want.tobytes() else b"differs")
            os._exit(0)
        os.close(w)
        answer = os.read(r, 16).decode()
        _, status = os.waitpid(pid, 0)
        again = m.generate(prompt, max_new_tokens=12, eos_token_id=None)
        print(answer, os.waitstatus_to_exitcode(status), again.tobytes() == want.tobytes())
    """
    got = run_child(code)
    assert got == "same 0 True", (
        f"expected the forked child to generate the parent's tokens and exit 0, and the "
        f"parent to keep working ('same 0 True'), got {got!r}"
    )


def test_pool_stats_count_the_jobs_and_the_wakes_of_sleeping_workers(model_dir):
    code = f"""
        import time
        import numpy as np
        import habana_assist as ha
        from habana_assist import _core
        ha.set_num_threads(2)
        m = ha.AutoModelForCausalLM.from_pretrained({model_dir!r})
        prompt = np.arange(3, 35)[None]
        m.generate(prompt, max_new_tokens=16, eos_token_id=None)
        before = _core.pool_stats()
        for _ in range(10):  # (a call inside a backoff of the pool, up to 0.5 s, runs alone: then again)
            time.sleep(0.3)  # past the workers' spin: they sleep
            m.generate(prompt, max_new_tokens=16, eos_token_id=None)
            after = _core.pool_stats()
            if after["jobs_waking"] > before["jobs_waking"]:
                break
        print(sorted(after) == sorted(before), after["jobs_pooled"] + after["jobs_alone"] > 0,
              after["jobs_waking"] > before["jobs_waking"], after["jobs_pooled"] >= after["jobs_waking"])
    """
    got = run_child(code)
    assert got == "True True True True", (
        "expected pool_stats() to count the jobs of two threads' generate calls, and a call after the workers "
        f"slept to count a job that woke them ('True True True True'), got {got!r}"
    )
