import sys

from hbtui.cli import main

sys.exit(main())
