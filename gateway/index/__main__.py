"""``python -m gateway.index``: the background builder process (see :mod:`gateway.index.background`)."""

import sys

from gateway.index.background import main

sys.exit(main())
