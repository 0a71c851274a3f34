"""Every parser of outside bytes gives a valid result or a HabanaAssistError on mutated inputs.

A short deterministic run of tests/fuzz/fuzz_parsers.py (fixed seed, fixed counts: the same inputs every
time), the replay of every input kept in tests/fuzz/crashers/ (each once broke a parser; FOUND.txt says how),
and a check that the harness itself sees a failure, a crash, a hang and an over-allocation. Crashes, hangs
and memory are caught by the harness's worker process (see the module docstring): a hang shows up as the
watchdog's report, never as a timing assertion here. The long run: scripts/fuzz.sh (the same module with
--seconds).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # fuzz_parsers.py beside this file
import fuzz_parsers as fp

SEED = 0
# Inputs per target: about 10 s for all on a 2-core machine shared with other work (none of it is asserted).
ITERATIONS = 300


@pytest.fixture(scope="module")
def short_run():
    return fp.run_fuzz(list(fp.TARGETS), SEED, iterations=ITERATIONS)


def test_every_seed_of_the_corpus_gives_a_valid_result(short_run):
    assert short_run.bad_seeds == [], "expected every corpus seed to parse and load; came:\n" + "\n".join(
        short_run.bad_seeds
    )


@pytest.mark.parametrize("target", fp.TARGETS)
def test_mutated_inputs_give_a_valid_result_or_a_clear_error(short_run, target):
    failures = short_run.failures[target]
    assert not failures, (
        f"expected only valid results and HabanaAssistErrors from {target}; came "
        f"{len(failures)} distinct failure(s):\n{short_run.summary()}\n{short_run.details()}"
    )
    assert short_run.execs[target] == ITERATIONS, f"expected {ITERATIONS} inputs run, came {short_run.execs[target]}"
    outcomes = short_run.outcomes[target]
    assert outcomes["ok"] > 0 and outcomes["error"] > 0, (
        f"expected the mutations to reach both the valid path and the error path of {target}, came {outcomes}"
    )


def test_the_tokenizer_json_seeds_on_disk_are_what_their_generator_writes():
    seeds = dict(fp.corpus_seeds("tokenizer_json"))
    made = fp.tokenizer_json_seeds()
    assert sorted(seeds) == sorted(made) and all(seeds[n] == made[n] for n in made), (
        "expected tests/fuzz/corpus/tokenizer_json/ to hold exactly what tokenizer_json_seeds() writes; rewrite "
        "it with: /usr/bin/python3 tests/fuzz/fuzz_parsers.py --make-corpus --targets tokenizer_json"
    )
    assert all(len(data) < 16384 for files in made.values() for data in files.values()), (
        "expected tiny seeds (a few KB a file): the worker's memory cap grows with the largest seed"
    )


def test_tokenizer_json_mutations_reach_the_components_and_the_chat_template():
    seeds = fp.corpus_seeds("tokenizer_json")
    kinds = {
        step.split(":")[0] for i in range(ITERATIONS) for step in fp.make_input("tokenizer_json", SEED, i, seeds)[2]
    }
    assert {"component", "template", "json", "bytes", "removed"} <= kinds, (
        f"expected every kind of tokenizer_json mutation among the first {ITERATIONS} inputs, came {sorted(kinds)}"
    )


def test_every_kept_crasher_now_gives_a_valid_result_or_a_clear_error():
    kept = fp.crasher_dirs()
    on_disk = sorted(d for d in os.listdir(fp.CRASHERS_DIR) if os.path.isdir(os.path.join(fp.CRASHERS_DIR, d)))
    assert sum(map(len, kept.values())) == len(on_disk) >= 20, (
        f"expected every directory of {fp.CRASHERS_DIR} to name its target in a TARGET file; came {kept} for {on_disk}"
    )
    report = fp.run_fuzz(sorted(kept), SEED, replay=kept)
    assert report.total_failures() == 0, (
        f"expected no failure from the kept crashers, came:\n{report.summary()}\n{report.details()}"
    )
    assert sum(report.execs.values()) == len(on_disk)


def test_the_harness_reports_an_exception_a_crash_a_hang_and_an_over_allocation(tmp_path):
    actions = ("valid", "clear-error", "type-error", "abort", "hang", "allocate-1-TiB", "valid")
    dirs = []
    for i, action in enumerate(actions):
        d = tmp_path / f"{i}-{action}"
        fp.write_input_dir(str(d), {"ACTION": action.encode()}, "selftest")
        dirs.append(str(d))
    report = fp.run_fuzz(["selftest"], SEED, replay={"selftest": dirs}, timeout=5)
    sigs = sorted(report.failures["selftest"])
    assert report.outcomes["selftest"] == {"ok": 2, "error": 1, "FAIL": 4}, (
        f"expected 2 valid, 1 clear error and 4 failures; came {report.outcomes['selftest']}: {sigs}"
    )
    assert [s.split(" ")[0] for s in sigs] == ["MemoryError", "TypeError", "crash", "hang"], (
        f"expected MemoryError (the address-space cap), TypeError, crash (abort) and hang (the watchdog), came {sigs}"
    )
    assert report.execs["selftest"] == len(actions), "expected the inputs after a crash and a hang to run too"
