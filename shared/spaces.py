"""Which space a tenant reads and writes (spaces, and migrations between them).

Every tenant starts in the configured space (`VIBE_SPACE`, default `core`). A migration adds a
`building` space for the tenant; writes then embed into it as well (so nothing written during
the migration is missed) and reads fuse it in where it is ready. Activation makes it the
tenant's `active` space and retires the old one. The state lives in the store, read at each
use, so every replica and worker agrees without a restart.
"""

from __future__ import annotations

from typing import Protocol

from shared.model import SpaceInfo
from shared.ports import LifecycleStore


class Spaces(Protocol):
    default: str

    def of(self, tenant: str) -> tuple[str, list[str]]: ...

    def layout(self, tenant: str) -> tuple[str, dict[str, str]]: ...

    def active(self, tenant: str) -> str: ...

    def live(self) -> set[str]: ...

    def live_of(self, tenant: str) -> set[str]: ...


class SpaceDirectory:
    def __init__(self, store: LifecycleStore, default: str):
        self.store = store
        self.default = default

    def of(self, tenant: str) -> tuple[str, list[str]]:
        """(active space, building spaces) of a tenant."""
        active, building = self.layout(tenant)
        return active, list(building)

    def layout(self, tenant: str) -> tuple[str, dict[str, str]]:
        """(active space, {building space: its migration's scope}) of a tenant."""
        rows = self.store.tenant_spaces(tenant)
        active = next((r.space for r in rows if r.state == "active"), self.default)
        return active, {r.space: r.scope for r in rows if r.state == "building"}

    def active(self, tenant: str) -> str:
        return self.of(tenant)[0]

    def live(self) -> set[str]:
        """Every space some tenant reads or builds: the vector indexes the followers maintain."""
        return {self.default} | {r.space for r in self.store.tenant_spaces() if r.state in ("active", "building")}

    def live_of(self, tenant: str) -> set[str]:
        """The spaces one tenant reads or builds: where its documents' vectors are kept."""
        return set(embedding_spaces(self, tenant))

    def rows(self, tenant: str) -> list[SpaceInfo]:
        return self.store.tenant_spaces(tenant)


def embedding_spaces(spaces: Spaces, tenant: str) -> list[str]:
    """Where the tenant's embeddings go, active first: its active space and any space a migration
    is building. A job of any other space is for a space nobody reads (the handler and the
    reconciler drop it), and the lag views count these."""
    active, building = spaces.of(tenant)
    return [active, *building]


class FixedSpace:
    """One space for every tenant (tests and tools that need no migrations)."""

    def __init__(self, space: str):
        self.default = space

    def of(self, tenant: str) -> tuple[str, list[str]]:
        return self.default, []

    def layout(self, tenant: str) -> tuple[str, dict[str, str]]:
        return self.default, {}

    def active(self, tenant: str) -> str:
        return self.default

    def live(self) -> set[str]:
        return {self.default}

    def live_of(self, tenant: str) -> set[str]:
        return {self.default}
