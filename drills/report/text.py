"""Words and small formats shared by the summary, the postmortems and the charts (en / zh)."""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path

from drills.core import datafiles
from drills.core.languages import LANGS
from drills.core.errors import DrillError
from drills.core.record import Category

__all__ = ["labels", "say", "environment_labels", "categories", "category_name", "fmt_seconds", "slug", "LANGS"]

log = logging.getLogger(__name__)

_HERE = Path(__file__).parent


def labels(lang: str = "en") -> dict[str, str]:
    """Headings in `lang`; English fills any heading the translation lacks."""
    if lang not in LANGS:
        raise DrillError(f"unknown report language {lang!r}: use one of {', '.join(LANGS)}")
    table = _yaml("labels.yaml")
    return {**table["en"], **table.get(lang, {})}


def say(key: str, lang: str = "en", **fields) -> str:
    """A console sentence from messages.yaml in `lang` (English when the language lacks it), its fields filled."""
    table = _yaml("messages.yaml")
    template = (table.get(lang) or {}).get(key) or table["en"][key]
    return template.format(**fields)


def environment_labels(facts: dict, lang: str = "en") -> dict:
    """The Environment widget's facts with keys (and a 'none') in `lang`; order kept, unknown keys as given."""
    w = labels(lang)
    out = {}
    for key, value in facts.items():
        name = w.get("env_" + re.sub(r"\W+", "_", str(key).strip().lower()), str(key))
        out[name] = w["none"] if value == "none" else value
    return out


def categories() -> list[dict]:
    """The failure categories (id, name, name_zh, statuses) from categories.yaml, in Category order."""
    entries = {c["id"]: dict(c) for c in _yaml("categories.yaml")["categories"]}
    missing = [c.value for c in Category if c.value not in entries]
    extra = sorted(set(entries) - {c.value for c in Category})
    if missing or extra:
        raise DrillError(f"drills/report/categories.yaml does not match drills.core.record.Category "
                         f"(missing: {', '.join(missing) or 'none'}; unknown: {', '.join(extra) or 'none'})")
    return [entries[c.value] for c in Category]


def category_name(category: Category | None, lang: str = "en") -> str:
    """'Stale checkpoint (`stale_checkpoint`)' in `lang`; '—' for none."""
    if category is None:
        return "—"
    entry = next(c for c in categories() if c["id"] == category.value)
    return f"{(entry.get('name_zh') if lang == 'zh' else None) or entry['name']} (`{category.value}`)"


def fmt_seconds(value) -> str:
    """312.4 → '5m 12s', 42.15 → '42.1s', None → '—'."""
    if value is None:
        return "—"
    value = float(value)
    if abs(value) < 60:
        return f"{value:.1f}s"
    minutes, seconds = divmod(int(round(value)), 60)
    if minutes >= 60:
        hours, minutes = divmod(minutes, 60)
        return f"{hours}h {minutes:02d}m {seconds:02d}s"
    return f"{minutes}m {seconds:02d}s"


def slug(text: str) -> str:
    """A file-name-safe slug; keeps CJK characters, drops everything else unusual."""
    text = re.sub(r"[^\w\u4e00-\u9fff]+", "-", str(text).strip().lower(), flags=re.UNICODE)
    return text.strip("-_")[:80] or "scenario"


@functools.cache
def _yaml(name: str) -> dict:
    return datafiles.load_file(_HERE / name)
