"""Structured (JSON-line) logs. Document text never goes into a log record unless debug is
on: callers pass counts, ids and codes in `extra`, never text.

Every record written while an HTTP request is being served carries that request's id
(`requestId`), so one request's lines can be found among concurrent ones. The id lives in a
context variable: the API's middleware sets it, and tasks and threadpool calls started for the
request inherit it."""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar

_STD = set(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime"}

REQUEST_ID: ContextVar[str | None] = ContextVar("vibe_request_id", default=None)


def current_request_id() -> str | None:
    """The id of the HTTP request this code runs for, or None outside a request."""
    return REQUEST_ID.get()


def _stamp_request_ids() -> None:
    """Records get the request id when they are made, in the request's own context: a handler
    may format them later or elsewhere (pytest's capture, a queue), where the id is not set."""
    make = logging.getLogRecordFactory()
    if getattr(make, "stamps_request_id", False):
        return

    def stamped(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make(*args, **kwargs)
        request_id = REQUEST_ID.get()
        if request_id is not None:
            record.requestId = request_id
        return record

    stamped.stamps_request_id = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(stamped)


_stamp_request_ids()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(time.time(), 3), "level": record.levelname.lower(), "logger": record.name,
               "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(debug: bool) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.INFO)
