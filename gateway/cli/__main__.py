"""``python -m gateway.cli``: the same as the ``fedsearch`` command."""

from gateway.cli.main import main

raise SystemExit(main())
