"""Per-batch execution state: registers, memories and special registers of a group of blocks.

Threads of a batch are laid out block after block; inside a block by linear thread id
(x fastest), so warp w of block b holds threads b*tpb + 32*w ... as on the GPU.
"""

from __future__ import annotations

import numpy as np

from .errors import ExecutionError


class LaunchGeometry:
    """Grid, block and cluster shape of one launch, plus the launch-wide constants."""

    def __init__(self, grid, block, cluster, explicit_cluster, dyn_shared, static_shared,
                 gridid):
        self.grid, self.block, self.cluster = tuple(grid), tuple(block), tuple(cluster)
        self.explicit_cluster = explicit_cluster
        self.tpb = block[0] * block[1] * block[2]
        self.nblocks = grid[0] * grid[1] * grid[2]
        self.dyn_shared = dyn_shared
        self.static_shared = static_shared
        self.gridid = gridid

    def cluster_order(self) -> np.ndarray:
        """Linear block ids ordered cluster by cluster, so batches hold whole clusters."""
        g, c = self.grid, self.cluster
        lin = np.arange(self.nblocks, dtype=np.int64)
        x, y, z = self.block_coords(lin)
        cid = (x // c[0]) + (y // c[1]) * (g[0] // c[0]) + \
            (z // c[2]) * (g[0] // c[0]) * (g[1] // c[1])
        return lin[np.argsort(cid, kind="stable")]

    def block_coords(self, lin):
        g = self.grid
        return lin % g[0], lin // g[0] % g[1], lin // (g[0] * g[1])

    def thread_coords(self, t):
        b = self.block
        return t % b[0], t // b[0] % b[1], t // (b[0] * b[1])


class State:
    def __init__(self, prog, geom: LaunchGeometry, block_ids, nblk: int, mem, kparams,
                 counters, shared_size: int, out):
        self.prog, self.geom, self.mem, self.kparams = prog, geom, mem, kparams
        # a launch on an emulated world (world.py): block b of the batch runs on rank
        # rank_of_block[b] and reads that rank's parameter buffer, kparam_rows[rank]
        self.rank_of_block = None
        self.kparam_rows = None
        # a rank of a world of processes (shared_world.RankLink): publishes this process's
        # memory changes and waits for the other processes' ones when only spinners are left
        self.world_link = None
        self.counters, self.out = counters, out
        # linear ids of the batch's blocks (whole clusters, cluster after cluster)
        self.block_ids = np.asarray(block_ids, np.int64)
        self.nblk, self.tpb = nblk, geom.tpb
        self.T = T = nblk * geom.tpb
        # Registers start as shared zero arrays: values are never modified in place (every
        # write stores a new array), so one zero array per dtype serves them all.
        zeros = {dt: np.zeros(T, dt) for dt in set(prog.reg_dtypes)}
        self.regs = [zeros[dt] for dt in prog.reg_dtypes]
        self.shared_size = shared_size
        # each block's shared memory starts at a multiple of 16 bytes in the batch's array, so
        # typed views (an 8-byte mbarrier, a 16-byte vector) line up in every block whatever
        # the declared size; bounds are checked against shared_size
        self.shared_stride = -(-shared_size // 16) * 16
        self.shared = np.zeros(max(nblk * self.shared_stride, 16) + 16, np.uint8)
        self.local_size = prog.local_size
        self.local = np.zeros(max(T * prog.local_size, 16), np.uint8)
        self.pslots = np.zeros((T, max(prog.pslot_size, 16)), np.uint8)
        self.live = np.ones(T, bool)
        self.carry = np.zeros(T, np.uint8)        # CC.CF of add.cc / addc / sub.cc / subc
        self.named_arrived = np.zeros((nblk, 16), np.int64)   # named barriers: threads so far
        self.wait_bar = np.full(T, -1, np.int64)   # named barrier a thread waits on; -2: mbarrier
        self.mbar_flipped = False                  # an mbarrier phase completed this step
        self.cp_pending = []                       # cp.async copies not landed (ops_async)
        self.cp_commits = np.zeros(T, np.int64)    # cp.async.commit_group count per thread
        self.wg_pending = []                       # wgmma.mma_async not waited for (ops_wgmma)
        self.wg_commits = np.zeros(T, np.int64)    # wgmma.commit_group count per thread
        self.wg_regs = {}                          # register -> threads whose value is pending
        self.tma_pending = []                      # bulk loads not landed (ops_bulk)
        self.bulk_pending = []                     # bulk stores not done (ops_bulk)
        self.bulk_commits = np.zeros(T, np.int64)  # cp.async.bulk.commit_group per thread
        self.tmem = None                           # tmem.TensorMemory, made on first use
        self.tc_issued = {}                        # thread -> tcgen05 ops not committed (tmem)
        self.tc_clock = {}                         # thread -> race clock of its committed ops
        self.tc_commits = []                       # tcgen05.commit records not arrived (tmem)
        self.tc_ld_regs = {}                       # strict race check: register -> ld's line
        # spin detection (executor._spin_check): back edges taken, when to look next, the
        # register hash and loop of the last look, and the branch that closed the loop
        self.back_count = np.zeros(T, np.int64)
        self.spin_next = np.full(T, 64, np.int64)
        self.spin_hash = np.zeros(T, np.uint64)
        self.spin_pc = np.full(T, -1, np.int64)
        self.spin_from = np.full(T, -1, np.int64)
        self.nspin = 0                             # threads parked as spinning
        self.narmed = 0                            # threads with a register hash taken
        self.watch = False                         # narmed or nspin: track memory changes
        self.epoch = 0                             # memory changes seen while watching
        self.spin_epoch = np.zeros(T, np.int64)
        self.cl_arrived = np.zeros(T, np.int64)    # barrier.cluster.arrive per thread
        self.cl_waited = np.zeros(T, np.int64)     # barrier.cluster.wait passed per thread
        self.grace = None                          # globalrace.GlobalRaceChecker
        self.proxy = None                          # proxy.ProxyTracker (async-proxy check)
        self.races = None                          # races.RaceChecker when race_check is on
        self.stack = np.zeros((16, T), np.int32)
        self.sp = np.zeros(T, np.int64)
        self.ins = None               # the instruction being executed (for error messages)
        self._special = {}
        self._views = {}
        t = np.arange(T, dtype=np.int64)
        self.thread_linear = t % geom.tpb          # linear tid within the block
        self.block_in_batch = t // geom.tpb
        self.lane = self.thread_linear % 32
        self.warp_global = self.block_in_batch * ((geom.tpb + 31) // 32) + \
            self.thread_linear // 32
        self.nwarps = nblk * ((geom.tpb + 31) // 32)

    # -- views of the byte memories -------------------------------------------------------
    def shared_view(self, dt):
        key = ("s", dt)
        v = self._views.get(key)
        if v is None:
            v = self._views[key] = self.shared.view(dt)
        return v

    def local_view(self, dt):
        key = ("l", dt)
        v = self._views.get(key)
        if v is None:
            v = self._views[key] = self.local.view(dt)
        return v

    # -- special registers ----------------------------------------------------------------
    def special(self, name: str) -> np.ndarray:
        v = self._special.get(name)
        if v is None:
            v = self._special[name] = self._compute_special(name)
        return v

    def _compute_special(self, name: str) -> np.ndarray:
        g = self.geom
        T = self.T
        base, _, comp = name.partition(".")
        ax = {"x": 0, "y": 1, "z": 2}.get(comp)
        # a world's batch numbers blocks rank after rank (world.py): the grid is per device
        blin = self.block_ids[self.block_in_batch] % g.nblocks
        bc = g.block_coords(blin)
        if base == "%tid":
            return np.asarray(g.thread_coords(self.thread_linear)[ax], np.uint32)
        if base == "%ntid":
            return np.full(T, g.block[ax], np.uint32)
        if base == "%ctaid":
            return np.asarray(bc[ax], np.uint32)
        if base == "%nctaid":
            return np.full(T, g.grid[ax], np.uint32)
        if base == "%cluster_ctaid":
            return np.asarray(bc[ax] % g.cluster[ax], np.uint32)
        if base == "%cluster_nctaid":
            return np.full(T, g.cluster[ax], np.uint32)
        if base == "%clusterid":
            return np.asarray(bc[ax] // g.cluster[ax], np.uint32)
        if base == "%nclusterid":
            return np.full(T, g.grid[ax] // g.cluster[ax], np.uint32)
        if base == "%cluster_ctarank":
            c = g.cluster
            r = bc[0] % c[0] + (bc[1] % c[1]) * c[0] + (bc[2] % c[2]) * c[0] * c[1]
            return np.asarray(r, np.uint32)
        if base == "%cluster_nctarank":
            return np.full(T, g.cluster[0] * g.cluster[1] * g.cluster[2], np.uint32)
        if base == "%is_explicit_cluster":
            return np.full(T, int(g.explicit_cluster), np.uint32)
        if base == "%laneid":
            return self.lane.astype(np.uint32)
        if base == "%warpid":
            return (self.thread_linear // 32).astype(np.uint32)
        if base == "%nwarpid":
            return np.full(T, 64, np.uint32)         # warp slots per SM on sm_80..sm_90
        if base == "%smid":
            return np.asarray(blin % 132, np.uint32)
        if base == "%nsmid":
            return np.full(T, 132, np.uint32)
        if base == "%gridid":
            return np.full(T, g.gridid, np.uint64)
        if base.startswith("%lanemask_"):
            lane = self.lane.astype(np.uint64)
            one = np.uint64(1)
            bit = one << lane
            r = {"eq": bit, "lt": bit - one, "le": (bit << one) - one,
                 "gt": ~((bit << one) - one), "ge": ~(bit - one)}[base[10:]]
            return (r & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        if base in ("%clock", "%clock64", "%globaltimer", "%globaltimer_lo",
                    "%globaltimer_hi"):
            self.counters.clock += 1000
            dt = np.uint64 if base in ("%clock64", "%globaltimer") else np.uint32
            return np.full(T, self.counters.clock, dt)
        if base == "%dynamic_smem_size":
            return np.full(T, g.dyn_shared, np.uint32)
        if base in ("%total_smem_size", "%aggr_smem_size"):
            return np.full(T, g.static_shared + g.dyn_shared, np.uint32)
        if base == "%warpsz":
            return np.full(T, 32, np.uint32)
        if base.startswith(("%envreg", "%pm", "%reserved_smem")):
            return np.zeros(T, np.uint32)
        raise self.error(ExecutionError, f"special register {name} is not supported")

    # -- errors ---------------------------------------------------------------------------
    def error(self, cls, msg, thread_index=None, address=None):
        ins = self.ins
        kw = {"kernel": self.prog.kernel.name, "line": ins.line if ins else None}
        if thread_index is not None:
            t = int(thread_index)
            lin = int(self.block_ids[t // self.tpb])
            kw["block"] = tuple(int(c) for c in self.geom.block_coords(lin % self.geom.nblocks))
            if self.rank_of_block is not None:
                msg = f"rank {int(self.rank_of_block[t // self.tpb])}: {msg}"

            kw["thread"] = self.geom.thread_coords(t % self.tpb)
        if address is not None:
            kw["address"] = int(address)
        return cls(msg, **kw)

    def active_index(self, m):
        return np.arange(self.T) if m is None else np.flatnonzero(m)
