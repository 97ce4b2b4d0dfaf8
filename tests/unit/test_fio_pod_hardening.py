"""The fio Job's pods (storage saturation, job mode): the image by a real published digest, and fio as a non-root
user on a read-only root file system, writing only in its directory on the store's volume — Pod Security
"restricted" (drills/schedule/podsecurity.py) — with a profile that breaks each rule refused, naming it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from drills.core.errors import InvalidProfile
from drills.faults.storage.saturation import SaturationSpec, render_fio_job
from drills.faults.storage.spec import saturation_spec
from drills.profile.images import DIGEST, FIO_IMAGE, check_image
from drills.profile.model import parse_profile
from drills.schedule.podsecurity import pod_specs, restricted_violations

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "images" / "khuedoan-homelab-storage_test.go.txt"


def _fio_pod(saturation: str = "") -> dict:
    profile = parse_profile(f"storage: {{saturation: {{mode: job, namespace: storage, claim: ckpt, "
                            f"mount_path: /mnt/ckpt{saturation}}}}}")
    (pod,) = pod_specs(render_fio_job(saturation_spec(profile, "/mnt/ckpt")))
    return pod


def test_the_fio_image_is_pinned_by_a_digest_a_public_project_runs_fio_from():
    assert DIGEST.search(FIO_IMAGE)
    source = REAL.read_text()
    assert source.startswith("# source: khuedoan/homelab/")
    assert f'Image: "{FIO_IMAGE}"' in source and '"fio", ' in source  # not an invented digest: fio runs from it
    assert parse_profile("storage: {}").storage.saturation.image == FIO_IMAGE
    assert _fio_pod()["containers"][0]["image"] == FIO_IMAGE


@pytest.mark.parametrize("image", ["docker.io/xridge/fio:3.13-r1", "docker.io/xridge/fio:latest", "docker.io/xridge/fio",
                                   "registry.example.com/fio@sha256:abc", "registry.example.com/fio@sha256:" + "A" * 64])
def test_a_fio_image_not_named_by_digest_is_refused(image):
    with pytest.raises(InvalidProfile, match=r"storage\.saturation\.image: must name the image by digest.*"
                                             r"docker buildx imagetools inspect"):
        parse_profile(f"storage: {{saturation: {{image: '{image}'}}}}")
    # the renderer holds the same line for a spec built without a profile
    with pytest.raises(InvalidProfile, match="storage.saturation.image must name the image by digest"):
        render_fio_job(SaturationSpec(directory="/s", mode="job", claim="c", image=image))


def test_a_mirror_digest_with_its_tag_is_accepted():
    mirrored = "harbor.site.local/mirror/fio:3.36@sha256:" + "0123456789abcdef" * 4
    assert parse_profile(f"storage: {{saturation: {{image: '{mirrored}'}}}}").storage.saturation.image == mirrored
    assert check_image("registry.example.com/gpu-drills:0.1.0") == "registry.example.com/gpu-drills:0.1.0"  # a tag


def test_fio_runs_as_non_root_with_a_read_only_root_and_writes_only_on_the_store():
    pod = _fio_pod()
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == sc["runAsGroup"] == 10001
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["fsGroup"] == 10001 and pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    assert restricted_violations(pod) == []
    # the one writable place is the store's volume: fio's directory (D) is under its mount path
    assert container["volumeMounts"] == [{"name": "store", "mountPath": "/mnt/ckpt"}]
    assert [v["name"] for v in pod["volumes"]] == ["store"]
    script = container["command"][2]
    (workdir,) = shlex.split(re.search(r"^D=(\S+)$", script, re.M).group(1))
    assert workdir.startswith("/mnt/ckpt/.drills-fio-") and '--directory="$D"' in script


def test_a_site_runs_fio_as_the_stores_owner_without_fs_group():
    """A parallel file system ignores fsGroup: fio runs as a uid/gid that owns the store's directory."""
    pod = _fio_pod(", run_as_user: 2000, run_as_group: 3000, fs_group: null")
    sc = pod["containers"][0]["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"]) == (2000, 3000)
    assert "fsGroup" not in pod["securityContext"] and "fsGroupChangePolicy" not in pod["securityContext"]
    assert pod["securityContext"]["runAsUser"] == 2000
    assert restricted_violations(pod) == []


@pytest.mark.parametrize("field", ["run_as_user", "run_as_group", "fs_group"])
def test_root_for_fio_is_refused(field):
    with pytest.raises(InvalidProfile, match=rf"storage\.saturation\.{field}: .*fio never runs as root"):
        parse_profile(f"storage: {{saturation: {{{field}: 0}}}}")
    if field != "fs_group":
        with pytest.raises(InvalidProfile, match="fio must not run as root"):
            SaturationSpec(directory="/s", mode="job", claim="c", **{field: 0})


def test_the_restricted_checker_sees_fio_as_root():
    """The construction the checker must catch: the same pod with its user forced to root."""
    pod = _fio_pod()
    pod["containers"][0]["securityContext"]["runAsUser"] = 0
    assert restricted_violations(pod) == ["container 'fio' must not set runAsUser=0"]
