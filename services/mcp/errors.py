"""Typed tool errors. A failed tool call answers `is_error` with the contract's error body
`{"error": {"code", "message"}}` as its JSON text and structured content.

Codes are those of shared/errors.py plus `feature_disabled` and `db_error`
(the codes inner_voice clients handle), and
`quota_exceeded` (a key's daily extract_key_info material budget is spent; details say which
quota, its limit, what is used and `retry_after_seconds`), which only agent tools use.
"""

from __future__ import annotations

from shared.errors import ErrorCode, VibeError

FEATURE_DISABLED = "feature_disabled"
DB_ERROR = "db_error"
QUOTA_EXCEEDED = "quota_exceeded"


class ToolFailure(Exception):
    """An anticipated failure with a stable code; the message is safe to show the caller."""

    def __init__(self, code: str, message: str, details: dict[str, object] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}

    @classmethod
    def of(cls, e: VibeError) -> ToolFailure:
        return cls(e.code.code, e.message, dict(e.details))

    def body(self) -> dict[str, object]:
        err: dict[str, object] = {"code": self.code, "message": self.message}
        if self.details:
            err["details"] = self.details
        return {"error": err}


def invalid(message: str) -> ToolFailure:
    return ToolFailure(ErrorCode.INVALID_PARAMS.code, message)


def forbidden(message: str) -> ToolFailure:
    return ToolFailure(ErrorCode.FORBIDDEN.code, message)
