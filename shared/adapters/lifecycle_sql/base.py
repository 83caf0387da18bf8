"""What every lifecycle mixin stands on: the hooks each store class supplies (its
transactions, reads, change-log append, row locks), the placeholder rewrite, and the paged
walk in key order that the scheduler's sweeps share."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from shared.model import DocKey, SidecarEntry
from shared.ports import CodeCursor, RowCursor

CURSOR_SEP = "\x1f"

_MAX = "CASE WHEN {a} > {b} THEN {a} ELSE {b} END"  # greatest() / max() differ between dialects

# A row whose content changed while its space was not written (retired): `stale` if it had (or
# was getting) a vector of the old content, else `none`; either way without the cold reference.
_ALIGNED = "CASE WHEN status IN ('ready','queued','stale') OR cold_ref IS NOT NULL THEN 'stale' ELSE 'none' END"


class SqlBase:
    """Mixin base: the store class provides the hooks below."""

    clock: Callable[[], float]  # the store's (DocumentStore.clock)
    _PH = "?"
    _POW2 = "vibe_pow2({})"
    _FOR_UPDATE = ""
    _FOR_SHARE = ""  # PostgreSQL: " FOR SHARE" (SQLite writers are serial: BEGIN IMMEDIATE)

    def _lc_tx(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _lc_rows(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        raise NotImplementedError

    def _lc_log(self, conn: Any, rows: Sequence[tuple[DocKey, str, str | None]]) -> None:
        raise NotImplementedError

    def _lc_lock_vectors(self, conn: Any, rows: Sequence[tuple[str, str, str]]) -> None:
        """Lock vector rows (tenant, hash, space) before a NOT EXISTS check (PostgreSQL)."""

    def _lc_row_to_sidecar(self, r: Mapping[str, Any]) -> SidecarEntry:
        raise NotImplementedError

    def follower_lease(self, name: str) -> AbstractContextManager[bool]:
        raise NotImplementedError

    def _sql(self, sql: str) -> str:
        return sql if self._PH == "?" else sql.replace("?", self._PH)

    def _x(self, conn: Any, sql: str, params: Sequence[object] = ()) -> Any:
        return conn.execute(self._sql(sql), params)

    def _read(self, sql: str, params: Sequence[object] = ()) -> Sequence[Mapping[str, Any]]:
        return self._lc_rows(self._sql(sql), params)

    def lease(self, name: str) -> AbstractContextManager[bool]:
        return self.follower_lease(f"lease:{name}")

    def _page(self, table: str, key: tuple[str, ...], test: str, args: Sequence[object],
              after: Sequence[str] | None, limit: int, extra: str = "", joins: str = "",
              ) -> tuple[list[Mapping[str, Any]], tuple[str, ...] | None]:
        """Of the next `limit` rows of `table` ("name alias") in the order of its `key` columns
        after `after`, the key (and `extra` columns) of those meeting `test` (with its `args`, and
        the tables `joins` brings), and the key of the last row examined (None: the end). The
        scheduler's sweeps go by such pages from cursors in the store (`sweep_cursor`). One row
        more is read to know whether the end is reached: a table that fits in a page is then
        examined whole at every tick (a page that stopped exactly at the end would
        make the next tick's page an empty one)."""
        alias = table.split()[-1]
        cols = ", ".join(f"{alias}.{k}" for k in key)
        since, at = ("", ()) if after is None else (f" WHERE ({cols}) > ({','.join('?' * len(key))})", tuple(after))
        page = self._read(f"SELECT {cols}{extra}, CASE WHEN {test} THEN 1 ELSE 0 END AS hit FROM {table} "
                          f"{joins}{since} ORDER BY {cols} LIMIT ?", (*args, *at, limit + 1))
        last = page[limit - 1] if len(page) > limit else None
        return [r for r in page[:limit] if r["hit"]], None if last is None else tuple(str(last[k]) for k in key)

    def _row_page(self, test: str, args: Sequence[object], after: RowCursor | None, limit: int,
                  extra: str = "", joins: str = "") -> tuple[list[Mapping[str, Any]], RowCursor | None]:
        """`_page` over the sidecar (`s`, keyed (tenant, collection, doc_id, space))."""
        found, last = self._page("sidecar s", ("tenant", "collection", "doc_id", "space"), test, args, after, limit,
                                 extra=extra, joins=joins)
        return found, None if last is None else (last[0], last[1], last[2], last[3])

    def _code_page(self, table: str, test: str, after: CodeCursor | None, limit: int,
                   ref: bool = False) -> tuple[list[Mapping[str, Any]], CodeCursor | None]:
        """`_page` over `table` (vectors, cold_vectors: both keyed (tenant, content_hash, space),
        the row `t`): a read, which the delete checks again."""
        found, last = self._page(f"{table} t", ("tenant", "content_hash", "space"), test, (), after, limit,
                                 extra=", t.ref" if ref else "")
        return found, None if last is None else (last[0], last[1], last[2])
