"""`CorrectionDesk.receive`: check a post-edit and store it in the registry.

Every front door (the native `POST /corrections`, LibreTranslate's `/suggest`) admits the
caller's API key first (`AccessGuard.check`, so corrections count against the key's
rate limits like requests), then hands the correction here. The domain it is for is the
one the corrector names; else the one the original answer was routed to; else the one
the router picks for the source now (a text the router is unsure of gets none, and such a
correction waits, stored, for an admin to see it). A correction sent with a key is
"accepted"; one without (keys off) is "pending" and trains nothing until approved.

An accepted correction, or a pending one once approved, also goes at once into its
domain's translation memory (server/memories: created for the domain if it has none), so
that the next request for the same sentence is answered with it; the module's refresh
from corrections is unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass, replace

from model_store import ConflictError, Registry
from model_store.correction_rows import (
    TRAINABLE,
    CorrectionFilter,
    CorrectionRecord,
    NewCorrection,
)
from server.access import KeyIdentity
from server.core.errors import Forbidden, InvalidInput, NotReady, UnknownDomain
from server.core.settings import CorrectionSettings
from server.core.tenancy import current_scope
from server.corrections.plausibility import implausible, normalised
from server.memories.admin import MemoryAdmin
from server.routing.policy import GENERIC, RoutingPolicy
from server.serving.runtime import Runtime
from server.serving.tenant_view import routable
from server.textproc.languages import LanguageDetectors, LanguagePair, language_pair

MAX_DIRECTION = 16
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Submission:
    source: str
    corrected: str
    machine: str | None = None
    domain: str | None = None  # the corrector's choice
    routed: str | None = None  # the original answer's routing (a domain, "ensemble", ...)
    direction: str | None = None  # "en-fr"; None: the served direction


def fingerprint(direction: str, source: str, corrected: str) -> str:
    joined = "\0".join((direction, normalised(source), normalised(corrected)))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


class CorrectionDesk:
    def __init__(self, registry: Registry, runtime: Runtime, policy: RoutingPolicy,
                 detectors: LanguageDetectors, settings: CorrectionSettings, *,
                 memories: MemoryAdmin | None = None) -> None:
        self.registry = registry
        self.memories = memories  # the served direction's memories (None: off)
        self.runtime = runtime
        self.policy = policy
        self.detectors = detectors
        self.settings = settings

    def check_enabled(self) -> None:
        if not self.settings.enabled:
            raise Forbidden("corrections are disabled on this server "
                            "(NMT_CORRECTIONS__ENABLED=false)")

    async def receive(self, submission: Submission, key: KeyIdentity | None
                      ) -> CorrectionRecord:
        """The stored correction; InvalidInput (422) saying why one is refused."""
        self.check_enabled()
        pair, backbone = self._served()
        direction = f"{pair.source}-{pair.target}" if pair else (submission.direction or "")
        if pair is not None and submission.direction not in (None, direction):
            raise InvalidInput(f"direction {submission.direction[:MAX_DIRECTION]!r} is not "
                               f"served; {pair.describe()} ({direction})", field="direction")
        domain = self._domain(submission)
        reason = await asyncio.to_thread(
            implausible, submission.source, submission.machine, submission.corrected,
            pair=pair, detector=self.detectors.get(pair.codes) if pair else None,
            settings=self.settings)
        if reason is not None:
            raise InvalidInput(f"implausible correction: {reason}", field="corrected")
        new = NewCorrection(
            source=submission.source, machine=submission.machine,
            corrected=submission.corrected, domain=domain, routed=submission.routed,
            direction=direction, backbone=backbone, key_id=key.id if key else None,
            key_name=key.name if key else None,
            fingerprint=fingerprint(direction, submission.source, submission.corrected))
        try:
            return await asyncio.to_thread(self._store, new)
        except ConflictError:
            raise InvalidInput("duplicate correction: the same correction of this source "
                               "was received already", field="corrected") from None

    def _store(self, new: NewCorrection) -> CorrectionRecord:
        if self.registry.has_correction(new.fingerprint):
            raise ConflictError("duplicate")
        record = self.registry.add_correction(new)
        scope = current_scope()
        # a tenant's correction of a shared domain stays out of that domain's memory,
        # which every tenant's requests read
        if scope.tenant is None or new.domain is None or \
                scope.owner("domain", new.domain) == scope.tenant:
            self._remember([record])
        return record

    def review(self, which: CorrectionFilter, *, approve: bool) -> int:
        """Approve or reject the pending corrections among `which` (blocking); approved
        ones go into their domains' memories."""
        pending = self.registry.list_corrections(replace(which, status="pending"))
        changed = self.registry.review_corrections(which, approve=approve)
        if approve and pending:
            ids = [record.id for record in pending]
            self._remember(self.registry.list_corrections(
                CorrectionFilter(ids=ids, status="approved")))
        return changed

    def _remember(self, records: list[CorrectionRecord]) -> None:
        """Trainable corrections of the served backbone into their domain's memory; a
        failure is logged (the correction is stored: the refresh still uses it)."""
        backbone = self.runtime.backbone
        if self.memories is None or backbone is None:
            return
        for record in records:
            if (record.status in TRAINABLE and record.domain is not None
                    and record.backbone == backbone.name):
                try:
                    self.memories.add_correction(record.domain, record.source,
                                                 record.corrected)
                except Exception:
                    log.exception("correction %s did not reach the memory of %s", record.id,
                                  record.domain)

    def _served(self) -> tuple[LanguagePair | None, str]:
        """The served language pair (None: the backbone does not say it, and the target's
        language is not checked) and the backbone's name."""
        backbone = self.runtime.backbone
        if backbone is None:
            raise NotReady("no backbone is loaded; see /health/ready")
        return language_pair(backbone), backbone.name

    def _domain(self, submission: Submission) -> str | None:
        state = self.runtime.state
        visible = routable(state)  # another tenant's domain is one that does not exist
        served = visible.versions
        if submission.domain is not None:
            if submission.domain not in served:
                raise UnknownDomain(f"unknown domain {submission.domain[:64]!r}; corrections "
                                    f"are for a served domain: {', '.join(sorted(served))}",
                                    field="domain")
            return submission.domain
        if submission.routed in served:
            return submission.routed
        decision = self.policy.decide(None, submission.source, domains=served,
                                      classifier=visible.classifier, field="domain")
        if decision.mode == "classifier" and decision.domain not in (None, GENERIC):
            return decision.domain
        return None
