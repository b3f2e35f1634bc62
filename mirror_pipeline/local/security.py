"""The throwaway credentials of a local cluster root, for its security mode.

Modes: `plaintext` (no security at all), `ssl` (mutual TLS: every client shows
a certificate `CN=<user>` signed by the root's CA), `sasl_plaintext` and
`sasl_ssl` (SCRAM-SHA-512 users with random passwords, the latter over TLS).
One set of credentials serves all the clusters of a root: each cluster is
formatted with the same users, and `add_user` adds one to every cluster.

Identities:

- `broker`: the broker's own identity (inter-broker traffic; in `ssl` mode also
  the controller listener's client). A super user.
- `controller` (SASL modes): the broker's identity on the controller listener,
  where it logs in with SASL/PLAIN against a user defined in its own config.
  SCRAM cannot serve there: SCRAM credentials live in the metadata log that the
  controller itself serves. A super user.
- `admin`: a super user for operators and tests.
- users added later: no ACL, so they may do nothing until granted.

Secrets are kept in files only their owner may read: the passwords in
`<root>/credentials.json`, the private keys under `<root>/tls/`. They are never
printed, logged or put into an exception message: what leaves this module for
display is a file path or a `${VAR}` reference.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import string
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirror_pipeline.local.certificates import (
    ensure_broker_keystore,
    ensure_ca,
    ensure_client_certificate,
    write_private,
)
from mirror_pipeline.model.errors import LocalClusterError

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "plaintext", "ssl", "sasl_plaintext", "sasl_ssl"
MODES = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SCRAM_MECHANISM = "SCRAM-SHA-512"
BROKER_USER, CONTROLLER_USER, ADMIN_USER = "broker", "controller", "admin"
CREDENTIALS_FILE = "credentials.json"
ENV_FILE = "credentials.env"
TLS_DIR = "tls"
#: Letters and digits only: nothing to escape in JAAS lines, SCRAM format arguments or env files.
_PASSWORD_ALPHABET = string.ascii_letters + string.digits
_PASSWORD_LENGTH = 32
#: A user name is also a certificate CN and part of an environment variable's name.
_USER_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise LocalClusterError(f"unknown security mode {mode!r}; choose one of {', '.join(MODES)}")
    return mode


def is_sasl(mode: str) -> bool:
    return mode in (SASL_PLAINTEXT, SASL_SSL)


def is_tls(mode: str) -> bool:
    return mode in (SSL, SASL_SSL)


def protocol(mode: str) -> str:
    """Kafka's name of the client listener's security protocol (`SASL_SSL`, ...)."""
    return mode.upper()


@dataclass(frozen=True)
class Credentials:
    """The users of a root and where their secrets are; passwords stay out of repr."""

    root: Path
    mode: str
    #: user -> SCRAM/PLAIN password (SASL modes) or None (ssl mode: certificates instead).
    passwords: dict[str, str | None] = field(repr=False)

    @property
    def users(self) -> list[str]:
        return sorted(self.passwords)

    @property
    def tls_dir(self) -> Path:
        return self.root / TLS_DIR

    @property
    def ca_file(self) -> Path:
        return self.tls_dir / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.tls_dir / "broker.pem"

    def password(self, user: str) -> str:
        self.require(user)
        value = self.passwords[user]
        if value is None:
            raise LocalClusterError(f"user {user!r} has no password in {self.mode} mode")
        return value

    def require(self, user: str) -> None:
        if user not in self.passwords:
            raise LocalClusterError(
                f"no local user {user!r} in {self.root}; known: {', '.join(self.users)} "
                "(create one with LocalKafka.create_user)"
            )

    def principal(self, user: str) -> str:
        """How the brokers' authorizer names `user`."""
        return f"User:CN={user}" if self.mode == SSL else f"User:{user}"

    @property
    def super_users(self) -> list[str]:
        users = [BROKER_USER, ADMIN_USER] if self.mode == SSL else [BROKER_USER, CONTROLLER_USER, ADMIN_USER]
        return [self.principal(u) for u in users]

    @property
    def secret_values(self) -> list[str]:
        return [p for p in self.passwords.values() if p]


def _credentials_path(root: Path) -> Path:
    return Path(root) / CREDENTIALS_FILE


def _read_passwords(root: Path) -> dict[str, str | None] | None:
    try:
        data = json.loads(_credentials_path(root).read_text())
        users = data["users"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        # Never quote the file: it holds the passwords.
        raise LocalClusterError(
            f"{_credentials_path(root)} is unreadable or damaged; run `local down` and delete {root} to start afresh"
        ) from None
    if not isinstance(users, dict) or not all(isinstance(v, (str, type(None))) for v in users.values()):
        raise LocalClusterError(f"{_credentials_path(root)} is damaged; delete {root} to start afresh")
    return dict(users)


def _write_passwords(root: Path, passwords: dict[str, str | None]) -> None:
    write_private(_credentials_path(root), json.dumps({"users": passwords}, indent=2, sort_keys=True) + "\n")


def _new_password() -> str:
    return "".join(secrets.choice(_PASSWORD_ALPHABET) for _ in range(_PASSWORD_LENGTH))


def _builtin_users(mode: str) -> list[str]:
    if is_sasl(mode):
        return [BROKER_USER, CONTROLLER_USER, ADMIN_USER]
    return [BROKER_USER, ADMIN_USER] if mode == SSL else []


def ensure_credentials(root: Path, mode: str) -> Credentials | None:
    """The root's credentials for `mode`, making whatever is missing; None in plaintext mode.

    Callers hold the root's lock. Users already recorded keep their secrets, so
    a restart changes nothing the running clients use.
    """
    if check_mode(mode) == PLAINTEXT:
        return None
    root = Path(root)
    passwords = _read_passwords(root) or {}
    changed = False
    for user in _builtin_users(mode):
        if user not in passwords:
            passwords[user] = None
            changed = True
    if is_sasl(mode):
        for user, value in passwords.items():
            if value is None:
                passwords[user] = _new_password()
                changed = True
    if changed or not _credentials_path(root).exists():
        _write_passwords(root, passwords)
    creds = Credentials(root, mode, passwords)
    if is_tls(mode):
        _ensure_certificates(creds)
    return creds


def _ensure_certificates(creds: Credentials) -> None:
    creds.tls_dir.mkdir(mode=0o700, exist_ok=True)
    ca = ensure_ca(creds.tls_dir)
    ensure_broker_keystore(creds.tls_dir, ca, BROKER_USER)
    if creds.mode == SSL:
        for user in creds.users:
            if user != BROKER_USER:
                ensure_client_certificate(creds.tls_dir, ca, user)


def read_credentials(root: Path, mode: str) -> Credentials | None:
    """The credentials an earlier `up` made; None in plaintext mode."""
    if check_mode(mode) == PLAINTEXT:
        return None
    passwords = _read_passwords(root)
    if passwords is None:
        raise LocalClusterError(
            f"no credentials in {root} yet: start the clusters with `local up --security {mode}` first"
        )
    return Credentials(Path(root), mode, passwords)


def add_user(creds: Credentials | None, name: str) -> Credentials:
    """Record user `name` (a random password, or a client certificate in ssl mode); idempotent."""
    if creds is None:
        raise LocalClusterError("plaintext local clusters have no users; start them with `local up --security`")
    if not _USER_NAME.match(name):
        raise LocalClusterError(
            f"user name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    if name in creds.passwords:
        return creds
    passwords = {**creds.passwords, name: _new_password() if is_sasl(creds.mode) else None}
    _write_passwords(creds.root, passwords)
    updated = Credentials(creds.root, creds.mode, passwords)
    if updated.mode == SSL:
        _ensure_certificates(updated)
    return updated


def client_settings(creds: Credentials | None, bootstrap: str, user: str) -> dict[str, str]:
    """The librdkafka settings a client needs to connect as `user`."""
    if creds is None:
        return {"bootstrap.servers": bootstrap}
    creds.require(user)
    settings = {"bootstrap.servers": bootstrap, "security.protocol": protocol(creds.mode)}
    if is_sasl(creds.mode):
        settings.update(
            {"sasl.mechanism": SCRAM_MECHANISM, "sasl.username": user, "sasl.password": creds.password(user)}
        )
    if is_tls(creds.mode):
        settings["ssl.ca.location"] = str(creds.ca_file)
    if creds.mode == SSL:
        settings["ssl.certificate.location"] = str(creds.tls_dir / f"{user}.pem")
        settings["ssl.key.location"] = str(creds.tls_dir / f"{user}-key.pem")
    return settings


def scram_format_args(creds: Credentials | None) -> list[str]:
    """`--add-scram` arguments of `StorageTool format` for the users that must exist at first start (KIP-900).

    The controller's PLAIN user lives in the broker's own config, not in the metadata log.
    """
    if creds is None or not is_sasl(creds.mode):
        return []
    args = []
    for user in creds.users:
        if user != CONTROLLER_USER:
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={creds.password(user)}]"]
    return args


def install_scram_user(admin_settings: dict[str, str], user: str, password: str, timeout: float = 30.0) -> None:
    """Create or update `user`'s SCRAM-SHA-512 credential on one running cluster."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    # A callback among the settings: confluent-kafka takes it, its hints say str | int | float.
    conf: dict[str, Any] = {**admin_settings, "log_level": 0, "error_cb": lambda _err: None}
    admin = AdminClient(conf)
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    deadline = time.monotonic() + timeout
    try:
        admin.alter_user_scram_credentials([upsert])[user].result(timeout=timeout)
        # The controller has committed it; wait until the broker serves it too, so the
        # caller's first login with it cannot race the broker's metadata update.
        while True:
            try:
                # Asked for named users it answers a dict by user; its hints also allow a lone future.
                admin.describe_user_scram_credentials([user])[user].result(timeout=timeout)  # type: ignore[index]
                return
            except (KafkaException, TimeoutError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
    except (KafkaException, TimeoutError) as exc:
        # Only the error's name: nothing of the request (it held the password) reaches the message.
        error = exc.args[0] if exc.args else None
        reason = error.name() if isinstance(error, KafkaError) else type(exc).__name__
        raise LocalClusterError(
            f"could not create SCRAM user {user!r} on {admin_settings.get('bootstrap.servers')}: {reason}"
        ) from None


def redact(text: str, creds: Credentials | None) -> str:
    """`text` with every password of `creds` replaced by `***` (for tool output quoted in errors)."""
    for secret in creds.secret_values if creds is not None else []:
        text = text.replace(secret, "***")
    return text


def env_var(cluster: str, user: str) -> str:
    """`US_WEST_ADMIN_PASSWORD` for cluster us-west, user admin."""
    return re.sub(r"[^A-Z0-9]+", "_", f"{cluster}_{user}_PASSWORD".upper())


def with_references(cluster: str, settings: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(settings with each secret replaced by a `${VAR}` reference, VAR -> value)."""
    shown, values = dict(settings), {}
    if "sasl.password" in settings:
        var = env_var(cluster, settings["sasl.username"])
        shown["sasl.password"] = f"${{{var}}}"
        values[var] = settings["sasl.password"]
    return shown, values


def write_env_file(root: Path, values: dict[str, Any]) -> Path:
    """`<root>/credentials.env` (0600): one `export VAR=value` line each, for `source`."""
    path = Path(root) / ENV_FILE
    lines = [f"export {var}={shlex.quote(str(value))}\n" for var, value in sorted(values.items())]
    write_private(path, "# Secrets of the local clusters under this directory; keep private.\n" + "".join(lines))
    return path
