import sys

from drills.cli import main

sys.exit(main())
