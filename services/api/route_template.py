"""The route template a request matched (`/v1/collections/{collection}/docs/{id}`), for labels
and log lines that must name the route, never the raw path's ids."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match

from services.api.ratelimit import Scope

UNMATCHED = "unmatched"


def leaf_routes(routes: Sequence[Any]) -> Iterator[BaseRoute]:
    """Routes with a path template, also inside included routers (FastAPI keeps an included
    router as one entry whose routes are the router's own; we include without prefixes)."""
    for r in routes:
        if hasattr(r, "path"):
            yield r
        elif hasattr(r, "original_router"):
            yield from leaf_routes(r.original_router.routes)
        elif hasattr(r, "routes"):
            yield from leaf_routes(r.routes)


class RouteTemplates:
    """The matched route's template for a finished request's scope."""

    def __init__(self, routes: Sequence[BaseRoute]):
        self.routes = routes
        self._leaves: list[BaseRoute] | None = None

    def of(self, scope: Scope) -> str:
        """A request answered before routing (429) or by a plain Starlette route (`/mcp`) has
        no `route` in its scope: the templates are matched here."""
        route: Any = scope.get("route")
        if route is not None and hasattr(route, "path"):
            return str(route.path)
        if self._leaves is None:  # routes are complete by the first request
            self._leaves = list(leaf_routes(self.routes))
        for r in self._leaves:
            if r.matches(scope)[0] is Match.FULL:
                return str(getattr(r, "path", UNMATCHED))
        return UNMATCHED
