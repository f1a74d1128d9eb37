import sys

from torchtalk.cli import main

sys.exit(main())
