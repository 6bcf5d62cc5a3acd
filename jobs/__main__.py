"""``python -m jobs`` is the ``lakehouse`` command."""

from jobs.cli import main

raise SystemExit(main())
