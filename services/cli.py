"""`vibe-semantic` command line: serve, ingest, and more as the product grows."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(help="vibe-semantic: immediate ACL-filtered answers, lazy on-touch embedding.",
                  no_args_is_help=True, add_completion=False)


def _version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        typer.echo(f"vibe-semantic {version('vibe-semantic')}")
    except PackageNotFoundError:  # run from a checkout that was never installed
        typer.echo("vibe-semantic (not installed: version unknown)")
    raise typer.Exit()


@app.callback()
def _main(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit.")) -> None:
    pass


# Settings whose values are never echoed back: credentials, and URLs (they may carry a password).
_SECRET_NAME = re.compile(r"key|secret|token|password|url|dsn", re.IGNORECASE)
_SETTINGS_FIELD = re.compile(r'field "(\w+)"')


def _env_names(field: object) -> list[str]:
    """The variables a setting is read from: its aliases (each is a full name), else `VIBE_<NAME>`."""
    from pydantic import AliasChoices

    alias = getattr(field, "validation_alias", None)
    if isinstance(alias, AliasChoices):
        return [a for a in alias.choices if isinstance(a, str)]
    return [alias] if isinstance(alias, str) else []


def _env_name(name: str) -> str:
    """A setting as the operator sets it. pydantic names an aliased setting by its first alias
    whichever one was set: all of them are named then."""
    from shared.config import Settings

    for field, info in Settings.model_fields.items():
        names = _env_names(info) or [f"VIBE_{field.upper()}"]
        if name == field or name.upper() in names:
            return " or ".join(names)
    return name


def _config_problem(err: dict[str, Any]) -> str:
    """One validation error as `VIBE_NAME[0].part: why (got 'value')`; the value only for a
    setting that cannot hold a secret."""
    loc = [str(p) for p in err.get("loc", ())]
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    if not loc:  # a check across settings (e.g. the language map): its message names them
        return msg
    where = _env_name(loc[0]) + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc[1:])
    if _SECRET_NAME.search(loc[0]) or "input" not in err or isinstance(err["input"], dict | list):
        return f"{where}: {msg}"
    shown = repr(err["input"])
    return f"{where}: {msg} (got {shown[:80] + '…' if len(shown) > 80 else shown})"


def config_error(exc: Exception) -> str:
    """A Settings failure as one line. pydantic-settings raises `SettingsError` (not a
    validation error) for a JSON value it cannot decode: its cause says where."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(_config_problem(dict(e)) for e in exc.errors())
    m = _SETTINGS_FIELD.search(str(exc))
    where = _env_name(m.group(1)) if m else "a setting"
    cause = exc.__cause__
    return f"{where}: not valid JSON ({cause})" if cause is not None else f"{where}: {exc}"


def _settings():  # noqa: ANN202 - Settings import is deferred so `--help` stays fast
    """Settings from the environment and `.env`; an invalid one ends the command with exit code
    2 and one line naming the variable, instead of pydantic's traceback."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from shared.config import Settings

    try:
        return Settings()
    except (ValidationError, SettingsError) as e:
        typer.echo(f"configuration error: {config_error(e)}", err=True)
        raise typer.Exit(code=2) from None


def _local_url(settings) -> str:  # noqa: ANN001
    """The URL a local client reaches `serve` at: a wildcard listen address is not one to call."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://[{host}]:{settings.port}" if ":" in host else f"http://{host}:{settings.port}"


@app.command()
def serve(
    host: str = typer.Option(None, "--host", help="listen address (default: VIBE_HOST, 127.0.0.1)"),
    port: int = typer.Option(None, "--port", min=1, max=65535, help="TCP port (default: VIBE_PORT, 8080)"),
    data_dir: Path = typer.Option(None, "--data-dir", file_okay=False,
                                  help="data folder (default: VIBE_DATA_DIR, ./data)"),
) -> None:
    """Run the API in the configured profile (embedded by default)."""
    import uvicorn

    from services.core.keyring import KeyRing, TokenSecretMissing, dev_key, token_secret
    from services.wiring import build, create_app
    from shared.adapters.schema.runner import SchemaTooNew
    from shared.logging import configure_logging

    given = {"host": host, "port": port, "data_dir": data_dir}
    settings = _settings().model_copy(update={k: v for k, v in given.items() if v is not None})
    configure_logging(settings.debug)
    try:
        token_secret(settings)  # before the model loads: replicas must share the token secret
    except TokenSecretMissing as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=2) from None
    keys = list(settings.api_keys)
    if not keys:
        key = dev_key(settings.data_dir)
        keys = [key]
        typer.echo(f"No VIBE_API_KEYS configured; using the local dev key (tenant 'default'):\n  {key.key}")
    typer.echo(f"Loading the '{settings.embedder}' embedder…")
    try:
        container = build(settings)
    except SchemaTooNew as e:  # a store a newer release migrated: say so, never run on it
        typer.echo(str(e), err=True)
        raise typer.Exit(code=2) from None
    url = f"http://{settings.host}:{settings.port}"
    typer.echo(f"vibe-semantic ({settings.profile} profile) listening on {url}  data: {settings.data_dir}")
    api = create_app(container, KeyRing(keys))
    _freeze_startup_heap(settings.gc_thresholds)
    # uvicorn's own access log stays off: the app writes its own, structured (services/api/access_log.py)
    uvicorn.run(api, host=settings.host, port=settings.port, log_level="warning", access_log=False)


def _freeze_startup_heap(thresholds: tuple[int, int, int]) -> None:
    """Leave what start-up built (modules, the model, the container) out of every later garbage
    collection: each full collection walked all of it again, ~16% of a bulk request's time in the
    serving process (py-spy, 2000-document bulks). Garbage made so far is collected first; frozen
    objects are never freed, and they live as long as the process anyway. Then the collector's
    thresholds for serving (`VIBE_GC_THRESHOLDS`)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)


@app.command()
def ingest(
    file: Path = typer.Argument(..., exists=True, readable=True, help="JSONL, one document a line, with _id"),
    collection: str = typer.Option(..., "--collection", "-c"),
    url: str = typer.Option(None, "--url", help="service URL (default: from VIBE_HOST/VIBE_PORT)"),
    key: str = typer.Option(None, "--key", envvar=["VIBE_API_KEY", "VIBE_KEY"], help="API key with write scope"),
    batch: int = typer.Option(1000, "--batch", min=1, max=5000),
) -> None:
    """Load a JSONL file through the bulk API, with a progress bar."""
    from services.ingest import ingest_file

    settings = _settings()
    base = url or _local_url(settings)
    token = key or _default_key(settings)
    summary = ingest_file(file, collection, base, token, batch)
    typer.echo(json.dumps(summary))
    if summary["rejected"]:
        raise typer.Exit(code=1)


@app.command()
def read(
    query: str = typer.Argument(..., help="the query text"),
    collection: str = typer.Option("any", "--collection", "-c", help="a collection, or `any`: all of the tenant's"),
    strategy: str = typer.Option("auto", "--strategy", "-s", help="auto | keyword | semantic | hybrid"),
    limit: int = typer.Option(10, "--limit", "-n", min=1, help="results per ranking"),
    url: str = typer.Option(None, "--url", help="service URL (default: from VIBE_HOST/VIBE_PORT)"),
    key: str = typer.Option(None, "--key", envvar=["VIBE_API_KEY", "VIBE_KEY"], show_envvar=False,
                            help="API key with read scope (default: VIBE_API_KEY, else the first of "
                                 "VIBE_API_KEYS, else the local dev key in the data dir)"),
    raw: bool = typer.Option(False, "--json", help="one JSON line per event: {event, id, data}"),
    timeout: float = typer.Option(60.0, "--timeout", min=0.1, help="seconds to wait for each event"),
) -> None:
    """Read from a running server, printing each event as it arrives (lexical ranking, re-rankings, done)."""
    from services.read_stream import STRATEGIES, ReadFailed, print_stream

    if strategy not in STRATEGIES:
        raise typer.BadParameter(" | ".join(STRATEGIES), param_hint="--strategy")
    settings = _settings()
    body = {"collection": collection, "q": query, "semantic": {"strategy": strategy}, "limit": limit}
    try:
        print_stream(url or _local_url(settings), key or _default_key(settings), body, raw, timeout, typer.echo)
    except ReadFailed as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=1) from None


@app.command()
def worker(
    concurrency: int = typer.Option(None, "--concurrency", "-c", min=1, help="processes (default: VIBE_WORKERS)"),
) -> None:
    """Run a Celery worker (VIBE_QUEUE=celery) that embeds queued documents."""
    from services.worker import metrics_server

    settings = _settings()
    metrics_server.prepare(settings)  # before anything imports prometheus_client
    from services.wiring import run_worker

    run_worker(settings, concurrency)


@app.command()
def scheduler() -> None:
    """Run Celery beat: the reconciler and the promotion/eviction scheduler."""
    from services.wiring import run_scheduler

    run_scheduler(_settings())


@app.command()
def mcp() -> None:
    """Serve the MCP tools over stdio; the caller's key comes from VIBE_MCP_KEY."""
    from services.wiring import run_mcp_stdio as run_stdio

    run_stdio(_settings())


@app.command("reindex-follower")
def reindex_follower(
    index: str = typer.Argument(..., help="lexical | vectors: the configured shared index (OpenSearch, Qdrant)"),
    wait: float = typer.Option(60.0, "--wait", min=0, help="seconds to wait while a replica is applying"),
) -> None:
    """Rebuild a shared index from the store's change log, here: reset its follower position
    to 0 and replay the log, under the follower lease (replicas skip their syncs meanwhile)."""
    from services.wiring import build_shared_follower

    if index not in ("lexical", "vectors"):
        raise typer.BadParameter("lexical or vectors", param_hint="INDEX")
    follower = build_shared_follower(_settings(), "lexical" if index == "lexical" else "vectors")
    if follower is None:
        typer.echo(f"the {index} index is embedded: stop the API, delete DATA_DIR/index.seq and the "
                   "index folder, and start it again", err=True)
        raise typer.Exit(code=2)
    try:
        applied, seq = follower.rebuild(wait), follower.seq
    finally:
        for part in (follower.lexical, follower.vectors, follower.store):
            if part is not None:
                part.close()
    if applied is None:
        typer.echo(f"another process kept the lease for {wait:g} s; try again", err=True)
        raise typer.Exit(code=1)
    typer.echo(json.dumps({"index": index, "applied": applied, "seq": seq}))


@app.command("rebuild-index")
def rebuild_index(
    index: str = typer.Argument("all", help="lexical | vectors | all"),
    wait: float = typer.Option(60.0, "--wait", min=0, help="seconds to wait while another process is applying"),
) -> None:
    """Rebuild indexes from the store of record: empty them (stamped with this release's schema
    version) and replay the whole change log, logging progress. A shared index (OpenSearch, a
    Qdrant server) is rebuilt under its follower lease; embedded indexes (tantivy, qdrant-edge) in
    every index slot of the data dir that no running process holds. A running process rebuilds
    its own slot by itself on start when the schema version differs; restart it to force one."""
    from services.wiring import (
        _build_lexical,
        _build_vectors,
        build_shared_follower,
        build_store,
        claim_index_home,
        follower_name,
        release_index_home,
    )
    from shared.indexing import FilePosition, IndexFollower
    from shared.logging import configure_logging
    from shared.spaces import SpaceDirectory

    if index not in ("lexical", "vectors", "all"):
        raise typer.BadParameter("lexical, vectors or all", param_hint="INDEX")
    settings = _settings()
    configure_logging(settings.debug)
    kinds = ["lexical", "vectors"] if index == "all" else [index]
    report: list[dict[str, object]] = []
    failed = False
    for kind in kinds:  # shared indexes: one rebuild, wherever it runs
        follower = build_shared_follower(settings, "lexical" if kind == "lexical" else "vectors")
        if follower is None:
            continue
        try:
            applied = follower.rebuild(wait, reset_schema=True)
        finally:
            for part in (follower.lexical, follower.vectors, follower.store):
                if part is not None:
                    part.close()
        failed |= applied is None
        report.append({"index": kind, "where": "shared", "applied": applied})
    own = [k for k in kinds if follower_name(settings, "lexical" if k == "lexical" else "vectors") is None]
    if own:
        store = build_store(settings)
        homes: list[Path] = []
        try:
            while True:  # every free slot that holds indexes; the first empty one ends the walk
                home = claim_index_home(settings.data_dir)
                homes.append(home)
                if not (home / "index.seq").exists() and not (home / "lexical").exists():
                    break
                lexical = _build_lexical(settings, home, store) if "lexical" in own else None
                vectors = _build_vectors(settings, home) if "vectors" in own else None
                live = SpaceDirectory(store, settings.space).live_of
                follower = IndexFollower(store, lexical, vectors, FilePosition(home / "index.seq"), settings.space,
                                         live)
                try:
                    applied = follower.rebuild(wait, reset_schema=True)
                finally:
                    for part in (lexical, vectors):
                        if part is not None:
                            part.close()
                report.append({"index": "+".join(own), "where": str(home), "applied": applied})
        finally:
            for home in homes:
                release_index_home(home)
            store.close()
    typer.echo(json.dumps({"rebuilt": report}))
    if failed:
        typer.echo(f"another process kept a shared index's lease for {wait:g} s; try again", err=True)
        raise typer.Exit(code=1)


keys_app = typer.Typer(help="API-made keys in the store of record (as POST/GET/DELETE /v1/keys), by tenant.",
                       no_args_is_help=True)
app.add_typer(keys_app, name="keys")


def _key_store():  # noqa: ANN202 - imports deferred so `--help` stays fast
    from services.wiring import build_key_store, build_store

    settings = _settings()
    store = build_store(settings)
    return settings, store, build_key_store(store)


@keys_app.command("create")
def keys_create(
    tenant: str = typer.Option(..., "--tenant", "-t"),
    name: str = typer.Option(..., "--name", "-n"),
    principal: list[str] = typer.Option([], "--principal", "-p", help="repeat for each principal"),
    cert: list[str] = typer.Option([], "--cert", help="repeat for each certificate (issuer:name)"),
    scope: list[str] = typer.Option(["read"], "--scope", "-s", help="read | write | admin; repeat"),
) -> None:
    """Make a key; prints it as JSON with its secret `key`, shown this once."""
    import time

    from shared.keys import TooManyKeys, new_key

    bad = sorted(set(scope) - {"read", "write", "admin"})
    if bad or not scope:
        raise typer.BadParameter("read, write or admin", param_hint="--scope")
    if not tenant.strip() or not name.strip() or len(name) > 128:
        raise typer.BadParameter("a non-empty tenant and a name of 1 to 128 characters")
    settings, store, keys = _key_store()
    try:
        scopes = [s for s in ("read", "write", "admin") if s in scope]
        record, secret = new_key(tenant, name, list(dict.fromkeys(principal)), list(dict.fromkeys(cert)), scopes,
                                 time.time())
        keys.create_key(record, settings.max_keys_per_tenant)
    except TooManyKeys:
        typer.echo(f"tenant {tenant!r} holds {settings.max_keys_per_tenant} keys (VIBE_MAX_KEYS_PER_TENANT)", err=True)
        raise typer.Exit(code=1) from None
    finally:
        store.close()
    typer.echo(json.dumps({**_key_json(record), "key": secret}))


@keys_app.command("list")
def keys_list(tenant: str = typer.Option(..., "--tenant", "-t")) -> None:
    """The tenant's API-made keys, one JSON object a line, without secrets."""
    _, store, keys = _key_store()
    try:
        for record in keys.keys_of(tenant):
            typer.echo(json.dumps(_key_json(record)))
    finally:
        store.close()


@keys_app.command("revoke")
def keys_revoke(
    key_id: str = typer.Argument(..., help="the key's id (key_...)"),
    tenant: str = typer.Option(..., "--tenant", "-t"),
) -> None:
    """Delete a key; every API process refuses it and its tokens within VIBE_KEY_REFRESH_SECONDS."""
    _, store, keys = _key_store()
    try:
        gone = keys.revoke_key(tenant, key_id)
    finally:
        store.close()
    if not gone:
        typer.echo(f"tenant {tenant!r} has no key {key_id!r}", err=True)
        raise typer.Exit(code=1)
    typer.echo(json.dumps({"revoked": key_id}))


def _key_json(record) -> dict[str, object]:  # noqa: ANN001
    import time

    return {"id": record.id, "tenant": record.tenant, "name": record.name, "principals": list(record.principals),
            "certs": list(record.certs), "scopes": list(record.scopes),
            "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created_at))}


def _default_key(settings) -> str:  # noqa: ANN001
    if settings.api_keys:
        return str(settings.api_keys[0].key)
    from services.core.keyring import DEV_KEY_FILE

    path = settings.data_dir / DEV_KEY_FILE
    if not path.exists():
        typer.echo("no key: pass --key or set VIBE_API_KEY (or VIBE_KEY)", err=True)
        raise typer.Exit(code=2)
    return str(json.loads(path.read_text())["key"])


if __name__ == "__main__":  # pragma: no cover
    logging.basicConfig(stream=sys.stderr)
    app()
