"""``python -m kvplan.launch launch|cleanup [options] [-- command]``."""

import sys

from kvplan.launch.cli import main

sys.exit(main())
