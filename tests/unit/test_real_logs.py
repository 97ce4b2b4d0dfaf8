"""Every real log excerpt in tests/data/real/logs read as EXPECTED.yaml says (values written by hand).

One test per file; each asserts every value EXPECTED.yaml gives for that file. Keys a file's entry
omits must come out empty (no transport, no error, no resume, no save, no loss) — except `nccl_version`,
`devices`, `vllm`, `skipped_steps` (optimizer steps the framework says it skipped) and `unknown` (error-like lines no
kind fits, which must stay unknown), checked only when given. `check()` is also the scorer:
`python -m tests.unit.test_real_logs` prints files fully right and values right.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from drills.core.datafiles import load_text as load_yaml  # libyaml: these are read at collection, by every worker

from drills.measure.logread import LogSummary, read_log

DIR = Path(__file__).resolve().parents[1] / "data" / "real" / "logs"
EXPECTED: dict = load_yaml((DIR / "EXPECTED.yaml").read_text())
FILES = sorted(p.name for p in DIR.iterdir() if p.name != "EXPECTED.yaml")


def summary_of(name: str) -> LogSummary:
    return read_log((DIR / name).read_text(encoding="utf-8", errors="replace"))


def _proc_matches(label: str, proc) -> bool:
    if m := re.fullmatch(r"rank(\d+)", label):
        return proc.rank == int(m.group(1)) and not proc.host
    if m := re.fullmatch(r"(.*):(\d+)", label):
        return proc.host == m.group(1) and proc.pid == int(m.group(2))
    return proc.host == label


def _error_problems(want: dict, got) -> list[str]:
    detail, out = str(want.get("detail", "")), []
    checks = []
    if m := re.search(r"SeqNum=(\d+)", detail):
        checks.append(("seq", int(m.group(1))))
    elif want["kind"] == "watchdog_timeout" and "no SeqNum" in detail:
        checks.append(("seq", None))
    if m := re.search(r"OpType=(\w+)", detail):
        checks.append(("op_type", m.group(1)))
    if m := re.search(r"Timeout\(ms\)=(\d+)", detail):
        checks.append(("timeout_ms", int(m.group(1))))
    if m := re.search(r"^rank(\d+)\b|\bRank (\d+)\]|aborted on rank (\d+)", detail):
        checks.append(("rank", int(next(g for g in m.groups() if g))))
    if want["kind"] == "ib_completion":
        if m := re.search(r"status=(\d+)|with error (\d+)", detail):
            checks.append(("status", int(next(g for g in m.groups() if g))))
        if m := re.search(r"vendor err (\d+)", detail):
            checks.append(("vendor_err", int(m.group(1))))
    if want["kind"] == "worker_exit":
        if m := re.search(r"exitcode (-?\d+)", detail):
            checks.append(("exitcode", int(m.group(1))))
        if m := re.search(r"local_rank (\d+)", detail):
            checks.append(("local_rank", int(m.group(1))))
    if want["kind"] == "traceback" and (m := re.match(r"(\w+(?:Error|Exception)): ", detail)):
        if not (got.exception or "").startswith(m.group(1)):
            out.append(f"traceback exception {got.exception!r}, want {m.group(1)}")
    for attr, value in checks:
        if getattr(got, attr) != value:
            out.append(f"{want['kind']}.{attr} = {getattr(got, attr)!r}, want {value!r}")
    return out


def check(name: str, want: dict, got: LogSummary) -> list[tuple[str, bool, str]]:
    """(value, right?, why) for every value the file's entry asserts."""
    res: list[tuple[str, bool, str]] = []

    def add(key: str, ok: bool, why: str = "") -> None:
        res.append((key, bool(ok), why))

    add("framework", got.framework == want.get("framework"), f"{got.framework!r} != {want.get('framework')!r}")
    if "nccl_version" in want:
        add("nccl_version", got.nccl_version == want["nccl_version"], f"{got.nccl_version!r}")
    transports = want.get("transports") or {}
    for label, value in transports.items():
        procs = [p for p in got.processes if _proc_matches(label, p) and p.transport(_v(got)) is not None]
        seen = {p.transport(_v(got)) for p in procs}
        read = "Socket" if "Socket" in seen else (seen.pop() if len(seen) == 1 else seen or None)
        add(f"transports.{label}", read == value, f"read {read!r}, want {value!r}")
    extra = [p for p in got.processes if p.transport(_v(got)) is not None
             and not any(_proc_matches(label, p) for label in transports)]
    add("transports.(no others)", not extra, f"transport read for {[(p.label, p.pid, p.transport(_v(got))) for p in extra]}")
    if "socket_fallback" in want:
        add("socket_fallback", got.socket_fallback == want["socket_fallback"], f"{got.socket_fallback!r}")
    if "devices" in want:
        add("devices", list(got.devices) == want["devices"], f"{list(got.devices)}")
    errors = want.get("errors") or []
    kinds = [e.kind for e in got.errors]
    add("errors.kinds", kinds == [e["kind"] for e in errors], f"read {kinds}")
    for i, e in enumerate(errors):
        if i < len(got.errors) and got.errors[i].kind == e["kind"]:
            problems = _error_problems(e, got.errors[i])
            add(f"errors[{i}]", not problems, "; ".join(problems))
        else:
            add(f"errors[{i}]", False, "missing or another kind")
    resume = want.get("resume")
    if resume is None:
        add("resume (none)", got.resume is None, f"read {got.resume}")
    else:
        for key in ("attempted", "succeeded", "step", "path"):
            read = (got.resume or {}).get(key, False if key == "attempted" else None)
            add(f"resume.{key}", read == resume.get(key), f"read {read!r}, want {resume.get(key)!r}")
        if resume.get("succeeded") is False:
            add("resume.reason", bool((got.resume or {}).get("reason")), "a failed resume names its error")
    saves = want.get("checkpoint_saves") or []
    add("checkpoint_saves.count", len(got.checkpoint_saves) == len(saves), f"read {list(got.checkpoint_saves)}")
    for i, s in enumerate(saves):
        g = got.checkpoint_saves[i] if i < len(got.checkpoint_saves) else {}
        for key in ("step", "path", "duration_s"):
            if key not in s:
                continue
            want_v, read = s[key], g.get(key)
            ok = (read is None) if want_v is None else (read is not None and abs(read - want_v) < 0.01
                                                      if isinstance(want_v, float) else read == want_v)
            add(f"checkpoint_saves[{i}].{key}", ok, f"read {read!r}, want {want_v!r}")
    losses = want.get("losses") or []  # (loss, grad norm) per line that printed one; .nan for NaN
    add("losses.count", len(got.losses) == len(losses), f"read {list(got.losses)}")
    for i, pair in enumerate(losses):
        read = got.losses[i] if i < len(got.losses) else (None, None)
        add(f"losses[{i}]", all(_same(w, r) for w, r in zip(pair, read)), f"read {read}, want {pair}")
    if "skipped_steps" in want:  # steps the framework says its optimizer skipped (loss-scaler overflow, NaN refused)
        read = getattr(got, "skipped_steps", None)
        add("skipped_steps", read == want["skipped_steps"], f"read {read!r}, want {want['skipped_steps']!r}")
    for text in want.get("unknown") or []:  # error-like lines no kind fits: kept as unknown (never healthy)
        add(f"unknown[{text[:40]}]", any(text in u for u in got.unknown_errors),
            f"not among the unknown lines {list(got.unknown_errors)}")
    for key, value in (want.get("vllm") or {}).items():
        read = got.vllm.get(key)
        if value is True:  # `failed: true`: the reader names the line that said so (a string); any is right
            ok = bool(read)
        else:
            ok = (not read) if value is None else (read is not None and (abs(read - value) < 1e-3 if isinstance(value, float)
                                                                          else read == value))
        add(f"vllm.{key}", ok, f"read {read!r}, want {value!r}")
    return res


def _same(want, read) -> bool:
    if want is None or read is None:
        return want is None and read is None
    if math.isnan(want) or math.isnan(read):
        return math.isnan(want) and math.isnan(read)
    return abs(want - read) <= 1e-6 * max(1.0, abs(want))


def _v(got: LogSummary):
    return tuple(int(x) for x in got.nccl_version.split(".")) if got.nccl_version else None


def test_every_file_has_an_entry_and_a_source_line():
    assert set(FILES) == set(EXPECTED), f"files without an entry: {set(FILES) - set(EXPECTED)}; " \
                                        f"entries without a file: {set(EXPECTED) - set(FILES)}"
    for name in FILES:
        assert (DIR / name).read_text(encoding="utf-8", errors="replace").startswith("# source: "), name


@pytest.mark.parametrize("name", FILES)
def test_real_log(name):
    wrong = [f"{key}: {why}" for key, ok, why in check(name, EXPECTED[name], summary_of(name)) if not ok]
    assert not wrong, "\n".join(wrong)


def score() -> tuple[int, int, int, int, list[str]]:
    files_ok = values_ok = values = 0
    wrong: list[str] = []
    for name in FILES:
        res = check(name, EXPECTED.get(name, {}), summary_of(name))
        values += len(res)
        values_ok += sum(ok for _, ok, _ in res)
        files_ok += all(ok for _, ok, _ in res)
        wrong += [f"{name}: {key}: {why}" for key, ok, why in res if not ok]
    return files_ok, len(FILES), values_ok, values, wrong


if __name__ == "__main__":
    f_ok, f_all, v_ok, v_all, wrong = score()
    print("\n".join(wrong))
    print(f"files fully right {f_ok}/{f_all} ({f_ok / f_all:.0%}); values right {v_ok}/{v_all} ({v_ok / v_all:.0%})")
