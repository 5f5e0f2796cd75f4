"""The harness's Python tools as one package. Each command is a module with main() (run as
`scripts/<name>.py`, a thin wrapper, or `python3 -m attn.<name>` from scripts/); the files
they read are checked by one schema module, `attn.schema` (results, tuning, JUnit, shapes);
`attn.store` knows the results tree (layout, compaction, index, retention, history)."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
