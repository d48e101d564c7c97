"""Errors the control plane reports to people and to scripts.

Every refusal names the field, the value and the rule, and carries a stable machine code
that ``--json`` output exposes. Exit code 2 is bad input (nothing was written), 1 is a
failure while doing the work.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


class AnycloudError(Exception):
    """A refusal or failure with a stable code."""

    exit_code = EXIT_FAILURE
    default_code = "FAILED"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        value: Any = None,
        rule: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.field = field
        self.value = value
        self.rule = rule

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            out["field"] = self.field
            out["value"] = self.value
        if self.rule is not None:
            out["rule"] = self.rule
        return out


class InvalidInput(AnycloudError):
    """The request breaks a rule; nothing was written."""

    exit_code = EXIT_BAD_INPUT
    default_code = "INVALID_ARGUMENT"

    def __init__(self, field: str, value: Any, rule: str, *, code: str | None = None) -> None:
        shown = "(none)" if value is None else repr(value) if isinstance(value, str) else value
        super().__init__(f"{field} {shown}: {rule}", code=code, field=field, value=value, rule=rule)


class NotFound(AnycloudError):
    exit_code = EXIT_BAD_INPUT
    default_code = "NOT_FOUND"

    def __init__(self, kind: str, ref: str, *, field: str | None = None) -> None:
        super().__init__(
            f"{kind} {ref!r} not found",
            field=field or kind.replace(" ", "_"),
            value=ref,
            rule=f"must name an existing {kind} (id or name)",
        )


class Conflict(AnycloudError):
    """The request is well-formed but the current state refuses it; nothing was written."""

    exit_code = EXIT_BAD_INPUT
    default_code = "FAILED_PRECONDITION"


class Unauthenticated(AnycloudError):
    """No credential, or one that is malformed, unknown, revoked or expired (HTTP 401)."""

    exit_code = EXIT_BAD_INPUT  # refused, nothing written
    default_code = "UNAUTHENTICATED"


class PermissionDenied(AnycloudError):
    """A known caller whose role (or OS user, in embedded mode) may not do this (HTTP 403)."""

    exit_code = EXIT_BAD_INPUT  # refused, nothing written
    default_code = "PERMISSION_DENIED"


def http_status(err: AnycloudError) -> int:
    """The HTTP status an error is answered with, by the API and the agent broker alike: an
    error class may name its own (``http_status``: 410 a retired agent, 412 a stale If-Match);
    otherwise by kind, a refusal the CLI counts as bad input being a 400, never a 500."""
    chosen: int | None = getattr(err, "http_status", None)
    if chosen is not None:
        return chosen
    for cls, status in ((Unauthenticated, 401), (PermissionDenied, 403), (NotFound, 404),
                        (Conflict, 409), (InvalidInput, 400)):
        if isinstance(err, cls):
            return status
    if err.code in ("UNAVAILABLE", "CLUSTER_UNAVAILABLE"):
        return 503
    if err.exit_code == EXIT_BAD_INPUT:
        return 400
    return 500
