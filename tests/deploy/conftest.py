"""A throwaway PostgreSQL server for the tests of the deployment's Dagster instance.

`postgres_server` (one per test session) is `mirror_pipeline.local.postgres`'s
server (fsync off). Without the binaries (or, as root, without a `postgres`
user) the tests that ask for it fail, saying what is missing: `make setup`
installs them, so their absence means the machine was not set up, not that
the tests do not apply.

`postgres_database` gives each test a database of its own, owned by a login
role with a password (not a superuser), as a deployment would have.
"""

from __future__ import annotations

import re
import secrets
from typing import Iterator

import pytest

from mirror_pipeline.local.postgres import PostgresServer, PostgresUnavailable, local_postgres


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        with local_postgres() as server:
            yield server
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def postgres_database(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> str:
    """A new, empty database owned by the test user (named after the test)."""
    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40] + "_" + secrets.token_hex(3)
    postgres_server.create_database(name)
    return name
