"""docs/configuration.md's settings table is generated from `shared.config.Settings` by
tools/gen_configuration.py: adding, renaming or changing a setting without regenerating the page
fails here, and so does a setting without a description (the page's only source for it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from shared.config import Settings

REPO = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_configuration", REPO / "tools" / "gen_configuration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_setting_has_a_description() -> None:
    missing = [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()]
    assert not missing, f"Settings fields without description= (shared/config.py): {missing}"


def test_generated_section_is_current() -> None:
    gen = _generator()
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == gen.render(page), (
        "docs/configuration.md is out of date with shared/config.py: run .venv/bin/python tools/gen_configuration.py")


def _env_names(name: str) -> list[str]:
    """The variables a setting is read from: its aliases (the first is its own name; a few
    settings are only read under another contract's name, such as SURR_*), else VIBE_<NAME>."""
    alias = Settings.model_fields[name].validation_alias
    choices = getattr(alias, "choices", None) or ([alias] if isinstance(alias, str) else [])
    return [c for c in choices if isinstance(c, str)] or [f"VIBE_{name.upper()}"]


def test_every_setting_is_on_the_page() -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    absent = [_env_names(name)[0] for name in Settings.model_fields if f"`{_env_names(name)[0]}`" not in page]
    assert not absent, absent
