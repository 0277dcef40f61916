"""``python3 tests/nemesis ...`` (or ``python3 -m tests.nemesis ...`` from the checkout): the
soak's command line, nemesis.cli."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# tests/ first, so that nemesis.* and the test helpers import; not this package's own folder
# (what running it as a directory puts there), whose modules are no top-level ones
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from nemesis.cli import main  # noqa: E402 - tests/ is on sys.path only from here on

sys.exit(main(sys.argv[1:]))
