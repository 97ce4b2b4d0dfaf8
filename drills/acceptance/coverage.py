"""Evidence must cover the whole node: a check that passed on part of it says nothing of the rest.

The product's counts (drills/acceptance/catalogue.py) against what each tool says it exercised: DCGM's
`GPU Device IDs Detected`, the GPUs gpu-burn burned, the ranks all_reduce_perf ran inside the node, the
rails ib_write_bw measured. Fewer than the product has (a Job given fewer GPUs, a rail list that misses
NICs) makes a GO a `partial` no-go naming what was left out; a tool that does not say stays as judged.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from drills.acceptance.catalogue import Expectation
from drills.acceptance.judge import CheckResult

__all__ = ["check"]

log = logging.getLogger(__name__)

# check → (what the tool exercised, the expectation it must cover, the words for it)
_COVERS = {"dcgm": ("gpus_tested", "gpus", "GPUs"), "burn": ("gpus_tested", "gpus", "GPUs"),
           "nccl-node": ("ranks", "gpus", "GPUs (ranks)"), "rdma": ("rails_tested", "nics.count", "NICs")}


def check(r: CheckResult, expect: Expectation | None) -> CheckResult:
    """`r`, or a `partial` no-go when its evidence covers fewer GPUs/NICs than the product has."""
    spec = _COVERS.get(r.check)
    if spec is None or expect is None or not r.go or r.peer is not None:
        return r
    key, figure, words = spec
    got, want = r.measured.get(key), expect.get(figure)
    if got is None or want is None or got >= int(want.value):
        return r
    return replace(r, go=False, failure="partial",
                   reason=f"{r.check} on {r.node} covered {got} of the {want.value} {words} a "
                          f"{expect.server or expect.gpu} has ({want.origin}: {want.source}); the rest is untested")
