from __future__ import annotations

import gc
import shutil
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

# Imported here, at the top of the stack: Hypothesis imports its optimiser lazily, and when that
# happens deep inside an async test's event loop, pytest's assertion rewriting of it trips CPython
# 3.11's "AST constructor recursion depth mismatch" (seen with tests/test_spoken.py).
import hypothesis.internal.conjecture.optimiser  # noqa: F401
import pytest

from tests.ci import in_ci, need_tools
from tests.openai_server import FakeOpenAI


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def _openai_fake_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="session")
def scene_recogniser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One offline scene recogniser (voice/scene_stt.py) for the run: its models are built once."""
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    from voice.scene_stt import SceneStt

    stt = SceneStt(shutil.which("espeak-ng"), str(tmp_path_factory.mktemp("stt")))
    yield stt
    stt.close()


@pytest.fixture
def openai_fake(_openai_fake_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The fake OpenAI server (tests/openai_server.py), with an empty script and no records."""
    _openai_fake_server.reset()
    yield _openai_fake_server
    _openai_fake_server.reset()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test of a module that sets COLLECT_GARBAGE_AFTER, collect its garbage quietly."""
    try:
        return (yield)
    finally:
        module = getattr(item, "module", None)
        if getattr(module, "COLLECT_GARBAGE_AFTER", False):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                gc.collect()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """In CI a skip is a failure (tests/ci.py): CI runs every test or says which one it could not run."""
    report: pytest.TestReport = yield
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.longrepr = f"skipped in CI, where every test must run: {reason}"
    return report


# A marker names what a test needs from the machine, so `-m "not neo4j"` leaves out exactly the tests
# that use the database: each marker goes with the fixture that provides the thing, and only with it.
MARKED_FIXTURES = {"neo4j": "neo4j_uri", "browser": "browser"}


def pytest_runtest_setup(item: pytest.Item) -> None:
    fixtures = getattr(item, "fixturenames", ())
    for marker, fixture in MARKED_FIXTURES.items():
        marked, uses = item.get_closest_marker(marker) is not None, fixture in fixtures
        if marked and not uses:
            pytest.fail(f"marked {marker} but uses no {fixture} fixture: drop the marker or move the test",
                        pytrace=False)
        if uses and not marked:
            pytest.fail(f"uses the {fixture} fixture without the {marker} marker", pytrace=False)


@pytest.fixture(scope="session")
def neo4j_uri() -> str:
    """The test Neo4j's Bolt URI (SAMVAD_TEST_NEO4J_URI); skips without it, fails without it in CI."""
    from tests.neo4j_support import neo4j_uri as uri

    return uri()


@pytest.fixture
def collect_servers() -> Iterator[None]:
    """After the test, garbage-collect what its stopped servers left (tests/live_server.py)."""
    from tests.live_server import collect_stopped_servers

    yield
    collect_stopped_servers()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """Debian's headless Chromium through Playwright; skips without it, fails without it in CI."""
    from tests.browser_support import CHROMIUM, CHROMIUM_ARGS, need_chromium

    need_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                            headless=True)
        try:
            yield launched
        finally:
            await launched.close()
