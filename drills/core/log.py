"""Logging setup shared by the CLI and the twin: quiet by default, tracebacks only with --debug."""

from __future__ import annotations

import logging

__all__ = ["setup_logging"]


def setup_logging(debug: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Libraries chatter at INFO; keep the console for our own progress.
    for noisy in ("aiohttp.access", "urllib3", "paramiko", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
