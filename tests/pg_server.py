"""A fresh PostgreSQL database per test, on the machine's server (ROCKMEM_TEST_POSTGRES names another); the
tests that need one are skipped, saying why, only when no server answers there."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

ADMIN_URL = os.environ.get("ROCKMEM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin() -> object:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[test]')")
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server answers at {ADMIN_URL} ({str(exc).strip().splitlines()[0]})")


@pytest.fixture
def database() -> Iterator[str]:
    """The URL of a new, empty database, dropped afterwards."""
    admin = _admin()
    name = "rockmem_test_" + secrets.token_hex(5)
    admin.execute(f"CREATE DATABASE {name}")  # type: ignore[attr-defined]
    base = ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[attr-defined]
        admin.close()  # type: ignore[attr-defined]
