"""Fixtures for the emulator tests; the helpers live in emu_support.py."""

import numpy as np
import pytest

from emu_support import Harness


@pytest.fixture
def hw():
    return Harness()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
