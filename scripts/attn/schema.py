"""The one schema module: loads and checks the files the scripts read, so that a missing, empty, truncated or
malformed file ends a script with one line on stderr and exit status 2, never a traceback:

    compare: results/x.json: tests[3] (benchmark/k/fp16/d64/full/s4): missing key 'kernel_timing.median_ms'

The files:
- a benchmark results file, schema 1 (results/README.md), or one per-test fragment of a run
  (a folder of them stands for an interrupted run): `load_results`, `load_fragment`;
  a test's workload: `workload`; its pass (forward, backward, both): `test_pass`, and the
  parts of a benchmark's name: `split_name` (the one place that knows where the pass word sits);
- a tune results file (attn_tune, results/README.md): `load_tune`;
- a CTest JUnit file (`ctest --output-junit`): `load_junit`, `junit_cases`;
- a shapes file, as the C program `attn_shapes --json` parses it (Python never parses shapes
  files itself), and the correctness check table (`attn_shapes --checks-json`):
  `load_shapes`, `load_checks`, `shapes_tool`.

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
import gzip
import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

BAD_INPUT = 2
SCHEMA = 1

# the types of the schema's fields; a tuple where null is allowed too
STR, INT, NUM, BOOL, OBJ, LIST, NULL = "a string", "an integer", "a number", "true or false", \
    "an object", "a list", "null"
POSITIVE = "a positive number"  # a time the scripts divide by
INT_MAX = 2**31 - 1  # the harness writes its integers from C ints
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
    "phases_s": OBJ, "phases_s.*": NUM, "pass": STR,
}
# What a benchmark times (its "pass"; absent in results written before the backward: fwd), in
# the order the tables show them. A backward test's name carries the pass after the suite:
# benchmark/bwd/<kernel>/<dtype>/d<D>/<mask>/s<S> beside the forward's benchmark/<kernel>/...
PASSES = ("fwd", "bwd", "fwd_bwd")
PASS_TITLES = {"fwd": "Forward", "bwd": "Backward", "fwd_bwd": "Forward + backward"}
NAME_PARTS = 6  # <suite>/<kernel>/<dtype>/d<D>/<mask or workload>/<shape>, without a pass word
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
    if data[:2] == b"\x1f\x8b":  # a committed results file over 150 KB is gzip-compressed (.json.gz)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise BadInput(f"not valid gzip: {e}")
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


def _out_of_range(value, want):
    """What a number of the right type must be but is not (None where it is fine): every
    number of the schema is finite and >= 0, every integer fits a C int."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        kinds = want if isinstance(want, tuple) else (want,)
        limit = INT_MAX if INT in kinds else float("inf")
        return None if 0 <= value <= limit else f"an integer from 0 to {INT_MAX}" if INT in kinds else "a number >= 0"
    if not math.isfinite(value):
        return "a finite number"
    return "a number >= 0" if value < 0 else None


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
            name = prefix + (head + "." if head else "") + key
            if not _type_ok(value, want):
                raise BadInput(f"'{name}' is {_what(value)}, expected {_want(want)}")
            bound = _out_of_range(value, want)
            if bound:
                raise BadInput(f"'{name}' is {_what(value)}, expected {bound}")


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


def split_name(name):
    """(pass, the name's parts without the pass word) of a benchmark's test name:
    benchmark/bwd/k/fp16/d64/full/s4 -> ("bwd", ["benchmark", "k", "fp16", "d64", "full", "s4"]).
    A name of another form (correctness/k/..., benchmark/prepare) has no pass word: fwd."""
    parts = name.split("/")
    if len(parts) == NAME_PARTS + 1 and parts[1] in PASSES[1:]:
        return parts[1], parts[:1] + parts[2:]
    return "fwd", parts


def test_pass(t):
    """A test record's pass: "fwd", "bwd" or "fwd_bwd" (a record without one is a forward's)."""
    return t.get("pass") or "fwd"


def _check_pass(t):
    """Raises BadInput when a record's pass is not one of PASSES, or disagrees with its name's
    (a backward record under a forward's name would be compared with the forward)."""
    if "pass" in t and t["pass"] not in PASSES:
        raise BadInput(f"'pass' is '{t['pass']}', expected one of {', '.join(PASSES)} (or absent: fwd)")
    if isinstance(t.get("test"), str):
        named = split_name(t["test"])[0]
        if named != test_pass(t):
            raise BadInput(f"'pass' is {repr(t['pass']) if 'pass' in t else 'absent (fwd)'}, but the test name "
                           f"says {named}" + ("" if named != "fwd" else " (no pass word after the suite)"))


def check_test(t, test=(), when=None):
    """Raises BadInput when one test's record breaks the schema or lacks a required field."""
    if not isinstance(t, dict):
        raise BadInput(f"expected an object, got {_what(t)}")
    _check_types(t, TEST_TYPES, "")
    _check_pass(t)
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
            _junit_number(tc, "time", f"testcase {i + 1} ({tc.get('name')})", float)
        for suite in root.iter("testsuite"):
            _junit_number(suite, "time", "<testsuite>", float)
            for count in ("tests", "failures", "disabled", "skipped", "errors"):
                _junit_number(suite, count, "<testsuite>", int)
        return root
    except BadInput as e:
        fail(prog, path, e)


def _junit_number(elem, attr, where, kind):
    """Raises BadInput when a JUnit attribute that is present is not a finite number >= 0
    (a count: an integer that fits a C int)."""
    text = elem.get(attr)
    if text is None:
        return
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or _out_of_range(value, INT if kind is int else NUM):
        want = f"an integer from 0 to {INT_MAX}" if kind is int else "a finite number >= 0"
        raise BadInput(f"{where}: '{attr}' is '{text}', expected {want}")


CASE_LINE = re.compile(r"^CASE (\S+) (passed|FAILED|KNOWN_DEVIATION|NOT_SUPPORTED|SKIPPED|NOT_RUN)\b", re.M)
CASE_WORDS = {"passed": "passed", "FAILED": "failed", "KNOWN_DEVIATION": "known deviation",
              "NOT_SUPPORTED": "not supported", "SKIPPED": "skipped", "NOT_RUN": "not run"}


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


def workload(t):
    """A test's workload: full, causal, or version 2's decode, varlen, window (results written
    before version 2 have none: by the mask)."""
    return t.get("workload") or ("causal" if t["causal"] else "full")


def shape_key(t):
    """What a benchmark measured, whichever kernel ran it: (pass, dtype, head dim, workload,
    S_q, S_k). A backward's key never equals the forward's of the same shape."""
    return (test_pass(t), t["dtype"], t["head_dim"], workload(t), t["seqlen_q"], t["seqlen_k"])


def by_pass(items, pass_of=test_pass):
    """[(pass, [item, ...])] for the passes present, in PASSES order, each item's order kept:
    the tables print the forward, then the backward, then both."""
    groups = {}
    for item in items:
        groups.setdefault(pass_of(item), []).append(item)
    return [(p, groups[p]) for p in PASSES if p in groups]


def load_tune(path, prog):
    """A tune results file (kind "tune"), checked; exits with one line when it is bad."""
    try:
        doc = _parse_json(path)
        if not isinstance(doc, dict) or doc.get("kind") != "tune":
            raise BadInput("not a tune results file (kind != 'tune')")
        for key, want in (("kernel", str), ("tunables", list), ("groups", list), ("classes", list)):
            if not isinstance(doc.get(key), want):
                raise BadInput(f"missing key '{key}'" if key not in doc else f"'{key}' is {_what(doc[key])}")
        for i, t in enumerate(doc["tunables"]):
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                raise BadInput(f"tunables[{i}]: missing key 'name'")
        return doc
    except BadInput as e:
        fail(prog, path, e)


# --- shapes: the C program attn_shapes parses shapes files; these read its JSON ---------------
SHAPES_TOOL_ENV = "ATTN_SHAPES_TOOL"


def shapes_tool(tool=None, build_dir=None):
    """The attn_shapes program: `tool`, else $ATTN_SHAPES_TOOL, else <build_dir>/tools/attn_shapes."""
    tool = tool or os.environ.get(SHAPES_TOOL_ENV)
    if not tool and build_dir:
        tool = os.path.join(build_dir, "tools", "attn_shapes")
    if not tool:
        raise BadInput(f"no attn_shapes program: give --shapes-tool or --build-dir, or set ${SHAPES_TOOL_ENV}")
    return tool


def _run_tool(tool, args):
    try:
        p = subprocess.run([tool] + args, capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise BadInput(f"cannot run {tool}: {e.strerror or e}")
    except subprocess.TimeoutExpired:
        raise BadInput(f"{tool} {' '.join(args)} took over 60 s")
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise BadInput(f"{os.path.basename(tool)} {' '.join(args)}: {err}")
    return p.stdout


def _json_text(text, what):
    try:
        return json.loads(text)
    except ValueError as e:
        raise BadInput(f"{what}: not valid JSON: {e}")


def check_shapes(doc):
    """Raises BadInput when `attn_shapes --json`'s document lacks a field or has a wrong type."""
    if not isinstance(doc, dict):
        raise BadInput(f"expected a JSON object at the top, got {_what(doc)}")
    _require(doc, ["file", "axes", "batch", "heads", "tokens", "hidden", "shapes", "sequences", "cases"], "")
    if not isinstance(doc["axes"], dict):
        raise BadInput(f"'axes' is {_what(doc['axes'])}, expected an object")
    for axis, values in doc["axes"].items():  # the axes of harness/axes.def, as attn_shapes lists them
        if not isinstance(values, list):
            raise BadInput(f"'axes.{axis}' is {_what(values)}, expected a list")
    for key in ("batch", "heads", "tokens", "hidden"):
        if doc[key] is not None and not _type_ok(doc[key], INT):
            raise BadInput(f"'{key}' is {_what(doc[key])}, expected an integer or null")
    for key, fields in (("shapes", {"name": STR, "seqlen_q": INT, "seqlen_k": INT}),
                        ("cases", {"dtype": STR, "head_dim": (INT, STR), "mask": STR, "shape": STR,
                                   "seqlen_q": INT, "seqlen_k": INT})):
        if not isinstance(doc[key], list):
            raise BadInput(f"'{key}' is {_what(doc[key])}, expected a list")
        for i, item in enumerate(doc[key]):
            if not isinstance(item, dict):
                raise BadInput(f"{key}[{i}] is {_what(item)}, expected an object")
            _require(item, fields, f"{key}[{i}].")
            _check_types(item, fields, f"{key}[{i}].")
    if not all(isinstance(s, str) for s in doc["sequences"]):
        raise BadInput("'sequences' must be a list of strings (\"1x239+0x5\")")
    return doc


def check_checks(table):
    """Raises BadInput when `attn_shapes --checks-json`'s table is not [{name, group, summary}]."""
    if not isinstance(table, list) or not table:
        raise BadInput("the check table must be a non-empty list")
    for i, c in enumerate(table):
        if not isinstance(c, dict):
            raise BadInput(f"checks[{i}] is {_what(c)}, expected an object")
        _require(c, ["name", "group", "summary"], f"checks[{i}].")
        _check_types(c, {"name": STR, "group": STR, "summary": STR}, f"checks[{i}].")
    return table


def load_shapes(path, prog, tool=None, build_dir=None, json_text=None):
    """A shapes file as attn_shapes --json parses it (or `json_text`, that program's output
    already captured), checked; exits with one line when the file or the program fails."""
    try:
        if json_text is None:
            json_text = _run_tool(shapes_tool(tool, build_dir), ["--json", path])
        return check_shapes(_json_text(json_text, "attn_shapes --json"))
    except BadInput as e:
        fail(prog, path, e)


def load_checks(prog, tool=None, build_dir=None, json_text=None):
    """The correctness check table [{name, group, summary}] (attn_shapes --checks-json)."""
    try:
        if json_text is None:
            json_text = _run_tool(shapes_tool(tool, build_dir), ["--checks-json"])
        return check_checks(_json_text(json_text, "attn_shapes --checks-json"))
    except BadInput as e:
        fail(prog, "attn_shapes --checks-json", e)
