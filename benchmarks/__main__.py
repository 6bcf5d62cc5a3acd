"""``python -m benchmarks [NAME] [--events N]``: run the benchmarks (``make bench``)."""

from __future__ import annotations

import sys

from benchmarks.pipeline_throughput import main

raise SystemExit(main(sys.argv[1:]))
