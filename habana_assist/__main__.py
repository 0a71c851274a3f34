"""`python3 -m habana_assist ...`: see habana_assist/cli.py."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
