#!/usr/bin/env python3
"""scripts/summary.py runs attn/summary.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.summary import main  # noqa: E402

sys.exit(main())
