"""The HTTP transport's safety settings, without a socket (the real server is tested in tests/e2e/test_http.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ConfigError
from rockmem_mcp.server.app import build_server
from rockmem_mcp.server.http import BearerToken, http_app, is_loopback, transport_security

TOKEN = "correct-horse-battery-staple-42"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "memory.example", ""])
def test_addresses_beyond_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_the_default_bind_is_loopback(tmp_path: Path) -> None:
    assert Settings.load({"home": tmp_path}, env={}).host == "127.0.0.1"


def test_loopback_admits_its_own_names_and_the_allowed_hosts_only(tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path}, env={"ROCKMEM_ALLOWED_HOSTS": "memory.internal:*, mem:8765"})
    security = transport_security(settings)
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts == ["127.0.0.1:*", "localhost:*", "[::1]:*", "memory.internal:*", "mem:8765"]
    assert "http://memory.internal:*" in security.allowed_origins and "https://localhost:*" in security.allowed_origins


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "::"])
def test_a_public_bind_with_a_token_serves_any_host(tmp_path: Path, host: str) -> None:
    settings = Settings.load({"home": tmp_path, "host": host}, env={"ROCKMEM_AUTH_TOKEN": TOKEN})
    assert not transport_security(settings).enable_dns_rebinding_protection  # the token guards it


def test_allowed_hosts_narrow_a_public_bind_to_them_and_its_address(tmp_path: Path) -> None:
    env = {"ROCKMEM_AUTH_TOKEN": TOKEN, "ROCKMEM_ALLOWED_HOSTS": "memory.internal:*"}
    for host, expected in (
        ("10.0.0.5", ["10.0.0.5:*", "memory.internal:*"]),
        ("fd00::2", ["[fd00::2]:*", "memory.internal:*"]),
        ("0.0.0.0", ["memory.internal:*"]),
        ("::", ["memory.internal:*"]),
    ):
        security = transport_security(Settings.load({"home": tmp_path, "host": host}, env=env))
        assert security.enable_dns_rebinding_protection and security.allowed_hosts == expected


def test_beyond_loopback_the_app_needs_a_token(tmp_path: Path) -> None:
    public = Settings.load({"home": tmp_path, "host": "0.0.0.0"}, env={})
    with pytest.raises(ConfigError, match=r"refusing to serve on 0\.0\.0\.0 without a token.*ROCKMEM_AUTH_TOKEN"):
        http_app(build_server(public), public)
    guarded = Settings.load({"home": tmp_path, "host": "0.0.0.0"}, env={"ROCKMEM_AUTH_TOKEN": TOKEN})
    assert isinstance(http_app(build_server(guarded), guarded), BearerToken)
    local = Settings.load({"home": tmp_path}, env={})
    assert not isinstance(http_app(build_server(local), local), BearerToken)  # loopback: no token needed


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ROCKMEM_AUTH_TOKEN: String should have at least 16 characters"):
        Settings.load({"home": tmp_path}, env={"ROCKMEM_AUTH_TOKEN": "short"})
