"""The one Settings object (nothing else reads the environment).

Every setting the API documents (docs/configuration.md) is here with the `VIBE_` prefix. `profile` sets the defaults of
`queue`, `lexical`, `vectors` and `store`; each can still be chosen on its own. The fields are declared by concern in
`shared/settings/` and combined here; the checks that span concerns are this class's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.settings.access import AccessSettings
from shared.settings.deployment import DeploymentSettings
from shared.settings.distributed import DistributedSettings
from shared.settings.documents import DocumentSettings
from shared.settings.embedding import EmbeddingSettings
from shared.settings.keys import ApiKey
from shared.settings.lifecycle import LifecycleSettings
from shared.settings.mcp import McpSettings
from shared.settings.read import ReadSettings

__all__ = ["KNOWN_MODEL_DIMS", "RETIRED_SETTINGS", "SURR_PROVIDERS", "ApiKey", "Settings", "retired_settings"]

# SURR_EMBED_PROVIDER values and the embedder each selects.
SURR_PROVIDERS: dict[str, Literal["local", "openai", "hash"]] = {"openai": "openai", "local": "local", "hash": "hash"}
# Dimensions of well-known models, so a contradicting SURR_EMBED_DIM stops the service before
# any model is loaded or any provider is called.
KNOWN_MODEL_DIMS: dict[str, int] = {
    "all-MiniLM-L6-v2": 384, "sentence-transformers/all-MiniLM-L6-v2": 384,
    "text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536,
}


# Research knobs of the touch policy that were settings once and are now fixed defaults in code
# (services/planner/touch_policy.py). Settings ignores unknown names, so a deployment that still
# sets one would silently run without it: the composition root names each one it finds instead.
RETIRED_SETTINGS = frozenset({
    "VIBE_FUSION_STAND_IN", "VIBE_SPECULATE_NEIGHBORS", "VIBE_SPECULATE_SOURCES", "VIBE_TOUCH_AUTO_AFTER",
    "VIBE_TOUCH_AUTO_BELOW", "VIBE_TOUCH_AUTO_DIG_STEP", "VIBE_TOUCH_AUTO_DISAGREE",
    "VIBE_TOUCH_AUTO_DISAGREE_DIG_STEP", "VIBE_TOUCH_AUTO_DISAGREE_PROBE_ROUNDS", "VIBE_TOUCH_DEPTH_FACTOR",
    "VIBE_TOUCH_DIG_MAX", "VIBE_TOUCH_DIG_STEP", "VIBE_TOUCH_FIRST_UNDER_BUDGET", "VIBE_TOUCH_MIN_DEPTH",
    "VIBE_TOUCH_POLICY", "VIBE_TOUCH_PROBE_ROUNDS", "VIBE_TOUCH_REACH_BEST", "VIBE_TOUCH_REACH_UNTIL",
    "VIBE_TOUCH_REMEMBER", "VIBE_TOUCH_SIMILAR", "VIBE_TOUCH_STABLE_ZONE", "VIBE_TOUCH_UNSTABLE_LEAST",
})


def retired_settings(environ: Mapping[str, str] | None = None, env_file: Path = Path(".env")) -> list[str]:
    """The retired setting names the environment or `.env` still sets (case as Settings reads them)."""
    names = set(os.environ if environ is None else environ)
    if env_file.is_file():
        for line in env_file.read_text(encoding="utf-8", errors="replace").splitlines():
            name, sep, _ = line.strip().removeprefix("export ").partition("=")
            if sep:
                names.add(name.strip())
    return sorted(n for n in names if n.upper() in RETIRED_SETTINGS)


# pydantic lists inherited fields base by base from the last base to the first, so the bases are
# named in reverse of the order the settings reference (docs/configuration.md) shows them.
class Settings(McpSettings, DistributedSettings, LifecycleSettings, AccessSettings, DocumentSettings, ReadSettings,
               EmbeddingSettings, DeploymentSettings, BaseSettings):
    # `.env` in the working directory fills what the environment leaves unset (the environment wins).
    model_config = SettingsConfigDict(env_prefix="VIBE_", extra="ignore", populate_by_name=True,
                                      env_file=".env", env_file_encoding="utf-8")

    @model_validator(mode="after")
    def _known_languages(self) -> Settings:
        self.language_map()  # ValueError (naming the supported languages) at start, not at a write
        return self

    @model_validator(mode="after")
    def _inner_voice_gate(self) -> Settings:
        if self.surr_enable_inner_voice is not None:
            self.enable_inner_voice = self.surr_enable_inner_voice == "1"
        return self

    @model_validator(mode="after")
    def _surr_embedder(self) -> Settings:
        """SURR_EMBED_* fill what the VIBE_ names leave unset; a declared dimension that a known
        model contradicts is a start-up error (an unknown model is checked when it is loaded)."""
        given = self.model_fields_set
        if self.surr_embed_provider is not None and "embedder" not in given:
            provider = self.surr_embed_provider.strip().lower()
            if provider not in SURR_PROVIDERS:
                raise ValueError(f"SURR_EMBED_PROVIDER {self.surr_embed_provider!r} is not one of "
                                 f"{sorted(SURR_PROVIDERS)}")
            self.embedder = SURR_PROVIDERS[provider]
        if self.surr_embed_model and "embed_model" not in given:
            self.embed_model = self.surr_embed_model.strip()
        if self.surr_embed_dim is not None and "embed_dim" not in given:
            self.embed_dim = self.surr_embed_dim
        dim = self.declared_embed_dim()
        known = KNOWN_MODEL_DIMS.get(self.embed_model)
        if dim is not None and self.embedder != "hash" and known is not None and known != dim:
            raise ValueError(f"SURR_EMBED_DIM={dim} disagrees with the model {self.embed_model!r}, whose "
                             f"vectors have {known} dimensions")
        return self

    def declared_embed_dim(self) -> int | None:
        """The dimension the operator declared for the configured model (SURR_EMBED_DIM), if any."""
        return self.surr_embed_dim

    @model_validator(mode="after")
    def _profile_defaults(self) -> Settings:
        distributed = self.profile == "distributed"
        if self.queue is None:
            self.queue = "celery" if distributed else "embedded"
        if self.lexical is None:
            self.lexical = "opensearch" if distributed else "embedded"
        if self.vectors is None:
            self.vectors = "qdrant" if distributed else "embedded"
        if self.store is None:
            self.store = "postgres" if distributed else "sqlite"
        return self

    def keys_json(self) -> str:
        return json.dumps([k.model_dump() for k in self.api_keys])
