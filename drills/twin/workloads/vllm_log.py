"""vLLM's startup log, as the twin's inference replicas print it.

Shapes from `tests/data/real/logs/vllm-*.log` (V0 engine, OpenAI API server): the version line,
`Starting to load model …`, `Using model weights format ['*.safetensors']`, `Loading weights took X
seconds`, `Model loading took X GiB and Y seconds`, CUDA graph capture, `Starting vLLM API server on …`
and uvicorn's `Application startup complete.` / `Uvicorn running on …`. The phases are cut from the
twin's model-load delay (container start → Ready), so what the drills read from the log adds up to
what the kubelet did. Pure functions.
"""

from __future__ import annotations

import logging
import re
import zlib
from datetime import datetime, timezone

__all__ = ["startup", "loaded", "phases"]

log = logging.getLogger(__name__)

WEIGHTS_SHARE = 0.78  # of the startup: safetensors weights read from disk
GRAPHS_SHARE = 0.12  # CUDA graph capture after the KV-cache profile


def phases(started: float, ready: float) -> dict[str, float]:
    """Phase boundaries (twin times) and durations between container start and Ready."""
    total = max(ready - started, 0.001)
    load_from = started + 0.03 * total
    weights = WEIGHTS_SHARE * total
    model = weights + 0.02 * total
    graphs = GRAPHS_SHARE * total
    return {"load_from": load_from, "weights_s": weights, "model_s": model, "loaded_at": load_from + model,
            "graphs_s": graphs, "graphs_at": ready - 0.04 * total, "ready": ready}


def startup(spec, image: str, started: float, uid: str) -> list[str]:
    """The lines printed as the container starts: version, arguments, engine config."""
    version = _version(image)
    at = started
    return [f"{_info(at, 'api_server.py:1034')}vLLM API server version {version}",
            f"{_info(at, 'api_server.py:1035')}args: Namespace(host=None, port={spec.port}, model='{spec.model}', "
            f"served_model_name=['{spec.served_model_name}'], tensor_parallel_size={spec.gpus})",
            f"{_info(at, 'llm_engine.py:234')}Initializing a V0 LLM engine (v{version}) with config: "
            f"model='{spec.model}', tokenizer='{spec.model}', dtype=torch.bfloat16, "
            f"tensor_parallel_size={spec.gpus}, served_model_name={spec.served_model_name}"]


def loaded(spec, started: float, ready: float, uid: str) -> list[tuple[float, list[str]]]:
    """(time, lines) batches from the weight load to the server being ready, ending at `ready`."""
    p = phases(started, ready)
    gib = round(spec.model_params_b * 2 * 0.9314 / max(1, spec.gpus), 4)  # bf16 weights per GPU
    pid = 1 + zlib.crc32(uid.encode()) % 400
    return [
        (p["load_from"], [f"{_info(p['load_from'], 'model_runner.py:1110')}Starting to load model {spec.model}...",
                          f"{_info(p['load_from'], 'weight_utils.py:265')}Using model weights format ['*.safetensors']"]),
        (p["load_from"] + p["weights_s"], [
            f"{_info(p['load_from'] + p['weights_s'], 'default_loader.py:272')}Loading weights took "
            f"{p['weights_s']:.2f} seconds"]),
        (p["loaded_at"], [f"{_info(p['loaded_at'], 'model_runner.py:1203')}Model loading took {gib} GiB and "
                          f"{p['model_s']:.6f} seconds"]),
        (p["graphs_at"] - p["graphs_s"], [
            f"{_info(p['graphs_at'] - p['graphs_s'], 'model_runner.py:1404')}Capturing cudagraphs for decoding. This "
            "may lead to unexpected consequences if the model is not static. To run the model in eager mode, set "
            "'enforce_eager=True' or use '--enforce-eager' in the CLI."]),
        (p["graphs_at"], [f"{_info(p['graphs_at'], 'model_runner.py:1546')}Graph capturing finished in "
                          f"{p['graphs_s']:.0f} secs, took 0.45 GiB"]),
        (ready, [f"{_info(ready, 'api_server.py:1081')}Starting vLLM API server on http://0.0.0.0:{spec.port}",
                 f"INFO:     Started server process [{pid}]", "INFO:     Waiting for application startup.",
                 "INFO:     Application startup complete.",
                 f"INFO:     Uvicorn running on http://0.0.0.0:{spec.port} (Press CTRL+C to quit)"]),
    ]


def _version(image: str) -> str:
    m = re.search(r":v?(\d+\.\d+\.\d+\S*)$", image)
    return m.group(1) if m else "0.8.5"


def _info(t: float, where: str) -> str:
    """`INFO 03-18 09:00:11 [launcher.py:34] ` (vLLM's logger: month-day, no year)."""
    d = datetime.fromtimestamp(t, timezone.utc)
    return f"INFO {d:%m-%d %H:%M:%S} [{where}] "
