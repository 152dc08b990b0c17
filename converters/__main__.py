"""Entry point: `python -m converters --help`."""

import sys

from converters.cli import main

sys.exit(main())
