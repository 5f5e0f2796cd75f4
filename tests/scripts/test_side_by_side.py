"""Unit tests of scripts/side_by_side.py's host parts (scripts/attn/side_by_side.py): its
arguments (bad ones exit 2 naming the argument), the matrix (S replaced, -k), FlashAttention's
FLOP counts, the table and the targets from a results document, the two files written whole
and never replacing one, exit 77 without PyTorch or numpy, peers.measure_interleaved's
round-robin on a stand-in timer, peers.L2Flush's steps on a stand-in torch; and, where $ATTN_KERNEL_SHIM names the built
libattn_kernel_shim.so, its C API through ctypes without a GPU (find, lacks, workspace, the
problem checks).

    python3 -m unittest tests/scripts/test_side_by_side.py   (CTest: unit/scripts/side_by_side)
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from attn import peers, schema, side_by_side as sbs, store  # noqa: E402

FAKE_TOOL = os.path.join(HERE, "fake_attn_shapes.sh")


def bad_args(test, argv):
    """parse_args(argv) must exit 2; returns its message."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), test.assertRaises(SystemExit) as e:
        sbs.parse_args(argv)
    test.assertEqual(e.exception.code, 2)
    return err.getvalue().splitlines()[-1]


class Arguments(unittest.TestCase):
    def test_defaults(self):
        a = sbs.parse_args([])
        self.assertEqual((a.pass_, a.kernels, a.peers, a.seqlen, a.target), ("bwd", ["flash2", "cudnn"],
                                                                             ["torch_flash", "torch_cudnn"], None, []))

    def test_lists_and_targets(self):
        a = sbs.parse_args(["--pass", "fwd_bwd", "--kernels", "flash2", "--peers", "torch_flash,torch_efficient",
                            "--seqlen", "1024,16384", "--target", "flash2/torch_flash>=1.0@s>=1024",
                            "--target", "flash2/torch_efficient>=0.95"])
        self.assertEqual(a.seqlen, [1024, 16384])
        self.assertEqual(a.target, [
            {"text": "flash2/torch_flash>=1.0@s>=1024", "kernel": "flash2", "peer": "torch_flash", "ratio": 1.0,
             "min_s": 1024},
            {"text": "flash2/torch_efficient>=0.95", "kernel": "flash2", "peer": "torch_efficient", "ratio": 0.95,
             "min_s": 0}])
        self.assertEqual(sbs.parse_args(["--kernels", "", "--peers", "torch_cudnn"]).kernels, [])

    def test_bad(self):
        cases = {("--pass", "backward"): "argument --pass: invalid choice",
                 ("--peers", "torch_math"): "argument --peers: 'torch_math' is not one of",
                 ("--kernels", "Flash2"): "argument --kernels: 'Flash2' is not a kernel name",
                 ("--kernels", "flash2,flash2"): "argument --kernels: a name twice",
                 ("--kernels", "", "--peers", ""): "argument --kernels/--peers: nothing to time",
                 ("--seqlen", "512,x"): "argument --seqlen: expected positive integers",
                 ("--seqlen", "0"): "argument --seqlen: expected positive integers",
                 ("-k", "fp16 ("): "argument -k: '(' is not a regular expression",
                 ("--target", "flash2/torch_flash>1"): "argument --target: 'flash2/torch_flash>1' is not",
                 ("--target", "simple/torch_flash>=1"): "simple must be one of --kernels"}
        for argv, expect in cases.items():
            self.assertIn(expect, bad_args(self, list(argv)), argv)


class Matrix(unittest.TestCase):
    def cases(self):
        return peers.read_shapes("shapes/benchmark.txt", "t", FAKE_TOOL)

    def test_seqlens_and_selection(self):
        cases = sbs.with_seqlens(self.cases(), sbs.FA_SEQLENS)
        self.assertEqual(len(cases), 2 * 2 * 2 * 6)
        self.assertEqual(cases[:2], [("fp16", 64, "full", 512, 16384, 2048), ("fp16", 64, "full", 1024, 16384, 2048)])
        picked = sbs.selected(cases, "bf16 d128 causal")
        self.assertEqual([sbs.label(c) for c in picked][-1], "bf16 d128 causal s16384")
        self.assertEqual(len(picked), 6)
        fp16_full_1024 = [c for c in cases if c[0] == "fp16" and c[2] == "full" and c[3] == 1024]
        self.assertEqual(sbs.selected(cases, "fp16 s1024$ full"), fp16_full_1024)
        self.assertEqual(sbs.with_seqlens(cases[:1], None), cases[:1])

    def test_default_shapes(self):
        a = sbs.parse_args([])
        path, seqlens = sbs.default_shapes(a)
        if os.path.exists(os.path.join(ROOT, "shapes", "benchmark_bwd.txt")):
            self.assertEqual((os.path.basename(path), seqlens), ("benchmark_bwd.txt", None))
        else:
            self.assertEqual((os.path.basename(path), seqlens), ("benchmark.txt", sbs.FA_SEQLENS))
        self.assertEqual(sbs.default_shapes(sbs.parse_args(["--shapes", "x.txt", "--seqlen", "64"])), ("x.txt", [64]))

    def test_flops(self):
        """FlashAttention's count: 4 B H S^2 D forward, causal half, backward 2.5x, both 3.5x."""
        case = ("fp16", 128, "full", 1024, 16384, 2048)
        b, h = sbs.dims(case)
        self.assertEqual((b, h), (16, 16))
        fwd = 4.0 * 16 * 16 * 1024 * 1024 * 128
        self.assertEqual(sbs.pass_flops("fwd", b, h, 1024, 128, False), fwd)
        self.assertEqual(sbs.pass_flops("fwd", b, h, 1024, 128, True), fwd / 2)
        self.assertEqual(sbs.pass_flops("bwd", b, h, 1024, 128, True), 2.5 * fwd / 2)
        self.assertEqual(sbs.pass_flops("fwd_bwd", b, h, 1024, 128, False), 3.5 * fwd)
        self.assertEqual(sbs.dims(("bf16", 64, "causal", 16384, 16384, 2048)), (1, 32))

    def test_records_follow_the_schema(self):
        """Named as the harness names a pass (no pass word for the forward), with its "pass"."""
        case = ("fp16", 128, "causal", 1024, 16384, 2048)
        names = []
        for p in ("fwd", "bwd", "fwd_bwd"):
            t = sbs.test_record(p, "flash2", case)
            schema.check_test(dict(t, verdict="measured"))
            self.assertEqual((schema.split_name(t["test"])[0], t["pass"]), (p, p))
            self.assertEqual(t["flops"], sbs.pass_flops(p, 16, 16, 1024, 128, True))
            names.append(t["test"])
        self.assertEqual(names, ["sidebyside/flash2/fp16/d128/causal/s1024",
                                 "sidebyside/bwd/flash2/fp16/d128/causal/s1024",
                                 "sidebyside/fwd_bwd/flash2/fp16/d128/causal/s1024"])


def timing(ms, noisy=False):
    return {"median_ms": ms, "min_ms": ms, "ci_lo_ms": ms, "ci_hi_ms": ms, "samples": 10, "noisy": noisy, "rsd": 0.001}


def document():
    """Two shapes, flash2 and cudnn beside torch_flash and torch_cudnn."""
    shapes = ["fp16 d128 causal s512", "fp16 d128 causal s1024"]

    def t(kernel, shape, ms=None, verdict="measured", **kw):
        x = {"test": f"sidebyside/bwd/{kernel}/{shape}", "shape": shape, "kernel": kernel, "batch": 32, "heads": 16,
             "verdict": verdict, **kw}
        if ms:
            x.update(kernel_timing=timing(ms), tflops=100.0 / ms)
        return x
    tests = [t("flash2", shapes[0], 2.0), t("cudnn", shapes[0], 1.0, note="O and LSE of the float32 reference"),
             t("torch_flash", shapes[0], 2.2), t("torch_cudnn", shapes[0], verdict="not_supported", reason="no | way"),
             t("flash2", shapes[1], 4.0), t("cudnn", shapes[1], verdict="fail", reason="wrong dQ: 0.5"),
             t("torch_flash", shapes[1], 3.8), t("torch_cudnn", shapes[1], 2.0)]
    return {"schema": 1, "run": {"commit": "abc1234", "date": "2026-01-02T00:00:00Z", "gpu": {"name": "NVIDIA Test"},
                                 "torch_version": "2.11", "cuda_version": "12.8", "cudnn_version": 91000,
                                 "side_by_side": {"pass": "bwd", "kernels": ["flash2", "cudnn"],
                                                  "peers": ["torch_flash", "torch_cudnn"], "shapes": shapes,
                                                  "hold": True, "cudnn_library_torch": "/x/libcudnn.so.9",
                                                  "cudnn_library_ours": "/x/libcudnn.so.9",
                                                  "cudnn_version_ours": 91000}},
            "tests": tests}


class Table(unittest.TestCase):
    def test_ratios(self):
        doc = document()
        self.assertAlmostEqual(sbs.ratio(doc, "flash2", "torch_flash", "fp16 d128 causal s512"), 1.1)
        self.assertIsNone(sbs.ratio(doc, "flash2", "torch_cudnn", "fp16 d128 causal s512"))  # not supported
        self.assertIsNone(sbs.ratio(doc, "cudnn", "torch_flash", "fp16 d128 causal s1024"))  # wrong: not timed

    def test_markdown(self):
        md = sbs.markdown(document())
        self.assertIn("| shape | B×H | flash2 | cudnn | torch_flash | torch_cudnn | flash2/torch_flash | "
                      "flash2/torch_cudnn | cudnn/torch_flash | cudnn/torch_cudnn |", md)
        self.assertIn("| fp16 d128 causal s512 | 32×16 | 50.0 | 100.0 | 45.5 | n/s | 1.10 |  | 2.20 |  |", md)
        self.assertIn("| fp16 d128 causal s1024 | 32×16 | 25.0 | wrong | 26.3 | 50.0 | 0.95 | 0.50 |  |  |", md)
        self.assertIn("2.5 x 4·B·H·S²·D, causal counted as half", md)
        self.assertIn("- fp16 d128 causal s512, torch_cudnn: no \\| way", md)
        self.assertIn("- fp16 d128 causal s512, cudnn: O and LSE of the float32 reference", md)
        self.assertIn("- fp16 d128 causal s1024, cudnn: wrong dQ: 0.5", md)
        self.assertEqual(md.count("\n| fp16"), 2)

    def test_targets(self):
        doc = document()
        t = sbs.parse_target
        out = sbs.judge_targets(doc, [t("flash2/torch_flash>=1.0"), t("flash2/torch_flash>=1.0@s>=600"),
                                      t("flash2/torch_flash>=0.9@s>=1024"), t("flash2/torch_cudnn>=0.1@s>=1024"),
                                      t("cudnn/torch_flash>=1@s>=1024"), t("flash2/torch_flash>=1@s>=2048")])
        self.assertEqual([x["met"] for x in out], [False, False, True, True, False, False])
        self.assertEqual(out[0]["summary"], "1 of 2 shapes; missed: fp16 d128 causal s1024: 0.950")
        self.assertEqual(out[4]["summary"], "0 of 1 shapes; missed: fp16 d128 causal s1024: no time")
        self.assertEqual(out[5]["summary"], "no shape ran with that S")
        doc["targets"] = out[:1]
        self.assertIn("- flash2/torch_flash>=1.0: **missed** (1 of 2 shapes; missed:", sbs.markdown(doc))


class Files(unittest.TestCase):
    def test_written_whole_never_replacing(self):
        doc = document()
        with tempfile.TemporaryDirectory() as d:
            first = sbs.write_outputs(doc, "table\n", d, "gpu", "2026-01-02-abc1234-sidebyside-bwd")
            second = sbs.write_outputs(doc, "table 2\n", d, "gpu", "2026-01-02-abc1234-sidebyside-bwd")
            folder = os.path.join(d, "gpu", "peers")
            self.assertEqual(first, (os.path.join(folder, "2026-01-02-abc1234-sidebyside-bwd.md"),
                                     os.path.join(folder, "2026-01-02-abc1234-sidebyside-bwd.json")))
            self.assertEqual(second[0], os.path.join(folder, "2026-01-02-abc1234-sidebyside-bwd-2.md"))
            # a stray .md of the next name: that name is skipped whole, its .md kept
            with open(os.path.join(folder, "2026-01-02-abc1234-sidebyside-bwd-3.md"), "w") as f:
                f.write("not ours\n")
            third = sbs.write_outputs(doc, "table 3\n", d, "gpu", "2026-01-02-abc1234-sidebyside-bwd")
            self.assertEqual(third[1], os.path.join(folder, "2026-01-02-abc1234-sidebyside-bwd-4.json"))
            self.assertEqual(sorted(os.listdir(folder)), sorted(
                [f"2026-01-02-abc1234-sidebyside-bwd{s}.{e}" for s in ("", "-2", "-4") for e in ("md", "json")]
                + ["2026-01-02-abc1234-sidebyside-bwd-3.md"]))
            with open(first[0]) as f:
                self.assertEqual(f.read(), "table\n")
            with open(first[1]) as f:
                text = f.read()
            self.assertTrue(store.is_compact(text))
            self.assertEqual(json.loads(text)["tests"][0]["kernel"], "flash2")
            self.assertEqual(store.parse_name("gpu/peers/" + os.path.basename(second[1]))["what"], "sidebyside-bwd-2")
            out = sbs.write_outputs(doc, "table\n", d, "gpu", "unused", out=os.path.join(d, "mine"))
            self.assertEqual(out, (os.path.join(d, "mine.md"), os.path.join(d, "mine.json")))
            self.assertFalse([f for f in os.listdir(d) if f.endswith(".tmp")])


class NoTorch(unittest.TestCase):
    def test_exit_77(self):
        saved = {m: sys.modules.get(m) for m in ("numpy", "torch")}
        sys.modules["numpy"] = None  # import numpy raises ImportError
        try:
            with contextlib.redirect_stdout(io.StringIO()) as out:
                rc = sbs.main(["--shapes", "shapes/benchmark.txt", "--shapes-tool", FAKE_TOOL, "-k", "fp16 d128"])
        finally:
            for m, v in saved.items():
                if v is None:
                    sys.modules.pop(m, None)
                else:
                    sys.modules[m] = v
        self.assertEqual(rc, 77)
        self.assertIn("SKIPPED: PyTorch not found", out.getvalue())

    def test_no_shape_matches(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = sbs.main(["--shapes", "shapes/benchmark.txt", "--shapes-tool", FAKE_TOOL, "-k", "fp8"])
        self.assertEqual(rc, 2)
        self.assertIn("-k: no shape of shapes/benchmark.txt matches 'fp8'", err.getvalue())


class Interleaved(unittest.TestCase):
    """peers.measure_interleaved on a stand-in clock: one sample of each in turn, the round's
    first rotating, each stopping by its own rule."""

    def test_round_robin(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy not installed")
        now, calls = [0.0], []

        class Event:
            def __init__(self, enable_timing=True):
                self.t = None

            def record(self):
                self.t = now[0]

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return end.t - self.t

        torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None, Event=Event))
        def flush(value):
            pass

        def fn(name, ms):
            def run():
                calls.append(name)
                now[0] += ms
            return run
        out = peers.measure_interleaved([fn("a", 60.0), fn("b", 30.0), fn("c", 20.0)], torch, np, flush, None)
        self.assertEqual("".join(calls[:9 + 9]), "aaabbbccc" + "abcbcacab")
        self.assertEqual([t["median_ms"] for t in out], [60.0, 30.0, 20.0])
        self.assertEqual([t["samples"] for t in out], [10, 17, 25])  # >= 10 samples and 0.5 s each
        self.assertEqual(peers.measure(fn("d", 50.0), torch, np, flush, None)["samples"], 10)


class Flush(unittest.TestCase):
    """peers.L2Flush on a stand-in torch: the buffer written, then read back (the L2 left clean),
    then the spin where one is asked for; holding() shares the buffer."""

    def test_write_read_spin(self):
        ops = []

        class Buf:
            def fill_(self, value):
                ops.append(("fill", value))

            def amax(self):
                ops.append(("read",))

        torch = types.SimpleNamespace(cuda=types.SimpleNamespace(_sleep=lambda cycles: ops.append(("spin", cycles))))
        flush = peers.L2Flush(torch, buf=Buf())
        flush(7)
        self.assertEqual(ops, [("fill", 7), ("read",)])
        ops.clear()
        held = flush.holding(1000)
        self.assertIs(held.buf, flush.buf)
        held(8)
        self.assertEqual(ops, [("fill", 8), ("read",), ("spin", 1000)])


@unittest.skipUnless(os.environ.get("ATTN_KERNEL_SHIM"), "ATTN_KERNEL_SHIM (the built libattn_kernel_shim.so) not set")
class ShimApi(unittest.TestCase):
    """tools/kernel_shim.c through ctypes, no GPU: stand-in device pointers are never read."""

    @classmethod
    def setUpClass(cls):
        cls.shim = sbs.Shim(os.environ["ATTN_KERNEL_SHIM"])

    def problem(self, name, dims8, ptrs=None, strides=None):
        k, err = self.shim.find(name, None)
        self.assertTrue(k, err)
        s, h, d = dims8[4], dims8[2], dims8[6]
        ptrs = ptrs or [(1 << 40) + (i << 32) for i in range(9)]
        return self.shim.problem(k, dims8, d ** -0.5, ptrs, strides or [s * h * d, d, h * d] * 8, 0)

    def test_find(self):
        self.assertEqual(self.shim.abi_version, 5)
        k, err = self.shim.find("no_such_kernel", None)
        self.assertFalse(k)
        self.assertIn("no built-in kernel named 'no_such_kernel'", err)

    def test_problem_and_capabilities(self):
        h, err = self.problem("flash2", [0, 8, 16, 16, 2048, 2048, 128, 1])
        self.assertTrue(h, err)
        self.assertIsNone(self.shim.lacks(h, False))
        self.assertIsNone(self.shim.lacks(h, True))
        self.assertEqual(self.shim.lib.attn_shim_bwd(h, None), -1)  # before its workspace is bound and checked
        ws = self.shim.lib.attn_shim_bwd_workspace(h)
        self.assertGreater(ws, 0)  # flash2's fp32 dQ accumulator
        self.assertIn("workspace", self.shim.set_workspace(h, (1 << 40) + 8, ws))  # not 256-byte aligned
        self.assertIsNone(self.shim.set_workspace(h, 1 << 40, ws))
        self.shim.lib.attn_shim_problem_free(h)
        h, err = self.problem("hopper", [1, 8, 16, 16, 2048, 2048, 64, 0])
        self.assertIsNone(self.shim.lacks(h, False))
        self.assertIn("kernel 'hopper' does not take the backward pass", self.shim.lacks(h, True))
        self.shim.lib.attn_shim_problem_free(h)

    def test_malformed(self):
        h, err = self.problem("flash2", [0, 8, 16, 3, 2048, 2048, 128, 1])
        self.assertFalse(h)
        self.assertIn("heads_k 3 does not divide heads 16", err)
        h, err = self.problem("flash2", [0, 8, 16, 16, 2048, 2048, 128, 0], ptrs=[1 << 40] * 5 + [None] * 4)
        self.assertTrue(h, err)  # a forward needs no gradients
        self.assertIn("dout is NULL", self.shim.set_workspace(h, None, 0))
        self.shim.lib.attn_shim_problem_free(h)


if __name__ == "__main__":
    unittest.main()
