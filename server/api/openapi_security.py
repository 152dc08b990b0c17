"""The OpenAPI document says whether the public endpoints need an API key.

FastAPI lists a security scheme as required wherever a route depends on it, even with
`auto_error=False`. The X-API-Key header is required only when the server checks keys
(NMT_ACCESS__API_KEYS); otherwise the operations list the empty requirement `{}` too,
which OpenAPI reads as "no credentials needed" (OpenAPI 3.1, Security Requirement Object).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from server.api.deps import api_key_header

API_KEY_SCHEME = api_key_header.scheme_name
NO_CREDENTIALS: dict[str, list[str]] = {}


def document_api_keys(app: FastAPI, *, required: bool) -> None:
    """Make `app.openapi()` state whether the X-API-Key header is required."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            if not required:
                for requirements in _api_key_requirements(schema):
                    requirements.append(NO_CREDENTIALS)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _api_key_requirements(schema: dict[str, Any]) -> list[list[dict[str, list[str]]]]:
    """The security lists of the operations that accept an API key."""
    found = []
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            requirements = operation.get("security") if isinstance(operation, dict) else None
            if requirements and any(API_KEY_SCHEME in entry for entry in requirements):
                found.append(requirements)
    return found
