"""tilelang.tools.sass: parsing cuobjdump listings, finding the main loop, and the PTX loop
finder; on a real cubin (Triton's sm_80 matmul fixture, assembled by nvJitLink) when the
cuobjdump/nvdisasm wheels are installed."""

from __future__ import annotations

import pathlib

import pytest

from tilelang.tools import sass
from tilelang.targets import get_target

LISTING = """
	code for sm_80
		Function : k
	.headerflags	@"EF_CUDA_SM80"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                 /* 0x00000a0000017a02 */
        /*0010*/                   LDG.E.128.CONSTANT R4, [R2.64] ;       /* 0x0000000000000000 */
        /*0020*/                   HMMA.16816.F32 R8, R12, R16, R8 ;      /* 0x0000000000000000 */
        /*0030*/                   LDGSTS.E.BYPASS.LTC128B.128 [R5], [R2.64] ;   /* 0x0 */
        /*0040*/                   FFMA R3, R4, R5, R3 ;                  /* 0x0000000000000000 */
        /*0050*/               @P0 BRA 0x20 ;                             /* 0x0000000000000000 */
        /*0060*/                   LDG.E.U16 R7, [R2.64] ;                /* 0x0000000000000000 */
        /*0070*/                   STL [R1], R7 ;                         /* 0x0000000000000000 */
        /*0080*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], R24 ;   /* 0x0 */
        /*0090*/              @!P1 BRA 0x80 ;                             /* 0x0000000000000000 */
        /*00a0*/                   EXIT ;                                 /* 0x000000000000794d */
        /*00b0*/                   BRA 0xb0;                              /* 0xfffffff000007947 */
"""


def test_parse_listing():
    (name, ins), = sass.parse_sass(LISTING).items()
    assert name == "k" and len(ins) == 12
    assert ins[2].op == "HMMA" and ins[2].mods == ("16816", "F32")
    assert ins[5].pred == "@P0" and ins[5].target == 0x20
    assert ins[8].opcode == "HGMMA.64x128x16.F32"
    assert [sass.access_width(i) for i in ins if i.op in ("LDG", "LDGSTS")] == [128, 128, 16]


def test_macs_per_warp_instruction():
    ins = sass.parse_sass(LISTING)["k"]
    assert [sass.macs(i) for i in ins if sass.macs(i)] == [16 * 8 * 16, 32, 64 * 128 * 16 // 4]


def test_loops_and_main_loop():
    ins = sass.parse_sass(LISTING)["k"]
    lps = sass.loops(ins)                       # `BRA self` after EXIT is no loop
    assert [(lp.start, lp.end) for lp in lps] == [(2, 5), (8, 9)]
    main = sass.main_loop(ins)                  # the HGMMA loop has the most multiply-adds
    assert (main.start, main.end) == (8, 9)
    s = sass.summarize(ins)
    assert (s.total, s.hmma, s.local, s.loop_instrs) == (12, 1, 1, 2)
    assert dict(s.ldg_widths) == {128: 2, 16: 1}
    # one K-step = 64 x 128 x 16 / 4 multiply-adds per warp: the loop is one K-step
    assert s.per_k_step(64 * 128 * 16 // 4) == (2.0, 1.0)


# ptxas puts the retry loop of an mbarrier wait after the function's EXIT; its jump back into
# the loop body spans the EXIT and must not be taken for the main loop
OUT_OF_LINE_WAIT = """
		Function : w
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;
        /*0020*/              @!P0 BRA 0x80 ;
        /*0030*/                   HGMMA.64x64x16.F32 R24, gdesc[UR8], R24 ;
        /*0040*/                   FFMA R3, R4, R5, R3 ;
        /*0050*/               @P1 BRA 0x10 ;
        /*0060*/                   EXIT ;
        /*0070*/                   BRA 0x70;
        /*0080*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ;
        /*0090*/              @!P0 BRA 0x80 ;
        /*00a0*/                   BRA 0x30 ;
"""


def test_out_of_line_wait_retry_is_no_loop():
    ins = sass.parse_sass(OUT_OF_LINE_WAIT)["w"]
    assert [(lp.start, lp.end) for lp in sass.loops(ins)] == [(1, 5), (8, 9)]   # the retry
    main = sass.main_loop(ins)
    assert (main.start, main.end, main.macs) == (1, 5, 64 * 64 * 16 // 4 + 32)

def test_ptx_loop_lines():
    ptx = "\n".join([
        ".entry k() {",                 # 1
        "$L__BB0_1:",                   # 2  a loop without math
        "  add.s32 %r1, %r1, 1;",       # 3
        "  @%p1 bra $L__BB0_1;",        # 4
        "$L__BB0_2:",                   # 5  the main loop
        "  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f1};",
        "  @%p2 bra $L__BB0_2;",        # 7
        "  bra.uni $L__BB0_3;",         # 8  forward: no loop
        "$L__BB0_3:",                   # 9
        "  ret;", "}"])
    assert sass.ptx_loop_lines(ptx) == [5, 6, 7]
    assert sass.ptx_loop_lines(".entry k() {\n ret;\n}") == []


def test_ptx_block_after_ret_jumping_back_is_no_loop():
    # LLVM places a wait's retry block after `ret`; its jump back spans both loops of a split
    # loop (16 MMAs) but is no loop: the first real loop wins
    mma = "  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f1}, %rd1, %rd2, 1, 1, 1;"
    ptx = "\n".join([
        ".entry k() {",                 # 1
        "$L__BB0_1:",                   # 2  after the retry block
        "  add.s32 %r1, %r1, 1;",       # 3
        "$L__BB0_2:",                   # 4  the first loop
        mma, mma,                       # 5, 6
        "  @%p2 bra $L__BB0_2;",        # 7
        "$L__BB0_3:",                   # 8  the second loop
        mma, mma, "  add.s32 %r2, %r2, 1;",
        "  @%p3 bra $L__BB0_3;",        # 12
        "  ret;",                       # 13
        "$L__BB0_4:",                   # 14 the out-of-line retry
        "  bra.uni $L__BB0_1;", "}"])
    assert sass.ptx_loop_lines(ptx) == [4, 5, 6, 7]


@pytest.mark.skipif(not sass.tools_available(), reason="cuobjdump/nvdisasm wheels not installed")
def test_triton_fixture_sass():
    from tilelang.codegen.target.link import link_ptx
    ptx = (pathlib.Path(__file__).parents[1] / "emulator" / "fixtures" /
           "triton_matmul_sm80.ptx").read_text()
    link = link_ptx(ptx, get_target("sm_80"))
    ins = sass.disassemble(link.cubin)["tiled_matmul"]
    s = sass.summarize(ins)
    assert s.hmma > 0 and s.local == 0
    assert sass.resource_usage(link.cubin)["tiled_matmul"]["LOCAL"] == 0
    # 128 x 128 x 64 tile, 4 warps: 128 HMMA.16816 per warp per K-step, copies 16 bytes wide
    per = s.per_k_step(128 * 128 * 64 // 4)
    assert per is not None and per[1] == 128
    assert set(s.ldg_widths) == {128} and s.loop_ops["LDGSTS"] > 0


def test_ptx_with_line_table():
    ptx = "\n".join([
        ".version 8.0",                              # 1
        ".target sm_90a",                            # 2
        ".address_size 64",                          # 3
        ".file 1 \"x.tile\"",                        # 4  the text's own table is dropped
        ".visible .entry k() {",                     # 5
        "\t.loc 1 7 3",                              # 6
        "\tmov.u32 %r1, %tid.x;",                    # 7
        "$L__BB0_1:",                                # 8
        "\t@%p1 bra $L__BB0_1;",                     # 9
        "\tret;",                                    # 10
        "}"])
    out = sass.ptx_with_line_table(ptx).splitlines()
    assert out == [".version 8.0", ".target sm_90a", ".address_size 64",
                   '.file 1 "kernel.ptx"', "", ".visible .entry k() {", "",
                   "\t.loc 1 7 1", "\tmov.u32 %r1, %tid.x;", "$L__BB0_1:",
                   "\t.loc 1 9 1", "\t@%p1 bra $L__BB0_1;", "\t.loc 1 10 1", "\tret;", "}"]


# an `nvdisasm -g -c` listing: a loop at .L_x_0 whose lines 20/21 also appear in the block
# after it (the copy an unroll leaves), an early exit, and the `BRA self` padding
NVDISASM = """
	.section	.text.k,"ax",@progbits
k:
.text.k:
	//## File "kernel.ptx", line 10
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   ISETP.GE.AND P0, PT, R0, 0x40, PT ;
	//## File "kernel.ptx", line 12
        /*0020*/               @P0 EXIT ;
.L_x_0:
	//## File "kernel.ptx", line 20
        /*0030*/                   FADD R1, R1, 1 ;
	//## File "kernel.ptx", line 21
        /*0040*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0050*/              @!P1 BRA `(.L_x_0) ;
	//## File "kernel.ptx", line 20
        /*0060*/                   FADD R1, R1, 1 ;
	//## File "kernel.ptx", line 30
        /*0070*/                   EXIT ;
.L_x_1:
        /*0080*/                   BRA `(.L_x_1);
        /*0090*/                   NOP;
"""


def test_parse_nvdisasm_blocks_and_issued():
    (name, ins), = sass.parse_nvdisasm(NVDISASM).items()
    assert name == "k" and len(ins) == 10
    assert [li.line for li in ins] == [10, 10, 12, 20, 21, 21, 20, 30, 30, 30]
    assert ins[5].instr.target == 0x30 and ins[8].instr.target == 0x80
    blocks = sass.basic_blocks(ins)
    assert [[li.instr.addr for li in b] for b in blocks] == [
        [0x0, 0x10, 0x20], [0x30, 0x40, 0x50], [0x60, 0x70], [0x80], [0x90]]
    # the loop's lines ran 6 times per warp, the rest once: no line shared with a block
    # outside the loop that ran, so each block counts as its lines did (the padding: 0)
    got = sass.sass_issued(ins, {10: 4, 12: 4, 20: 0, 21: 0, 30: 0})
    assert got == sass.IssuedEstimate(3 * 4, True)
    # block [0x60, 0x70]: lines 20 and 30 tie at one instruction each; ties take the larger
    got = sass.sass_issued(ins, {10: 2, 12: 2, 20: 12, 21: 12, 30: 2})
    # the loop body shares line 20 with the block after it: flagged, counted per line with
    # its fewest instructions (line 10: 2, 12: 1, 20: 1, 21: 2, 30: 1 of the padding block)
    assert got == sass.IssuedEstimate(2 * 2 + 2 * 1 + 12 * 1 + 12 * 2 + 2 * 1, False)


# straight-line PTX: every SASS instruction but the padding issues once per warp
STRAIGHT = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry straight(.param .u64 p) {
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<4>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.f32 %f1, [%rd2];
    fma.rn.f32 %f2, %f1, %f1, 0f3F800000;
    st.global.f32 [%rd2], %f2;
    ret;
}
"""


@pytest.mark.skipif(not sass.tools_available(), reason="cuobjdump/nvdisasm wheels not installed")
def test_sass_issued_on_the_emulator():
    import numpy as np
    from tilelang.codegen.target.link import link_ptx
    from tilelang.emulator import EmulatorDevice
    target = get_target("sm_90a")
    plain = sass.disassemble(link_ptx(STRAIGHT, target).cubin)["straight"]
    lined = sass.disassemble_with_lines(link_ptx(sass.ptx_with_line_table(STRAIGHT), target,
                                                 extra_options=["-lineinfo"]).cubin)
    # the line table changes no instruction
    assert [i.opcode for i in plain] == [li.instr.opcode for li in lined["straight"]]
    assert all(li.line > 0 for li in lined["straight"])
    dev = EmulatorDevice()
    x = np.arange(96, dtype=np.float32)
    px = dev.to_device(x)
    rep = dev.launch(dev.load_module(STRAIGHT).get_function("straight"), (1, 1, 1),
                     (96, 1, 1), [px])
    np.testing.assert_array_equal(dev.from_device(px, (96,), np.float32), x * x + 1)
    assert sum(rep.issued_lines.values()) == rep.total_issued
    body = [i for i in plain if not (i.op == "BRA" and i.target == i.addr) and i.op != "NOP"]
    assert sass.sass_issued(lined["straight"], rep.issued_lines) == \
        sass.IssuedEstimate(3 * len(body), True)            # 3 warps
