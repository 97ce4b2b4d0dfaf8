"""vLLM's startup log, as the twin's inference replicas print it, line style by version.

Every line shape comes from `tests/data/real/logs/vllm-*.log` (the file and its source are named next to
each). vLLM ≤ 0.7 prints `INFO 03-01 10:30:42 model_runner.py:1110] …` and `Loading model weights took
X GB` (no time); ≥ 0.8 prints `INFO 06-02 11:03:55 [gpu_model_runner.py:1933] …`, `Loading weights took S
seconds` and `Model loading took X GiB and S seconds`. The phases are cut from the replica's startup
delay (container start → Ready): the model load, then CUDA graph capture, then the API server, so what
the drills read from the log adds up to what the kubelet did. `plan` gives (time, lines) batches, the
last one (uvicorn's) printed only when the replica is Ready. Pure functions.
"""

from __future__ import annotations

import logging
import re
import zlib
from datetime import datetime, timezone

__all__ = ["plan", "phases", "version_of"]

log = logging.getLogger(__name__)

WEIGHTS_SHARE = 0.78  # of the startup: safetensors weights read from disk
GRAPHS_SHARE = 0.12  # CUDA graph capture after the KV-cache profile


def phases(started: float, ready: float, graph_capture_s: float | None = None) -> dict[str, float]:
    """Phase boundaries (twin times) and durations between container start and Ready; `graph_capture_s`
    fixes the CUDA graph capture (a defect), the other phases share the rest."""
    total = max(ready - started, 0.001)
    graphs = min(graph_capture_s, 0.95 * total) if graph_capture_s is not None else GRAPHS_SHARE * total
    rest = (total - graphs) / (1.0 - GRAPHS_SHARE)  # what the default shares apply to
    load_from = started + 0.03 * rest
    weights = WEIGHTS_SHARE * rest
    model = weights + 0.02 * rest
    graphs_at = ready - 0.04 * rest
    return {"load_from": load_from, "weights_s": weights, "model_s": model, "loaded_at": load_from + model,
            "graphs_s": graphs, "graphs_from": graphs_at - graphs, "graphs_at": graphs_at, "ready": ready}


def plan(spec, image: str, started: float, ready: float, uid: str,
         graph_capture_s: float | None = None) -> list[tuple[float, list[str]]]:
    """(time, lines) batches from the container start to the server being ready (the last batch, at `ready`)."""
    version = version_of(image)
    new = _vtuple(version) >= (0, 8)

    def info(t: float, where: str) -> str:
        d = datetime.fromtimestamp(t, timezone.utc)
        return f"INFO {d:%m-%d %H:%M:%S} [{where}] " if new else f"INFO {d:%m-%d %H:%M:%S} {where}] "

    p = phases(started, ready, graph_capture_s)
    gib = round(spec.model_params_b * 2 * 0.9314 / max(1, spec.gpus), 4)  # bf16 weights per GPU
    pid = 1 + zlib.crc32(uid.encode()) % 400
    engine = "a V0 LLM engine" if _vtuple(version) >= (0, 7) else "an LLM engine"
    out: list[tuple[float, list[str]]] = [(started, [
        # vllm-0.4-api-server-version-no-brackets.log (vllm#4154), vllm-v1-0.10.2-api-server-version.log (vllm#24162)
        f"{info(started, 'api_server.py:528')}vLLM API server version {version}",
        f"{info(started, 'api_server.py:529')}args: Namespace(host=None, port={spec.port}, model='{spec.model}', "
        f"served_model_name=['{spec.served_model_name}'], tensor_parallel_size={spec.gpus})",
        # pytorch/serve#3343 (0.6.1), vllm-v0-… (0.7: "a V0 LLM engine")
        f"{info(started, 'llm_engine.py:237')}Initializing {engine} (v{version}) with config: "
        f"model='{spec.model}', tokenizer='{spec.model}', dtype=torch.bfloat16, "
        f"tensor_parallel_size={spec.gpus}, served_model_name={spec.served_model_name}"])]
    # vllm-0.6.1-torchserve-starting-to-load.log; vllm-v1-rocm-strix-halo-compile-cache.log (weights format)
    out.append((p["load_from"], [f"{info(p['load_from'], 'model_runner.py:1014')}Starting to load model {spec.model}...",
                                 f"{info(p['load_from'], 'weight_utils.py:243')}Using model weights format "
                                 "['*.safetensors']"]))
    if new:  # vllm-v0-enc-dec-whisper-weights.log (0.8+, V0 with brackets)
        out.append((p["load_from"] + p["weights_s"], [
            f"{info(p['load_from'] + p['weights_s'], 'default_loader.py:272')}Loading weights took "
            f"{p['weights_s']:.2f} seconds"]))
        out.append((p["loaded_at"], [f"{info(p['loaded_at'], 'model_runner.py:1203')}Model loading took {gib} GiB "
                                     f"and {p['model_s']:.6f} seconds"]))
    else:  # vllm-0.5-mp-workers-weights-cudagraph.log: size only, the time is read from the stamps
        out.append((p["loaded_at"], [f"{info(p['loaded_at'], 'model_runner.py:1025')}Loading model weights took "
                                     f"{gib} GB"]))
    # vllm-0.6-v0-cudagraph-capture-no-brackets.log (vllm#11349)
    out.append((p["graphs_from"], [
        f"{info(p['graphs_from'], 'model_runner.py:1385')}Capturing cudagraphs for decoding. This may lead to "
        "unexpected consequences if the model is not static. To run the model in eager mode, set "
        "'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph "
        "capture, consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also reduce the "
        "`max_num_seqs` as needed to decrease memory usage."]))
    out.append((p["graphs_at"], [f"{info(p['graphs_at'], 'model_runner.py:1535')}Graph capturing finished in "
                                 f"{p['graphs_s']:.0f} secs, took 0.21 GiB"]))
    # vllm-v0-uvicorn-application-startup-complete.log (vllm#15018): uvicorn's own lines
    out.append((ready, [f"INFO:     Started server process [{pid}]", "INFO:     Waiting for application startup.",
                        "INFO:     Application startup complete.",
                        f"INFO:     Uvicorn running on http://0.0.0.0:{spec.port} (Press CTRL+C to quit)"]))
    return out


def version_of(image: str) -> str:
    m = re.search(r":v?(\d+\.\d+\.\d+\S*)$", image)
    return m.group(1) if m else "0.6.3"


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])
