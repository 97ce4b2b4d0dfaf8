"""The twin's switch fabric: a leaf/spine link-state model, vendor CLI dialects as data, and one
paramiko SSH server per switch so the drill's switch injector works exactly as on real switches.

`start_fabric(spec, state_dir)` is the entry point; the workloads subscribe to
`handle.fabric.on_change(cb, loop=loop)`.
"""

from drills.twin.fabric.cli import CliResult, CliSession, SwitchCli
from drills.twin.fabric.dialects import dialect_names, load_dialect
from drills.twin.fabric.spec import fabric_specs, leaf_spine
from drills.twin.fabric.state import FabricHandle, start_fabric
from drills.twin.fabric.topology import (
    Fabric,
    FabricEvent,
    IfaceState,
    LeafRedundancy,
    SwitchSpec,
    UnknownInterface,
    UplinkSpec,
)

__all__ = [
    "CliResult",
    "CliSession",
    "SwitchCli",
    "dialect_names",
    "load_dialect",
    "fabric_specs",
    "leaf_spine",
    "FabricHandle",
    "start_fabric",
    "Fabric",
    "FabricEvent",
    "IfaceState",
    "LeafRedundancy",
    "SwitchSpec",
    "UnknownInterface",
    "UplinkSpec",
]
