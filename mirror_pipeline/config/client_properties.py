"""A cluster's Kafka client properties, checked when the file is loaded (R-CFG-1, R-CFG-4).

Before any connection is made, every cluster's properties are checked:

- `bootstrap.servers` is a comma-separated list of `host:port` (an IPv6
  address as `[address]:port`, an optional `PLAINTEXT://`-style prefix), each
  port 1-65535: checked here, as librdkafka quietly defaults a missing port;
- a file the client reads (CA, certificate, key, keystore, CRL, keytab) exists
  as a readable regular file (a CA location may be a directory, or `probe`);
- `sasl.mechanism(s)` comes with a SASL `security.protocol` (librdkafka only
  warns, and the client then authenticates with nothing);
- no value holds a control character (U+0000-U+001F, U+007F-U+009F), but for
  the line breaks and tabs of PEM text (`ssl.key.pem`, ...). librdkafka takes
  every property as a C string and silently cuts it at a NUL (a password
  `pw\\x00x` would authenticate as `pw`) and SASL PLAIN separates its fields
  with NUL; no name, host, path or credential is meant to hold the others,
  which come from typos and paste errors (a YAML `"\\e"`, a `|` block that
  keeps its last newline) and would otherwise reach logs, where an ESC drives
  the terminal and a newline forges a line. The refusal names the character,
  for a secret only that there is one;
- names and values pass librdkafka itself: a producer and a consumer are
  built from the properties *without* `bootstrap.servers` (so they never
  connect) and closed at once. Their refusal is reported by the property's
  name and the Kafka error's name only: librdkafka's text may quote a value.

OIDC is probed with its token fetch switched off (librdkafka would otherwise
call the token endpoint while the client is built), and properties that load
shared objects (`plugin.library.paths`, `ssl.engine.location`) are left out of
the probe: loading a configuration runs no code and opens no connection.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from mirror_pipeline.config.redaction import is_secret_key

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# Properties that name a file the client reads; True: a directory (or `probe`) is fine too.
_FILES = {
    "ssl.ca.location": True,
    "https.ca.location": True,
    "ssl.certificate.location": False,
    "ssl.key.location": False,
    "ssl.keystore.location": False,
    "ssl.crl.location": False,
    "sasl.kerberos.keytab": False,
    "sasl.oauthbearer.assertion.private.key.file": False,
    "sasl.oauthbearer.assertion.jwt.template.file": False,
}
# Set through confluent-kafka's Python API (callables, mappings), never from a file.
_PYTHON_ONLY = frozenset(
    {"error_cb", "throttle_cb", "stats_cb", "oauth_cb", "logger", "on_delivery", "on_commit", "default.topic.config"}
)
_NOT_PROBED = frozenset({"bootstrap.servers", "plugin.library.paths", "ssl.engine.location"})
_ENUMS = {
    "security.protocol": "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    "sasl.mechanism": "GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
    "sasl.mechanisms": "GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER",
    "sasl.oauthbearer.method": "default or oidc",
    "ssl.endpoint.identification.algorithm": "none or https",
    "broker.address.family": "any, v4 or v6",
    "client.dns.lookup": "use_all_dns_ips or resolve_canonical_bootstrap_servers_only",
    "compression.type": "none, gzip, snappy, lz4 or zstd",
    "isolation.level": "read_uncommitted or read_committed",
    "auto.offset.reset": "smallest, earliest, beginning, largest, latest, end or error",
}
_BOOTSTRAP_ALLOWED = (
    "allowed: a comma-separated list of host:port (an IPv6 address as [address]:port), each port 1-65535"
)
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_RANGE = re.compile(r"allowed range (-?\d+)\.\.(-?\d+)")
_SSL_FILE_KEY = re.compile(r"\b(ssl\.[a-z.]+(?:location|pem)|https\.ca\.location)\b")
_PROBE_GROUP = "mirror-pipeline.config-check"
# Unicode's control characters (category Cc); PEM text may also hold line breaks and tabs.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_PEM_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CONTROL_ALLOWED = "allowed: printable text (line breaks and tabs only in PEM text, a property ending in .pem)"

# librdkafka's log lines (a missing bootstrap.servers, `debug`) go nowhere during a probe.
_SILENT = logging.getLogger(f"{__name__}.probe")
_SILENT.propagate = False
_SILENT.addHandler(logging.NullHandler())
_SILENT.disabled = True


def client_property_problems(at: str, props: Mapping[str, str]) -> list[str]:
    """Problems of one cluster's properties, as `<at>.<key>: <reason>` lines."""
    control = _control_problems(props)
    refused = {key for key, _ in control}
    problems: list[tuple[str | None, str]] = []
    servers = props.get("bootstrap.servers", "")
    if servers.strip() and "bootstrap.servers" not in refused:
        problems += _bootstrap_problems(servers)
    for key in props:
        if key in _PYTHON_ONLY:
            problems.append(
                (
                    key,
                    "is a confluent-kafka Python callback or object, which a configuration file cannot set; remove it",
                )
            )
        elif key == "metadata.broker.list":
            problems.append((key, "is librdkafka's other name for bootstrap.servers; set bootstrap.servers only"))
    problems += _sasl_problems(props) + _file_problems({k: v for k, v in props.items() if k not in refused})
    bad = {key for key, _ in problems}
    # A value refused for its control characters is probed without them: librdkafka judges the rest,
    # and its absence does not read as a missing property (`sasl.password`).
    probed = {
        k: _control(k).sub("", v) if k in refused else v
        for k, v in props.items()
        if k not in bad and k not in _NOT_PROBED
    }
    problems = control + problems
    problems += _probe_problems(probed)
    return [f"{at}.{key}: {reason}" if key else f"{at}: {reason}" for key, reason in problems]


def _bootstrap_problems(servers: str) -> list[tuple[str, str]]:
    entries = servers.split(",")

    def which(i: int) -> str:
        return f"entry {i} of {len(entries)} " if len(entries) > 1 else ""

    found = [f"{which(i)}{why}" for i, entry in enumerate(entries, 1) if (why := _server_problem(entry))]
    return [("bootstrap.servers", f"{', '.join(found)}; {_BOOTSTRAP_ALLOWED}")] if found else []


def _server_problem(entry: str) -> str | None:
    entry = entry.strip()
    if not entry:
        return "is empty"
    scheme, sep, rest = entry.partition("://")
    if not sep:
        rest = entry
    elif scheme.upper() not in PROTOCOLS:
        return "has an unknown protocol prefix"
    if rest.startswith("["):
        address, closed, tail = rest[1:].partition("]")
        if not closed:
            return "has an unclosed ["
        try:
            ipaddress.IPv6Address(address.split("%", 1)[0])
        except ValueError:
            return "has no valid IPv6 address between [ and ]"
        if not tail.startswith(":"):
            return "has no port"
        port = tail[1:]
    else:
        host, colon, port = rest.rpartition(":")
        if not colon:
            return "has no port"
        if ":" in host:
            return "is not host:port (an IPv6 address needs brackets: [address]:port)"
        if not host:
            return "has no host"
        if not _HOST.fullmatch(host):
            return "has a host name with characters other than [A-Za-z0-9._-]"
    if not port:
        return "has no port"
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
        return "has a port that is not a number from 1 to 65535"
    return None


def _control(key: str) -> re.Pattern[str]:
    """The control characters the value of `key` must not hold."""
    return _PEM_CONTROL if key.endswith(".pem") else _CONTROL


def _control_problems(props: Mapping[str, str]) -> list[tuple[str, str]]:
    problems = []
    for key, value in props.items():
        found = sorted(set(_control(key).findall(value)))
        if not found:
            continue
        if is_secret_key(key):  # not even which character: the value is a secret
            what = "holds a control character"
        else:
            what = (
                f"holds {'a control character' if len(found) == 1 else 'control characters'} "
                f"({', '.join(f'U+{ord(c):04X}' for c in found)})"
            )
        trailing = not _CONTROL.search(value.rstrip("\n"))
        hint = (
            (
                "; it ends with a line break, as a YAML block scalar (| or >) or a value read from a file "
                "keeps one: write |- or >-, or strip it"
            )
            if trailing
            else ""
        )
        problems.append((key, f"{what}{hint}; {_CONTROL_ALLOWED}"))
    return problems


def _sasl_problems(props: Mapping[str, str]) -> list[tuple[str | None, str]]:
    problems: list[tuple[str | None, str]] = []
    mechanisms = [key for key in ("sasl.mechanism", "sasl.mechanisms") if key in props]
    if len(mechanisms) == 2:
        problems.append((None, "sasl.mechanism and sasl.mechanisms are one property; set only one"))
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol in PROTOCOLS and protocol not in _SASL_PROTOCOLS:
        problems += [
            (
                key,
                f"has no effect unless security.protocol is SASL_PLAINTEXT or SASL_SSL; set "
                f"security.protocol to one of them, or remove {key}",
            )
            for key in mechanisms
        ]
    if (
        props.get("sasl.oauthbearer.method", "").lower() == "oidc"
        and not props.get("sasl.oauthbearer.token.endpoint.url", "").strip()
    ):
        problems.append(("sasl.oauthbearer.method", "oidc needs sasl.oauthbearer.token.endpoint.url; set it"))
    return problems


def _file_problems(props: Mapping[str, str]) -> list[tuple[str | None, str]]:
    problems: list[tuple[str | None, str]] = []
    for key, directory_ok in _FILES.items():
        value = props.get(key, "")
        if not value or (directory_ok and value == "probe"):
            continue
        allowed = "an existing, readable file" + (", a directory of CA certificates, or probe" if directory_ok else "")
        try:
            path = Path(value)
            kind_ok = path.is_file() or (directory_ok and path.is_dir())
            exists = path.exists()
        except (OSError, ValueError):
            problems.append((key, f"is not a usable path; allowed: {allowed}"))
            continue
        if not exists:
            problems.append((key, f"names a file that does not exist; allowed: {allowed}"))
        elif not kind_ok:
            problems.append((key, f"names something that is not a regular file; allowed: {allowed}"))
        elif not os.access(path, os.R_OK):
            problems.append((key, f"names a file this process cannot read; allowed: {allowed}"))
    return problems


def _probe_problems(props: Mapping[str, str]) -> list[tuple[str | None, str]]:
    for client in (Producer, Consumer):
        refused = _refusal(client, props)
        if refused is None:
            continue
        if _at_creation(refused):
            return [_combination(props, refused)]
        # A name or a value refused as it was set: find each such property on its own
        # (only such refusals count, as one property alone may lack what it needs).
        single: list[tuple[str | None, str]] = [
            (key, _single_reason(key, err))
            for key in props
            if (err := _refusal(client, {key: props[key]})) is not None and not _at_creation(err)
        ]
        return single or [_combination(props, refused)]
    return []


def _at_creation(refused: tuple[str, str]) -> bool:
    """True for a refusal of the properties together, as the client was built (not as one was set)."""
    return refused[1].startswith("Failed to create")


def _refusal(client: type, props: Mapping[str, str]) -> tuple[str, str] | None:
    """(error name, librdkafka's text) if `client` cannot be built from `props`, else None."""
    conf: dict[str, object] = dict(props)
    if props.get("sasl.oauthbearer.method", "").lower() == "oidc":
        conf["sasl.oauthbearer.method"] = "default"  # no token fetch while probing
    conf["logger"] = _SILENT
    if client is Consumer:
        conf.setdefault("group.id", _PROBE_GROUP)
    try:
        instance = client(conf)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        return (err.name(), err.str()) if isinstance(err, KafkaError) else (type(exc).__name__, str(exc))
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    instance.close()
    return None


def _single_reason(key: str, refused: tuple[str, str]) -> str:
    name, text = refused
    if "No such configuration property" in text:
        return (
            "is not a librdkafka client property; allowed: the properties of librdkafka's "
            "CONFIGURATION.md (Java client names such as ssl.truststore.location do not apply)"
        )
    if "TrustStore" in text:
        return "Java TrustStores are not supported by librdkafka; allowed: ssl.ca.location with a PEM certificate file"
    if "JAAS" in text:
        return (
            "Java JAAS configuration is not supported by librdkafka; allowed: sasl.username and "
            "sasl.password (PLAIN, SCRAM) or the sasl.oauthbearer.* properties"
        )
    if "not settable" in text or "dedicated" in text:
        return "cannot be set from a configuration file; remove it"
    if match := _RANGE.search(text):
        return f"is out of range; allowed: {match.group(1)} to {match.group(2)}"
    if "Expected bool" in text:
        return "is not a boolean; allowed: true or false"
    if "Invalid value" in text:
        allowed = _ENUMS.get(key, "see librdkafka's CONFIGURATION.md")
        return f"has a value librdkafka does not accept; allowed: {allowed}"
    return f"is refused by librdkafka ({name}); see librdkafka's CONFIGURATION.md"


def _combination(props: Mapping[str, str], refused: tuple[str, str]) -> tuple[str | None, str]:
    name, text = refused
    mechanism = next((k for k in ("sasl.mechanism", "sasl.mechanisms") if k in props), "sasl.mechanism")
    if "sasl.username and sasl.password must be set" in text:
        return None, "SASL PLAIN and SCRAM need both sasl.username and sasl.password; set them"
    if "Unsupported SASL mechanism" in text:
        return mechanism, f"is not a SASL mechanism; allowed: {_ENUMS['sasl.mechanism']}"
    if "No provider for SASL mechanism" in text:
        what = "names" if mechanism in props else "is not set, so librdkafka uses GSSAPI,"
        return mechanism, (
            f"{what} a SASL mechanism this build of librdkafka lacks; allowed here: PLAIN, "
            "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
        )
    if (match := _SSL_FILE_KEY.search(text)) and match.group(1) in props:
        return match.group(1), (
            "cannot be loaded: not a valid certificate, key or keystore, or a wrong password for it"
        )
    mentioned = sorted(key for key in props if re.search(rf"(?<![\w.]){re.escape(key)}(?![\w.])", text))
    if len(mentioned) == 1:
        return mentioned[0], f"is refused by librdkafka together with the other properties ({name})"
    named = f" ({', '.join(mentioned)})" if mentioned else ""
    return None, (
        f"librdkafka refuses this combination of client properties{named} ({name}); see librdkafka's CONFIGURATION.md"
    )
