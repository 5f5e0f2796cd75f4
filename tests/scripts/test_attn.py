"""Unit tests of the scripts package (scripts/attn): the schema's shapes part against
attn_shapes' JSON (fixtures shapes_*.json, checks.json), the selftest's and peers' matrices
built from it, the results tree's layout, compaction, retention, index and SQLite history
(on a tree built here from run_a.json, run_b.json and tune_small.json), report.py's trend,
and every entry point's --help.

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

from attn import peers, schema, selftest, store  # noqa: E402

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
