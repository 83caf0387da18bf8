"""The provider circuit breaker: opens after N consecutive non-429 failures, refuses without
calling the provider while open, lets one probe through after the cool-down, recovers."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from shared.adapters.embedders.breaker import BreakerEmbedder, CircuitOpen, RateLimited
from shared.ports import EmbedderError


class Http429(Exception):
    status_code = 429


class Http400(Exception):
    status_code = 400


class Flaky:
    model_id = "flaky"
    dim = 2

    def __init__(self) -> None:
        self.calls = 0
        self.mode = "ok"  # ok | fail | 429 | 400 | block

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.mode == "fail":
            raise EmbedderError("provider answered 500")
        if self.mode == "429":
            raise EmbedderError("provider rate limit (429)", retry_after=2.0) from Http429()
        if self.mode == "400":
            raise EmbedderError("provider answered 400", transient=False) from Http400()
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _rig(failures: int = 3) -> tuple[Flaky, Clock, BreakerEmbedder]:
    inner, clock = Flaky(), Clock()
    return inner, clock, BreakerEmbedder(inner, failures=failures, cooldown=10.0, clock=clock)


def test_opens_after_consecutive_failures_and_refuses_without_calling() -> None:
    inner, clock, b = _rig()
    inner.mode = "fail"
    for _ in range(3):
        with pytest.raises(EmbedderError) as e:
            b.embed(["x"])
        assert not isinstance(e.value, CircuitOpen)
    assert b.state == "open" and inner.calls == 3
    with pytest.raises(CircuitOpen) as opened:
        b.embed_query("x")
    assert inner.calls == 3  # the provider was not called
    assert opened.value.retry_after == pytest.approx(10.0)
    clock.now += 4
    with pytest.raises(CircuitOpen) as later:
        b.embed(["x"])
    assert later.value.retry_after == pytest.approx(6.0)


def test_a_success_resets_the_count() -> None:
    inner, _, b = _rig()
    for mode in ("fail", "fail", "ok", "fail", "fail"):
        inner.mode = mode
        with pytest.raises(EmbedderError) if mode == "fail" else _nothing():
            b.embed(["x"])
    assert b.state == "closed"


def test_half_open_probe_success_closes_failure_reopens() -> None:
    inner, clock, b = _rig(failures=1)
    inner.mode = "fail"
    with pytest.raises(EmbedderError):
        b.embed(["x"])
    clock.now += 10
    assert b.state == "half_open"
    with pytest.raises(EmbedderError):  # the probe fails: open for another cool-down
        b.embed(["x"])
    assert b.state == "open" and inner.calls == 2
    clock.now += 10
    inner.mode = "ok"
    assert b.embed(["x"]) == [[1.0, 0.0]]
    assert b.state == "closed"


def test_429_is_never_counted_and_surfaces_as_rate_limited() -> None:
    inner, _, b = _rig(failures=2)
    inner.mode = "429"
    for _ in range(5):
        with pytest.raises(RateLimited) as e:
            b.embed(["x"])
        assert e.value.retry_after == 2.0
    assert b.state == "closed" and inner.calls == 5


def test_a_4xx_refusal_is_never_counted() -> None:
    """A provider refusing one input (400: too long, bad parameter) is up;
    counting it would let one tenant's bad documents open the circuit for every tenant."""
    inner, _, b = _rig(failures=2)
    inner.mode = "400"
    for _ in range(10):
        with pytest.raises(EmbedderError) as e:
            b.embed(["x" * 100_000])
        assert not isinstance(e.value, CircuitOpen | RateLimited) and not e.value.transient
    assert b.state == "closed" and inner.calls == 10
    inner.mode = "ok"
    assert b.embed(["x"]) == [[1.0, 0.0]]


def test_a_4xx_answer_to_the_probe_closes_the_circuit() -> None:
    inner, clock, b = _rig(failures=1)
    inner.mode = "fail"
    with pytest.raises(EmbedderError):
        b.embed(["x"])
    assert b.state == "open"
    clock.now += 10
    inner.mode = "400"
    with pytest.raises(EmbedderError) as e:
        b.embed(["x"])
    assert not isinstance(e.value, CircuitOpen)
    assert b.state == "closed"  # the provider answered: it is up


def test_only_one_probe_while_half_open() -> None:
    inner, clock, b = _rig(failures=1)
    inner.mode = "fail"
    with pytest.raises(EmbedderError):
        b.embed(["x"])
    clock.now += 10
    gate, entered = threading.Event(), threading.Event()

    def slow(texts: Sequence[str]) -> list[list[float]]:
        entered.set()
        gate.wait(5)
        return [[0.0, 1.0]]

    inner.embed = slow  # type: ignore[method-assign]
    probe = threading.Thread(target=b.embed, args=(["x"],))
    probe.start()
    assert entered.wait(5)
    with pytest.raises(CircuitOpen):  # a second caller during the probe is refused
        b.embed(["y"])
    gate.set()
    probe.join(5)
    assert b.state == "closed"


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
