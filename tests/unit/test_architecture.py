"""Layering rules (ports and adapters) that a reviewer would otherwise have to remember."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_shared_never_imports_services() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(n for n in _imports(p) if n == "services" or n.startswith("services."))
        for p in (ROOT / "shared").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
