#!/usr/bin/env python3
"""scripts/sass_mix.py runs attn/sass_mix.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.sass_mix import main  # noqa: E402

sys.exit(main())
