"""Stable error codes: one enum of (code, HTTP status), rendered by one handler."""

from __future__ import annotations

from enum import Enum


class ErrorCode(Enum):
    INVALID_PARAMS = ("invalid_params", 400)
    UNAUTHORIZED = ("unauthorized", 401)
    FORBIDDEN = ("forbidden", 403)
    NOT_FOUND = ("not_found", 404)
    PAYLOAD_TOO_LARGE = ("payload_too_large", 413)
    RATE_LIMITED = ("rate_limited", 429)
    EMBEDDER_UNAVAILABLE = ("embedder_unavailable", 503)
    INDEX_UNAVAILABLE = ("index_unavailable", 503)  # a shared index server (OpenSearch) does not answer
    DIMENSION_MISMATCH = ("dimension_mismatch", 409)
    CONFLICT = ("conflict", 409)  # the request contradicts the current state (e.g. activating an unfinished space)
    INTERNAL_ERROR = ("internal_error", 500)

    @property
    def code(self) -> str:
        return self.value[0]

    @property
    def status(self) -> int:
        return self.value[1]


class VibeError(Exception):
    """An error with a stable code; the message is safe to show a client."""

    def __init__(self, code: ErrorCode, message: str, details: dict[str, object] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}

    def body(self) -> dict[str, object]:
        err: dict[str, object] = {"code": self.code.code, "message": self.message}
        if self.details:
            err["details"] = self.details
        return {"error": err}


class IndexUnavailable(RuntimeError):
    """An index server that does not answer, or answers that it cannot take writes now (busy,
    unavailable): the changes are not refused, so an index follower retries its whole batch at its
    next sync instead of judging (and possibly quarantining) them one by one."""


def invalid(message: str, **details: object) -> VibeError:
    return VibeError(ErrorCode.INVALID_PARAMS, message, dict(details))
