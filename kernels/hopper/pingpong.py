# The named-barrier ping-pong of hopper.cu (n + 1 turns per tile of n KV tiles) with C = 2 or 3
# consumer warpgroups over several tiles of a persistent block, under random interleavings: no
# deadlock, and no barrier ever collects two arrivals of one warpgroup in a phase (that would
# complete it without its owner). Barrier 1 + w is warpgroup w's: it syncs there, the warpgroup
# before it arrives; the last warpgroup opens the first turn of a tile and skips its own last
# hand-over. Run: python3 kernels/hopper/pingpong.py
import random
def program(C, w, tiles):
    ops = []
    for n in tiles:
        if n == 0: continue
        turns = n + 1
        if w == C - 1: ops.append(("arrive", 1))
        for k in range(turns):
            ops.append(("sync", 1 + w))
            last = k == turns - 1
            if not (w == C - 1 and last): ops.append(("arrive", 1 + (w + 1) % C))
    return ops
def run(C, tiles, seed):
    rng = random.Random(seed)
    progs = [program(C, w, tiles) for w in range(C)]
    pc = [0] * C
    bars = {b: [] for b in range(1, C + 1)}  # arrivals (wg ids) in the current phase; sync waiters
    waiting = [None] * C
    while True:
        runnable = [w for w in range(C) if pc[w] < len(progs[w]) and waiting[w] is None]
        if not runnable:
            if all(pc[w] == len(progs[w]) for w in range(C)) and all(waiting[w] is None for w in range(C)):
                assert all(not v for v in bars.values()), bars
                return True
            raise AssertionError("deadlock %s %s" % (pc, waiting))
        w = rng.choice(runnable)
        op, b = progs[w][pc[w]]; pc[w] += 1
        assert w not in bars[b], "barrier %d got two arrivals of warpgroup %d in one phase" % (b, w)
        bars[b].append(w)
        if op == "sync": waiting[w] = b
        if len(bars[b]) == 2:
            for x in bars[b]:
                if waiting[x] == b: waiting[x] = None
            bars[b] = []
for C in (2, 3):
    for tiles in ([1], [2], [5], [1, 1, 1], [3, 0, 2, 1], [4, 4]):
        for seed in range(300):
            run(C, tiles, seed)
print("ping-pong: no deadlock, no double arrival (C = 2, 3; 300 interleavings x 6 tile lists)")
