"""`NMT_DIRECTIONS__*`: how many backbones (directions) stay in memory at once."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DirectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resident: int = Field(
        0, ge=0, le=1024,
        description="at most this many backbones loaded at once (0: every served backbone "
                    "stays loaded); the least recently used idle one is unloaded when "
                    "another direction's request needs room, and loaded again from the "
                    "store on its next request (docs/DIRECTIONS.md)")
    wait_s: float = Field(
        30.0, gt=0, le=3600,
        description="how long a request waits for its backbone to be loaded (other "
                    "directions' requests finishing first) before it gets 503")
