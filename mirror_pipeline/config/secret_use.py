"""Where a secret's value may go while a file is loaded: into no message, and into no shown value (R-CFG-5).

`ConfigSecrets` gathers the values set under secret keys (as written, and as
`${NAME}` expanded them) and the values the environment brought into keys that
are not secret, then does two things with them:

- `scrubbed` hides them in a problem line: the last defence, as the loader's
  own messages never quote a secret key's value (see `redaction.scrub` for
  how a short secret is hidden without garbling the words around it);
- `reuse_problems` refuses a file in which a secret's value is also the value,
  or a key, of something that is not secret: a YAML alias (`prefix: *pw`), a
  copy, or one environment variable used for both. Values that are not secret
  are printed by `link list` and `link describe`, become topic, group and
  client names on the clusters and in Dagster, and reach logs and metrics:
  masking them in the CLI alone would leave every other copy (and show a
  prefix of `***`, which is wrong too). So the file is refused, naming both
  keys and never the value. Only a secret key's own single value counts: the
  items of a list under a secret key are refused with it (the value is not a
  single value), and are only scrubbed from messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirror_pipeline.config.redaction import is_secret_key, scrub, scrub_words

# Bounds of the walk over parsed data, which may come from a Python caller (cycles, huge nesting).
_MAX_DEPTH = 64
_MAX_NODES = 200_000
_MAX_KEY_CHARS = 100
_MAX_DIGITS = 100
# What a value is, seen from the secret keys above it.
_SHOWN, _SECRET, _INSIDE_SECRET = 0, 1, 2


def leaf_text(value: Any) -> str | None:
    """The text a scalar is written and shown as; None for a boolean, null or a container."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value) if abs(value) < 10**_MAX_DIGITS else None
    if isinstance(value, float):
        return repr(value)
    return None


def _step(path: str, key: Any) -> str:
    text = leaf_text(key)
    text = text if text is not None and len(text) <= _MAX_KEY_CHARS else "<key>"
    text = text if text.isprintable() else repr(text)[1:-1]
    return f"{path}.{text}" if path else text


def _walk(data: Any) -> Iterator[tuple[int, str, str, bool]]:
    """(what it is, where, text, is a key) of every scalar and mapping key of `data`."""
    stack: list[tuple[Any, str, int, int]] = [(data, "", _SHOWN, 1)]
    nodes = 0
    while stack and nodes < _MAX_NODES:
        item, path, kind, depth = stack.pop()
        nodes += 1
        if depth > _MAX_DEPTH:
            continue
        if isinstance(item, Mapping):
            for key, value in item.items():
                if (text := leaf_text(key)) is not None:
                    yield (_INSIDE_SECRET if kind else _SHOWN), path, text, True
                secret_key = isinstance(key, str) and is_secret_key(key)
                child = _SECRET if secret_key else (_INSIDE_SECRET if kind else _SHOWN)
                stack.append((value, _step(path, key), child, depth + 1))
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(
                (value, f"{path}[{i}]", _INSIDE_SECRET if kind else _SHOWN, depth + 1) for i, value in enumerate(item)
            )
        elif (text := leaf_text(item)) is not None:
            yield kind, path, text, False


@dataclass
class ConfigSecrets:
    """What must not appear in a message, and what must not be a shown value."""

    # Every text to hide in a message: secret values (as written and expanded) and all they hold.
    values: list[str] = field(default_factory=list)
    # Substituted into keys that are not secret: scrubbed as whole words only (see `scrub_words`).
    env_values: list[str] = field(default_factory=list)
    # A secret key's single value -> where it is set (the first place, for the message).
    _set_at: dict[str, str] = field(default_factory=dict)
    # (where, text, is a key) of every value and key that is shown.
    _shown: list[tuple[str, str, bool]] = field(default_factory=list)

    @classmethod
    def of(cls, data: Any) -> ConfigSecrets:
        """The secrets and shown values of parsed `data`, as written (before `${NAME}` expansion)."""
        secrets = cls()
        for kind, where, text, is_key in _walk(data):
            if kind == _SHOWN:
                secrets._shown.append((where, text, is_key))
            else:
                if kind == _SECRET and text:
                    secrets._set_at.setdefault(text, where)
                secrets.values.append(text)
        return secrets

    def secret(self, where: str, value: str, parts: list[str]) -> None:
        """The expanded `value` of the secret key at `where`, and the env `parts` substituted into it
        (a part alone may be quoted: a JAAS line's password)."""
        for text in (value, *parts):
            if text:
                self._set_at.setdefault(text, where)
                self.values.append(text)

    def shown(self, where: str, value: str, parts: list[str]) -> None:
        """The expanded `value` of the key at `where`, which is not secret, and the env `parts` in it."""
        self._shown.append((where, value, False))
        self.env_values.extend(parts)

    def scrubbed(self, problem: str) -> str:
        # A message shows a string with control characters escaped (`repr`): hide that form too.
        escaped = [repr(v)[1:-1] for v in (*self.values, *self.env_values) if not v.isprintable()]
        return scrub_words(scrub(problem, [*self.values, *escaped]), self.env_values)

    def reuse_problems(self) -> list[str]:
        """One line for each shown value or key that is also a secret's value (see the module's doc)."""
        found: dict[tuple[str, bool], str] = {}
        for where, text, is_key in self._shown:
            secret_at = self._set_at.get(text)
            if secret_at is None or (where, is_key) in found:
                continue
            what = (f"{where}: " if where else "") + ("a key has" if is_key else "has")
            found[where, is_key] = (
                f"{what} the same value as the secret {secret_at} (a YAML alias, a copy or the same "
                "environment variable?); what is not secret is shown (link list and describe, topic and "
                "client names, logs), so it must not hold a secret: give it a value of its own"
            )
        return list(found.values())
