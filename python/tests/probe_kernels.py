"""Kernels for the bridge's host tests (no GPU, no torch: "raw" kernels that never touch the
device). record (and its backward) writes what it was given to $ATTN_PROBE_OUT, a line each,
for test_bridge.c."""
import os

import attn_bridge as ab


def _write(p, *extra):
    with open(os.environ["ATTN_PROBE_OUT"], "w") as f:
        for key in sorted(p.fields):
            value = p.fields[key]
            f.write(f"field {key} {value:.6g}\n" if isinstance(value, float) else f"field {key} {value}\n")
        for name in sorted(p.specs):
            s = p.specs[name]
            f.write(f"spec {name} none\n" if s is None else
                    f"spec {name} {s.ptr} {','.join(map(str, s.shape))} {','.join(map(str, s.strides))} {s.dtype}\n")
        f.write(f"stream {p.stream_handle}\ndevice {p.device}\n")
        f.write(f"problem {p.dtype} {p.head_dim_v} {p.causal} {p.q_packed} {p.k_packed} {p.paged}\n")
        for line in extra:
            f.write(line + "\n")


@ab.kernel(name="probe_record", caps={"gqa", "varlen", "paged", "head_dim_v"}, dtypes=("bf16",),
           head_dim_pairs=((64, 64), (192, 128)), tensors="raw")
def record(p):
    _write(p)


# the workspace's size shows that the scalars and the deterministic flag reached it
@record.backward(caps={"gqa", "varlen", "softcap"}, deterministic=True,
                 workspace=lambda p: 1000 * p.batch + p.deterministic)
def record_bwd(p):
    _write(p, f"backward {p.backward} {p.deterministic} {p.workspace_bytes}")


@ab.kernel(name="probe_raises", head_dims=(64,), tensors="raw")
def raises(p):
    raise ValueError("probe failure at batch %d" % p.batch)


@raises.backward(workspace=lambda p: 1 // (p.batch - 3))  # the problem's batch is 3: it raises
def raises_bwd(p):
    raise ValueError("probe backward failure at batch %d" % p.batch)


@ab.kernel(name="probe_unsupported", tensors="raw")
def unsupported(p):
    raise ab.Unsupported("probe says no")


@unsupported.backward()
def unsupported_bwd(p):
    raise ab.Unsupported("probe's backward says no")


@ab.kernel(name="probe_noop")
def noop(p):
    """Does nothing, through the whole torch path (tensor views, the stream current): what the
    bridge itself costs per call (tools/call_overhead.c)."""
