"""Run a command in a pod's container over pods/exec (the client's WebSocket stream): one place for the tools the
drills read inside pods — nvidia-smi in a worker, dcgmi in the DCGM pod, find/cat in the checkpoint-store reader.

The command is an argument list (never a shell line); no stdin, no tty. The answer is (exit code, stdout,
stderr); an exec that never ran (denied, pod gone, connection lost) is exit 255 with the reason in stderr, so a
caller can say so instead of reading an empty answer as "nothing there".
"""

from __future__ import annotations

import logging

__all__ = ["exec_in_pod", "EXEC_FAILED"]

log = logging.getLogger(__name__)

EXEC_FAILED = 255  # the exit code of an exec that never ran (as kubectl exec reports a failed connection)


def exec_in_pod(cluster, namespace: str, pod: str, command: list[str], container: str | None = None,
                timeout_s: float = 60.0) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `command` in `namespace/pod` (its `container`, else the default one)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    kwargs = {"container": container} if container else {}
    try:
        session = stream(cluster.core.connect_get_namespaced_pod_exec, pod, namespace, command=command,
                         stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False, **kwargs)
        session.run_forever(timeout=timeout_s)
        out, err = session.read_stdout() or "", session.read_stderr() or ""
        code = session.returncode
        session.close()
    except (ApiException, OSError, ValueError) as err:  # the exec never ran: say so, never guess
        if _interrupted(err):  # Ctrl-C/SIGTERM landed in the stream, which wrapped it: an interrupt, not a reading
            raise KeyboardInterrupt(str(err)) from err
        return EXEC_FAILED, "", f"exec failed: {getattr(err, 'status', '') or ''} {getattr(err, 'reason', '') or err}".strip()
    log.debug("%s/%s: %s → %s", namespace, pod, " ".join(command), code)
    return (EXEC_FAILED if code is None else code), out, err


def _interrupted(err: BaseException) -> bool:
    """Whether the stream's error is a KeyboardInterrupt it caught and wrapped (its cause or its context: the
    WebSocket client raises its own error while handling the interrupt). A run being stopped must end as
    interrupted, never as a reading that failed (a steady state "not observed" with `exec failed: signal 2`)."""
    from drills.core.signals import interrupt_caused

    return interrupt_caused(err) or isinstance(err.__context__, KeyboardInterrupt)
