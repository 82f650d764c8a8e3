"""The runtime fixture of tests/runtime, on every backend, for the schedule tests."""

from tests.runtime.conftest import runtime as runtime
