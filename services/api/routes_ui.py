"""The `/ui` search page: the committed static build in
`services/api/ui/dist/` (built from `services/api/ui/src/` with the TypeScript SDK by
`sdk/typescript/scripts/build_ui.mjs`, so serving it needs no Node).

The files carry no data, so they need no key: the page asks for one (or takes it from the URL
fragment, which browsers never send) and calls the API with it as a bearer header. Still
`Cache-Control: no-store` on every answer (nothing a shared cache or another key could reuse)
and a CSP that allows only this origin's script, style and API calls: document text the page
shows can never run as script even if it slipped past the page's own escaping."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import Response

from shared.errors import ErrorCode, VibeError

UI_DIR = Path(__file__).resolve().parent / "ui" / "dist"

# The only files served: a fixed list, so no request path ever reaches the file system.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

router = APIRouter(include_in_schema=False)  # a page, not an API operation: kept out of /openapi.json


def _file(name: str) -> Response:
    media = FILES.get(name)
    path = UI_DIR / name
    if media is None or not path.is_file():
        raise VibeError(ErrorCode.NOT_FOUND, "no such page file" if media is None else
                        "the /ui build is missing (cd sdk/typescript && npm ci && npm run build:ui)")
    return Response(path.read_bytes(), media_type=media, headers=HEADERS)


@router.get("/ui")
@router.get("/ui/")
async def page() -> Response:
    """The page; `/ui?collection=C&q=Q#key=K` runs the query on load."""
    return _file("index.html")


@router.get("/ui/{name}")
async def asset(name: str) -> Response:
    return _file(name)


# /docs (Swagger UI) from this server's own copy of swagger-ui-dist (vendored into the same
# committed build by build_ui.mjs): no CDN, so the page works offline, and no third-party
# script runs on a page where an operator types a key. The key typed there is not kept in the
# browser's storage (persistAuthorization off).
DOCS_FILES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}
DOCS_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                "X-Frame-Options": "DENY"}


@router.get("/docs")
async def docs() -> Response:
    html = get_swagger_ui_html(openapi_url="/openapi.json", title="vibe-semantic - Swagger UI",
                               swagger_js_url="/docs/swagger-ui-bundle.js", swagger_css_url="/docs/swagger-ui.css",
                               swagger_favicon_url="/docs/favicon-32x32.png",
                               swagger_ui_parameters={"persistAuthorization": False})
    html.headers.update(DOCS_HEADERS)
    return html


@router.get("/docs/{name}")
async def docs_asset(name: str) -> Response:
    media = DOCS_FILES.get(name)
    path = UI_DIR / name
    if media is None or not path.is_file():
        raise VibeError(ErrorCode.NOT_FOUND, "no such file" if media is None else
                        "the /docs assets are missing (cd sdk/typescript && npm ci && npm run build:ui)")
    return Response(path.read_bytes(), media_type=media, headers=DOCS_HEADERS)
