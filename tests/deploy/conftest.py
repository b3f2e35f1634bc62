"""Databases on the throwaway PostgreSQL server (`postgres_server`, tests/conftest.py) for the
tests of the deployment's Dagster instance.

`postgres_database` gives each test a database of its own, owned by a login
role with a password (not a superuser), as a deployment would have.
"""

from __future__ import annotations

import re
import secrets

import pytest

from mirror_pipeline.local.postgres import PostgresServer


@pytest.fixture
def postgres_database(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A new, empty database owned by the test user (named after the test)."""
    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40] + "_" + secrets.token_hex(3)
    postgres_server.create_database(name)
    return name
