#!/usr/bin/env python3
"""scripts/side_by_side.py runs attn/side_by_side.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.side_by_side import main  # noqa: E402

sys.exit(main())
