#!/usr/bin/env python3
"""scripts/set_thresholds.py runs attn/set_thresholds.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.set_thresholds import main  # noqa: E402

sys.exit(main())
