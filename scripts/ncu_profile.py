#!/usr/bin/env python3
"""scripts/ncu_profile.py runs attn/ncu_profile.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.ncu_profile import main  # noqa: E402

sys.exit(main())
