"""Inference load for drills: a locustfile run in a subprocess, and its fine-grained results.

Importing this package never imports locust (see runner.py for why).
"""

from drills.load.bucket_stats import (
    WindowStats,
    baseline,
    error_rate,
    first_sustained_success,
    p99,
    percentile,
    window,
)
from drills.load.buckets import Bucket, read_buckets, rebin
from drills.load.runner import LoadResult, LoadRunner

__all__ = [
    "Bucket",
    "WindowStats",
    "LoadRunner",
    "LoadResult",
    "baseline",
    "error_rate",
    "first_sustained_success",
    "p99",
    "percentile",
    "read_buckets",
    "rebin",
    "window",
]
