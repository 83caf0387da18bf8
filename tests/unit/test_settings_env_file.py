"""Settings read `.env` from the working directory; the environment wins over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config import Settings


def test_dotenv_fills_what_the_environment_leaves_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("VIBE_PORT=9123\nVIBE_ACCESS_LOG=false\nOTHER_TOOL_SETTING=1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VIBE_PORT", raising=False)
    monkeypatch.delenv("VIBE_ACCESS_LOG", raising=False)
    s = Settings()
    assert s.port == 9123 and s.access_log is False
    monkeypatch.setenv("VIBE_PORT", "7001")
    assert Settings().port == 7001


def test_without_dotenv_the_defaults_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VIBE_ACCESS_LOG", raising=False)
    assert Settings().access_log is True
