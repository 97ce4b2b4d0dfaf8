"""The switch's identity in the journal: the host key it presented, kept on the uplink record."""

from __future__ import annotations

import json

import paramiko

from drills.faults import reverter, revert_entry
from drills.faults.switch.login import HostKey
from drills.faults.switch.uplink import UplinkRecord


def test_host_key_reads_back_from_its_journal_form():
    key = paramiko.RSAKey.generate(1024)
    presented = HostKey(key.get_name(), key.fingerprint)
    assert str(presented) == f"ssh-rsa {key.fingerprint}" and key.fingerprint.startswith("SHA256:")
    assert HostKey.parse(str(presented)) == presented
    assert HostKey.parse("ssh-ed25519 SHA256:abc") != HostKey.parse("ssh-ed25519 SHA256:abd")


def test_uplink_record_keeps_the_host_key_through_json_and_old_records_have_none():
    record = UplinkRecord("leaf1", "10.0.0.1", 22, "sonic", "Ethernet8", "exec", "up", "up", "down", "down",
                          "2026-01-01T00:00:00.000Z", host_key="ssh-ed25519 SHA256:abc")
    assert UplinkRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    old = {k: v for k, v in record.to_dict().items() if k != "host_key"}  # a journal written before the field
    assert UplinkRecord.from_dict(old).host_key is None


def test_the_override_reaches_the_reverter_only_when_given():
    class Entry:
        kind = "switch-uplink"

    assert reverter(Entry()) is revert_entry
    assert reverter(Entry(), accept_new_host_key=True) is not revert_entry
