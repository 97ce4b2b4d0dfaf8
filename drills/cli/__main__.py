import signal
import sys

# SIGTERM stops a drills command as Ctrl-C does (exit 130), from the first instant; `drills run` then takes
# over both (drills.core.signals.stop_on_signal). A signal the shell made us ignore stays ignored.
if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.default_int_handler)

try:
    from drills.cli import main
except KeyboardInterrupt:  # while the CLI is still importing: nothing has started
    sys.exit(130)

sys.exit(main())
