"""schemathesis' own command line (`schemathesis run`) against the app served by uvicorn on
127.0.0.1, with the admin token: every phase (the schema's examples, its coverage of each
constraint's edges, fuzzing with valid and invalid data, stateful sequences through the
links it infers), a fixed example budget per operation and a fixed seed. No answer is a
5xx, every answer matches the schema its operation declares, and every request that
violates the published schema is refused (`negative_data_rejection`): the schema says what
the API accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TOKEN, make_settings
from test_libretranslate import build_store
from uvicorn_live import serving

from server.app import create_app

CHECKS = ("not_a_server_error", "response_schema_conformance", "negative_data_rejection")
# Test cases per operation and phase: about a minute on an idle 2-core machine, so that
# `make test` stays within its quarter of an hour.
EXAMPLES = 25
SEED = 1
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # the server tests' tiny store, its backbone declaring its languages (LibreTranslate)
    root = build_store(tmp_path_factory.mktemp("fuzz") / "store")
    app = create_app(make_settings(root, scheduler={"request_timeout_s": 10.0},
                                   limits={"max_upload_bytes": 1 << 20}))
    with serving(app) as url:
        yield url


def run_schemathesis(base_url: str, workdir: Path) -> dict[str, Any]:
    """One `schemathesis run`; its JSON report."""
    report = workdir / "report.json"
    # schemathesis' default rejections plus 413: a body larger than
    # NMT_LIMITS__MAX_BODY_BYTES (e.g. a `text` far past its maxLength) is refused while it
    # streams, before it is parsed, which is the right answer to invalid data too
    (workdir / "schemathesis.toml").write_text(
        "[checks.negative_data_rejection]\nexpected-statuses = [400, 401, 403, 404, 405, "
        "406, 409, 413, 415, 422, 428, 429, \"5xx\"]\n")
    result = subprocess.run(
        [str(SCHEMATHESIS), "run", f"{base_url}/openapi.json",
         "--header", f"Authorization: Bearer {TOKEN}", "--checks", ",".join(CHECKS),
         "--max-examples", str(EXAMPLES), "--seed", str(SEED), "--request-timeout", "30",
         "--generation-database", "none", "--no-color", "--output-truncate", "false",
         "--report", "json", "--report-json-path", str(report)],
        cwd=workdir, capture_output=True, text=True, timeout=900, check=False)
    assert report.is_file(), result.stdout[-4000:] + result.stderr[-4000:]
    found: dict[str, Any] = json.loads(report.read_text())
    found["output"] = result.stdout
    return found


def test_no_server_error_answers_match_the_schema_and_invalid_data_is_refused(
        base_url: str, tmp_path: Path) -> None:
    report = run_schemathesis(base_url, tmp_path)
    failures = report["output"][report["output"].find("FAILURES"):]
    assert report["failures"] == [] and report["errors"] == [], failures
    assert report["exit_code"] == 0 and report["complete"], failures
    operations = report["operations"]
    assert operations["tested"] == operations["total"] >= 20  # every route is in the schema
    assert operations["errored"] == 0
    assert {name: phase["status"] for name, phase in report["phases"].items()} == {
        "examples": "success", "coverage": "success", "fuzzing": "success",
        "stateful": "success"}
    assert report["test_cases"]["generated"] >= EXAMPLES * operations["total"]
