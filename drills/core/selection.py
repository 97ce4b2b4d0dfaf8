"""`-m` / `-k` selections checked without running pytest: the syntax, and which scenarios they pick.

`drills run` refuses an expression pytest cannot parse before a run folder exists; `drills schedule`
also refuses one that selects no scenario of the features it ships, at render time — a nightly run
that selects nothing would otherwise be found out at 2 a.m. as "nothing selected". The scenarios are
read with pytest-bdd's own parser and named as its binder names them (`test_<scenario>[<example
values joined by ->]`, marks = the feature's, scenario's and Examples' tags), and the expressions are
evaluated with pytest's own `Expression` — `-m` on the marks, `-k` as a case-insensitive substring of
the test's name, its feature file and folder names, or a mark (pytest's keyword matching).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from drills.core.errors import DrillError

__all__ = ["Candidate", "check_selection", "candidates", "select", "ACCEPTANCE_FOLDER", "drill_feature_files"]

log = logging.getLogger(__name__)

ACCEPTANCE_FOLDER = "acceptance"  # features/acceptance: the acceptance runbook, run by `drills accept` only


def drill_feature_files(root: Path) -> list[str]:
    """The drills' `.feature` files under `root`: all of them but the acceptance runbook's folder (its
    scenarios are checks of new nodes, run by `drills accept` on its plan — never drills) and the other
    languages' trees (features/zh/ holds its own binder)."""
    from drills.core.languages import language_trees

    root = Path(root)
    others = language_trees(root)  # features/zh/ beside the English ones: a run reads one language (--lang)
    return [str(p) for p in sorted(root.rglob("*.feature"))
            if ACCEPTANCE_FOLDER not in p.relative_to(root).parts[:-1] and not any(tree in p.parents for tree in others)]


@dataclass(frozen=True)
class Candidate:
    """One test a feature binder collects: its pytest name, marks and where it comes from."""

    name: str  # test_<scenario>[<example values>]
    marks: frozenset[str]
    feature: str  # the feature file, relative to the folder read

    def keywords(self) -> tuple[str, ...]:
        return (self.name, *Path(self.feature).parts, *self.marks)


def check_selection(markexpr: str | None, keyword: str | None) -> None:
    """A -m/-k expression pytest cannot parse, or a -m naming a tag no drill carries, is bad input: one
    DrillError line (before pytest, whose own error would be several lines and exit 4)."""
    for flag, expr in (("-m", markexpr), ("-k", keyword)):
        if expr:
            compiled = _compile(flag, expr)
            unknown = sorted(compiled.idents() - known_marks()) if flag == "-m" else []
            if unknown:
                raise DrillError(f"-m {expr!r}: unknown tag{'s' if len(unknown) > 1 else ''} "
                                 f"{', '.join(unknown)}; use the drills' tags (e.g. training, network, slo_15m; "
                                 f"`drills run --dry-run` lists the drills)")


def known_marks() -> frozenset[str]:
    """Every tag a `-m` may name: the markers pyproject.toml registers and each drill's own tag (the catalog's,
    registered by fixtures/recorder.py) — what pytest with --strict-markers accepts."""
    import tomllib

    from drills.core.catalog import catalog

    root = Path(__file__).resolve().parents[2]
    with open(root / "pyproject.toml", "rb") as file:
        declared = tomllib.load(file)["tool"]["pytest"]["ini_options"].get("markers", [])
    return frozenset({m.split(":", 1)[0].split("(", 1)[0].strip() for m in declared} |
                     {d.tag for d in catalog().values()} | {"skip", "skipif", "xfail", "parametrize", "usefixtures",
                                                             "filterwarnings"})


def candidates(features_dir: Path, lang: str = "en") -> list[Candidate]:
    """Every test the binder of `lang`'s features under `features_dir` collects, in file order (English: not
    the other languages' trees, drills/core/languages.py)."""
    from pytest_bdd.feature import get_features
    from pytest_bdd.scenario import make_python_name

    from drills.core.languages import feature_root

    root = feature_root(Path(features_dir), lang).resolve()
    out = []
    for feature in get_features(drill_feature_files(root)):
        rel = str(Path(feature.filename).resolve().relative_to(root))
        for template in feature.scenarios.values():
            base = f"test_{make_python_name(template.name)}"
            tags = frozenset(feature.tags | template.tags)
            examples = [(ex.tags, ctx) for ex in template.examples for ctx in ex.as_contexts()]
            if not examples:
                out.append(Candidate(base, tags, rel))
            for ex_tags, ctx in examples:
                out.append(Candidate(f"{base}[{'-'.join(ctx.values())}]", tags | frozenset(ex_tags), rel))
    return out


def select(features_dir: Path, markexpr: str | None, keyword: str | None, lang: str = "en") -> list[Candidate]:
    """The tests `-m markexpr -k keyword` pick from `lang`'s features in `features_dir` (every test when both are
    None)."""
    check_selection(markexpr, keyword)
    chosen = candidates(features_dir, lang)
    if markexpr:
        expr = _compile("-m", markexpr)
        chosen = [c for c in chosen if expr.evaluate(lambda name, c=c: name in c.marks)]
    if keyword:
        expr = _compile("-k", keyword)
        chosen = [c for c in chosen
                  if expr.evaluate(lambda sub, c=c: any(sub.lower() in k.lower() for k in c.keywords()))]
    return chosen


def _compile(flag: str, expr: str):
    from _pytest.mark.expression import Expression

    try:
        return Expression.compile(expr)
    except SyntaxError as err:  # what pytest raises for a malformed expression
        raise DrillError(f"{flag} {expr!r} is not a selection expression ({err.msg}); quote words and join "
                         f"them with and/or/not, e.g. -k \"uplink and sonic\"") from None
