"""``python -m gateway.index``: the background builder process (see :mod:`gateway.index.builder`)."""

import sys

from gateway.index.builder import main

sys.exit(main())
