"""Fixtures shared by several test files; the helpers and references in tests/fixtures/ importable by name from
every test folder."""

import atexit
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))

# No test reaches a real Hub or the user's Hugging Face cache: a name that is no directory resolves offline,
# in an empty cache of the session's own (subprocesses inherit it). The hub tests (tests/checkpoints/test_hub.py)
# point HF_ENDPOINT at a server of their own on 127.0.0.1 and turn offline mode off for themselves.
for _name in (
    "HF_ENDPOINT",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "TRANSFORMERS_OFFLINE",
    "HA_HUB_CLIENT",
):
    os.environ.pop(_name, None)
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="habana-assist-tests-hf-home-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], True)
os.environ["HF_HUB_OFFLINE"] = "1"

import habana_assist as ha  # noqa: E402 - imported only once the Hub environment above is set

# scripts/test.sh's second step runs the subprocess tests from a copy of tests/ against the package installed into a
# virtual environment, naming the checkout in HA_TEST_INSTALLED: the package imported here must be the venv's.
if os.environ.get("HA_TEST_INSTALLED"):
    _imported = os.path.realpath(ha.__file__)
    if _imported.startswith(os.path.realpath(os.environ["HA_TEST_INSTALLED"]) + os.sep) or not _imported.startswith(
        os.path.realpath(sys.prefix) + os.sep
    ):
        raise RuntimeError(
            f"HA_TEST_INSTALLED: expected habana_assist installed in {sys.prefix}, outside the "
            f"checkout {os.environ['HA_TEST_INSTALLED']}; imported {_imported}"
        )


@pytest.fixture(scope="session")
def hf_reference():
    """Transformers in the reference environment (tests/fixtures/hf_reference.py: HFReference, whose run(jobs)
    runs a batch of jobs in one child process). Where the environment is missing (a clone used offline) the test
    skips and says how to build it; under CI (CI set) that is a failure instead, so CI never skips these tests."""
    import hf_reference as ref

    reason = ref.missing_reason()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the reference tests, but {reason}", pytrace=False)
        pytest.skip(reason)
    return ref.HFReference()


@pytest.fixture(scope="session", autouse=True)
def mask_warning_already_given():
    """generate()'s once-per-process warning that the attention mask cannot be inferred (pad id = eos id, no mask)
    counts as already given for the whole session: which test would give it depends on the order tests run in (a
    module's fixtures included), so none could assert it; tests/generation/test_generate_surface.py asserts it,
    each of its tests starting as a fresh process."""
    from habana_assist.generation import utils as generation_utils

    generation_utils._WARNED_ONCE.add("mask not inferred")


@pytest.fixture
def one_core_thread():
    """The core on one thread for the test, then back to what it was (results never depend on it; tiny models
    run faster without pool hand-offs)."""
    old = ha.get_num_threads()
    ha.set_num_threads(1)
    yield
    ha.set_num_threads(old)
