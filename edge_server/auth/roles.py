"""Roles and the access each route needs (issue 41).

People are admins, officers or viewers; a machine token (a publishing phone or encoder, a metrics
scraper, a dispatch system) has one of those roles or ``publisher``. A route needs one kind of
:class:`Access`; :data:`ROLES_FOR` says which roles have it:

======== ============================================================= ===========================
access   what                                                          roles
======== ============================================================= ===========================
read     sessions, violations, their snapshots and clips, live video    viewer, officer, admin
         and events, metrics, a violation's history
publish  start and stop streams, a stream's operator telemetry, the     publisher, officer, admin
         DJI Pilot 2 set-up
operate  review and dismiss, export (CSV, evidence packs), make a       officer, admin
         pack, a stream's rules and height reference
admin    users, tokens, RTMP keys, the audit trail                      admin
======== ============================================================= ===========================
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    OFFICER = "officer"
    VIEWER = "viewer"
    PUBLISHER = "publisher"


PERSON_ROLES = (Role.ADMIN, Role.OFFICER, Role.VIEWER)
MACHINE_ROLES = (Role.ADMIN, Role.OFFICER, Role.VIEWER, Role.PUBLISHER)


class Access(StrEnum):
    READ = "read"
    PUBLISH = "publish"
    OPERATE = "operate"
    ADMIN = "admin"


ROLES_FOR: dict[Access, frozenset[Role]] = {
    Access.READ: frozenset({Role.VIEWER, Role.OFFICER, Role.ADMIN}),
    Access.PUBLISH: frozenset({Role.PUBLISHER, Role.OFFICER, Role.ADMIN}),
    Access.OPERATE: frozenset({Role.OFFICER, Role.ADMIN}),
    Access.ADMIN: frozenset({Role.ADMIN}),
}


def allowed(role: Role | str, access: Access) -> bool:
    return role in ROLES_FOR[access]


def who_may(access: Access) -> str:
    """The roles with ``access``, for an error message ("officer or admin")."""
    names = [r.value for r in MACHINE_ROLES if r in ROLES_FOR[access]]
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


__all__ = ["MACHINE_ROLES", "PERSON_ROLES", "ROLES_FOR", "Access", "Role", "allowed", "who_may"]
