"""Fine-grained load outcomes: per-interval buckets and their JSONL format (analysis: `bucket_stats`).

Locust's own 1 s history is too coarse once the twin dilates time (one wall second is one
cluster minute), so the locustfile folds every request into buckets of `width` wall seconds
(50 ms by default) keyed by the request's *completion* time in epoch seconds. One JSONL line:

    {"t": 1718000000.05, "w": 0.05, "ok": 12, "fail": 1, "sum": 83.1, "max": 11.2,
     "h": {"6.17": 9, "11.3": 4}, "lf": 1718000000.071, "fo": 1718000000.083, "fs": 1718000000.072, "na": 3,
     "err": {"503 no ready replica": 1}, "k": {"status": 1}, "r": {"llama-7b-infer-abc12": 12}}

`t` bucket start, `w` width (s); `ok`/`fail` counts; `sum`/`max` latency (ms); `h` latency
histogram (bin centre in ms, 8 bins per octave -> count); `lf` completion time of the last
failure in the bucket and `ls` the latest send of a failed request in it; `fo` first success after
the failures (first success at all when the bucket has no failure; a failure sent before that success was sent does
not count against it), `fs` when that first success was sent (its start: when the endpoint took a
request it then answered; its completion adds the request's own latency, which at a high twin scale is
many cluster seconds) and `na` how many successes followed it; `err` the first few distinct
error messages with counts; `k` failures per kind (`drills.load.outcome`: status, error_200,
invalid, timeout, connection); `r` successes per replica that answered (the endpoint's replica header,
when it sends one). Several lines may carry the same `t` (a late request, one file
per worker): readers merge them. Everything here is pure and free of locust.

Each flush also ends with a watermark line (`drills.load.watermark`), which readers of buckets skip.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Bucket",
    "BucketAccumulator",
    "read_buckets",
    "merge_buckets",
    "rebin",
    "round_ms",
    "MAX_ERRORS_PER_BUCKET",
]

log = logging.getLogger(__name__)

MAX_ERRORS_PER_BUCKET = 3
WATERMARK_KEY = "upto"  # the key of a flush's watermark line (drills.load.watermark), not a bucket
HIST_BINS_PER_OCTAVE = 8


@dataclass
class Bucket:
    """Outcomes of the requests that completed in [t, t + w) (epoch seconds, wall clock)."""

    t: float
    w: float
    ok: int = 0
    fail: int = 0
    sum_ms: float = 0.0
    max_ms: float = 0.0
    hist: dict[float, int] = field(default_factory=dict)
    last_fail: float | None = None
    last_fail_sent: float | None = None  # the latest send of a failed request in the bucket
    first_ok_after: float | None = None
    first_ok_sent: float | None = None  # start of the request that completed at first_ok_after
    first_sent: float | None = None  # the earliest send of a request the bucket holds (a straggler's, if any)
    ok_after: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)  # failures per kind (drills.load.outcome)
    served: dict[str, int] = field(default_factory=dict)  # successes per replica that answered

    @property
    def n(self) -> int:
        return self.ok + self.fail

    @property
    def end(self) -> float:
        return self.t + self.w

    def to_json(self) -> dict:
        d = {"t": round(self.t, 6), "w": self.w, "ok": self.ok, "fail": self.fail,
             "sum": round(self.sum_ms, 3), "max": round(self.max_ms, 3),
             "h": {_key(k): v for k, v in self.hist.items()}}
        if self.last_fail is not None:
            d["lf"] = round(self.last_fail, 6)
        if self.last_fail_sent is not None:
            d["ls"] = round(self.last_fail_sent, 6)
        if self.first_ok_after is not None:
            d["fo"] = round(self.first_ok_after, 6)
            d["na"] = self.ok_after
            if self.first_ok_sent is not None:
                d["fs"] = round(self.first_ok_sent, 6)
        if self.first_sent is not None:
            d["s0"] = round(self.first_sent, 6)
        if self.errors:
            d["err"] = self.errors
        if self.kinds:
            d["k"] = self.kinds
        if self.served:
            d["r"] = self.served
        return d

    @classmethod
    def from_json(cls, d: dict) -> Bucket:
        return cls(t=float(d["t"]), w=float(d["w"]), ok=int(d.get("ok", 0)), fail=int(d.get("fail", 0)),
                   sum_ms=float(d.get("sum", 0.0)), max_ms=float(d.get("max", 0.0)),
                   hist={float(k): int(v) for k, v in d.get("h", {}).items()},
                   last_fail=d.get("lf"), last_fail_sent=d.get("ls"), first_ok_after=d.get("fo"), first_ok_sent=d.get("fs"),
                   ok_after=int(d.get("na", 0)), first_sent=d.get("s0"),
                   errors=dict(d.get("err", {})), kinds=dict(d.get("k", {})), served=dict(d.get("r", {})))


class BucketAccumulator:
    """Folds request outcomes into buckets and hands back the closed ones (used by the locustfile)."""

    def __init__(self, width_s: float = 0.05, max_errors: int = MAX_ERRORS_PER_BUCKET) -> None:
        if width_s <= 0:
            raise ValueError(f"bucket width must be positive, got {width_s}")
        self.width = width_s
        self.max_errors = max_errors
        self._open: dict[int, Bucket] = {}

    def add(self, end_s: float, latency_ms: float, error: str | None = None, kind: str | None = None,
            replica: str | None = None, start_s: float | None = None) -> None:
        """One request sent at `start_s` that completed at `end_s` (epoch) after `latency_ms`; `error` None
        means success (answered by `replica`, when known); a failure's `kind` is counted per bucket."""
        idx = math.floor(end_s / self.width)
        b = self._open.get(idx)
        if b is None:
            b = self._open[idx] = Bucket(t=idx * self.width, w=self.width)
        _add(b, end_s, latency_ms, error, self.max_errors, start_s)
        if error is not None and kind:
            b.kinds[kind] = b.kinds.get(kind, 0) + 1
        elif error is None and replica:
            b.served[replica] = b.served.get(replica, 0) + 1

    def take_closed(self, now_s: float, grace_s: float = 0.05) -> list[Bucket]:
        """Buckets that ended more than `grace_s` before `now_s`, oldest first; they leave the accumulator."""
        done = sorted(i for i, b in self._open.items() if b.end + grace_s <= now_s)
        return [self._open.pop(i) for i in done]

    def take_all(self) -> list[Bucket]:
        done = sorted(self._open)
        return [self._open.pop(i) for i in done]

    def closed_until(self, now_s: float, grace_s: float = 0.05) -> float:
        """After `take_closed(now_s, grace_s)`: every completion before this moment is in a taken bucket."""
        return math.floor((now_s - grace_s) / self.width) * self.width


def read_buckets(paths: Iterable[str | Path]) -> list[Bucket]:
    """All buckets from the JSONL files (missing files and a torn last line are skipped), merged by time."""
    raw: list[Bucket] = []
    for path in paths:
        p = Path(path)
        if not p.exists():
            continue
        for line in p.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line or line.startswith('{"' + WATERMARK_KEY + '"'):  # a watermark, not a bucket
                continue
            try:
                raw.append(Bucket.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                log.debug("skipping unreadable bucket line in %s: %.80s", p, line)
    return merge_buckets(raw)


def merge_buckets(buckets: Iterable[Bucket]) -> list[Bucket]:
    """One bucket per interval (same width assumed), sorted by time."""
    merged: dict[int, Bucket] = {}
    for b in buckets:
        idx = round(b.t / b.w)
        m = merged.get(idx)
        if m is None:
            merged[idx] = Bucket(t=b.t, w=b.w, ok=b.ok, fail=b.fail, sum_ms=b.sum_ms, max_ms=b.max_ms,
                                 hist=dict(b.hist), last_fail=b.last_fail, last_fail_sent=b.last_fail_sent,
                                 first_ok_after=b.first_ok_after,
                                 first_ok_sent=b.first_ok_sent, ok_after=b.ok_after, errors=dict(b.errors), kinds=dict(b.kinds),
                                 served=dict(b.served), first_sent=b.first_sent)
        else:
            _merge_into(m, b)
    return [merged[i] for i in sorted(merged)]


def rebin(buckets: Sequence[Bucket], width_s: float) -> list[Bucket]:
    """Coarser buckets (e.g. 1 s for a chart); `width_s` should be a multiple of the bucket width."""
    out: dict[int, Bucket] = {}
    for b in buckets:
        idx = math.floor(b.t / width_s + 1e-9)
        m = out.get(idx)
        if m is None:
            out[idx] = m = Bucket(t=idx * width_s, w=width_s)
        _merge_into(m, b)
    return [out[i] for i in sorted(out)]


def round_ms(ms: float) -> float:
    """The histogram bin of a latency: 8 log-spaced bins per octave (within ±4.5 %), as ms with
    3 significant digits, so a bucket holds a dozen keys rather than one per distinct latency."""
    if ms <= 0.001:
        return 0.0
    center = 2.0 ** (round(HIST_BINS_PER_OCTAVE * math.log2(ms)) / HIST_BINS_PER_OCTAVE)
    return round(center, 2 - math.floor(math.log10(center)))


# ---------------------------------------------------------------- helpers

def _add(b: Bucket, end_s: float, latency_ms: float, error: str | None, max_errors: int,
         start_s: float | None = None) -> None:
    b.sum_ms += latency_ms
    b.max_ms = max(b.max_ms, latency_ms)
    if start_s is not None and (b.first_sent is None or start_s < b.first_sent):
        b.first_sent = start_s
    key = round_ms(latency_ms)
    b.hist[key] = b.hist.get(key, 0) + 1
    if error is None:
        b.ok += 1
        if b.last_fail is None or end_s > b.last_fail:
            if b.first_ok_after is None or end_s < b.first_ok_after:
                b.first_ok_after, b.first_ok_sent = end_s, start_s
            b.ok_after += 1
        return
    b.fail += 1
    if start_s is not None and (b.last_fail_sent is None or start_s > b.last_fail_sent):
        b.last_fail_sent = start_s
    if b.last_fail is None or end_s > b.last_fail:
        b.last_fail = end_s
        if b.first_ok_after is not None and b.first_ok_after <= end_s and not _sent_before(start_s, b.first_ok_sent):
            b.first_ok_after, b.first_ok_sent, b.ok_after = None, None, 0
    if error in b.errors or len(b.errors) < max_errors:
        b.errors[error] = b.errors.get(error, 0) + 1


def _merge_into(m: Bucket, b: Bucket) -> None:
    m.ok += b.ok
    m.fail += b.fail
    m.sum_ms += b.sum_ms
    m.max_ms = max(m.max_ms, b.max_ms)
    m.first_sent = min((x for x in (m.first_sent, b.first_sent) if x is not None), default=None)
    for k, v in b.hist.items():
        m.hist[k] = m.hist.get(k, 0) + v
    for k, v in b.kinds.items():
        m.kinds[k] = m.kinds.get(k, 0) + v
    for k, v in b.served.items():
        m.served[k] = m.served.get(k, 0) + v
    for k, v in b.errors.items():
        if k in m.errors or len(m.errors) < MAX_ERRORS_PER_BUCKET:
            m.errors[k] = m.errors.get(k, 0) + v
    # The run of successes after the merged last failure: keep only the parts that follow it.
    lf = max((x for x in (m.last_fail, b.last_fail) if x is not None), default=None)
    ls = max((x for x in (m.last_fail_sent, b.last_fail_sent) if x is not None), default=None)
    parts = [(m.first_ok_after, m.first_ok_sent, m.ok_after), (b.first_ok_after, b.first_ok_sent, b.ok_after)]
    parts = [(fo, fs, na) for fo, fs, na in parts
             if fo is not None and (lf is None or fo > lf or (ls is not None and _sent_before(ls, fs)))]
    m.last_fail, m.last_fail_sent = lf, ls
    first = min(parts, key=lambda part: part[0], default=(None, None, 0))
    m.first_ok_after, m.first_ok_sent = first[0], first[1]
    m.ok_after = sum(na for _, _, na in parts)


def _sent_before(failed_sent: float | None, ok_sent: float | None) -> bool:
    """A failure sent before the success that began a run was sent does not end the run, whenever its answer was
    stamped: it was answered before that success was (a failure is quicker than an answer), and a busy load
    generator stamps completions late and out of the endpoint's order (at 600x, 1 ms is 0.6 cluster s)."""
    return failed_sent is not None and ok_sent is not None and failed_sent < ok_sent


def _key(ms: float) -> str:
    return repr(ms) if ms != int(ms) else str(int(ms))
