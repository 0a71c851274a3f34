"""Fixtures shared by several test files; the helpers and references in tests/fixtures/ importable by name from
every test folder."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))

import habana_assist as ha


@pytest.fixture
def one_core_thread():
    """The core on one thread for the test, then back to what it was (results never depend on it; tiny models
    run faster without pool hand-offs)."""
    old = ha.get_num_threads()
    ha.set_num_threads(1)
    yield
    ha.set_num_threads(old)
