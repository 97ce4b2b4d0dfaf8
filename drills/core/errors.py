"""The one error tree: every failure a user sees is a DrillError rendered as one clear line."""

__all__ = [
    "DrillError",
    "InvalidProfile",
    "InjectionFailed",
    "RevertFailed",
    "CheckFailed",
    "ToolOutputError",
    "SloViolated",
    "UnsafeTarget",
    "TargetUnreachable",
    "TargetGone",
    "StopConditionBreached",
]


class DrillError(Exception):
    """Base of every error meant for a user: str(err) is the line they read (what, which, what to do).

    `changed` is set by an injector that knows whether the platform was changed before it failed
    (False: nothing of ours is in place; None: unknown, so the guard reverts from the undo spec)."""

    changed: bool | None = None


class InvalidProfile(DrillError):
    """A profile, defect or stage file does not validate."""


class InjectionFailed(DrillError):
    """A fault could not be injected. `changed=False` when the injector guarantees it changed nothing
    (the guard then closes the journal entry as not injected); otherwise the guard reverts from the
    entry's undo spec, which is safe on a fault only half in place."""

    def __init__(self, message: str, *, changed: bool | None = None) -> None:
        super().__init__(message)
        self.changed = changed


class RevertFailed(DrillError):
    """A fault could not be reverted; the journal keeps the entry open for `drills revert`."""


class CheckFailed(DrillError):
    """A check could not measure what it was asked to (not a verdict: see SloViolated)."""


class NotNominal(CheckFailed):
    """The platform was not in its nominal steady state (the profile's `nominal:`) before the first fault:
    nothing was injected (drills.measure.steady; the record says each reading)."""


class ToolOutputError(CheckFailed):
    """A tool's output (nvidia-smi, dcgmi, nccl-tests, perftest, ibstat, gpu-burn) is not what that tool
    prints, or stops before the figures a check needs: an acceptance check reads it as a no-go."""


class SloViolated(DrillError):
    """A measured value breaks its target."""


class UnsafeTarget(DrillError):
    """A target outside the profile's allowlist or blast-radius cap; refused before any change."""


class TargetUnreachable(DrillError):
    """The cluster API, a switch or an endpoint does not answer."""


class TargetGone(TargetUnreachable):
    """The target no longer exists (a twin whose process ended): its faults ended with it."""


class StopConditionBreached(DrillError):
    """A stop condition over the steady state tripped during the fault (drills.core.stop): the guard
    reverted the scenario's faults at once; the drill is aborted, not judged."""
