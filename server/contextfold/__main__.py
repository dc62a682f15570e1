import sys

from contextfold.cli.main import main

sys.exit(main())
