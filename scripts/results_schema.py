"""Kept for callers outside scripts/ that import it by this name: the schema lives in
attn/schema.py."""
from attn.schema import *  # noqa: F401,F403
from attn.schema import BadInput, fail, junit_cases, load_fragment, load_junit, load_results, results_or_none  # noqa: F401
