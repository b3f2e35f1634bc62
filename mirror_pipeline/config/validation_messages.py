"""Pydantic's validation errors as the loader reports problems: `<key path>: <reason>` lines
that never quote an input value (a value may be a secret)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ValidationError

from mirror_pipeline.config.filters import unknown_key_hint


def _known_keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items() if name != "name"]


def validation_problems(exc: ValidationError, at: str, model: type[BaseModel]) -> list[str]:
    """Pydantic errors as `<key path>: <reason>` lines, never quoting input values."""
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = [part if isinstance(part, str) and part.isprintable() else repr(part) for part in err["loc"]]
        ctx = err.get("ctx") or {}
        if err["type"] == "extra_forbidden":
            key = loc.pop()
            reason = unknown_key_hint(key, _known_keys(model) if not loc else [])
        elif err["type"] == "missing":
            key = loc.pop()
            reason = f"{key} is required"
        else:
            reason = err["msg"].removeprefix("Value error, ")
            reason = re.sub(r"^\w+ should ", "must ", reason).replace("a valid dictionary", "a mapping")
        if "key" in ctx:
            loc.append(ctx["key"])
        path = ".".join(p for p in [at, *loc] if p)
        problems.append(f"{path}: {reason}" if path else reason)
    return problems
