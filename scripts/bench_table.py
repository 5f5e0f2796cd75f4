#!/usr/bin/env python3
"""scripts/bench_table.py runs attn/bench_table.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.bench_table import main  # noqa: E402

sys.exit(main())
