"""Write pytest's rewritten-assert cache for the suite before its workers start (`make test`).

pytest rewrites the asserts of each test module, conftest and plugin module as it imports them and keeps the result
beside their bytecode (`__pycache__/<name>.<tag>-pytest-<version>.pyc`, hash-checked). On a fresh clone each xdist
worker found no cache and rewrote every module itself, all at once: ≈ 5 s of CPU per worker before its first test.
This rewrites them once, in two processes, with pytest's own functions and file format — nothing is imported or
run. A module it misses, or a pytest whose internals moved, only means a worker rewrites it as before.

    python scripts/warm_asserts.py [ROOT]
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
# What pytest rewrites here: conftest files, test modules (python_files' default test_*.py) and the plugin modules
# the root conftest lists in pytest_plugins (fixtures/).
PATTERNS = ("tests/**/conftest.py", "tests/**/test_*.py", "features/**/test_*.py", "conftest.py", "fixtures/**/*.py")


def _warm(paths: list[str]) -> int:
    try:
        from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _rewrite_test, _write_pyc, get_cache_dir
    except ImportError:  # pytest moved its internals: the workers rewrite as before
        return 0

    class _State:  # what _write_pyc needs of pytest's AssertionState
        @staticmethod
        def trace(*_args) -> None:
            pass

    done = 0
    for name in paths:
        fn = Path(name)
        cache = get_cache_dir(fn)
        pyc = cache / (fn.name[:-3] + PYC_TAIL)
        try:
            if _read_pyc(fn, pyc, _State.trace) is not None:
                continue
            cache.mkdir(exist_ok=True)
            source_hash, co = _rewrite_test(fn, None)  # type: ignore[arg-type] — no config: pytest's defaults
        except (OSError, SyntaxError):
            continue  # the worker's collection says what is wrong with it
        done += bool(_write_pyc(_State(), co, source_hash, pyc))  # type: ignore[arg-type]
    return done


def main() -> int:
    files = sorted({str(p) for pattern in PATTERNS for p in ROOT.glob(pattern) if "__pycache__" not in p.parts})
    halves = [files[0::2], files[1::2]]
    with ProcessPoolExecutor(2) as pool:
        written = sum(pool.map(_warm, halves))
    print(f"rewritten asserts cached: {written} of {len(files)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
