"""Unit tests of the scripts package (scripts/attn): the schema's shapes part against
attn_shapes' JSON (fixtures shapes_*.json, checks.json), the selftest's and peers' matrices
built from it, the results tree's layout, compaction, a run's parts merged, retention, index
and SQLite history (on a tree built here from run_a.json, run_b.json and tune_small.json),
report.py's trend, the benchmark's passes (run_passes.json, peers_passes.json: the forward,
backward and forward + backward of one shape kept apart by every table, the thresholds and the
history), and every entry point's --help.

    python3 -m unittest tests/scripts/test_attn.py      (CTest: unit/scripts/attn_package)
"""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from attn import bench_table, ncu_profile, peers, schema, selftest, store  # noqa: E402

FAKE_TOOL = os.path.join(HERE, "fake_attn_shapes.sh")
GPU = "nvidia_test_gpu"


def fixture(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


def exits_with(test, fn, status=2):
    """Runs fn, which must exit with `status` and one line on stderr; returns that line."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), test.assertRaises(SystemExit) as e:
        fn()
    test.assertEqual(e.exception.code, status)
    test.assertEqual(len(err.getvalue().splitlines()), 1, err.getvalue())
    return err.getvalue()


class Shapes(unittest.TestCase):
    def test_fixture_parses(self):
        doc = schema.load_shapes("shapes/features.txt", "t", json_text=fixture("shapes_features.json"))
        self.assertEqual(doc["axes"]["head_dim"][-1], "192x128")
        self.assertEqual(len(doc["shapes"]), 9)

    def test_program_is_run(self):
        doc = schema.load_shapes("shapes/packed.txt", "t", tool=FAKE_TOOL)
        self.assertEqual(len(doc["sequences"]), 5)
        self.assertEqual([c["name"] for c in schema.load_checks("t", tool=FAKE_TOOL)][-1], "packed")

    def test_tool_from_env_and_build_dir(self):
        os.environ[schema.SHAPES_TOOL_ENV] = "/x/attn_shapes"
        try:
            self.assertEqual(schema.shapes_tool(), "/x/attn_shapes")
        finally:
            del os.environ[schema.SHAPES_TOOL_ENV]
        self.assertEqual(schema.shapes_tool(build_dir="/b"), "/b/tools/attn_shapes")

    def test_bad_documents(self):
        doc = json.loads(fixture("shapes_features.json"))
        del doc["axes"]
        self.assertIn("missing key 'axes'", exits_with(self, lambda: schema.load_shapes("f.txt", "t", json_text=json.dumps(doc))))
        doc = json.loads(fixture("shapes_features.json"))
        doc["shapes"][0]["seqlen_q"] = "4"
        self.assertIn("'shapes[0].seqlen_q' is a string", exits_with(
            self, lambda: schema.load_shapes("f.txt", "t", json_text=json.dumps(doc))))
        self.assertIn("not valid JSON", exits_with(self, lambda: schema.load_shapes("f.txt", "t", json_text="{")))
        self.assertIn("missing key 'checks[0].group'", exits_with(
            self, lambda: schema.load_checks("t", json_text='[{"name": "a", "summary": "s"}]')))
        self.assertIn("no fixture", exits_with(self, lambda: schema.load_shapes("nothing.txt", "t", tool=FAKE_TOOL)))
        self.assertIn("cannot run", exits_with(self, lambda: schema.load_shapes("f.txt", "t", tool="/no/such/attn_shapes")))

    def test_selftest_kernels(self):
        """--kernels and --shard: the kernels a selftest run covers."""
        kernels = [("simple", None), ("broken_none", "lib.so"), ("broken_grid_barrier", "lib.so")]
        self.assertEqual(selftest.select_kernels(kernels, None), kernels)
        self.assertEqual(selftest.select_kernels(kernels, "broken_grid_barrier,simple"),
                         [("simple", None), ("broken_grid_barrier", "lib.so")])
        self.assertIn("broken_typo", exits_with(self, lambda: selftest.select_kernels(kernels, "simple,broken_typo")))
        self.assertEqual(selftest.select_kernels(kernels, None, "1/2"), [("broken_none", "lib.so")])
        self.assertEqual(selftest.select_kernels(kernels, "simple,broken_none", "0/2"), [("simple", None)])
        self.assertIn("0 <= K < N", exits_with(self, lambda: selftest.select_kernels(kernels, None, "2/2")))

    def test_selftest_matrix(self):
        """The attn_correctness arguments the Python shapes parser gave for shapes/*.txt."""
        table = schema.load_checks("t", json_text=fixture("checks.json"))
        self.assertEqual(selftest.check_names(table, ("correctness",))[-1], "lse")
        self.assertEqual(len(selftest.check_names(table, selftest.CONTRACT_GROUPS)), 11)
        doc = lambda n: schema.load_shapes(n, "t", json_text=fixture(f"shapes_{n}.json"))  # noqa: E731
        groups = selftest.read_shapes(doc("selftest"), ["accuracy"])
        self.assertEqual(len(groups), 8)
        self.assertEqual(groups[0][0], "fp16/d64/full")
        self.assertEqual(groups[0][3], ["--dtype", "fp16", "--head-dim", "64", "--mask", "full", "--shapes",
                                        "65x65,1000x1000,512x127", "--batch", "2", "--heads", "3"])
        self.assertEqual(selftest.read_features(doc("features"), [])[3], [
            "--pairwise", "--dtype", "fp16,bf16", "--head-dim", "64,96,128,256,192x128", "--mask", "full,causal",
            "--heads-k", "8,2,1", "--window", "-1:-1,16:0,0:16,3:5", "--softcap", "0,30", "--shapes",
            "1x1,17x17,128x128,1000x1000,1x239,239x1,127x512,512x127,16x2000", "--batch", "2", "--heads", "8"])
        dims = selftest.read_head_dims(doc("features"), ["bwd_accuracy"], backward=True)
        self.assertEqual(dims[:3], ("backward/head_dims", "backward/head_dims/", ["bwd_accuracy"]))
        self.assertEqual(dims[3], selftest.read_features(doc("features"), [])[3])
        self.assertEqual(selftest.read_head_dims(doc("features"), ["accuracy"])[:2], ("head_dims", "head_dims/"))
        packed = selftest.read_packed(doc("packed"))
        self.assertEqual(packed[2], ["packed"])
        self.assertIn("--page-size", packed[3])
        self.assertEqual(packed[3][packed[3].index("--shapes") + 1].split(",")[1], "239x1+5x5+64x300+1000x1000")

    def test_selftest_verdict(self):
        """A fixture that proves a check survives unless that check caught it."""
        self.assertEqual(selftest.broken_verdict("broken_batch_stride", {"accuracy": 3}, 3), ("caught", True))
        self.assertEqual(selftest.broken_verdict("broken_batch_stride", {}, 0), ("SURVIVED: no check caught it", False))
        self.assertEqual(selftest.broken_verdict("broken_q_scaled_in_place", {"determinism": 9, "inputs_unchanged": 0},
                                                 9), ("SURVIVED: inputs_unchanged did not catch it", False))
        self.assertEqual(selftest.broken_verdict("broken_block_table_sanitized", {"inputs_unchanged": 2}, 2),
                         ("caught", True))

    def test_peers_matrix(self):
        cases = peers.read_shapes("shapes/benchmark.txt", json_text=fixture("shapes_benchmark.json"))
        self.assertEqual(len(cases), 48)
        self.assertEqual(cases[:2], [("fp16", 64, "full", 4, 16384, 2048), ("fp16", 64, "full", 32, 16384, 2048)])
        self.assertIn("'tokens' and 'hidden'", exits_with(self, lambda: peers.read_shapes(
            "shapes/selftest.txt", json_text=fixture("shapes_selftest.json"))))
        dxdv = json.loads(fixture("shapes_benchmark.json"))
        dxdv["axes"]["head_dim"] = ["192x128"]
        self.assertIn("head_dim 192x128: these tools time one head dim", exits_with(self, lambda: peers.read_shapes(
            "shapes/x.txt", json_text=json.dumps(dxdv))))


class Tree(unittest.TestCase):
    """A results tree in a temporary folder (not a git work tree: every file counts)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.results = os.path.join(self.dir, "results")
        self.thresholds = os.path.join(self.dir, "thresholds")
        os.makedirs(self.thresholds)
        self.put("benchmarks/2026-01-01-aaaaaaa.json", store.dumps(store.compact(json.loads(fixture("run_a.json")))))
        self.put("benchmarks/2026-01-02-bbbbbbb.json", store.dumps(store.compact(json.loads(fixture("run_b.json")))))
        self.put("correctness/2026-01-02-bbbbbbb-correctness.summary.txt", "summary of x: 1 tests: 1 passed\n")
        self.put("tune/2026-01-01-aaaaaaa-k.json", store.dumps(store.compact(json.loads(fixture("tune_small.json")))))
        with open(os.path.join(self.thresholds, GPU + ".ini"), "w") as f:
            f.write("; k: generated by set_thresholds.py from 2026-01-01-aaaaaaa.json,\n"
                    ";   2026-01-02-bbbbbbb.json on 2026-01-02, margin 0.9\n[k fp16 d64 full 4-4]\nmin_roofline = 0.1\n\n"
                    "; j: generated by set_thresholds.py from bench-v9.json on 2026-01-02, margin 0.9\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def put(self, rel, text):
        path = os.path.join(self.results, GPU, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_names(self):
        info = store.parse_name(f"{GPU}/peers/2026-01-02-bbbbbbb-hopper-peers-table.md")
        self.assertEqual((info["kind"], info["commit"], info["what"], info["ext"]),
                         ("peers", "bbbbbbb", "hopper-peers-table", "md"))
        self.assertEqual(store.parse_name(f"{GPU}/benchmarks/2026-01-02-bbbbbbb-interrupted/x.json")["path"],
                         f"{GPU}/benchmarks/2026-01-02-bbbbbbb-interrupted")
        self.assertIsNone(store.parse_name(f"{GPU}/2026-01-02-bbbbbbb.json"))
        self.assertIsNone(store.parse_name(f"{GPU}/misc/2026-01-02-bbbbbbb.json"))

    def test_compact_keeps_what_scripts_read(self):
        full = json.loads(fixture("run_b.json"))
        small = store.compact(json.loads(fixture("run_b.json")))
        self.assertEqual(store.compact(small), small)
        self.assertTrue(store.is_compact(store.dumps(small)))
        self.assertFalse(store.is_compact(fixture("run_b.json")))
        schema.check_results(small)
        for t, c in zip(full["tests"], small["tests"]):
            self.assertEqual(t["test"], c["test"])
            if t.get("kernel_timing"):
                self.assertAlmostEqual(c["kernel_timing"]["median_ms"], t["kernel_timing"]["median_ms"],
                                       delta=1e-5 * t["kernel_timing"]["median_ms"])
                self.assertIn("ci_hi_ms", c["kernel_timing"])
            self.assertEqual(t.get("verdict"), c.get("verdict"))

    def test_retention(self):
        self.assertEqual(store.retention_problems(self.results), [])
        self.put("correctness/2026-01-02-bbbbbbb.junit.xml", "<testsuite/>")
        self.put("benchmarks/2026-01-03-ccccccc.json", fixture("run_a.json"))
        self.put("2026-01-03-ccccccc.json", "{}")
        self.put("nightly/2026-01-03-ccccccc-speedup.png", "x" * 200_000)
        problems = "\n".join(store.retention_problems(self.results))
        self.assertIn("junit.xml is a raw artefact", problems)
        self.assertIn("2026-01-03-ccccccc.json: not compact", problems)
        self.assertIn(f"{GPU}/2026-01-03-ccccccc.json: not results/<gpu>/<kind>/", problems)
        self.assertIn("200000 bytes, over the 150000", problems)

    def test_index(self):
        text = store.index_markdown(self.results, self.thresholds)
        self.assertIn(f"| benchmarks | 2 | 2026-01-02-bbbbbbb | [2026-01-02-bbbbbbb.json]({GPU}/benchmarks/2026-01-02-bbbbbbb.json) |", text)
        self.assertIn("| tune | 1 | 2026-01-01-aaaaaaa |", text)
        self.assertIn(f"| k | [2026-01-01-aaaaaaa.json]({GPU}/benchmarks/2026-01-01-aaaaaaa.json), "
                      f"[2026-01-02-bbbbbbb.json]({GPU}/benchmarks/2026-01-02-bbbbbbb.json) |", text)
        self.assertIn("| j | bench-v9.json (not in results/) |", text)

    def test_index_command_check(self):
        run = lambda *a: subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "results.py"), "--results",  # noqa: E731
                                         self.results, "--thresholds", self.thresholds] + list(a), capture_output=True, text=True)
        self.assertEqual(run("index", "--check").returncode, 1)
        self.assertEqual(run("index").returncode, 0)
        self.assertEqual(run("index", "--check").returncode, 0)
        self.put("benchmarks/2026-01-03-ccccccc.json", store.dumps(store.compact(json.loads(fixture("run_a.json")))))
        self.assertEqual(run("index", "--check").returncode, 1)

    def test_merge(self):
        """results.py merge: one run's parts into one compact file (date the earliest), and one
        line, exit 2, for parts of two runs, a test in two parts or a file already there."""
        def part(name, commit, date, keep):
            doc = json.loads(fixture(name))
            doc["run"].update(commit=commit, date=date)
            doc["tests"] = [t for t in doc["tests"] if keep(t["test"])]
            path = os.path.join(self.dir, f"{name}-{commit}-{len(doc['tests'])}.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            return path
        a = part("run_a.json", "aaaa", "2026-01-02T00:00:00Z", lambda n: True)
        b = part("run_b.json", "aaaa", "2026-01-01T00:00:00Z", lambda n: "decode" in n)
        out = os.path.join(self.dir, "merged.json")
        merge = lambda *paths: subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "results.py"),  # noqa: E731
                                               "merge", out] + list(paths), capture_output=True, text=True)
        r = merge(a, b)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = schema.load_results(out, "t")
        self.assertEqual([t["test"] for t in doc["tests"]], ["benchmark/k/fp16/d64/full/s4",
                         "benchmark/k/bf16/d128/causal/s512", "benchmark/k/fp16/d128/decode/q16k8192"])
        self.assertEqual(doc["run"]["date"], "2026-01-01T00:00:00Z")
        self.assertTrue(store.is_compact(store.read_text(out)))
        r = merge(a, b)
        self.assertEqual((r.returncode, len(r.stderr.splitlines())), (2, 1))
        self.assertIn("exists: a results file is never replaced", r.stderr)
        os.remove(out)
        r = merge(a, part("run_b.json", "bbbb", "2026-01-01T00:00:00Z", lambda n: "decode" in n))
        self.assertEqual((r.returncode, len(r.stderr.splitlines())), (2, 1))
        self.assertIn('run.commit is "bbbb"', r.stderr)
        r = merge(a, part("run_b.json", "aaaa", "2026-01-01T00:00:00Z", lambda n: True))
        self.assertEqual((r.returncode, len(r.stderr.splitlines())), (2, 1))
        self.assertIn("benchmark/k/fp16/d64/full/s4 is in", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_previous(self):
        """results.py previous: the earlier run timing the most of the new run's tests, the latest
        of those; a later partial run (one test) is never the one; nothing when none is earlier."""
        def run(name, date, keep):
            doc = json.loads(fixture(name))
            doc["run"]["date"] = date
            doc["tests"] = [t for t in doc["tests"] if keep(t["test"])]
            path = os.path.join(self.dir, f"{date[:13]}-{len(doc['tests'])}.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            return path
        both = lambda n: True  # noqa: E731
        new = run("run_a.json", "2026-01-05T00:00:00Z", both)
        whole_old = run("run_a.json", "2026-01-02T00:00:00Z", both)
        whole = run("run_a.json", "2026-01-03T00:00:00Z", both)
        partial = run("run_a.json", "2026-01-04T00:00:00Z", lambda n: "causal" in n)
        later = run("run_a.json", "2026-01-06T00:00:00Z", both)
        other = run("run_b.json", "2026-01-04T12:00:00Z", lambda n: "decode" in n)
        previous = lambda *c: script("results", "previous", new, *c)  # noqa: E731
        self.assertEqual(previous(partial, whole_old, whole, later, other, new)[:2], (0, whole + "\n"))
        self.assertEqual(previous(partial, other)[:2], (0, partial + "\n"))
        self.assertEqual(previous(later, other, os.path.join(self.dir, "absent.json"))[:2], (0, ""))

    def test_gzip(self):
        """A compact document over 150 KB is committed as .json.gz; every reader takes it."""
        path = self.put("benchmarks/2026-01-03-ccccccc.json", fixture("run_b.json"))
        self.assertEqual(store.write_compact(path, json.loads(fixture("run_b.json")), gzip_over=100), path + ".gz")
        self.assertFalse(os.path.exists(path))
        doc = schema.load_results(path + ".gz", "t")
        self.assertEqual(doc, store.compact(json.loads(fixture("run_b.json"))))
        self.assertEqual(store.retention_problems(self.results), [])
        with open(os.path.join(self.thresholds, GPU + ".ini"), "a") as f:
            f.write("; g: generated by set_thresholds.py from 2026-01-03-ccccccc.json on 2026-01-03, margin 0.9\n")
        self.assertIn(f"| g | [2026-01-03-ccccccc.json]({GPU}/benchmarks/2026-01-03-ccccccc.json.gz) |",
                      store.index_markdown(self.results, self.thresholds))
        self.assertEqual(store.build_history(self.results, os.path.join(self.dir, "h.sqlite"))[1], 3)
        self.assertEqual(store.write_compact(path, doc, gzip_over=10 ** 6), path)
        with open(path + ".gz", "wb") as f:
            f.write(b"\x1f\x8b broken")
        self.assertIn("not valid gzip", exits_with(self, lambda: schema.load_results(path + ".gz", "t")))

    def test_history(self):
        db = os.path.join(self.dir, "h.sqlite")
        n_files, n_runs, n_tests = store.build_history(self.results, db)
        self.assertEqual((n_files, n_runs), (4, 2))
        name = json.loads(fixture("run_b.json"))["tests"][0]["test"]
        rows = store.test_history(db, name)
        self.assertEqual([r[1] for r in rows], ["aaaaaaa", "bbbbbbb"][-len(rows):])
        latest = {(g, k): run for g, k, run, _, _ in store.latest_runs(db)}
        self.assertEqual(latest[(GPU, "benchmarks")], "2026-01-02-bbbbbbb")
        self.assertEqual(latest[(GPU, "correctness")], "2026-01-02-bbbbbbb")
        self.assertEqual(latest[(GPU, "tune")], "2026-01-01-aaaaaaa")

    def test_report_trend(self):
        db = os.path.join(self.dir, "h.sqlite")
        store.build_history(self.results, db)
        out = os.path.join(self.dir, "report")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "report.py"), os.path.join(HERE, "run_b.json"),
                            "--history", db, "--out", out], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "report.md")) as f:
            text = f.read()
        self.assertIn("**Trend**", text)
        self.assertIn("aaaaaaa: ", text)


    def test_report_plots_fit(self):
        """A nightly's plots (four kernels' ~400 benchmarks, random points) stay under the size a
        committed PNG may have (results/README.md); in full colour the speedup plot did not."""
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib is not installed")
        import random
        rng = random.Random(7)
        doc = json.loads(fixture("run_a.json"))
        t0, doc["tests"] = doc["tests"][0], []
        for k in ("cudnn", "flash2", "hopper", "simple"):
            for dtype in ("fp16", "bf16"):
                for d in (64, 128):
                    for mask in ("full", "causal"):
                        for s in (4, 32, 128, 512, 1024, 2048, 4096, 8192, 16384, 65536, 131072, 262144):
                            t = json.loads(json.dumps(t0))
                            t.update(test=f"benchmark/{k}/{dtype}/d{d}/{mask}/s{s}", kernel=k, dtype=dtype, head_dim=d,
                                     causal=mask == "causal", seqlen_q=s, seqlen_k=s, tflops=rng.uniform(0.1, 600),
                                     flops=s * s * d * 4.0, bytes=s * d * 8.0)
                            t["baselines"] = {"reference": {"speedup": rng.uniform(0.05, 20)},
                                              "cudnn": {"available": True, "speedup": rng.uniform(0.01, 8)}}
                            doc["tests"].append(t)
        path, out = os.path.join(self.dir, "big.json"), os.path.join(self.dir, "plots")
        with open(path, "w") as f:
            json.dump(doc, f)
        self.assertEqual(script("report", path, "--out", out)[0], 0)
        for name in ("roofline.png", "speedup.png"):
            self.assertLess(os.path.getsize(os.path.join(out, name)), store.MAX_BYTES["png"], name)

def script(name, *args):
    """Runs scripts/<name>.py; returns (exit status, stdout, stderr)."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", name + ".py")] + list(args),
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def sections(text, title):
    """The Markdown text under the heading '### <title>' up to the next heading."""
    after = text.split(f"### {title}\n", 1)[1]
    return after.split("\n### ", 1)[0]


class Passes(unittest.TestCase):
    """The backward's benchmarks beside the forward's: never compared with, or mistaken for,
    the forward of the same shape (results without "pass" are the forward's)."""
    PASSES = os.path.join(HERE, "run_passes.json")

    def test_names(self):
        self.assertEqual(schema.split_name("benchmark/bwd/k/fp16/d64/full/s4"),
                         ("bwd", ["benchmark", "k", "fp16", "d64", "full", "s4"]))
        self.assertEqual(schema.split_name("benchmark/fwd_bwd/k/fp16/d64/full/s4")[0], "fwd_bwd")
        self.assertEqual(schema.split_name("peers/bwd/torch_flash/fp16/d64/full/s4")[0], "bwd")
        # a forward's name: a kernel named bwd, a workload, a correctness test, a fixture
        self.assertEqual(schema.split_name("benchmark/bwd/fp16/d64/full/s4"),
                         ("fwd", ["benchmark", "bwd", "fp16", "d64", "full", "s4"]))
        self.assertEqual(schema.split_name("benchmark/k/fp16/d128/decode/q16k8192")[0], "fwd")
        self.assertEqual(schema.split_name("correctness/bwd/fp16/d64/full")[0], "fwd")
        self.assertEqual(schema.split_name("benchmark/prepare"), ("fwd", ["benchmark", "prepare"]))
        self.assertEqual(ncu_profile.kernel_regex("benchmark/flash2/fp16/d64/full/s4"), "flash2_fwd_kernel")
        self.assertEqual(ncu_profile.kernel_regex("benchmark/bwd/flash2/fp16/d64/full/s4"), "flash2_bwd")

    def test_keys(self):
        tests = schema.load_results(self.PASSES, "t")["tests"]
        old = schema.load_results(os.path.join(HERE, "run_a.json"), "t")["tests"]
        self.assertEqual([schema.test_pass(t) for t in tests], ["fwd", "bwd", "fwd_bwd", "bwd", "bwd"])
        self.assertEqual(schema.test_pass(old[0]), "fwd")  # no "pass": the forward's
        keys = [schema.shape_key(t) for t in tests[:3]]
        self.assertEqual(len(set(keys)), 3, "the three passes of one shape share a key")
        self.assertEqual(keys[0], schema.shape_key(old[0]))  # the forward's key is the old one's
        self.assertEqual([p for p, _ in schema.by_pass(reversed(tests))], ["fwd", "bwd", "fwd_bwd"])

    def test_schema_refuses(self):
        doc = schema.load_results(self.PASSES, "t")
        for i, value, want in ((1, "backward", "'pass' is 'backward', expected one of fwd, bwd, fwd_bwd"),
                               (1, "fwd", "'pass' is 'fwd', but the test name says bwd"),
                               (0, "bwd", "'pass' is 'bwd', but the test name says fwd"),
                               (2, 3, "'pass' is the number 3, expected a string")):
            bad = json.loads(json.dumps(doc))
            bad["tests"][i]["pass"] = value
            with self.assertRaises(schema.BadInput) as e:
                schema.check_results(bad)
            self.assertIn(want, str(e.exception))
        del doc["tests"][3]["pass"]
        with self.assertRaises(schema.BadInput) as e:
            schema.check_results(doc)
        self.assertIn("tests[3] (benchmark/bwd/k/bf16/d128/causal/s512): 'pass' is absent (fwd)", str(e.exception))

    def test_bench_table(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(bench_table.main([self.PASSES]), 0)
        text = out.getvalue()
        fwd, bwd, both = (sections(text, t) for t in ("Forward (fwd)", "Backward (bwd)", "Forward + backward (fwd_bwd)"))
        self.assertIn("| benchmark/k/fp16/d64/full/s4 | 1.0000 |", fwd)
        self.assertNotIn("bwd/", fwd)
        self.assertIn("| benchmark/bwd/k/fp16/d64/full/s4 | 3.0000 | 0.8 | 30.00 | 1.500 | 30.0% |", bwd)
        self.assertEqual(bwd.count("| benchmark/bwd/"), 3)
        self.assertIn("| benchmark/fwd_bwd/k/fp16/d64/full/s4 | 4.0000 | 0.9 |", both)
        self.assertIn("5 pass; fwd: 1 pass; bwd: 3 pass; fwd_bwd: 1 pass", text)

    def test_report(self):
        """The report's table per pass; the previous run (from before the backward) is the
        forward's only: a backward's row has no ratio to it."""
        out = tempfile.mkdtemp()
        try:
            rc, _, err = script("report", self.PASSES, "--previous", os.path.join(HERE, "run_a.json"), "--out", out)
            self.assertEqual(rc, 0, err)
            with open(os.path.join(out, "report.md")) as f:
                text = f.read()
        finally:
            shutil.rmtree(out)
        self.assertIn("**Benchmarks:** 5 pass; fwd: 1 pass; bwd: 3 pass; fwd_bwd: 1 pass; compared with run_a.json.", text)
        self.assertIn("| benchmark/k/fp16/d64/full/s4 | 1.0000 | 1.0 | 90.00 | 2.000 | 50.0% | pass | 1.000x |",
                      sections(text, "Forward (fwd)"))
        self.assertIn("| benchmark/bwd/k/fp16/d64/full/s4 | 3.0000 | 0.8 | 30.00 | 1.500 | 30.0% | pass |  |",
                      sections(text, "Backward (bwd)"))
        self.assertIn("| benchmark/fwd_bwd/k/fp16/d64/full/s4 | 4.0000 | 0.9 | 25.00 | 1.250 | 35.0% | pass |  |",
                      sections(text, "Forward + backward (fwd_bwd)"))
        self.assertEqual(report_trend_keys(self.PASSES), {
            ("k", "fwd", "fp16", 64, "full"), ("k", "bwd", "fp16", 64, "full"), ("k", "fwd_bwd", "fp16", 64, "full"),
            ("k", "bwd", "bf16", 128, "causal")})

    def test_peer_table(self):
        """Each pass against the peers' same pass: the backward at S=4 is 1.5x PyTorch's
        backward (2.25x its forward, were they mixed up), at S=1024 0.8x: the backward's target missed."""
        peers_file = os.path.join(HERE, "peers_passes.json")
        rc, text, err = script("peer_table", self.PASSES, peers_file, "--kernel", "k", "--backends", "torch_flash", "--check")
        self.assertEqual(rc, 2, err)
        self.assertIn("| fp16 d64 full s4 | 1.0 | 0.5 | 2.00 | 2.00 | 50.0% |", sections(text, "Forward (fwd)"))
        bwd = sections(text, "Backward (bwd)")
        self.assertIn("| fp16 d64 full s4 | 0.8 | 0.6 | 1.50 | 1.50 | 30.0% |", bwd)
        self.assertIn("| bf16 d128 causal s512 | 1.2 | n/a | n/a | n/a | 25.0% |", bwd)  # no forward target here
        self.assertIn("| fp16 d64 full s4 | 0.9 | 0.7 | 1.25 | 1.25 | 35.0% |", sections(text, "Forward + backward (fwd_bwd)"))
        self.assertIn("  missed: fp16 d64 full s1024 bwd: 0.8x torch_flash (target 1.0x)", text)
        self.assertIn("targets: 2 missed", text)
        rc, text, err = script("peer_table", self.PASSES, peers_file, "--kernel", "k", "--backends", "torch_flash",
                               "--pass", "fwd_bwd")
        self.assertEqual((rc, text.count("| fp16 d64 full s4 |"), "###" in text), (0, 1, False), err)

    def test_history(self):
        d = tempfile.mkdtemp()
        try:
            gpu = os.path.join(d, "results", GPU, "benchmarks")
            os.makedirs(gpu)
            for name, fix in (("2026-01-01-aaaaaaa.json", "run_a.json"), ("2026-01-03-ccccccc.json", "run_passes.json")):
                with open(os.path.join(gpu, name), "w") as f:
                    f.write(store.dumps(store.compact(json.loads(fixture(fix)))))
            db = os.path.join(d, "h.sqlite")
            store.build_history(os.path.join(d, "results"), db)
            import sqlite3
            con = sqlite3.connect(db)
            rows = con.execute("SELECT r.commit_, t.pass, t.test FROM tests t JOIN runs r ON t.run_id = r.id "
                               "WHERE t.dtype = 'fp16' AND t.seqlen_q = 4 ORDER BY r.commit_, t.pass").fetchall()
            con.close()
            self.assertEqual(rows, [("aaaaaaa", "fwd", "benchmark/k/fp16/d64/full/s4"),
                                    ("ccccccc", "bwd", "benchmark/bwd/k/fp16/d64/full/s4"),
                                    ("ccccccc", "fwd", "benchmark/k/fp16/d64/full/s4"),
                                    ("ccccccc", "fwd_bwd", "benchmark/fwd_bwd/k/fp16/d64/full/s4")])
            self.assertEqual([r[1] for r in store.test_history(db, "benchmark/k/fp16/d64/full/s4")], ["aaaaaaa", "ccccccc"])
            self.assertEqual([r[1] for r in store.test_history(db, "benchmark/bwd/k/fp16/d64/full/s4")], ["ccccccc"])
        finally:
            shutil.rmtree(d)

    def test_thresholds_round_trip(self):
        """A thresholds file set_thresholds.py writes, read back the way harness/thresholds.c
        reads a class ([<kernel> [<pass>] <dtype> d<D> <workload> <lo>-<hi>]): each test finds
        the section of its own pass, with its own minimums, and only that one."""
        d = tempfile.mkdtemp()
        try:
            with open(os.path.join(d, "test_gpu_1.ini"), "w") as f:
                f.write("[gpu]\nname = Test GPU 1\n[peaks]\nfp16_tflops = 700\nbf16_tflops = 700\nbandwidth_gbs = 3000\n")
            rc, _, err = script("set_thresholds", self.PASSES, "--kernel", "k", "--margin", "0.8", "--thresholds-dir", d)
            self.assertEqual(rc, 0, err)
            with open(os.path.join(d, "test_gpu_1.ini")) as f:
                classes = read_classes(f.read())
        finally:
            shutil.rmtree(d)
        for t in schema.load_results(self.PASSES, "t")["tests"]:
            found = [c for c in classes if class_matches(c, t)]
            self.assertEqual(len(found), 1, (t["test"], found))
            self.assertAlmostEqual(found[0]["min_speedup_reference"], 0.8 * t["baselines"]["reference"]["speedup"])
            self.assertAlmostEqual(found[0]["min_roofline"], 0.8 * t["roofline_efficiency"])


def report_trend_keys(path):
    from attn import report
    return {(t["kernel"], schema.test_pass(t), t["dtype"], t["head_dim"], schema.workload(t))
            for t in report.trend_tests(schema.load_results(path, "t"))}


def read_classes(text):
    """The class sections of a thresholds file as dicts (kernel, pass, dtype, head_dim, workload,
    lo, hi and their minimums); the pass word is optional (fwd), as the contract says."""
    classes, cur = [], None
    for line in text.splitlines():
        line = line.split(";")[0].strip()
        if line.startswith("["):
            words = line.strip("[]").split()
            cur = None
            if words[0] in ("gpu", "peaks"):
                continue
            pass_ = words.pop(1) if words[1] in schema.PASSES else "fwd"
            lo, hi = words[4].split("-")
            cur = {"kernel": words[0], "pass": pass_, "dtype": words[1], "head_dim": words[2], "workload": words[3],
                   "lo": int(lo), "hi": int(hi)}
            classes.append(cur)
        elif cur is not None and "=" in line:
            key, value = (x.strip() for x in line.split("=", 1))
            cur[key] = float(value)
    return classes


def class_matches(c, t):
    return (c["kernel"] == t["kernel"] and c["pass"] == schema.test_pass(t) and c["dtype"] in ("*", t["dtype"])
            and c["head_dim"] in ("*", f"d{t['head_dim']}") and c["workload"] in ("*", schema.workload(t))
            and c["lo"] <= t["seqlen_q"] <= c["hi"])


class EntryPoints(unittest.TestCase):
    def test_help(self):
        names = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "scripts", "attn"))
                       if f.endswith(".py") and f not in ("__init__.py", "schema.py", "store.py"))
        self.assertGreaterEqual(len(names), 15)
        for n in names:
            p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", n + ".py"), "--help"],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, f"{n}: {p.stderr}")
            self.assertIn("usage:", p.stdout, n)


if __name__ == "__main__":
    unittest.main()
