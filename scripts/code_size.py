#!/usr/bin/env python3
"""scripts/code_size.py runs attn/code_size.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.code_size import main  # noqa: E402

sys.exit(main())
