"""`drills schedule`'s options, each by its grammar (drills.core.grammar) before anything renders: the install's
name and namespace, the image, the claims and secrets it mounts, its placement. One DrillError line each."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from drills.core.errors import DrillError

if TYPE_CHECKING:
    from drills.schedule.cronjob import ScheduleOptions

__all__ = ["check_options", "parse_node_selector", "parse_toleration"]

log = logging.getLogger(__name__)

_LABEL_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def check_options(opts: ScheduleOptions) -> None:
    """Every other value that reaches the manifests, by its grammar (drills.core.grammar): one DrillError line."""
    from drills.core.grammar import check_flag
    from drills.profile.images import check_reference

    for what, value in (("--namespace", opts.namespace), ("--name", opts.name)):
        if not _LABEL_NAME.fullmatch(value) or len(value) > 52:  # CronJob names: ≤ 52 characters
            raise DrillError(f"{what} {value!r}: must be a lowercase DNS label of at most 52 characters")
    try:
        check_reference(opts.image)
    except ValueError as err:
        raise DrillError(f"--image {err}") from None
    check_flag("--profile", "local_path", opts.profile)
    for flag, kind, value in (("--reports-pvc", "dns_subdomain", opts.reports_pvc),
                              ("--checkpoint-pvc", "dns_subdomain", opts.checkpoint_pvc),
                              ("--switch-secret", "dns_subdomain", opts.switch_secret),
                              ("--priority-class", "dns_subdomain", opts.priority_class_name),
                              ("--time-zone", "time_zone", opts.time_zone)):
        if value is not None:
            check_flag(flag, kind, value)
    if opts.load_secret is not None:
        secret, colon, key = opts.load_secret.partition(":")
        check_flag("--load-secret", "dns_subdomain", secret)
        if colon:
            check_flag("--load-secret", "config_key", key)
    if opts.features is not None:
        check_flag("--features", "local_path", opts.features)


def parse_node_selector(items: list[str]) -> tuple[tuple[str, str], ...]:
    """`KEY=VALUE` items (`--node-selector`); DrillError names a malformed one."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _LABEL_KEY.fullmatch(key) or not _LABEL_VALUE.fullmatch(value):
            raise DrillError(f"--node-selector {item!r}: must be KEY=VALUE with a label key and value")
        out.append((key, value))
    return tuple(out)


def parse_toleration(text: str) -> dict:
    """A toleration from `KEY[=VALUE]:EFFECT` (kubectl taint's syntax; no VALUE: operator Exists)."""
    head, sep, effect = text.rpartition(":")
    key, eq, value = head.partition("=")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not _LABEL_KEY.fullmatch(key) \
            or (eq and not _LABEL_VALUE.fullmatch(value)):
        raise DrillError(f"--toleration {text!r}: must be KEY[=VALUE]:EFFECT, EFFECT one of NoSchedule, "
                         "PreferNoSchedule, NoExecute")
    return {"key": key, "operator": "Equal", "value": value, "effect": effect} if eq else \
        {"key": key, "operator": "Exists", "effect": effect}
