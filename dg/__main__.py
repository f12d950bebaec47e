"""`python -m dg generate …`: see dg/cli.py."""

import sys

from dg.cli import main

sys.exit(main())
