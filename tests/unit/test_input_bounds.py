"""`_acl` bounds each principal's size and the ACL's total size (UTF-8
bytes) with a clear invalid_params, below what the index mappings accept."""

from __future__ import annotations

import pytest

from services.core.documents import DocumentService
from shared.config import Settings
from shared.errors import ErrorCode, VibeError

acl = DocumentService._acl


def test_principal_and_total_bounds() -> None:
    assert acl(["user:" + "a" * 507]) == ["user:" + "a" * 507]  # 512 bytes: the bound itself
    with pytest.raises(VibeError) as e:
        acl(["user:" + "a" * 508])
    assert e.value.code is ErrorCode.INVALID_PARAMS and "512 bytes" in e.value.message
    with pytest.raises(VibeError, match="at most 65536 bytes in all"):
        acl([f"g:{i:04d}:" + "p" * 193 for i in range(330)])  # 200 B x 330 = 66 kB
    assert len(acl([f"g:{i:04d}:" + "p" * 193 for i in range(320)])) == 320  # 64 kB


def test_bounds_count_utf8_bytes_not_characters() -> None:
    with pytest.raises(VibeError, match="one is 600"):
        acl(["é" * 300])  # 300 characters, 600 bytes
    assert acl(["é" * 256]) == ["é" * 256]


def test_duplicates_count_once_and_an_empty_acl_is_refused() -> None:
    assert acl(["g:" + "x" * 500] * 1000) == ["g:" + "x" * 500]
    with pytest.raises(VibeError):  # nobody could read, rewrite or delete such a document
        acl([])


def test_configured_bounds_apply() -> None:
    with pytest.raises(VibeError):
        acl(["g:abcdef"], max_principal_bytes=4)
    with pytest.raises(VibeError):
        acl(["g:a", "g:b"], max_bytes=5)


def test_defaults_are_the_settings_defaults() -> None:
    s = Settings()
    d = DocumentService._acl.__defaults__
    assert d == (s.acl_max_principal_bytes, s.acl_max_bytes)
