"""The embedders of every space and the embedding job handler built on them."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future

from services.core.handlers import EmbedHandler
from services.wiring.stores import build_cold, build_collections, build_ledger
from shared.collection_settings import EmbedFields
from shared.config import Settings
from shared.model_specs import ModelSpec, local_allowlist, parse_model
from shared.policy.eligibility import EligibilityPolicy
from shared.policy.provider_certs import ProviderCerts
from shared.ports import (
    Embedder,
    StoreOfRecord,
)
from shared.spaces import SpaceDirectory, embedding_spaces
from shared.text.passages import PassageConfig

log = logging.getLogger("vibe.wiring")


def _check_space(store: StoreOfRecord, space: str, emb: Embedder) -> None:
    """Dim safety across restarts: a space's vectors are only ever compared with
    vectors of the same model and dimension. Only the operator's own use of the name counts: a
    binding that tenants' spaces of that name wrote while names were global is released
    (`release_space_binding`), so no tenant's row can keep a process from starting."""
    model_id, dim = store.bind_space(space, emb.model_id, emb.dim)
    if (model_id, dim) != (emb.model_id, emb.dim) and store.release_space_binding(space, model_id, dim):
        log.info("space binding of tenants' spaces released", extra={"space": space, "model": model_id})
        model_id, dim = store.bind_space(space, emb.model_id, emb.dim)
    others = [r.tenant for r in store.tenant_spaces() if r.space == space and r.model_id != emb.model_id]
    if others:  # the configured name serves them with the configured model from now on
        log.warning("tenants have a space of the configured name with another model",
                    extra={"space": space, "tenants": len(others)})
    if (model_id, dim) != (emb.model_id, emb.dim):
        raise RuntimeError(
            f"space {space!r} holds vectors of {model_id} ({dim} dims) but the configured embedder is "
            f"{emb.model_id} ({emb.dim} dims); choose another VIBE_SPACE for the new model or use the old one")


class SpaceEmbedders:
    """Each space's embedder (a space bundles its model), built on first use from the
    model id the space is bound to in the store, and kept. The configured space uses the
    configured embedder. Only the provider kinds this deployment can reach are built, and only
    models `shared.model_specs` accepts (bounded dimensions, listed local models)."""

    def __init__(self, settings: Settings, store: StoreOfRecord, default: Embedder,
                 wrap: Callable[[Embedder], Embedder] | None = None):
        self.settings = settings
        self.store = store
        self.default = default
        self.wrap = wrap
        self._by_model: dict[ModelSpec, Embedder] = {}
        self._preparing: dict[ModelSpec, Future[Embedder]] = {}
        self._lock = threading.Lock()

    def __call__(self, space: str, tenant: str | None = None) -> Embedder:
        """The embedder of the tenant's space `space` (space names are per tenant: two tenants'
        `core@v2` may hold two models), read from its row at each call (a space removed and made
        again may have another model); the configured space is the operator's model for every
        tenant. Without a tenant: the space's binding in `spaces` (the operator's)."""
        if space == self.settings.space:
            return self.default
        store = self.store
        binding = store.space_binding(space) if tenant is None else store.tenant_space_binding(tenant, space)
        if binding is None:
            raise LookupError(f"space {space!r} is not bound to a model")
        try:
            return self.for_model(*binding)
        except ValueError as e:  # a model no longer allowed here (VIBE_LOCAL_MODELS changed)
            raise LookupError(f"space {space!r}: {e}") from e

    def if_ready(self, space: str, tenant: str | None = None) -> Embedder | None:
        """`__call__` for reads: None (the leg answers degraded, lexically) instead of loading a
        local model in the read's thread, which a background thread then loads; None too for a
        space with no usable model."""
        if space == self.settings.space:
            return self.default
        store = self.store
        try:
            binding = store.space_binding(space) if tenant is None else store.tenant_space_binding(tenant, space)
            if binding is None:
                return None
            return self.prepare(*binding)
        except (LookupError, ValueError, RuntimeError, OSError):
            log.warning("no embedder for a read", extra={"space": space}, exc_info=True)
            return None

    def spec(self, model: str, dim: int | None = None) -> ModelSpec:
        """`model` checked by its text alone (ValueError: a message for the caller)."""
        s = self.settings
        return parse_model(model, dim, s.embedder, s.embed_dim, local_allowlist(s.embed_model, s.local_models))

    def for_model(self, model: str, dim: int | None = None) -> Embedder:
        """An embedder for a model id (`hash:v1@64`, `openai:<model>`, `local:<model>`) or a bare
        model name for the configured provider kind, built here (a worker, or a background
        thread through `prepare`: a local model may load for minutes, exporting to ONNX)."""
        spec = self.spec(model, dim)
        fut = self._future(spec)
        return fut.result()

    def prepare(self, model: str, dim: int | None = None) -> Embedder | None:
        """For a request thread: the model's embedder when it is quick to have (hash, a provider
        probed once, a local model already loaded), else None while a background thread loads the
        local model (ask again later). ValueError for a model `spec` refuses."""
        spec = self.spec(model, dim)
        fut = self._future(spec, background=spec.kind == "local")
        return fut.result() if fut.done() or spec.kind != "local" else None

    def _future(self, spec: ModelSpec, background: bool = False) -> Future[Embedder]:
        """One build per model per process, shared by every caller (single flight)."""
        with self._lock:
            done = self._by_model.get(spec)
            if done is not None:
                fut: Future[Embedder] = Future()
                fut.set_result(done)
                return fut
            fut = self._preparing.get(spec) or Future()
            mine = spec not in self._preparing
            self._preparing[spec] = fut
        if mine:
            if background:
                threading.Thread(target=self._build_into, args=(spec, fut), name="model-build", daemon=True).start()
            else:
                self._build_into(spec, fut)
        return fut

    def _build_into(self, spec: ModelSpec, fut: Future[Embedder]) -> None:
        try:
            emb = self._build(spec)
        except BaseException as e:  # noqa: BLE001 - handed to every waiter; the next call tries again
            with self._lock:
                self._preparing.pop(spec, None)
            fut.set_exception(e)
            return
        with self._lock:
            self._by_model[spec] = emb
            self._preparing.pop(spec, None)
        fut.set_result(emb)

    def _build(self, spec: ModelSpec) -> Embedder:
        from shared.adapters.embedders import build_embedder

        s = self.settings
        if spec.kind == s.embedder and (spec.kind == "hash" and spec.dim == s.embed_dim
                                        or spec.kind != "hash" and spec.name == s.embed_model):
            return self.default  # the configured model, loaded once per process
        if spec.kind == "hash":
            update: dict[str, object] = {"embedder": "hash", "embed_dim": spec.dim}
        else:
            update = {"embedder": spec.kind, "embed_model": spec.name}
        emb = build_embedder(s.model_copy(update=update), spec.dim)
        return self.wrap(emb) if self.wrap is not None else emb


def build_handler(settings: Settings, store: StoreOfRecord, emb: Embedder,
                  wrap: Callable[[Embedder], Embedder] | None = None) -> EmbedHandler:
    """The embedding job handler, the same in the API's worker threads and in Celery workers."""
    check_declared_dim(settings, emb)
    _check_space(store, settings.space, emb)
    policy = EligibilityPolicy(settings.index_policy)
    directory = SpaceDirectory(store, settings.space)
    return EmbedHandler(store, emb, policy, EmbedFields(build_collections(settings, store)), settings.job_max_attempts,
                        build_cold(settings, store), settings.tenant_daily_tokens, store.clock,
                        embedders=SpaceEmbedders(settings, store, emb, wrap), default_space=settings.space,
                        live=lambda tenant: set(embedding_spaces(directory, tenant)),
                        passages=passage_config(settings), calls=build_ledger(store),
                        max_inputs=settings.embed_batch_size,
                        provider_certs=ProviderCerts(settings.provider_certs))


def check_declared_dim(settings: Settings, emb: Embedder) -> None:
    """SURR_EMBED_DIM is a promise about the model: one that reports another dimension stops the
    process here, before a vector of the wrong shape is stored or compared."""
    declared = settings.declared_embed_dim()
    if declared is not None and emb.dim != declared:
        raise RuntimeError(f"SURR_EMBED_DIM={declared} but the model {emb.model_id} makes vectors of {emb.dim} "
                           "dimensions; fix SURR_EMBED_DIM or the model")


def passage_config(s: Settings) -> PassageConfig:
    return PassageConfig(s.passage_chars, s.passage_overlap, s.max_passages)
