"""The image is reproducible: its base is pinned by digest, its Python dependencies come from the constraints file
(every runtime dependency pinned, within pyproject's ranges), and it carries the Chinese font the zh reports need."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = (ROOT / "deploy" / "Containerfile").read_text(encoding="utf-8")


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "deploy" / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep, f"not pinned with ==: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def test_base_image_is_pinned_by_digest():
    (base,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", CONTAINERFILE, re.M)
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", base), base
    froms = re.findall(r"^FROM (\S+)", CONTAINERFILE, re.M)
    assert froms and all(f == "${PYTHON_IMAGE}" for f in froms), froms


def test_python_dependencies_install_from_the_constraints_file():
    assert "COPY deploy/constraints.txt" in CONTAINERFILE
    assert re.search(r"pip install --no-cache-dir -c deploy/constraints\.txt -e \.", CONTAINERFILE)
    assert "deploy" not in (ROOT / "deploy" / "Containerfile.dockerignore").read_text().split()


def test_every_runtime_dependency_is_pinned_within_pyprojects_range():
    pins = _pins()
    deps = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    for req in deps:
        version = pins.get(canonicalize_name(req.name))
        assert version is not None, f"{req.name} is not in deploy/constraints.txt (run scripts/lock_constraints.py)"
        assert req.specifier.contains(version, prereleases=True), f"{req.name}=={version} is outside {req.specifier}"


def test_the_image_has_the_chinese_font():
    install = next(line for line in CONTAINERFILE.splitlines() if "apt-get install" in line and "fio" in line)
    assert "fonts-wqy-microhei" in install.split()
