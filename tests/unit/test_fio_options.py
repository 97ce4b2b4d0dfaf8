"""storage.fio_options: an allowlist of fio job options, each value in its grammar (drills/profile/fio_options.py)."""

from __future__ import annotations

import pytest

from drills.core.errors import InvalidProfile
from drills.profile.model import parse_profile


@pytest.mark.parametrize("options", [
    "{rate: 256k}", "{rate_iops: 500}", "{ioengine: libaio, bs: 1M, size: 2G}", "{numjobs: 8, iodepth: 32}",
    "{rw: randrw, rwmixread: 70}", "{direct: true, runtime: 60s, time_based: 1, group_reporting: 1}",
    "{norandommap: 1, randrepeat: 0, fsync: 16, end_fsync: 1}", "{rate: '100m,50m'}",
])
def test_allowed_options_load(options):
    assert parse_profile(f"storage: {{fio_options: {options}}}").storage.fio_options


@pytest.mark.parametrize("options, says", [
    ("{exec_prerun: 'touch /tmp/pwned'}", "'exec_prerun' runs a command: refused"),
    ("{exec_postrun: 'rm -rf /'}", "'exec_postrun' runs a command: refused"),
    ("{filename: /dev/sda}", "'filename' writes outside"),
    ("{directory: /etc}", "'directory' writes outside"),
    ("{opendir: /}", "'opendir' reads and writes a whole tree"),
    ("{write_bw_log: /etc/cron.d/x}", "'write_bw_log' writes log files"),
    ("{write_lat_log: x}", "'write_lat_log' writes log files"),
    ("{write_iolog: x}", "'write_iolog' writes a file"),
    ("{ioscheduler: none}", "'ioscheduler' changes the host's I/O scheduler"),
    ("{cgroup: x}", "'cgroup' changes the host's cgroups"),
    ("{verify_pattern: 1}", "'verify_pattern' is not allowed"),
    ("{ioengine: external}", "ioengine='external' is not a valid ioengine value"),
    ("{rate: \"1k\\nexec_prerun=touch /tmp/x\"}", "is not a valid rate value"),
    ("{rate: '1k; touch /tmp/x'}", "is not a valid rate value"),
    ("{bs: '4k\\n'}", "is not a valid bs value"),
    ("{rwmixread: 170}", "is not a valid rwmixread value"),
])
def test_refused_options_are_one_line(options, says):
    with pytest.raises(InvalidProfile) as err:
        parse_profile(f"storage: {{fio_options: {options}}}", source="site.yaml")
    line = str(err.value)
    assert "\n" not in line and line.startswith("profile site.yaml: storage.fio_options") and says in line, line
