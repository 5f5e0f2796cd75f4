#!/usr/bin/env python3
"""scripts/results.py: see attn/results.py (--help)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.results import main  # noqa: E402

sys.exit(main())
