"""`dcgmi` as the twin's DCGM pods answer it: field injection into nv-hostengine's cache, and `dmon` to read it.

Only images that ship DCGM have it (the image reference names `dcgm`: the GPU Operator's `cloud-native/dcgm`
host engine and `k8s/dcgm-exporter`). The twin's DCGM cache is the node's annotation
`twin.gpu-drills.io/dcgm-fields` (drills/twin/controllers/nodeutil.py): an injection returns the new cache as
`Output.node_annotations`, which the exec handler writes through the store, so the node agents (GPU health)
and the exporters see it as they see any node change.

Shapes, from NVIDIA/DCGM (dcgmi/CommandLineParser.cpp `ProcessAdminCommandLine`, dcgmi/DcgmiTest.cpp,
dcgmi/DeviceMonitor.cpp, dcgmlib/src/dcgm_fields.cpp):
- `dcgmi test --inject --gpuid G -f F -v V [--offset S] [--host H]` → "Successfully injected field info.";
  without -f: "The --field argument is required for --inject and --introspect"; without -v: "The -v/--value
  argument is required for --inject"; a GPU id the node does not have: "Error: Unable to inject info. Return:
  …". `--offset` (seconds into the future, default 1) is accepted; the twin stores the value at once.
- `dcgmi dmon -i G[,G…] -e F[,F…] [-c N]`: the header `#Entity` (14+2 wide) then each field's short name
  (its format width + 6, + 2), the `ID` line, then one row per GPU and sample, `N/A` for a field with no value.
"""

from __future__ import annotations

import json
import logging

from drills.twin.controllers.nodeutil import DCGM_FIELDS_ANNOTATION, GPU, dcgm_fields, parse_quantity
from drills.twin.workloads.container_shell import Output

__all__ = ["FIELDS", "has_dcgmi", "dcgmi"]

log = logging.getLogger(__name__)

# field id → (dmon short name, format width): dcgmlib/src/dcgm_fields.cpp DcgmFieldsPopulateOneFieldWithFormatting
FIELDS = {230: ("XIDER", 5), 311: ("EDVTL", 5), 310: ("ESVTL", 5)}
_ENTITY_WIDTH, _PADDING = 14, 2
_BADPARAM = 254  # dcgmi exits with the DCGM return code (DCGM_ST_BADPARAM = -2) as a byte


def has_dcgmi(image: str) -> bool:
    """DCGM's images carry `dcgmi` (nv-hostengine's image and dcgm-exporter's, built on it); others do not."""
    return "dcgm" in (image or "").rsplit("/", 1)[-1]


def dcgmi(args: list[str], node: dict | None) -> Output:
    """Run `dcgmi ARGS` against the host engine of `node` (None: no node, nothing to connect to)."""
    if node is None:
        return _err("Error: unable to establish a connection to the specified host: localhost\n", 255)
    if args[:1] == ["test"]:
        return _test(args[1:], node)
    if args[:1] == ["dmon"]:
        return _dmon(args[1:], node)
    return _err("dcgmi: only `test --inject` and `dmon` are modelled by the twin\n", 2)


def _test(args: list[str], node: dict) -> Output:
    opts, switches = _parse(args, {"--gpuid", "-f", "--field", "-v", "--value", "--offset", "--host", "-g", "--group"},
                            {"--inject", "--introspect", "--pause", "--resume"})
    if opts is None:
        return _err(f"Error: {switches}.\n", 255)
    if "--inject" not in switches:
        return _err("dcgmi test: only --inject is modelled by the twin\n", 2)
    if "-g" in opts or "--group" in opts:
        return _err("Error: Injection can only be specified for a single GPU.\n", 255)
    field, value = opts.get("-f", opts.get("--field")), opts.get("-v", opts.get("--value"))
    if field is None:
        return _err("Error: The --field argument is required for --inject and --introspect.\n", 255)
    if value is None:
        return _err("Error: The -v/--value argument is required for --inject.\n", 255)
    gpu, fid = _int(opts.get("--gpuid", "1")), _int(field)
    count = int(parse_quantity(((node.get("status") or {}).get("capacity") or {}).get(GPU)))
    if gpu is None or fid is None or not 0 <= gpu < count or fid not in FIELDS:
        return Output(b"Error: Unable to inject info. Return: Bad parameter passed to function.\n", b"", _BADPARAM)
    cache = dcgm_fields(node)
    cache.setdefault(gpu, {})[fid] = _int(value) or 0  # atol(): a non-number injects 0
    encoded = json.dumps({str(g): {str(f): v for f, v in sorted(fs.items())} for g, fs in sorted(cache.items())})
    log.info("dcgmi: injected field %d = %s on GPU %d of %s", fid, value, gpu, node["metadata"]["name"])
    return Output(b"Successfully injected field info.\n", b"", 0, node_annotations={DCGM_FIELDS_ANNOTATION: encoded})


def _dmon(args: list[str], node: dict) -> Output:
    opts, problem = _parse(args, {"-i", "--entity-id", "-e", "--field-id", "-c", "--count", "-d", "--delay"}, set())
    if opts is None:
        return _err(f"Error: {problem}.\n", 255)
    count = int(parse_quantity(((node.get("status") or {}).get("capacity") or {}).get(GPU)))
    gpus = [_int(g) for g in opts.get("-i", opts.get("--entity-id", ",".join(map(str, range(count))))).split(",")]
    fids = [_int(f) for f in (opts.get("-e") or opts.get("--field-id") or "").split(",") if f]
    samples = _int(opts.get("-c", opts.get("--count", "1"))) or 1
    if not fids or any(f not in FIELDS for f in fids):
        return _err("Error: Invalid field id(s) given for -e.\n", 255)
    if any(g is None or not 0 <= g < count for g in gpus):
        return _err("Error: Invalid entity id(s) given for -i.\n", 255)
    head = f"{'#Entity':<{_ENTITY_WIDTH + _PADDING}}" + "".join(
        f"{FIELDS[f][0]:<{FIELDS[f][1] + 6 + _PADDING}}" for f in fids)
    unit = f"{'ID':<{_ENTITY_WIDTH + _PADDING}}" + "".join(f"{'':<{FIELDS[f][1] + 6 + _PADDING}}" for f in fids)
    cache = dcgm_fields(node)
    rows = []
    for _ in range(samples):
        for gpu in gpus:
            values = [str(cache.get(gpu, {}).get(f, "N/A")) for f in fids]
            rows.append(f"{f'GPU {gpu}':<{_ENTITY_WIDTH + _PADDING}}" + "".join(
                f"{v:<{FIELDS[f][1] + 6 + _PADDING}}" for v, f in zip(values, fids)))
    return Output("\n".join([head, unit, *rows, ""]).encode(), b"", 0)


def _parse(args: list[str], valued: set[str], flags: set[str]) -> tuple[dict | None, set | str]:
    """TCLAP's options: `--name value`, `-x value`, `--name=value`, switches; (None, problem) on an unknown one."""
    opts, seen, i = {}, set(), 0
    while i < len(args):
        arg = args[i]
        name, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in flags:
            seen.add(name)
        elif name in valued:
            if inline:
                opts[name] = inline
            elif i + 1 < len(args):
                i += 1
                opts[name] = args[i]
            else:
                return None, f"Missing a value for this argument! for arg {name}"
        else:
            return None, f"Couldn't find match for argument for arg {arg}"
        i += 1
    return opts, seen


def _int(text: str | None) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _err(text: str, code: int) -> Output:
    return Output(b"", text.encode(), code)
