"""vLLM: a traceback during start-up is a failed start (drills/measure/vllm_startup.py), not "still starting";
a server that still reaches Ready after one did not fail. Lines shaped after tests/data/real/logs/vllm-*.log."""

from drills.measure.vllm_startup import read_startup

LOAD = "INFO 02-12 10:00:01 model_runner.py:1094] Starting to load model Qwen/Qwen2.5-VL-72B-Instruct..."
TB = ["Traceback (most recent call last):",
      '  File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", line 875, in run_server',
      "    async with build_async_engine_client(args) as engine_client:"]
EXC = "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0."
READY = "INFO:     Application startup complete."


def test_a_traceback_in_a_phase_is_a_failed_start_with_its_exception():
    s = read_startup("\n".join([LOAD, *TB, EXC]))
    assert s.failed == EXC and s.in_progress() is None and not s.ready


def test_a_traceback_cut_before_its_exception_is_still_a_failed_start():
    s = read_startup("\n".join([LOAD, *TB]))
    assert s.failed == "Traceback (most recent call last) during start-up" and s.in_progress() is None


def test_a_recognised_failure_line_says_more_than_the_traceback():
    s = read_startup("\n".join([LOAD, *TB, "ERROR 02-12 10:00:09 [core.py:586] EngineCore failed to start.", EXC]))
    assert s.failed == "EngineCore failed to start."


def test_a_server_that_reaches_ready_after_a_traceback_did_not_fail():
    s = read_startup("\n".join([LOAD, *TB, EXC, READY]))
    assert s.ready and s.failed is None
