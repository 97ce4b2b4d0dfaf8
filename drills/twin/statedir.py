"""Where a foreground twin (`drills twin up`) keeps its state: kubeconfig, twin.json, the audit log, and
private keys (the switches' host keys, the switch client key, the TLS service-account token).

Private keys never go under `reports/` (reports are archived and shared). Without `--state-dir`, each
`drills twin up` gets a fresh folder of its own, `$XDG_STATE_HOME/gpu-drills/twins/<UTC time>-<pid>`
(`~/.local/state/…` when XDG_STATE_HOME is unset), mode 0700, and `…/twins/latest` points at the newest;
the folder is printed on start, and `drills run --twin-state` / `drills twin down --state-dir` take it.
A folder given with `--state-dir` is used as it is (created 0700 when new; an existing folder that
others can read is named in a warning, never re-permissioned behind the user's back).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from pathlib import Path

__all__ = ["state_root", "new_state_dir", "prepare_state_dir", "latest_state_dir", "LATEST"]

log = logging.getLogger(__name__)

LATEST = "latest"


def state_root() -> Path:
    """`$XDG_STATE_HOME/gpu-drills/twins` (XDG Base Directory spec: default `~/.local/state`)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"  # the spec: ignore relative
    return root / "gpu-drills" / "twins"


def new_state_dir() -> Path:
    """A fresh folder for one twin (0700, its parents too when new), and `latest` pointing at it."""
    root = state_root()
    _mkdir_private(root)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = root / f"{stamp}-{os.getpid()}"
    path.mkdir(mode=0o700)
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
    link = root / f".{LATEST}.{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(path.name)
    os.replace(link, root / LATEST)  # atomic: a reader sees the old or the new twin, never none
    return path


def prepare_state_dir(path: Path) -> Path:
    """A folder the user named: created 0700 if new; a warning when an existing one is open to others."""
    path = Path(path)
    if not path.exists():
        _mkdir_private(path)
    elif path.is_dir() and stat.S_IMODE(path.stat().st_mode) & 0o077:
        log.warning("twin state dir %s is readable by other users (mode %o): it will hold private keys; "
                    "chmod 700 it or use another --state-dir", path, stat.S_IMODE(path.stat().st_mode))
    return path


def latest_state_dir() -> Path:
    """The newest twin's folder (`…/twins/latest`), resolved."""
    return (state_root() / LATEST).resolve()


def _mkdir_private(path: Path) -> None:
    """mkdir -p, with every folder this creates at mode 0700."""
    missing = []
    current = Path(path)
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
