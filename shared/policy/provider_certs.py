"""Which documents an external embedding provider may receive, by their certificates.

A document's certificates (`_certs`, "issuer:name") say who may read it; sending its text to an
outside API is a kind of reading. So a document that carries certificates goes to an external
provider only when every one of them is listed for that provider (`VIBE_PROVIDER_CERTS`); the
default, an empty list, keeps every certificate-bearing document local. Documents without
certificates and local models (whose text never leaves the process) are not gated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# Model-id prefixes of providers outside this deployment (shared/model_specs.py): a model id
# is "<kind>:<name>"; `local` and `hash` run in process.
EXTERNAL_PROVIDERS: frozenset[str] = frozenset({"openai"})
REASON_CERT = "cert"
_CERT = re.compile(r"^[^:\s]{1,128}:(\*|[^\s]{1,128})$")


def provider_of(model_id: str) -> str | None:
    """The external provider a model id names, or None for a model that runs here."""
    kind = model_id.split(":", 1)[0]
    return kind if kind in EXTERNAL_PROVIDERS else None


class ProviderCerts:
    """`allows(model_id, certs)`: whether a document with `certs` may be sent to that model."""

    def __init__(self, allowed: Mapping[str, Sequence[str]] | None = None) -> None:
        self.allowed: dict[str, frozenset[str]] = {}
        for provider, certs in (allowed or {}).items():
            if provider not in EXTERNAL_PROVIDERS:
                raise ValueError(f"provider_certs: {provider!r} is not an external provider; use "
                                 f"{sorted(EXTERNAL_PROVIDERS)} (local models receive every document)")
            if isinstance(certs, str) or len(certs) > 1000:
                raise ValueError(f"provider_certs.{provider} must be a list of at most 1000 certificates")
            bad = [c for c in certs if not isinstance(c, str) or not _CERT.match(c)]
            if bad:
                raise ValueError(f"provider_certs.{provider}: {str(bad[:3])[:200]} are not 'issuer:name' "
                                 "or 'issuer:*'")
            self.allowed[provider] = frozenset(certs)

    def allows(self, model_id: str, certs: Sequence[str]) -> bool:
        provider = provider_of(model_id)
        if provider is None or not certs:
            return True
        listed = self.allowed.get(provider, frozenset())
        return all(c in listed or f"{c.split(':', 1)[0]}:*" in listed for c in certs)
