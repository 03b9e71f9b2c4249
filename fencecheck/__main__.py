import sys

from fencecheck.commands.main import main

sys.exit(main())
