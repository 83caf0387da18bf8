"""The import-linter contracts (pyproject.toml, run by make lint/check/test) cover every module
they are meant to: a new top-level module of `shared` must be named in the contract that keeps
adapters out of the rest of shared, or the contract would silently not check it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _contract(name_start: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"].startswith(name_start))


def test_every_top_level_module_of_shared_but_the_adapters_is_kept_from_the_adapters() -> None:
    contract = _contract("Only adapters know the adapters")
    modules = {f"shared.{p.stem}" for p in (ROOT / "shared").iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    modules.discard("shared.adapters")
    assert contract["forbidden_modules"] == ["shared.adapters"]
    assert sorted(modules - set(contract["source_modules"])) == []
