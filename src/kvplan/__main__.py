import sys

from kvplan.cli.main import main

sys.exit(main())
