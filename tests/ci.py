"""The one CI guard: what a test needs from the machine is there, or the test says so.

Outside CI a missing tool (espeak-ng, chromium, Mono, HAProxy) or a missing test database skips the
tests that need it, with the reason and the install command, so that a developer can run the rest.
In CI (the `CI` environment variable set to 1, true or yes, as GitHub Actions and most runners set
it) the same absence fails the test: CI runs everything or says what it could not run. The hook in
tests/conftest.py backs this up: in CI any skip, however it was raised, is reported as a failure.
"""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["in_ci", "need", "need_tools"]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def need(present: bool, missing: str, install: str) -> None:
    """Go on if `present`; else fail in CI and skip elsewhere, naming what is `missing` and how to `install` it."""
    if present:
        return
    if in_ci():
        pytest.fail(f"{missing} in CI, where every test must run: {install}", pytrace=False)
    pytest.skip(f"{missing}: {install}")


def need_tools(*tools: str, install: str) -> None:
    """Each of `tools` on the PATH (or an absolute path that exists)."""
    absent = [tool for tool in tools if shutil.which(tool) is None]
    need(not absent, f"{', '.join(absent)} not found", install)
