"""The LibreTranslate door's own dependency (the native ones are server/api/deps.py's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from server.textproc.languages import LanguageDetectors


async def get_detectors(request: Request) -> LanguageDetectors:
    detectors: LanguageDetectors = request.app.state.language_detectors
    return detectors


DetectorsDep = Annotated[LanguageDetectors, Depends(get_detectors)]
