"""The bridge's Python side without a GPU or torch: declarations, specs, the configure step's
CLI, and the tensors a problem's fields describe (python -m unittest, CTest unit/python/declare)."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]
import attn_bridge as ab  # noqa: E402
from attn_bridge.runtime import specs_of  # noqa: E402


class Declarations(unittest.TestCase):
    def test_bad_declarations_name_the_field(self):
        for kwargs, message in [
            (dict(name="Bad-Name"), "need [a-z0-9_]+"),
            (dict(name="k", caps={"gqa", "rope"}), "unknown caps ['rope']"),
            (dict(name="k", dtypes=("fp32",)), "dtypes ('fp32',)"),
            (dict(name="k", dtypes=()), "need a non-empty subset"),
            (dict(name="k", head_dims=(64, 0)), "head_dims (64, 0)"),
            (dict(name="k", head_dims=(64,), head_dim_pairs=((64, 64),)), "not both"),
            (dict(name="k", head_dim_pairs=((192, 128),)), "'head_dim_v' is not in its caps"),
            (dict(name="k", head_dim_pairs=((64,),)), "need (d, dv)"),
            (dict(name="k", head_dim_pairs=()), "is empty"),
            (dict(name="k", tensors="numpy"), "tensors 'numpy'"),
        ]:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(ab.DeclarationError) as e:
                    ab.kernel(**kwargs)
                self.assertIn(message, str(e.exception))

    def test_cmake_lines_are_the_abi_bits(self):
        d = ab.Declaration("k", caps={"gqa", "paged", "seqused_k"}, dtypes=("bf16",), head_dims=(64, 128))
        self.assertEqual(d.cmake_lines(), ["name=k", "caps=97", "dtypes=2", "head_dims=64,128", "head_dim_pairs=",
                                           "bwd=0", "bwd_caps=0", "bwd_workspace=0"])
        d = ab.Declaration("k", caps={"head_dim_v"}, head_dim_pairs=((192, 128), (64, 64)))
        self.assertEqual(d.cmake_lines()[1:5], ["caps=8", "dtypes=3", "head_dims=", "head_dim_pairs=192,128,64,64"])


class Backwards(unittest.TestCase):
    """@fwd.backward(...): attn_kernel.bwd, bwd_caps and bwd_workspace."""

    @staticmethod
    def fwd(caps=("gqa", "paged", "window")):
        @ab.kernel(name="k", caps=set(caps))
        def fwd(p):
            pass
        return fwd

    def test_caps_default_to_the_forwards_less_paged(self):
        fwd = self.fwd()

        @fwd.backward()
        def bwd(p):
            pass
        self.assertIs(fwd.attn_kernel.backward.fn, bwd)
        self.assertEqual(fwd.attn_kernel.cmake_lines()[5:], ["bwd=1", "bwd_caps=3", "bwd_workspace=0"])

    def test_deterministic_and_workspace(self):
        fwd = self.fwd()
        fwd.backward(caps={"softcap"}, deterministic=True, workspace=lambda p: 4 * p.batch)(lambda p: None)
        self.assertEqual(fwd.attn_kernel.cmake_lines()[5:], ["bwd=1", f"bwd_caps={4 | 1 << 31}", "bwd_workspace=1"])
        self.assertEqual(fwd.attn_kernel.backward.workspace(type("P", (), {"batch": 3})), 12)

    def test_bad_backwards_name_the_field(self):
        for kwargs, message in [
            (dict(caps={"rope"}), "backward caps: unknown ['rope']"),
            (dict(caps={"paged"}), "'paged' has no backward"),
            (dict(deterministic=1), "deterministic=1: need True or False"),
            (dict(workspace=64), "workspace=64: need a callable"),
        ]:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(ab.DeclarationError) as e:
                    self.fwd().backward(**kwargs)(lambda p: None)
                self.assertIn(message, str(e.exception))
        fwd = self.fwd()
        fwd.backward()(lambda p: None)
        with self.assertRaisesRegex(ab.DeclarationError, "a backward is already attached"):
            fwd.backward()(lambda p: None)
        with self.assertRaisesRegex(ab.DeclarationError, "needs its parentheses"):
            self.fwd().backward(lambda p: None)


class Cli(unittest.TestCase):
    """python -m attn_bridge declare SPEC, as the configure step runs it."""

    def declare(self, spec, modules):
        with tempfile.TemporaryDirectory() as d:
            for name, text in modules.items():
                with open(os.path.join(d, name + ".py"), "w") as f:
                    f.write(textwrap.dedent(text))
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), d]))
            r = subprocess.run([sys.executable, "-m", "attn_bridge", "declare", spec], env=env,
                               capture_output=True, text=True, cwd=d)
            return r.returncode, r.stdout.replace(d, "<dir>")

    GOOD = """
        import attn_bridge as ab
        @ab.kernel(name="good", caps={"window"}, head_dims=(64,))
        def fwd(p):
            pass
        def plain(p):
            pass
    """

    def test_good(self):
        rc, out = self.declare("good_mod:fwd", {"good_mod": self.GOOD})
        self.assertEqual((rc, out), (0, "name=good\ncaps=2\ndtypes=3\nhead_dims=64\nhead_dim_pairs=\n"
                                   "bwd=0\nbwd_caps=0\nbwd_workspace=0\nroot=<dir>\n"))

    def test_errors(self):
        for spec, modules, rc_want, message in [
            ("nosuch_mod:fwd", {}, 1, "error='nosuch_mod:fwd': no module nosuch_mod on the path"),
            ("good_mod:nope", {"good_mod": self.GOOD}, 1, "has no nope"),
            ("good_mod:plain", {"good_mod": self.GOOD}, 1, "plain is not declared with @attn_bridge.kernel"),
            ("good_mod", {"good_mod": self.GOOD}, 1, "expected module:function"),
            ("syntax_mod:fwd", {"syntax_mod": "def fwd(:\n"}, 1, "importing syntax_mod failed"),
            ("raises_mod:fwd", {"raises_mod": "raise RuntimeError('no GPU here')\n"}, 1,
             "RuntimeError: no GPU here"),
            ("bad_decl:fwd", {"bad_decl": "import attn_bridge as ab\n@ab.kernel(name='x', caps={'rope'})\n"
                                          "def fwd(p): pass\n"}, 1, "unknown caps"),
            ("needs_dep:fwd", {"needs_dep": "import attn_no_such_package\n"}, 3,
             "needs attn_no_such_package, which is not installed"),
        ]:
            with self.subTest(spec=spec):
                rc, out = self.declare(spec, modules)
                self.assertEqual(rc, rc_want, out)
                self.assertIn(message, out)
                self.assertTrue(out.startswith("error=") or out.startswith("missing="), out)


def fields(**kw):
    f = dict(dtype=0, batch=2, heads=8, heads_k=2, seqlen_q=5, seqlen_k=7, head_dim=64, head_dim_v=0, causal=0,
             softmax_scale=0.125, q=0x1000, k=0x2000, v=0x3000, o=0x4000, lse=0, window_left=-1, window_right=-1,
             softcap=0.0, cu_seqlens_q=0, cu_seqlens_k=0, block_table=0, block_table_stride=0, page_size=0,
             num_pages=0, seqused_k=0, total_q=0, total_k=0)
    for t, (b, h, r) in dict(q=(2560, 64, 512), k=(896, 64, 128), v=(896, 0, 128), o=(2560, 320, 64)).items():
        f.update({t + "_batch_stride": b, t + "_head_stride": h, t + "_row_stride": r})
    f.update(kw)
    return f


class Specs(unittest.TestCase):
    """The tensors of attn_abi.h's layouts, in FlashAttention's axis order, strides as given."""

    def shapes(self, f):
        return {k: None if s is None else (s.ptr, s.shape, s.strides, s.dtype) for k, s in specs_of(f).items()}

    def test_dense(self):
        s = self.shapes(fields(lse=0x5000, dtype=1))
        self.assertEqual(s["q"], (0x1000, (2, 5, 8, 64), (2560, 512, 64, 1), "bf16"))
        self.assertEqual(s["v"], (0x3000, (2, 7, 2, 64), (896, 128, 0, 1), "bf16"))  # a broadcast head stride
        self.assertEqual(s["o"], (0x4000, (2, 5, 8, 64), (2560, 64, 320, 1), "bf16"))
        self.assertEqual(s["lse"], (0x5000, (2, 8, 5), (40, 5, 1), "f32"))
        self.assertEqual([s[k] for k in ("cu_seqlens_q", "cu_seqlens_k", "block_table", "seqused_k")], [None] * 4)

    def test_packed(self):
        s = self.shapes(fields(cu_seqlens_q=0x6000, cu_seqlens_k=0x7000, total_q=9, total_k=13, lse=0x5000,
                               head_dim_v=32))
        self.assertEqual(s["q"][1:3], ((9, 8, 64), (512, 64, 1)))
        self.assertEqual(s["o"][1:3], ((9, 8, 32), (64, 320, 1)))
        self.assertEqual(s["k"][1:3], ((13, 2, 64), (128, 64, 1)))
        self.assertEqual(s["v"][1:3], ((13, 2, 32), (128, 0, 1)))
        self.assertEqual(s["lse"][1:3], ((8, 9), (9, 1)))
        self.assertEqual(s["cu_seqlens_q"], (0x6000, (3,), (1,), "i32"))
        self.assertEqual(s["cu_seqlens_k"], (0x7000, (3,), (1,), "i32"))

    def test_paged(self):
        s = self.shapes(fields(block_table=0x8000, block_table_stride=4, page_size=16, num_pages=11,
                               seqused_k=0x9000, cu_seqlens_q=0x6000, total_q=9))
        self.assertEqual(s["k"][1:3], ((11, 16, 2, 64), (896, 128, 64, 1)))
        self.assertEqual(s["block_table"], (0x8000, (2, 4), (4, 1), "i32"))
        self.assertEqual(s["seqused_k"], (0x9000, (2,), (1,), "i32"))
        self.assertEqual(s["q"][1], (9, 8, 64))

    def test_backward(self):
        f = fields(lse=0x5000, dout=0xa000, dq=0xb000, dk=0xc000, dv=0xd000, deterministic=0, workspace=0,
                   workspace_bytes=0, head_dim_v=32)
        for t, (b, h, r) in dict(do=(1, 2, 3), dq=(4, 5, 6), dk=(7, 8, 9), dv=(10, 0, 12)).items():
            f.update({t + "_batch_stride": b, t + "_head_stride": h, t + "_row_stride": r})
        s = self.shapes(f)
        self.assertEqual(s["dout"], (0xa000, (2, 5, 8, 32), (1, 3, 2, 1), "fp16"))
        self.assertEqual(s["dq"], (0xb000, (2, 5, 8, 64), (4, 6, 5, 1), "fp16"))
        self.assertEqual(s["dk"], (0xc000, (2, 7, 2, 64), (7, 9, 8, 1), "fp16"))
        self.assertEqual(s["dv"], (0xd000, (2, 7, 2, 32), (10, 12, 0, 1), "fp16"))
        self.assertIsNone(s["workspace"])
        self.assertNotIn("dq", self.shapes(fields()))  # a forward call has no gradients


if __name__ == "__main__":
    unittest.main()
