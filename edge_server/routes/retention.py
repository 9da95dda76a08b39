"""Retention and legal holds, for admins (issue 41): the policy and what a pass would remove, a pass
now, and a violation's legal hold. Every hold, release and removal is in the audit trail."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request

from edge_server.retention.purge import Purger
from edge_server.retention.schemas import LegalHoldIn, PolicyOut, PurgeOut, RetentionOut
from edge_server.routes.common import ADMIN, ERRORS, ApiError, actor_of
from edge_server.routes.violations import ViolationId
from edge_server.schemas import API_PREFIX, ErrorOut, ViolationOut

protected = APIRouter(responses=ERRORS)


def _purger(request: Request) -> Purger:
    return request.app.state.retention


@protected.get(
    f"{API_PREFIX}/retention",
    tags=["retention"],
    summary="The retention policy, the legal holds, and what a pass now would remove",
    dependencies=ADMIN,
)
async def get_retention(request: Request) -> RetentionOut:
    purger = _purger(request)
    plan = await asyncio.to_thread(purger.run, actor_of(request), True)
    settings = request.app.state.settings
    policy = PolicyOut(**vars(purger.policy), interval_s=settings.retention_interval_s)
    last = PurgeOut(**purger.last.to_dict()) if purger.last else None
    return RetentionOut(policy=policy, held=plan.held, next=PurgeOut(**plan.to_dict()), last=last)


@protected.post(
    f"{API_PREFIX}/retention/purge",
    tags=["retention"],
    summary="Run a retention pass now (dry_run: only say what it would remove)",
    dependencies=ADMIN,
)
async def purge_now(
    request: Request, dry_run: Annotated[bool, Query(description="remove nothing, only report")] = False
) -> PurgeOut:
    report = await asyncio.to_thread(_purger(request).run, actor_of(request), dry_run)
    return PurgeOut(**report.to_dict())


@protected.put(
    f"{API_PREFIX}/violations/{{violation_id}}/legal-hold",
    response_model=ViolationOut,
    tags=["retention"],
    summary="Place or release a legal hold: a held violation and its media are kept whatever the retention",
    responses={404: {"model": ErrorOut}},
    dependencies=ADMIN,
)
async def set_legal_hold(request: Request, violation_id: ViolationId, body: LegalHoldIn) -> ViolationOut:
    reason = body.reason if body.hold else None
    row = await asyncio.to_thread(_purger(request).set_hold, violation_id, actor_of(request), reason)
    if row is None:
        raise ApiError(404, "not_found", f"no violation {violation_id}")
    return ViolationOut.from_row(row)
