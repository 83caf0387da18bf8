"""The schema version of an embedded index kept as a folder of sub-indexes (tantivy's tenant
indexes, qdrant-edge's shards): a `SCHEMA_VERSION` file beside them. An index written by
another version (new filter fields, another analyzer) is emptied and rebuilt from the store's
change log (shared/indexing.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

VERSION_FILE = "SCHEMA_VERSION"


class FolderSchemaStamp:
    def __init__(self, root: Path, version: int | str):
        self.root = root
        self.version = version
        if not self.outdated():  # empty or current: what gets written now is current
            self.stamp()

    def outdated(self) -> bool:
        """Sub-indexes exist but were written by another schema version (or before versions)."""
        try:
            if (self.root / VERSION_FILE).read_text().strip() == str(self.version):
                return False
        except OSError:
            pass
        return self.root.exists() and any(p.is_dir() for p in self.root.iterdir())

    def stamp(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / VERSION_FILE).write_text(str(self.version))

    def empty_and_stamp(self) -> None:
        """Delete every sub-index (the caller closed them) and record the current version."""
        if self.root.exists():
            for p in self.root.iterdir():
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        self.stamp()
