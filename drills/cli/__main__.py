import sys

try:
    from drills.cli import main
except KeyboardInterrupt:  # Ctrl-C while the CLI is still importing: nothing has started
    sys.exit(130)

sys.exit(main())
