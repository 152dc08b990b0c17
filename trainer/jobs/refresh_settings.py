"""`NMT_TRAINER__REFRESH__*`: when and how a domain's module is refreshed from the
corrections translators sent for it (trainer/corrections/refresh_job.py, issue #49)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class RefreshSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    min_new_corrections: int = Field(
        500, ge=0, description="queue a refresh of a domain once it has this many new usable "
                               "corrections (accepted or approved, unused, received since its "
                               "last refresh job); 0: only on an admin request")
    check_every_s: float = Field(60.0, gt=0, description="how often an idle sidecar counts "
                                                         "new corrections")
    data_dir: Path | None = Field(
        None, description="where the data of shipped modules lives (their provenance names "
                          "e.g. 'shared/data en-fr/domains/medical/train'): the original "
                          "data a shipped domain is refreshed with")
    correction_weight: int = Field(
        4, ge=1, le=100, description="each training correction is seen this many times per "
                                     "epoch (the domain's own pairs once)")
    max_original_pairs: int = Field(
        2000, ge=0, description="the domain's own pairs replayed with the corrections (a "
                                "seeded sample; they keep the module from forgetting), and "
                                "at most as many of the corrections earlier refreshes "
                                "trained on")
    held_out_fraction: float = Field(
        0.2, gt=0, lt=1, description="corrections held back as extra dev data; the gate "
                                     "needs the refresh to score better on them")
    max_held_out: int = Field(200, ge=1, description="at most this many held back")
    max_key_share: float = Field(
        0.5, gt=0, le=1, description="one API key's corrections are at most this share of a "
                                     "refresh's (admin-approved anonymous ones are not "
                                     "capped: an admin vetted them)")
    min_held_out_gain_chrf: float = Field(
        0.0, ge=-100, le=100,
        description="the upper end of the 95% paired-bootstrap interval of the refreshed "
                    "module's chrF gain on the held-back corrections must be at least this "
                    "(0: refused when significantly worse; positive: refused unless a gain "
                    "that large is plausible; trainer/corrections/refresh_gate.py)")
