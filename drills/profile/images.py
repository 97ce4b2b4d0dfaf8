"""Container image references the profile names (the pods load generator's drills image, the fio image): their
grammar, and how firmly each must be pinned.

A tag other than `latest` is enough for the drills image (the site builds and tags it). The fio image runs on a
shared store from many nodes with the drill's authority, so it is named by digest (`repo@sha256:<64 hex>`, a
tag before the digest allowed): what runs is exactly what was reviewed, and a registry that moves a tag cannot
change it. `FIO_IMAGE` is a public fio image pinned by a digest a public project runs fio from (source below).
"""

from __future__ import annotations

import re

__all__ = ["FIO_IMAGE", "check_image", "check_reference", "DIGEST"]

# dbench (Alpine with fio and libaio; /bin/sh, mkdir and rm for the Job's script), by the digest khuedoan/homelab
# runs fio with --output-format=json from (tests/benchmarks/storage_test.go@5c1811fb; verbatim in
# tests/data/real/images/). Confirm it, or pin your mirror's, with `docker buildx imagetools inspect <image>`.
FIO_IMAGE = "docker.io/zayashv/dbench@sha256:5186d2e2acca33d98b0f50a2fba3463bf0ebe30864c8dbd529f234651c462db4"

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\Z")


def _reference(value) -> bool:
    from drills.core.grammar import valid

    return valid("image", value)


def check_reference(value: str) -> str:
    """`value` if it is an image reference at all (any tag); ValueError says what is accepted."""
    if not _reference(value):
        raise ValueError(f'must be an image reference like "registry.example.com/gpu-drills:0.1.0" (got {value!r})')
    return value


def check_image(value: str, *, digest: bool = False) -> str:
    """`value` if it is an image reference pinned as required: by digest when `digest`, else by digest or by a tag
    other than `latest`. ValueError says what is accepted."""
    example = "registry.example.com/fio@sha256:<64 hex digits>"
    if digest:
        if not (_reference(value) and DIGEST.search(value)):
            raise ValueError(f'must name the image by digest, like "{example}" (got {value!r}); find the digest of a '
                             "tag with `docker buildx imagetools inspect <image:tag>` (or `crane digest`)")
        return value
    last = value.split("@")[0].split("/")[-1]
    if not _reference(value) or value.endswith(":latest") or ("@" not in value and ":" not in last):
        raise ValueError(f'must be an image pinned by a tag other than latest or by digest, like '
                         f'"registry.example.com/gpu-drills:0.1.0" (got {value!r})')
    return value
