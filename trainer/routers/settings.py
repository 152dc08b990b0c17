"""`NMT_TRAINER__ROUTER__*`: how the fastText router is retrained when a domain is added
(trainer/routers/update.py) or refreshed from corrections
(trainer/corrections/refresh_router.py); nested in the sidecar's settings
(trainer/jobs/settings.py), and the default recipe's router is trained with the same
defaults (trainer/recipes/router_stage.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from trainer.routers.balance import Balance
from trainer.routers.classifier import ClassifierSettings

# The fastText defaults are the default model's recipe's (set in trainer/routers/classifier.py).
_FASTTEXT = ClassifierSettings()


class RouterSettings(BaseModel):
    """How the fastText router is retrained when a domain is added."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("router", description="classifier artifact name (the server's "
                                            "NMT_ROUTING__CLASSIFIER)")
    max_examples_per_domain: int = Field(
        5000, ge=1, description="distinct source sentences of the new domain added to the "
                                "examples")
    balance: Balance = Field(
        "median", description="repeat the new domain's lines until its class is as large as "
                              "the median (or largest) other domain class; none: as many as "
                              "it has (benchmarks/results/router_new_domain.md)")
    claim_overlap: bool = Field(
        True, description="move the stored examples that look like the new domain's text "
                          "(another class learned text of its kind) to the new domain "
                          "(trainer/routers/overlap.py)")
    epoch: int = Field(_FASTTEXT.epoch, ge=1)
    lr: float = Field(_FASTTEXT.lr, gt=0)
    dim: int = Field(_FASTTEXT.dim, ge=2)
    word_ngrams: int = Field(
        _FASTTEXT.word_ngrams, ge=1, description="word n-grams up to, hashed into `bucket` "
                                                 "numbers: for a router retrained from an "
                                                 "older one's text examples (a router that "
                                                 "keeps features keeps its own)")
    bucket: int = Field(_FASTTEXT.bucket, ge=2, description="hashed feature numbers (see "
                                                            "word_ngrams)")
    min_examples: int = Field(
        _FASTTEXT.min_examples, ge=1, description="a feature is learnt and stored only when "
                                                  "at least this many distinct examples "
                                                  "hold it")
    quantize: bool = Field(_FASTTEXT.quantize,
                           description="product quantization (a ~10x smaller file)")
    seed: int = Field(_FASTTEXT.seed, ge=0)

    def classifier_settings(self) -> ClassifierSettings:
        return ClassifierSettings(
            epoch=self.epoch, lr=self.lr, dim=self.dim, word_ngrams=self.word_ngrams,
            bucket=self.bucket, min_examples=self.min_examples, seed=self.seed,
            quantize=self.quantize)
