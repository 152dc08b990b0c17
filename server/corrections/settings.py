"""`NMT_CORRECTIONS__*`: whether post-edits are accepted and how plausible they must be."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CorrectionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="accept corrections (POST /corrections and "
                                            "LibreTranslate's /suggest; off: 403)")
    min_length_ratio: float = Field(
        0.4, gt=0, description="a correction shorter than this times its source (in "
                               "characters) is refused")
    max_length_ratio: float = Field(
        2.5, gt=0, description="... and one longer than this times its source")
    ratio_min_chars: int = Field(
        12, ge=0, description="the length ratio is checked only when the longer of the two "
                              "texts has at least this many characters (short strings vary "
                              "more: \"OK\" -> \"D'accord\")")
    language_min_chars: int = Field(
        20, ge=0, description="the corrected target's language is identified only from this "
                              "many characters on (shorter texts are identified unreliably)")

    @model_validator(mode="after")
    def _ratios(self) -> CorrectionSettings:
        if self.min_length_ratio >= self.max_length_ratio:
            raise ValueError(f"min_length_ratio {self.min_length_ratio} must be below "
                             f"max_length_ratio {self.max_length_ratio}")
        return self
