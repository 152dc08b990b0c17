"""schemathesis drives every operation of /openapi.json against the app (ASGI, in
process, with the admin token), with valid and with invalid data, a fixed example budget
per operation: no answer is a 5xx, and every answer matches the schema its operation
declares. (schemathesis' pytest plugin does not run under this pytest, so the cases come
from each operation's Hypothesis strategy.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from conftest import admin_headers, make_settings
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import response_schema_conformance
from schemathesis.specs.openapi.schemas import OpenApiSchema
from test_libretranslate import build_store

from server.app import create_app

EXAMPLES = 12  # per operation and mode: well under two minutes on a busy 2-core machine


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenApiSchema]:
    # the server tests' tiny store, its backbone declaring its languages (LibreTranslate)
    root: Path = build_store(tmp_path_factory.mktemp("fuzz") / "store")
    app = create_app(make_settings(root, scheduler={"request_timeout_s": 10.0},
                                   limits={"max_upload_bytes": 1 << 20}))
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    asgi.shutdown_lifespans()  # schemathesis started the app's lifespan: stop it


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_server_error_and_answers_match_the_schema(api_schema: OpenApiSchema,
                                                      mode: GenerationMode) -> None:
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10  # every route is in the schema
    for operation in operations:
        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=admin_headers(),
                                   checks=[not_a_server_error, response_schema_conformance])

        try:
            check()
        except Unsatisfiable:  # nothing to make invalid: an operation without inputs
            assert mode == GenerationMode.NEGATIVE
        except Exception as error:  # collect every operation's failure, then report all
            failures.append(f"{operation.label}: {error}")
    assert not failures, "\n\n".join(failures)
