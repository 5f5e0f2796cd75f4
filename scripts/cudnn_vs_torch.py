#!/usr/bin/env python3
"""scripts/cudnn_vs_torch.py runs attn/cudnn_vs_torch.py's command (--help says what it does)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn.cudnn_vs_torch import main  # noqa: E402

sys.exit(main())
