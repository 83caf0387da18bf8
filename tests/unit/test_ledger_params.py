"""GET /semantic/ledger's `since` and `cursor` as parsed (services/api/ledger.py): every value the
declared pattern allows is answered, and means the instant it names."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from services.api.ledger import CURSOR_PATTERN, SINCE_PATTERN, parse_cursor, parse_since
from shared.errors import ErrorCode, VibeError


def _utc(y: int, m: int, d: int, hh: int = 0, mm: int = 0, ss: int = 0) -> float:
    return datetime(y, m, d, hh, mm, ss, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("raw", "want"), [
    ("1790000000", 1_790_000_000.0), ("1790000000.25", 1_790_000_000.25), ("0", 0.0),
    ("2026-11-28", _utc(2026, 11, 28)), ("2026-11-28T10:15:30Z", _utc(2026, 11, 28, 10, 15, 30)),
    ("2026-11-28T10:15", _utc(2026, 11, 28, 10, 15)), ("2026-11-28 10:15:30.5", _utc(2026, 11, 28, 10, 15, 30) + 0.5),
    ("2026-11-28T12:15:30+02:00", _utc(2026, 11, 28, 10, 15, 30)), ("2026-02-30", _utc(2026, 3, 2)),
    ("1970-01-01T00:30+01:00", 0.0), ("9999-12-31T23:59:59Z", _utc(9999, 12, 31, 23, 59, 59)),
])
def test_since_means_the_instant_it_names(raw: str, want: float) -> None:
    assert re.match(SINCE_PATTERN, raw)
    assert parse_since(raw) == pytest.approx(want)


@pytest.mark.parametrize("raw", ["yesterday", "-5", "2026-13-01", "1969-12-31", "2026-11-28T24:00", "1e9",
                                 "2026-11-28T10:15:30+25:00", " 1790000000"])
def test_anything_else_is_refused_and_the_pattern_says_so(raw: str) -> None:
    assert not re.match(SINCE_PATTERN, raw)
    with pytest.raises(VibeError) as e:
        parse_since(raw)
    assert e.value.code == ErrorCode.INVALID_PARAMS


def test_every_cursor_the_pattern_allows_is_a_position() -> None:
    assert parse_cursor("9" * 18) == 10 ** 18 - 1 and parse_cursor(None) == 0
    assert re.match(CURSOR_PATTERN, "9" * 18) and not re.match(CURSOR_PATTERN, "9" * 19)
    with pytest.raises(VibeError):
        parse_cursor("-1")
