"""docs/configuration.md is what the settings' own definitions say (see `config.reference`)."""

from __future__ import annotations

from pathlib import Path

from mirror_pipeline.config.link_settings import LinkSettings
from mirror_pipeline.config.reference import render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_page_is_the_generated_one():
    assert PAGE.read_text() == render(), (
        "docs/configuration.md differs from the settings: regenerate it with "
        "`python -m mirror_pipeline.config.reference > docs/configuration.md`"
    )


def test_every_link_setting_is_on_the_page_with_what_it_does():
    page = PAGE.read_text()
    for field in LinkSettings.model_fields.values():
        assert field.description, f"{field.alias} has no description"
        assert f"| `{field.alias}` |" in page, field.alias
