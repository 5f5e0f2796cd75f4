#!/usr/bin/env python3
"""scripts/tune_table.py runs attn/tune_table.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.tune_table import main  # noqa: E402

sys.exit(main())
