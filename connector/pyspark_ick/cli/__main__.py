"""``python -m pyspark_ick.cli``: the same as the ``pyspark-ick`` command."""

import sys

from . import main

sys.exit(main())
