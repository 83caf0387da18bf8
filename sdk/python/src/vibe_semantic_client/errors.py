"""Typed errors: one `VibeError` subclass per stable error code of the API.

The API answers every failure as `{"error": {"code", "message", "details"?}}`;
`error_from_body` turns that into the subclass for its code, so callers can write
`except NotFound:` instead of comparing strings. Codes this version does not know still
raise a `VibeError` (mapped by HTTP status where possible), never a bare `httpx` error.
"""

from __future__ import annotations

from typing import Any


class VibeError(Exception):
    """Any failure of a call. `code` is the API's stable code, `status` the HTTP status
    (None when no answer arrived), `retry_after` the seconds the server asked to wait."""

    default_code = "error"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None,
                 retry_after: float | None = None, details: dict[str, Any] | None = None,
                 request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.status = status
        self.retry_after = retry_after
        self.details = details or {}
        self.request_id = request_id  # the answer's X-Request-Id: what to quote in a bug report

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, message={self.message!r})"

    def __str__(self) -> str:
        return f"{self.code} ({self.status}): {self.message}" if self.status else f"{self.code}: {self.message}"


class InvalidParams(VibeError):
    default_code = "invalid_params"


class Unauthorized(VibeError):
    default_code = "unauthorized"


class Forbidden(VibeError):
    default_code = "forbidden"


class NotFound(VibeError):
    default_code = "not_found"


class MethodNotAllowed(VibeError):
    default_code = "method_not_allowed"


class Conflict(VibeError):
    default_code = "conflict"


class DimensionMismatch(Conflict):
    """A space already holds vectors of another model or dimension."""

    default_code = "dimension_mismatch"


class PayloadTooLarge(VibeError):
    default_code = "payload_too_large"


class RateLimited(VibeError):
    default_code = "rate_limited"


class QuotaExceeded(RateLimited):
    """A tenant's budget (e.g. the daily token cap) is spent."""

    default_code = "quota_exceeded"


class EmbedderUnavailable(VibeError):
    default_code = "embedder_unavailable"


class ServiceUnavailable(VibeError):
    """A 503 without a more specific code (e.g. a proxy in front of the API)."""

    default_code = "service_unavailable"


class InternalError(VibeError):
    default_code = "internal_error"


class TransportError(VibeError):
    """No usable answer arrived: connection refused or reset, DNS, TLS, or a malformed body."""

    default_code = "transport_error"


class Timeout(TransportError):
    default_code = "timeout"


_BY_CODE: dict[str, type[VibeError]] = {cls.default_code: cls for cls in (
    InvalidParams, Unauthorized, Forbidden, NotFound, MethodNotAllowed, Conflict, DimensionMismatch,
    PayloadTooLarge, RateLimited, QuotaExceeded, EmbedderUnavailable, ServiceUnavailable, InternalError,
    TransportError, Timeout)}
_BY_STATUS: dict[int, type[VibeError]] = {400: InvalidParams, 401: Unauthorized, 403: Forbidden, 404: NotFound,
                                          405: MethodNotAllowed, 409: Conflict, 413: PayloadTooLarge,
                                          422: InvalidParams, 429: RateLimited, 503: ServiceUnavailable}


def error_class(code: str | None, status: int | None) -> type[VibeError]:
    if code and code in _BY_CODE:
        return _BY_CODE[code]
    if status is not None and status in _BY_STATUS:
        return _BY_STATUS[status]
    return InternalError if status is not None and status >= 500 else VibeError


def error_from_body(body: Any, status: int | None, retry_after: float | None = None) -> VibeError:
    """The typed error for an `{"error": {...}}` body (or the bare inner object, as an SSE
    `error` event carries it); anything else gets a generic message for its status."""
    err = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        code, message = err["code"], str(err.get("message") or err["code"])
        details = err.get("details") if isinstance(err.get("details"), dict) else None
        request_id = err.get("requestId") if isinstance(err.get("requestId"), str) else None
    else:
        code, message, details = None, f"HTTP {status}" if status else "unexpected answer", None
        request_id = None
    cls = error_class(code, status)
    return cls(message, code=code, status=status, retry_after=retry_after, details=details, request_id=request_id)
