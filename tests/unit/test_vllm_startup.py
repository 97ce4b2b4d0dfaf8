"""vLLM's startup phases read from real logs (tests/data/real/logs/vllm-*.log) in both line styles, and
how a replacement's slow startup is attributed to the phase its log shows. Values written by hand from
reading the files."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from drills.measure.serving_startup import PodStartup
from drills.measure.vllm_startup import read_startup

DIR = Path(__file__).resolve().parents[1] / "data" / "real" / "logs"


def _text(name: str, first_lines: int | None = None) -> str:
    lines = (DIR / name).read_text(encoding="utf-8").split("\n")
    return "\n".join(lines[: first_lines + 1] if first_lines is not None else lines)  # + the source line


def _at(month: int, day: int, h: int, m: int, s: int) -> datetime:
    return datetime(2000, month, day, h, m, s, tzinfo=timezone.utc)  # vLLM's stamps have no year


def test_old_style_graph_capture_from_start_to_finish():
    """`INFO 12-19 22:58:27 model_runner.py:1415] Capturing cudagraphs…` … `Graph capturing finished in 14 secs`."""
    startup = read_startup(_text("vllm-0.6-v0-cudagraph-capture-no-brackets.log"))
    assert startup.started["graph_capture"] == _at(12, 19, 22, 58, 27)
    assert startup.breakdown() == {"graph_capture": 14.0} and startup.in_progress() is None


def test_old_style_graph_capture_read_before_it_ended_is_in_progress():
    startup = read_startup(_text("vllm-0.6-v0-cudagraph-capture-no-brackets.log", first_lines=2))
    assert startup.in_progress(now=_at(12, 19, 22, 58, 40)) == ("graph_capture", 13.0)
    assert startup.summary()["in_progress"] == {"phase": "graph_capture", "seconds": 0.0}  # its last line's time


def test_new_style_model_load_with_process_prefix():
    """`(EngineCore_DP0 pid=66914) INFO 09-21 12:29:22 [gpu_model_runner.py:2530] Starting to load model …`."""
    startup = read_startup(_text("vllm-v1-gguf-engine-core-dp0.log"))
    assert startup.started["model_load"] == _at(9, 21, 12, 29, 22)
    assert startup.summary()["model_load_s"] == 74.270197 and startup.summary()["model_load_gb"] == 2.2845
    assert startup.in_progress() is None


def test_a_model_load_whose_end_is_not_in_the_log_is_in_progress_behind_a_torchserve_prefix():
    startup = read_startup(_text("vllm-0.6.1-torchserve-starting-to-load.log"))
    assert startup.in_progress(now=_at(10, 7, 22, 56, 57)) == ("model_load", 120.0)


def test_compile_graphs_and_the_api_server_start():
    startup = read_startup(_text("vllm-v1-graph-capture-api-server.log"))
    assert startup.summary()["compile_s"] == 45.81 and startup.summary()["graph_capture_s"] == 37.0
    assert startup.summary()["engine_init_s"] == 90.84
    # `Starting vLLM API server on …` printed, uvicorn's `Application startup complete.` not yet
    assert not startup.ready and startup.in_progress()[0] == "server_start"


def test_uvicorn_startup_complete_is_ready():
    assert read_startup(_text("vllm-v0-uvicorn-application-startup-complete.log")).ready


def test_versions_in_both_line_styles():
    assert read_startup(_text("vllm-0.4-api-server-version-no-brackets.log")).version == "0.4.0.post1"
    assert read_startup(_text("vllm-v1-0.10.2-api-server-version.log")).version == "0.10.2.dev378+g4d7fe40fc.d20250829"


def test_the_slowest_phase_of_a_replacement_comes_from_its_log_when_it_covers_the_server_startup():
    pod = PodStartup("p", "n", {"scheduling": 1.0, "image pull": 20.0, "container start": 1.0, "server startup": 400.0},
                     ready=False, server_phases={"model load": 50.0, "CUDA graph capture": 330.0})
    assert pod.slowest() == ("CUDA graph capture", 330.0) and pod.from_log
    assert pod.attributed()["server startup"] == 20.0  # what the log's phases do not cover
    # a log whose phases cover little of a long startup: the startup itself stays the slowest
    pod = PodStartup("p", "n", {"image pull": 20.0, "server startup": 400.0}, ready=True,
                     server_phases={"model load": 50.0})
    assert pod.slowest() == ("server startup", 350.0) and not pod.from_log
    # no log read: the pod's events alone
    assert PodStartup("p", "n", {"image pull": 300.0, "server startup": 60.0}, ready=True).slowest() == ("image pull", 300.0)


def test_the_compile_total_in_every_wording_vllm_printed():
    """vllm/compilation/monitor.py: `graph compilation takes` (0.7), `torch.compile takes` (0.8+), `took` (newer)."""
    for wording in ("graph compilation takes", "torch.compile takes", "torch.compile took"):
        line = f"INFO 06-13 11:37:08 [monitor.py:33] {wording} 26.48 s in total"
        assert read_startup(line).summary()["compile_s"] == 26.48, wording
