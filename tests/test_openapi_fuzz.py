"""The OpenAPI document made from the route table (server/routes_table.py), and schemathesis fuzzing
the running server against it in development and in production (with no credential, and with the
admin key): no 500, and no status, media type or body outside the document."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from server.routes_table import OPERATIONS
from tests.servers import server_process

ADMIN = "fuzz-admin-key-" + "z" * 24
CONFIG = Path(__file__).with_name("schemathesis.toml")
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
FUZZ_SECONDS = os.environ.get("SAMVAD_FUZZ_SECONDS", "15")


def test_the_document_lists_every_http_route_of_the_table() -> None:
    with server_process() as served:
        document = httpx.get(f"{served.base_url}/openapi.json", timeout=5).json()
    assert document["openapi"].startswith("3.1")
    listed = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    expected = {(op.method, op.path.replace(":path}", "}")) for op in OPERATIONS if not op.websocket}
    assert listed == expected
    for ops in document["paths"].values():
        for op in ops.values():
            assert "Who:" in op["description"] and {"400"} <= set(op["responses"])


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "env", "header"), [
    ("development", {"DEV_ENDPOINTS": "true"}, None),
    ("production", {"SAMVAD_ENV": "production", "ADMIN_KEY": ADMIN}, None),
    ("production-admin", {"SAMVAD_ENV": "production", "ADMIN_KEY": ADMIN}, f"Authorization: Bearer {ADMIN}"),
])
def test_schemathesis_finds_no_500_and_nothing_outside_the_document(
        mode: str, env: dict[str, str], header: str | None, tmp_path: Path) -> None:
    cli = Path(sys.executable).with_name("schemathesis")
    if not cli.exists():
        pytest.fail("schemathesis is missing: bash scripts/setup.sh test installs the test extra")
    with server_process(env) as served:
        args = [str(cli), "--config-file", str(CONFIG), "run", f"{served.base_url}/openapi.json",
                "--checks", CHECKS, "--max-time", FUZZ_SECONDS, "--workers", "1", "--request-timeout", "20",
                "--continue-on-failure", "--report", "junit", "--report-dir", str(tmp_path)]
        if header:
            args += ["--header", header]
        done = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, timeout=600,
                              env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, f"{mode}:\n{done.stdout[-8000:]}\n{done.stderr[-2000:]}"
    assert " passed" in done.stdout
