import sys

from contextfold.cli.dispatch import main

sys.exit(main())
