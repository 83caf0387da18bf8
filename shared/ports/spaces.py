"""Spaces per tenant: their records, bindings, cut-overs and removal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from shared.model import SpaceInfo


@runtime_checkable
class SpaceStore(Protocol):
    """What the space registry and the migration steps need: a tenant's spaces, their model bindings,
    cut-overs between them and their removal."""

    def tenant_spaces(self, tenant: str | None = None) -> list[SpaceInfo]: ...

    def put_tenant_space(self, info: SpaceInfo) -> None: ...

    def space_binding(self, space: str) -> tuple[str, int] | None:
        """The (model id, dimension) a space was first bound to (DocumentStore.bind_space)."""

    def tenant_space_binding(self, tenant: str, space: str) -> tuple[str, int] | None:
        """The (model id, dimension) of the tenant's own space of that name (space names are
        per tenant; `space_binding` is the operator's configured spaces')."""

    def release_space_binding(self, space: str, model_id: str, dim: int) -> bool:
        """Forget the binding of `space` to (model id, dim) when only tenants' spaces of that name
        account for it (a binding written while space names were global); False otherwise."""

    def drop_space_vectors(self, tenant: str, space: str) -> int:
        """A space's vectors, sidecar rows and cold entries go (the change log drops their
        points); the caller deletes the cold files first (`cold_hashes`)."""

    def forget_tenant_space(self, tenant: str, space: str) -> None:
        """The tenant's space is gone (a retired space past its retention)."""

    def realign_space(self, tenant: str, space: str, now: float) -> int:
        """A retired space made current again: rows of content edited since lose their cold
        reference and go `stale`/`none` with the document's hash, `queued` rows go `none`,
        documents written since get a `none` row, `ready` rows are logged for the vector index
        again (current ACL). Returns the rows changed or added."""

    def migration_backlog(self, tenant: str, space: str, source: str, scope: str,
                          eager: Sequence[str] = ()) -> dict[str, int]:
        """What a migration into `space` still has to embed, by state there (`none`, `queued`,
        `stale`; a document without a row counts as `none`, an evicted one not at all): every document of the tenant for
        scope `all`, for `ready` those `ready`/`queued` in `source` or in an `eager` collection."""
        ...

    def switch_space(self, to: SpaceInfo, expect: str, retire: SpaceInfo | None, now: float,
                     fill_rows: bool = False, filled_since: float | None = None,
                     realigned_since: float | None = None) -> int | None:
        """A cut-over in one transaction: `to` is written if its row is in state `expect`,
        `retire` is written (retired), a space coming back from `retired` is realigned (with
        `realigned_since`, only as to documents written since then: `realign_space_rows` did
        the rest before), and with `fill_rows` a space made active gets a `none` row for every
        document that has none there (with `filled_since`, only among documents written since
        then: `fill_space_rows` did the rest before). Returns the rows realigned, None when `to`
        was not in state `expect`."""

    def fill_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                        now: float) -> tuple[int, tuple[str, str] | None]:
        """A `none` row in `space` for each of the next `limit` documents of the tenant after the
        key (collection, doc_id) `after` (None: from the first) that has none there, in a short
        transaction of its own; returns (rows written, the batch's last key, None when the end
        was reached)."""

    def realign_space_rows(self, tenant: str, space: str, after: tuple[str, str] | None, limit: int,
                           now: float) -> tuple[int, tuple[str, str] | None]:
        """`realign_space` for the next `limit` documents of the tenant after the key `after`
        (and the rows between them), in a short transaction of its own; returns (rows changed or
        added, the batch's last key, None when the end was reached)."""

    def claim_expiry(self, tenant: str, space: str, retired_before: float) -> bool:
        """Mark a space retired before `retired_before` `expiring` (re-checked under its row
        lock); True when it is (or already was) claimed for removal."""
