"""Fixtures shared by several test files."""
import pytest

import habana_assist as ha


@pytest.fixture
def one_core_thread():
    """The core on one thread for the test, then back to what it was (results never depend on it; tiny models
    run faster without pool hand-offs)."""
    old = ha.get_num_threads()
    ha.set_num_threads(1)
    yield
    ha.set_num_threads(old)
