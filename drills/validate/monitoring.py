"""`drills validate`, the monitoring that judges detection (the profile's `monitoring:`): reads only.

Managed: Prometheus and Alertmanager are installed, and every rule file the profile names passes `promtool check
rules`. A site's own: its Alertmanager answers API v2 (`/api/v2/status`), and its Prometheus evaluates every
alert the drills' features expect (`/api/v1/rules`): a missing rule is a detection that can only fail.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from drills.core.errors import InvalidProfile
from drills.detect.alerts import read_alert_rules
from drills.detect.pack import alert_names, pack_files
from drills.detect.stack import missing_tools
from drills.profile.model import TargetProfile
from drills.profile.monitoring import OPT_OUT, opted_out
from drills.validate.preflight import Check

__all__ = ["monitoring_checks", "expected_alerts"]

log = logging.getLogger(__name__)

_RAISES = re.compile(r"^\s*(?:Then|And|But)\s+the monitoring raises (\S+) within ", re.M)
_PLACEHOLDER = re.compile(r"<([^<>]+)>")


def monitoring_checks(profile: TargetProfile, features: Path | None = None) -> list[Check]:
    """One line per thing detection needs; one `ok` line when the profile turns detection off."""
    config = profile.monitoring
    if config is None:
        return [Check("monitoring", True, "no monitoring: section: the drills' detection steps are not judged")]
    if opted_out():
        return [Check("monitoring", True, f"{OPT_OUT}=off in the environment: the drills' detection steps are not "
                                          "judged")]
    expected = expected_alerts(features)
    if config.managed:
        return _managed(config.rules, expected)
    return [_alertmanager(str(config.alertmanager)), _site_rules(str(config.prometheus), expected)]


def expected_alerts(features: Path | None = None) -> list[str]:
    """The alerts the features' detection steps expect ("the monitoring raises <alert> within …")."""
    root = features or Path(__file__).resolve().parents[2] / "features"
    files = [root] if root.is_file() else sorted(root.rglob("*.feature")) if root.is_dir() else []
    return sorted({a for f in files for a in _raised(f.read_text(encoding="utf-8"))})


def _raised(text: str) -> set[str]:
    """The alerts one feature expects; an outline's `<column>` is every value of that column in its Examples."""
    out: set[str] = set()
    for found in _RAISES.findall(text):
        name = found.strip('"')
        column = _PLACEHOLDER.fullmatch(name)
        out.update(_column(text, column.group(1)) if column else {name})
    return out


def _column(text: str, name: str) -> set[str]:
    values, index = set(), None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.strip().startswith("|") else None
        if cells is None:
            index = None
        elif index is None:
            index = cells.index(name) if name in cells else None
        elif index < len(cells):
            values.add(cells[index])
    return values


def _managed(rules: list[str], expected: list[str]) -> list[Check]:
    missing = missing_tools()
    if missing:  # a warning: the drills run, their detection steps are skipped naming the same reason
        return [Check("monitoring", False, f"{' and '.join(missing)} not installed: detection will not be judged; "
                                           f"apt-get install {' '.join(missing)} (or `make bootstrap` as root)",
                      warn=True)]
    try:
        files = pack_files(rules)
    except InvalidProfile as err:
        return [Check("monitoring rules", False, str(err))]
    done = subprocess.run([shutil.which("promtool") or "promtool", "check", "rules", *map(str, files)],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        return [Check("monitoring rules", False, f"promtool check rules: {last[0]}")]
    names = alert_names(files)
    absent = [a for a in expected if a not in names]
    out = [Check("monitoring", True, f"Prometheus and Alertmanager installed; {len(names)} alerting rules in "
                                     f"{', '.join(rules)} pass promtool check rules")]
    if absent:
        out.append(Check("monitoring rules", False, f"the features expect {', '.join(absent)}, which no rule file in "
                                                    f"monitoring.rules defines"))
    return out


def _alertmanager(url: str) -> Check:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v2/status", timeout=5) as answer:
            status = json.load(answer)
    except (urllib.error.URLError, OSError, ValueError) as err:
        return Check("Alertmanager", False, f"{url}/api/v2/status does not answer ({err}): fix monitoring.alertmanager")
    version = (status.get("versionInfo") or {}).get("version", "?") if isinstance(status, dict) else "?"
    return Check("Alertmanager", True, f"{url} answers API v2 (version {version})")


def _site_rules(url: str, expected: list[str]) -> Check:
    names = read_alert_rules(url)
    if names is None:
        return Check("Prometheus rules", False, f"{url}/api/v1/rules cannot be read: fix monitoring.prometheus")
    absent = [a for a in expected if a not in names]
    if absent:
        return Check("Prometheus rules", False, f"{url} has no alerting rule {', '.join(absent)} that the features "
                                                f"expect: load drills/detect/rules (or rename the steps' alerts)")
    return Check("Prometheus rules", True, f"{url} evaluates {len(names)} alerting rules, the {len(expected)} the "
                                           f"features expect among them")
