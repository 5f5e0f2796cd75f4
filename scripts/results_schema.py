"""Loads and checks the files the scripts read, so that a missing, empty, truncated or
malformed file ends a script with one line on stderr and exit status 2, never a traceback:

    compare: results/x.json: tests[3] (benchmark/k/fp16/d64/full/s4): missing key 'kernel_timing.median_ms'

Two kinds of file:
- a benchmark results file, schema 1 (results/README.md), or one per-test fragment of a run
  (a folder of them stands for an interrupted run): `load_results`, `load_fragment`;
- a CTest JUnit file (`ctest --output-junit`): `load_junit`.

Every field of the schema that is present must have the schema's type (a field that a
verdict made unreachable may be absent, as the schema says). Each script names the fields
it reads, which must then be present: `run` in the run's record, `test` in every test, and
`when` {field: [fields]}: in every test where that field is present and not null (a test
with a kernel timing has its TFLOP/s, ...). A field is a dotted path: "gpu.name",
"kernel_timing.median_ms".

    doc = load_results(path, "compare", run=["gpu.name", "commit"],
                       when={"kernel_timing": ["test", "kernel_timing.median_ms"]})
"""
import collections
import json
import re
import sys
import xml.etree.ElementTree as ET

BAD_INPUT = 2
SCHEMA = 1

# the types of the schema's fields; a tuple where null is allowed too
STR, INT, NUM, BOOL, OBJ, LIST, NULL = "a string", "an integer", "a number", "true or false", \
    "an object", "a list", "null"
POSITIVE = "a positive number"  # a time the scripts divide by
TIMING = {"median_ms": POSITIVE, "min_ms": NUM, "ci_lo_ms": NUM, "ci_hi_ms": NUM, "samples": INT,
          "dropped_for_clock": INT, "noisy": BOOL, "rsd": NUM, "mean_sm_clock_mhz": NUM,
          "gpu_time_s": NUM, "held": BOOL, "enqueue_ms": NUM}
RUN_TYPES = {
    "commit": STR, "dirty": (BOOL, NULL), "date": STR, "gpu": OBJ, "gpu.name": STR,
    "gpu.compute_capability": STR, "gpu.sms": INT, "gpu.sm_clock_max_mhz": NUM,
    "gpu.memory_clock_max_mhz": NUM, "gpu.l2_bytes": INT, "driver_version": INT,
    "runtime_version": INT, "cublas_version": INT, "cudnn_version": (INT, NULL),
}
TEST_TYPES = {
    "test": STR, "kernel": STR, "dtype": STR, "head_dim": INT, "causal": BOOL, "seqlen_q": INT,
    "seqlen_k": INT, "batch": INT, "heads": INT, "kernel_timing": (OBJ, NULL),
    **{"kernel_timing." + k: t for k, t in TIMING.items()},
    "flops": NUM, "bytes": NUM, "tflops": NUM, "gbs": NUM, "roofline_efficiency": NUM,
    "roofline_bound": STR, "peaks": OBJ, "peaks.tflops": NUM, "peaks.gbs": NUM,
    "baselines": OBJ, "baselines.timed_by": STR,
    "baselines.reference": OBJ, "baselines.reference.speedup": NUM,
    "baselines.reference.speedup_ci": LIST, "baselines.reference.timing": OBJ,
    **{"baselines.reference.timing." + k: t for k, t in TIMING.items()},
    "baselines.cudnn": OBJ, "baselines.cudnn.available": BOOL, "baselines.cudnn.speedup": NUM,
    "baselines.cudnn.speedup_ci": LIST, "baselines.cudnn.reason": STR, "baselines.cudnn.kind": STR,
    "baselines.cudnn.version": INT, "baselines.cudnn.timing": OBJ,
    **{"baselines.cudnn.timing." + k: t for k, t in TIMING.items()},
    "workload": STR, "heads_k": INT, "page_size": INT, "window": LIST, "sequences": LIST,
    "thresholds": OBJ, "launches": OBJ, "launches.available": BOOL, "launches.count": INT,
    "launches.each": LIST, "config": OBJ, "config.tuned": BOOL, "verdict": STR, "reason": STR,
    "phases_s": OBJ, "phases_s.*": NUM,
}
# a cuDNN baseline that ran has its speedup ({"available": true, ..., "speedup": ...})
CUDNN_RAN = ("baselines.cudnn.available", "baselines.cudnn.speedup")


class BadInput(Exception):
    """What is wrong with a file, in a few words (the file's name not included)."""


def fail(prog, path, what):
    """Prints `<prog>: <path>: <what>` as one line on stderr and exits with status 2."""
    print(f"{prog}: {path}: {' '.join(str(what).split())}", file=sys.stderr)
    sys.exit(BAD_INPUT)


def _read(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror or e}")
    if not data.strip():
        raise BadInput("empty file")
    return data


def _type_ok(value, want):
    if isinstance(want, tuple):
        return any(_type_ok(value, w) for w in want)
    if want == NULL:
        return value is None
    if want == STR:
        return isinstance(value, str)
    if want == BOOL:
        return isinstance(value, bool)
    if want == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if want in (NUM, POSITIVE):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok and (want == NUM or value > 0)
    if want == OBJ:
        return isinstance(value, dict)
    if want == LIST:
        return isinstance(value, list)
    raise AssertionError(want)


def _what(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value:g}" if isinstance(value, float) else f"the number {value}"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _want(want):
    return " or ".join(want) if isinstance(want, tuple) else want


def _check_types(obj, types, prefix):
    """Raises BadInput for the first present field of `types` with a wrong type."""
    for path, want in types.items():
        head, _, last = path.rpartition(".")
        parent = _get(obj, head) if head else obj
        if not isinstance(parent, dict):
            continue
        if last == "*":
            items = sorted(parent.items())
        elif last in parent:
            items = [(last, parent[last])]
        else:
            continue
        for key, value in items:
            if not _type_ok(value, want):
                name = prefix + (head + "." if head else "") + key
                raise BadInput(f"'{name}' is {_what(value)}, expected {_want(want)}")


_MISSING = object()


def _get(obj, path):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _require(obj, paths, prefix):
    for path in paths:
        node, done = obj, []
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                raise BadInput(f"missing key '{prefix}{'.'.join(done + [key])}'")
            done.append(key)
            node = node[key]


def check_test(t, test=(), when=None):
    """Raises BadInput when one test's record breaks the schema or lacks a required field."""
    if not isinstance(t, dict):
        raise BadInput(f"expected an object, got {_what(t)}")
    _check_types(t, TEST_TYPES, "")
    _require(t, test, "")
    for field, needed in (when or {}).items():
        if _get(t, field) not in (None, _MISSING):
            _require(t, needed, "")
    if _get(t, CUDNN_RAN[0]) is True:
        _require(t, [CUDNN_RAN[1]], "")


def check_results(doc, run=(), test=(), when=None):
    """Raises BadInput when a parsed results file breaks schema 1 or lacks a required field."""
    if not isinstance(doc, dict):
        raise BadInput(f"expected a JSON object at the top, got {_what(doc)}")
    if "schema" not in doc:
        raise BadInput(f"missing key 'schema': not a benchmark results file (schema {SCHEMA}, results/README.md)")
    _require(doc, ["run", "tests"], "")
    if doc["schema"] != SCHEMA:
        raise BadInput(f"'schema' is {_what(doc['schema'])}, this script reads schema {SCHEMA}")
    if not isinstance(doc["run"], dict):
        raise BadInput(f"'run' is {_what(doc['run'])}, expected an object")
    _check_types(doc["run"], RUN_TYPES, "run.")
    _require(doc["run"], run, "run.")
    if not isinstance(doc["tests"], list):
        raise BadInput(f"'tests' is {_what(doc['tests'])}, expected a list")
    for i, t in enumerate(doc["tests"]):
        try:
            check_test(t, test, when)
        except BadInput as e:
            name = t.get("test") if isinstance(t, dict) else None
            raise BadInput(f"tests[{i}]" + (f" ({name})" if isinstance(name, str) else "") + f": {e}")
    return doc


def _parse_json(path):
    data = _read(path)
    try:
        return json.loads(data)
    except UnicodeDecodeError as e:
        raise BadInput(f"not valid JSON: undecodable text ({e.reason} at byte {e.start})")
    except json.JSONDecodeError as e:
        cut = e.msg.startswith("Unterminated") or e.pos >= len(e.doc.rstrip())
        raise BadInput(f"not valid JSON{' (truncated?)' if cut else ''}: {e}")
    except ValueError as e:
        raise BadInput(f"not valid JSON: {e}")
    except RecursionError:
        raise BadInput("not valid JSON: nested too deeply")


def load_results(path, prog, run=(), test=(), when=None):
    """A results file, checked (see check_results); exits with one line when it is bad."""
    try:
        return check_results(_parse_json(path), run, test, when)
    except BadInput as e:
        fail(prog, path, e)


def results_or_none(path, run=(), test=(), when=None):
    """A results file, or None when it is not a good one (for scans over a folder)."""
    try:
        return check_results(_parse_json(path), run, test, when)
    except BadInput:
        return None


def load_fragment(path, prog, test=(), when=None):
    """One test's record (a fragment of a run), checked; exits with one line when it is bad."""
    try:
        t = _parse_json(path)
        if not isinstance(t, dict):
            raise BadInput(f"expected a JSON object at the top, got {_what(t)}")
        check_test(t, test, when)
        return t
    except BadInput as e:
        fail(prog, path, e)


def load_junit(path, prog):
    """A CTest JUnit file's root element, checked; exits with one line when it is bad."""
    try:
        data = _read(path)
        try:
            root = ET.fromstring(data)
        except ET.ParseError as e:  # expat's "no element found" and "unclosed token": cut short
            raise BadInput(f"not valid XML{' (truncated?)' if e.code in (3, 5) else ''}: {e}")
        if root.tag not in ("testsuite", "testsuites"):
            raise BadInput(f"not a JUnit file: the root element is <{root.tag}>, "
                           "expected <testsuite> or <testsuites>")
        for i, tc in enumerate(root.iter("testcase")):
            if not tc.get("name"):
                raise BadInput(f"testcase {i + 1} has no 'name' attribute")
        return root
    except BadInput as e:
        fail(prog, path, e)


CASE_LINE = re.compile(r"^CASE (\S+) (passed|FAILED|NOT_SUPPORTED|SKIPPED|NOT_RUN)\b", re.M)
CASE_WORDS = {"passed": "passed", "FAILED": "failed", "NOT_SUPPORTED": "not supported", "SKIPPED": "skipped",
              "NOT_RUN": "not run"}


def junit_cases(root):
    """The cases inside a JUnit file's correctness tests (the "CASE <case> <verdict>" lines
    attn_correctness prints): a Counter by verdict word, and the failed and never-run cases as
    "<test>/<case>"."""
    counts, failed = collections.Counter(), []
    for tc in root.iter("testcase"):
        for label, verdict in CASE_LINE.findall(tc.findtext("system-out") or ""):
            counts[CASE_WORDS[verdict]] += 1
            if verdict in ("FAILED", "NOT_RUN"):
                failed.append(f"{tc.get('name')}: case {label}")
    return counts, failed
