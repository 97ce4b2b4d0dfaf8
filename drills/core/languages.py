"""The drills' features in each language: English at the root of features/, every other language in a folder
of its own (features/zh/), bound by a binder of its own (features/zh/test_drills_zh.py).

A run reads one language (`drills run --lang zh`): it collects that language's tree only, and a run in English
never collects another language's tree (fixtures/selection.py ignores it; features/test_drills.py does not bind
it). The trees mirror each other — the same files, scenarios, tags and Examples, in the same order
(tests/unit/test_step_phrasings.py) — so a scenario in one language has one counterpart in every other:
`counterparts` pairs their pytest names, which is how a run in Chinese is compared with one in English.
"""

from __future__ import annotations

import logging
from pathlib import Path

from drills.core.errors import DrillError

__all__ = ["LANGS", "DEFAULT_LANG", "check_lang", "feature_root", "other_trees", "language_trees", "english_paths", "counterparts", "keyword_for"]

log = logging.getLogger(__name__)

LANGS = ("en", "zh")  # the languages a run reads and reports in (drills/report/labels.yaml has their words)
DEFAULT_LANG = "en"


def check_lang(lang: str) -> str:
    """`lang`, if the drills speak it; else one DrillError line."""
    if lang not in LANGS:
        raise DrillError(f"--lang {lang!r} is not a language of the drills; use one of {', '.join(LANGS)}")
    return lang


def feature_root(features_dir: Path, lang: str) -> Path:
    """The folder of `lang`'s features under `features_dir`: the folder itself for English."""
    check_lang(lang)
    return Path(features_dir) if lang == DEFAULT_LANG else Path(features_dir) / lang


def other_trees(features_dir: Path, lang: str) -> list[Path]:
    """The trees of the languages other than `lang` that live under `lang`'s root (English: features/zh)."""
    root = feature_root(features_dir, lang)
    return [root / other for other in LANGS if other != DEFAULT_LANG and other != lang]


def language_trees(folder: Path) -> list[Path]:
    """The other languages' trees inside `folder`: a folder named by a language, holding its binder
    test_drills_<lang>.py (the rule fixtures/selection.py ignores them by in an English run)."""
    return [Path(folder) / lang for lang in LANGS
            if lang != DEFAULT_LANG and (Path(folder) / lang / f"test_drills_{lang}.py").is_file()]


def english_paths(features_dir: Path) -> list[str]:
    """What the English binder binds: every folder and .feature file of features/ but the other languages' trees
    (relative names, in order), so a new drill folder is bound without editing the binder."""
    root = Path(features_dir)
    skip = {p.name for p in other_trees(root, DEFAULT_LANG)}
    return sorted(p.name for p in root.iterdir() if p.name not in skip and not p.name.startswith((".", "_"))
                  and (p.is_dir() and any(p.rglob("*.feature")) or p.suffix == ".feature"))


def counterparts(features_dir: Path, lang: str) -> dict[str, str]:
    """English pytest test name → its counterpart's in `lang` (test_<scenario>[<example values>]), pairing the
    trees' files by their path and their tests by their order in the file."""
    from drills.core.selection import candidates

    root = Path(features_dir)
    english = candidates(root, DEFAULT_LANG)
    other = candidates(root, lang)
    by_file: dict[str, list[str]] = {}
    for c in other:
        by_file.setdefault(c.feature, []).append(c.name)
    pairs: dict[str, str] = {}
    seen: dict[str, int] = {}
    for c in english:
        index = seen.get(c.feature, 0)
        seen[c.feature] = index + 1
        names = by_file.get(c.feature, [])
        if index < len(names):
            pairs[c.name] = names[index]
    return pairs


def keyword_for(names: list[str]) -> str:
    """A -k expression selecting exactly these test names (each a keyword pytest matches as a substring)."""
    return " or ".join(names)
