"""Which certificate-bearing documents an external provider may receive, and the handler's
decision per job: routed elsewhere, gated by certificates, or embedded."""

from __future__ import annotations

from typing import Any

import pytest

from services.core.handlers import in_space, route_or_gate
from shared.model import Decision
from shared.policy.provider_certs import ProviderCerts, provider_of

OPENAI, LOCAL, HASH = "openai:text-embedding-3-small", "local:all-MiniLM-L6-v2", "hash:v1@64"


def test_provider_of_names_only_external_providers() -> None:
    assert (provider_of(OPENAI), provider_of(LOCAL), provider_of(HASH)) == ("openai", None, None)


@pytest.mark.parametrize("listed, model, certs, allowed", [
    ({}, OPENAI, [], True),                                   # no certificates: not gated
    ({}, OPENAI, ["acme:public"], False),                     # default: certificates stay local
    ({}, LOCAL, ["hr:confidential"], True),                   # a local model gets everything
    ({}, HASH, ["hr:confidential"], True),
    ({"openai": ["acme:public"]}, OPENAI, ["acme:public"], True),
    ({"openai": ["acme:public"]}, OPENAI, ["acme:public", "hr:confidential"], False),  # every one must be listed
    ({"openai": ["acme:*"]}, OPENAI, ["acme:public", "acme:staff"], True),
    ({"openai": ["acme:*"]}, OPENAI, ["acmex:public"], False),
    ({"openai": ["acme:public"]}, LOCAL, ["hr:confidential"], True),
])
def test_allows(listed: dict[str, list[str]], model: str, certs: list[str], allowed: bool) -> None:
    assert ProviderCerts(listed).allows(model, certs) is allowed


@pytest.mark.parametrize("raw, message", [
    ({"local": ["a:b"]}, "not an external provider"),
    ({"openai": "acme:public"}, "must be a list"),
    ({"openai": ["nocolon"]}, "not 'issuer:name'"),
    ({"openai": ["a b:c"]}, "not 'issuer:name'"),
])
def test_bad_settings_raise(raw: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProviderCerts(raw)


def test_route_or_gate() -> None:
    gate = ProviderCerts({"openai": ["acme:public"]})
    embed = Decision("embed", "default")
    assert route_or_gate(embed, "core", OPENAI, ["acme:public"], gate) == embed
    assert route_or_gate(embed, "core", OPENAI, ["hr:x"], gate) == Decision("defer", "cert")
    assert route_or_gate(embed, "private", LOCAL, ["hr:x"], gate) == embed
    routed = Decision("embed", "policy:rule0", None, "private")
    assert route_or_gate(routed, "core", LOCAL, [], gate) == Decision("defer", "routed")
    assert route_or_gate(routed, "private", LOCAL, ["hr:x"], gate) == routed
    assert route_or_gate(routed, "private@v2", LOCAL, [], gate) == routed  # a migrated version of it
    # routing to an external space does not lift the certificate gate
    assert route_or_gate(routed, "private", OPENAI, ["hr:x"], gate) == Decision("defer", "cert")
    denied = Decision("ignore", "writer_deny")
    assert route_or_gate(denied, "core", OPENAI, ["hr:x"], gate) == denied


def test_in_space() -> None:
    assert in_space("core", "core") and in_space("core@v2", "core")
    assert not in_space("core2", "core") and not in_space("private", "core")
