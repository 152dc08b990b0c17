"""The web page: plain HTML, CSS and JavaScript modules shipped in the package (no build
step, no CDN, nothing fetched at run time). `/` is the page, `/ui/...` its files; the page
calls the public HTTP API like any other client and has no routes of its own."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
# Only the page's own files run or load; nothing inline, nothing from another origin.
CONTENT_SECURITY_POLICY = ("default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'; object-src 'none'")

router = APIRouter(include_in_schema=False)


@router.get("/")
async def page() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers={
        "Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff"})


def install_web(app: FastAPI) -> None:
    """Serve the page at `/` and its files under `/ui`."""
    app.include_router(router)
    app.mount("/ui", StaticFiles(directory=STATIC_DIR), name="ui")
