#!/usr/bin/env python3
"""scripts/resource_spec.py runs attn/resource_spec.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.resource_spec import main  # noqa: E402

sys.exit(main())
