"""`${NAME}` references to environment variables in a configuration file's values (R-CFG-5).

`$${` stands for a literal `${`; a missing variable or a malformed reference is a
problem of the file, named but never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_ENV_TOKEN = re.compile(r"\$\$\{|\$\{(?:([A-Za-z_][A-Za-z0-9_]*)\})?")


def expand_references(text: str, env: Mapping[str, str], at: str, problems: list[str], substituted: list[str]) -> str:
    """Substitute `${NAME}` from `env` (each value also goes to `substituted`); a missing
    variable or a malformed reference is a problem, named but never guessed."""
    missing: list[str] = []
    malformed = False

    def substitute(match: re.Match[str]) -> str:
        nonlocal malformed
        if match.group(0) == "$${":
            return "${"
        name = match.group(1)
        if name is None:
            malformed = True
            return ""
        if name not in env:
            missing.append(name)
            return ""
        substituted.append(env[name])
        return env[name]

    expanded = _ENV_TOKEN.sub(substitute, text)
    if malformed:
        problems.append(
            f"{at}: has a '${{' that does not start a complete reference; allowed: "
            "${NAME} (NAME: a letter or _, then letters, digits or _), or $${ for a literal ${"
        )
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        verb = "is" if len(set(missing)) == 1 else "are"
        problems.append(f"{at}: environment variable {names} {verb} not set")
    return expanded
