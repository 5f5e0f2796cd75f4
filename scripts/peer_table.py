#!/usr/bin/env python3
"""scripts/peer_table.py runs attn/peer_table.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.peer_table import main  # noqa: E402

sys.exit(main())
