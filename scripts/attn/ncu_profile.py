#!/usr/bin/env python3
"""Profiles one launch of a test's kernel with Nsight Compute and says what bounds it.

    scripts/ncu_profile.py <test name> [--build build] [--kernel-regex RE] [--shape QxK]
                           [--out FILE.json]

The test is any CTest test of the harness (correctness/..., benchmark/...): its command
is run under `ncu --clock-control none --launch-count 1` on the first launch of the
kernel (a correctness test runs only its `accuracy` check, on one case: --shape, or its
largest, in one process). From speed-of-light memory and
compute, achieved occupancy, registers, spills, shared-memory bank conflicts and the top
warp stall reasons it classifies the kernel (launch-overhead-, memory-, compute- or
latency-bound), prints the next thing to try, and writes the same as JSON
(default <build>/profile/<test>.json). Exit 77 where ncu is missing. A backward's benchmark
(benchmark/bwd/<kernel>/...) profiles the kernel's first backward launch (<kernel>_bwd...),
a forward + backward's (benchmark/fwd_bwd/...) the first launch of either.
"""
import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys

from attn import ROOT
from attn.schema import split_name

STALLS = ["long_scoreboard", "short_scoreboard", "mio_throttle", "math_pipe_throttle", "barrier", "wait",
          "not_selected", "lg_throttle", "membar", "no_instruction", "dispatch_stall", "tex_throttle",
          "branch_resolving", "drain", "imc_miss", "sleeping", "misc", "selected"]
METRICS = {
    "duration": "gpu__time_duration.sum",
    "compute_sol_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_sol_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_dynamic": "launch__shared_mem_per_block_dynamic",
    "shared_mem_static": "launch__shared_mem_per_block_static",
    "local_load_instructions": "smsp__sass_inst_executed_op_local_ld.sum",
    "local_store_instructions": "smsp__sass_inst_executed_op_local_st.sum",
    "bank_conflicts_load": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "bank_conflicts_store": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}
METRICS.update({f"stall_{s}": f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio" for s in STALLS})
# ncu names the duration's unit "nsecond" (older) or "ns" (2025 on): both, to microseconds
TIME_UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
              "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def classify(m):
    """(bound, next steps) from the metrics; duration in microseconds."""
    steps = []
    if (m.get("local_load_instructions") or 0) + (m.get("local_store_instructions") or 0) > 0:
        steps.append("registers spill to local memory: fewer live values or a smaller tile")
    if (m.get("bank_conflicts_load") or 0) + (m.get("bank_conflicts_store") or 0) > 0:
        steps.append("shared-memory bank conflicts: swizzle or pad the tile rows")
    dur, mem, comp = m.get("duration_us") or 0, m.get("memory_sol_pct") or 0, m.get("compute_sol_pct") or 0
    occ = m.get("achieved_occupancy_pct") or 0
    if dur < 10:
        bound = "launch-overhead-bound"
        steps.insert(0, "under 10 us: fuse launches or give each launch more work (pack several heads per block)")
    elif mem >= 60 and mem >= comp:
        bound = "memory-bound"
        if (m.get("dram_pct") or 0) < 70:
            steps.insert(0, "memory throughput under 70 % of peak: check the access pattern, 16-byte vectorized "
                            "loads, more loads in flight")
        else:
            steps.insert(0, "near the bandwidth: move fewer bytes (reuse tiles, fuse passes)")
    elif comp >= 60:
        bound = "compute-bound"
        steps.insert(0, "near the SM's peak: use the faster instructions (wgmma on Hopper), cut non-matrix work "
                        "(exp, masking) off the critical path")
    else:
        bound = "latency-bound"
        if occ < 50:
            steps.insert(0, f"achieved occupancy {occ:.0f} %: registers ({m.get('registers_per_thread'):.0f} per "
                            "thread) or shared memory limit the warps per SM; shrink them or overlap more "
                            "work per warp (deeper pipeline)")
        top = max(STALLS, key=lambda s: m.get(f"stall_{s}") or 0)
        advice = {"long_scoreboard": "waiting on global memory: prefetch deeper (more cp.async stages)",
                  "short_scoreboard": "waiting on shared memory or special functions: fewer exp/ldmatrix "
                                      "on the critical path",
                  "barrier": "warps wait at barriers: balance the work between barriers, fewer barriers",
                  "mio_throttle": "shared-memory instruction queue full: wider (ldmatrix.x4) accesses",
                  "math_pipe_throttle": "a math pipe is saturated: move work to another pipe",
                  "wait": "fixed-latency dependencies: more independent instructions (unroll)",
                  "not_selected": "enough eligible warps: look at instruction count instead"}
        steps.append(f"top stall: {top} ({m.get('stall_' + top) or 0:.1f} cycles per issue): "
                     + advice.get(top, "see Nsight Compute's warp state section"))
    return bound, steps


def kernel_regex(test):
    """The launches a test's name points at: its kernel's forward, or its backward's (a
    backward's benchmark), or either (a forward + backward's)."""
    pass_, parts = split_name(test)
    kernel = parts[1]
    return {"fwd": f"{kernel}_fwd_kernel", "bwd": f"{kernel}_bwd", "fwd_bwd": f"{kernel}_(fwd_kernel|bwd)"}[pass_]


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("test")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--kernel-regex", help="ncu kernel filter (default from the test name: <kernel>_fwd_kernel, "
                    "a backward's <kernel>_bwd, a forward + backward's either)")
    ap.add_argument("--shape", help="a correctness test's case to profile, QxK (default: its largest shape)")
    ap.add_argument("--out")
    a = ap.parse_args()
    ncu = shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.path.exists(p)), None)
    if not ncu:
        print("SKIPPED: ncu (Nsight Compute) not found")
        return 77
    show = subprocess.run(["ctest", "--test-dir", a.build, "--show-only=json-v1", "-R", f"^{a.test}$"],
                          capture_output=True, text=True)
    # the selection also holds the test's fixtures (benchmark/prepare, ...): take it by name
    test = next((t for t in json.loads(show.stdout or "{}").get("tests", []) if t["name"] == a.test), None)
    if not test:
        sys.exit(f"profile: no test named '{a.test}' in {a.build} (ctest -N lists them)")
    command = test["command"]
    if "--shapes" in command:  # a correctness test: one case, in the process ncu starts
        i = command.index("--shapes") + 1
        shapes = command[i].split(",")
        command[i] = a.shape or max(shapes, key=lambda s: int(s.split("x")[0]) * int(s.split("x")[-1]))
        command = command + ["--in-process"]
    env = dict(os.environ, CK_FORK="no", CK_RUN_CASE="accuracy")
    for prop in test.get("properties", []):
        if prop["name"] == "ENVIRONMENT":
            env.update(v.split("=", 1) for v in prop["value"])
    regex = a.kernel_regex or kernel_regex(a.test)
    cmd = [ncu, "--clock-control", "none", "--launch-count", "1", "--kernel-name", f"regex:{regex}",
           "--metrics", ",".join(METRICS.values()), "--csv", "--page", "raw"] + command
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    rows = [r for r in csv.reader(io.StringIO(run.stdout)) if r]
    head = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if head is None or len(rows) < head + 3:
        sys.exit(f"profile: ncu profiled no kernel matching '{regex}' (exit {run.returncode}):\n"
                 + (run.stderr or run.stdout)[-2000:])
    names, units, values = rows[head], rows[head + 1], rows[head + 2]
    col = {n: i for i, n in enumerate(names)}
    m = {"kernel_name": values[col["Kernel Name"]]}
    for key, metric in METRICS.items():
        if metric in col:
            m[key] = number(values[col[metric]])
    if m.get("duration") is not None:
        unit = units[col[METRICS["duration"]]]
        if unit not in TIME_UNITS:
            sys.exit(f"profile: ncu gave the duration in '{unit}', a unit this script does not know")
        m["duration_us"] = m.pop("duration") * TIME_UNITS[unit]
    bound, steps = classify(m)
    report = {"test": a.test, "command": command, "metrics": m, "bound": bound, "next_steps": steps}
    print(f"{a.test}: {m['kernel_name'][:80]}")
    print(f"  {m.get('duration_us', float('nan')):.1f} us; memory {m.get('memory_sol_pct') or 0:.0f} % and "
          f"compute {m.get('compute_sol_pct') or 0:.0f} % of peak; occupancy {m.get('achieved_occupancy_pct') or 0:.0f} % "
          f"(theoretical {m.get('theoretical_occupancy_pct') or 0:.0f} %); {m.get('registers_per_thread') or 0:.0f} registers")
    print(f"  {bound}")
    for s in steps:
        print(f"  next: {s}")
    out = a.out or os.path.join(a.build, "profile", a.test.replace("/", ".") + ".json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump(report, f, indent=1)
    os.replace(out + ".tmp", out)
    print(f"  written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
