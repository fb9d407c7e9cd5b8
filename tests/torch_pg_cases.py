"""Cases of torch.distributed backend "lpmpi" (issue 27), run under mpiexec by
tests/test_torch_backend.py: every ProcessGroup operation against a reference computed here,
on the world group and on a subgroup, sync and async, counts 0, 1, a prime and a large one,
every op / dtype pairing the backend takes.

    mpiexec -n P python tests/torch_pg_cases.py [--quick]
"""
from __future__ import annotations

import os
import sys
import traceback

for v in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):   # from MPI, not from here
    os.environ.pop(v, None)

import torch
import torch.distributed as dist

import lpmpi.torch

FAILS: list[str] = []
NCASES = 0
QUICK = "--quick" in sys.argv
COUNTS = (0, 1, 7) if QUICK else (0, 1, 7, 4099, 100003)
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INTS = (torch.int32, torch.int64, torch.int8, torch.uint8)


def case(name: str, fn) -> None:
    global NCASES
    NCASES += 1
    try:
        fn()
    except Exception:  # noqa: BLE001
        FAILS.append(f"FAIL rank={dist.get_rank()} case={name}: {traceback.format_exc(limit=4)}")
        print(FAILS[-1], flush=True)


def data(q: int, n: int, dt: torch.dtype, salt: int = 0) -> torch.Tensor:
    """Rank q's input: small values, so that sums and products are exact in every dtype."""
    i = torch.arange(n, dtype=torch.int64)
    v = (i * 7 + q * 3 + salt) % 5 + 1
    if dt == torch.bool:
        return (v % 2).to(torch.bool)
    return v.to(dt)


def reference(xs: list[torch.Tensor], op: str) -> torch.Tensor:
    acc = xs[0].to(torch.float64) if xs[0].is_floating_point() else xs[0].clone()
    for x in xs[1:]:
        y = x.to(acc.dtype)
        if op in ("sum", "avg"):
            acc = acc + y
        elif op == "prod":
            acc = acc * y
        elif op == "min":
            acc = torch.minimum(acc, y)
        elif op == "max":
            acc = torch.maximum(acc, y)
        elif op == "band":
            acc = acc & y
        elif op == "bor":
            acc = acc | y
        elif op == "bxor":
            acc = acc ^ y
    if op == "avg":
        acc = acc / len(xs)
    return acc.to(xs[0].dtype)


OPS = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "prod": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "band": dist.ReduceOp.BAND,
       "bor": dist.ReduceOp.BOR, "bxor": dist.ReduceOp.BXOR}


def pairs():
    for dt in FLOATS:
        for op in ("sum", "avg", "prod", "min", "max"):
            yield dt, op
    for dt in INTS:
        for op in ("sum", "prod", "min", "max", "band", "bor", "bxor"):
            yield dt, op


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        tol = 1e-2 if a.dtype in (torch.float16, torch.bfloat16) else 1e-6
        return torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)
    return torch.equal(a, b)


def run_async(work, async_op: bool):
    if async_op:
        assert work is not None
        work.wait()
        assert work.is_completed()
    else:
        assert work is None


def check_group(g, tag: str) -> None:
    P, r = dist.get_world_size(g), dist.get_rank(g)
    for dt, op in pairs():
        for n in COUNTS:
            if n > 5000 and (dt not in (torch.float32, torch.int32) or op not in ("sum", "max")):
                continue
            for async_op in (False, True):
                name = f"{tag} all_reduce {dt} {op} n={n} async={async_op}"

                def ar(dt=dt, op=op, n=n, async_op=async_op) -> None:
                    x = data(r, n, dt)
                    want = reference([data(q, n, dt) for q in range(P)], op)
                    run_async(dist.all_reduce(x, op=OPS[op], group=g, async_op=async_op), async_op)
                    assert close(x, want), (x[:6], want[:6])
                case(name, ar)

                def red(dt=dt, op=op, n=n, async_op=async_op) -> None:
                    x = data(r, n, dt)
                    want = reference([data(q, n, dt) for q in range(P)], op)
                    root = dist.get_global_rank(g, P - 1) if g is not None else P - 1
                    run_async(dist.reduce(x, root, op=OPS[op], group=g, async_op=async_op), async_op)
                    if r == P - 1:
                        assert close(x, want), (x[:6], want[:6])
                case(f"{tag} reduce {dt} {op} n={n} async={async_op}", red)

                def rs(dt=dt, op=op, n=n, async_op=async_op) -> None:
                    ins = [data(r, n, dt, salt=b) for b in range(P)]
                    want = reference([data(q, n, dt, salt=r) for q in range(P)], op)
                    out = torch.full((n,), 3).to(dt)
                    run_async(dist.reduce_scatter_tensor(out, torch.cat(ins), op=OPS[op], group=g,
                                                         async_op=async_op), async_op)
                    assert close(out, want), (out[:6], want[:6])
                    out2 = torch.zeros(n, dtype=dt)
                    run_async(dist.reduce_scatter(out2, ins, op=OPS[op], group=g, async_op=async_op),
                              async_op)
                    assert close(out2, want)
                if op != "avg" or dt.is_floating_point:
                    case(f"{tag} reduce_scatter {dt} {op} n={n} async={async_op}", rs)
    for dt in (*FLOATS, *INTS, torch.bool, torch.complex64):
        for n in COUNTS:
            for async_op in (False, True):
                def moves(dt=dt, n=n, async_op=async_op) -> None:
                    root_g = P - 1
                    root = dist.get_global_rank(g, root_g) if g is not None else root_g
                    b = data(r, n, dt, salt=11)
                    run_async(dist.broadcast(b, root, group=g, async_op=async_op), async_op)
                    assert torch.equal(b, data(root_g, n, dt, salt=11))
                    out = torch.empty(P * n, dtype=dt)
                    run_async(dist.all_gather_into_tensor(out, data(r, n, dt), group=g,
                                                          async_op=async_op), async_op)
                    assert torch.equal(out, torch.cat([data(q, n, dt) for q in range(P)]))
                    lst = [torch.empty(n, dtype=dt) for _ in range(P)]
                    run_async(dist.all_gather(lst, data(r, n, dt), group=g, async_op=async_op), async_op)
                    assert all(torch.equal(lst[q], data(q, n, dt)) for q in range(P))
                    # in place, FSDP2's way: the input is the output's block r
                    buf = torch.zeros(P * n, dtype=dt)
                    buf[r * n:(r + 1) * n] = data(r, n, dt)
                    dist.all_gather_into_tensor(buf, buf[r * n:(r + 1) * n], group=g)
                    assert torch.equal(buf, torch.cat([data(q, n, dt) for q in range(P)]))
                    gl = [torch.empty(n, dtype=dt) for _ in range(P)] if r == root_g else None
                    run_async(dist.gather(data(r, n, dt, 5), gl, dst=root, group=g,
                                          async_op=async_op), async_op)
                    if r == root_g:
                        assert all(torch.equal(gl[q], data(q, n, dt, 5)) for q in range(P))
                    sc = torch.empty(n, dtype=dt)
                    sl = [data(q, n, dt, 9) for q in range(P)] if r == root_g else None
                    run_async(dist.scatter(sc, sl, src=root, group=g, async_op=async_op), async_op)
                    assert torch.equal(sc, data(r, n, dt, 9))
                    # all_to_all_single, even and uneven splits
                    src = torch.cat([data(r, n, dt, salt=q) for q in range(P)])
                    dst = torch.empty(P * n, dtype=dt)
                    run_async(dist.all_to_all_single(dst, src, group=g, async_op=async_op), async_op)
                    assert torch.equal(dst, torch.cat([data(q, n, dt, salt=r) for q in range(P)]))
                    ins = [data(r, (q + r) % 3 + n, dt, salt=q) for q in range(P)]
                    outs = [torch.empty((r + q) % 3 + n, dtype=dt) for q in range(P)]
                    o = torch.empty(sum(t.numel() for t in outs), dtype=dt)
                    run_async(dist.all_to_all_single(o, torch.cat(ins), [t.numel() for t in outs],
                                                     [t.numel() for t in ins], group=g,
                                                     async_op=async_op), async_op)
                    assert torch.equal(o, torch.cat([data(q, (r + q) % 3 + n, dt, salt=r) for q in range(P)]))
                    run_async(dist.all_to_all(outs, ins, group=g, async_op=async_op), async_op)
                    assert all(torch.equal(outs[q], data(q, (r + q) % 3 + n, dt, salt=r)) for q in range(P))
                case(f"{tag} bcast/allgather/gather/scatter/alltoall {dt} n={n} async={async_op}", moves)

                def uneven(dt=dt, n=n, async_op=async_op) -> None:
                    # list forms with different sizes per rank: allgatherv, reduce_scatter with counts
                    sizes = [(q * 3 + 1) % 4 + n for q in range(P)]
                    lst = [torch.full((sizes[q],), 7).to(dt) for q in range(P)]
                    run_async(dist.all_gather(lst, data(r, sizes[r], dt, 3), group=g, async_op=async_op), async_op)
                    assert all(torch.equal(lst[q], data(q, sizes[q], dt, 3)) for q in range(P))
                    if dt == torch.bool:
                        return
                    ins = [data(r, sizes[q], dt, salt=q) for q in range(P)]
                    out = torch.zeros(sizes[r], dtype=dt)
                    run_async(dist.reduce_scatter(out, ins, op=dist.ReduceOp.SUM, group=g, async_op=async_op),
                              async_op)
                    assert close(out, reference([data(q, sizes[r], dt, salt=r) for q in range(P)], "sum"))
                case(f"{tag} uneven all_gather/reduce_scatter {dt} n={n} async={async_op}", uneven)

    def p2p() -> None:
        if P < 2:
            return
        peer = (r + 1) % P
        gpeer = dist.get_global_rank(g, peer) if g is not None else peer
        gprev = dist.get_global_rank(g, (r - 1) % P) if g is not None else (r - 1) % P
        got = torch.empty(13)
        w = dist.isend(torch.full((13,), float(r)), gpeer, group=g)
        dist.recv(got, gprev, group=g)
        w.wait()
        assert torch.equal(got, torch.full((13,), float((r - 1) % P)))
    case(f"{tag} send/recv", p2p)

    def misc() -> None:
        dist.barrier(group=g)
        objs = [None] * P
        dist.all_gather_object(objs, {"r": r, "s": "x" * r}, group=g)
        assert objs == [{"r": q, "s": "x" * q} for q in range(P)]
        lst = [r if r == 0 else None]
        dist.broadcast_object_list(lst, src=dist.get_global_rank(g, 0) if g is not None else 0, group=g)
        assert lst == [0]
        # PREMUL_SUM (FSDP2 with a divide factor), coalesced all_reduce
        x = torch.full((5,), float(r + 1))
        dist.all_reduce(x, op=dist.ReduceOp.PREMUL_SUM(0.5), group=g)
        assert torch.allclose(x, torch.full((5,), 0.5 * sum(q + 1 for q in range(P))))
        ts = [torch.full((3,), float(r)), torch.full((2, 2), 1.0)]
        with dist._coalescing_manager(group=g):
            for t in ts:
                dist.all_reduce(t, group=g)
        assert torch.equal(ts[0], torch.full((3,), float(sum(range(P)))))
        assert torch.equal(ts[1], torch.full((2, 2), float(P)))
        # non-contiguous tensors come back where they were
        m = torch.arange(12.0).reshape(3, 4) + r
        col = m[:, 1]
        dist.all_reduce(col, group=g)
        assert torch.equal(m[:, 1], sum(torch.arange(12.0).reshape(3, 4)[:, 1] + q for q in range(P)))
        assert torch.equal(m[:, 0], torch.arange(12.0).reshape(3, 4)[:, 0] + r), "neighbours written"
        fut = dist.all_reduce(torch.ones(4), group=g, async_op=True).get_future()
        assert torch.equal(fut.wait()[0], torch.full((4,), float(P)))
    case(f"{tag} barrier/objects/premul/coalesced/strided/future", misc)


def check_errors() -> None:
    def meta() -> None:
        try:
            dist.all_reduce(torch.empty(4, device="meta"))
        except RuntimeError as e:
            assert "all_reduce" in str(e) or "allreduce" in str(e), e
            assert "meta" in str(e), e
        else:
            raise AssertionError("no error for a tensor that is not on the CPU")
    case("error: device tensor", meta)

    def avg_int() -> None:
        x = torch.ones(3, dtype=torch.int32)
        try:
            dist.all_reduce(x, op=dist.ReduceOp.AVG)
        except (TypeError, ValueError, RuntimeError) as e:
            assert "avg" in str(e).lower(), e
        else:
            raise AssertionError("AVG of int32 was accepted")
        assert torch.equal(x, torch.ones(3, dtype=torch.int32)), "written"
    case("error: AVG of integers", avg_int)

    def list_size() -> None:
        P = dist.get_world_size()
        outs = [torch.zeros(2) for _ in range(P + 1)]
        try:
            dist.all_gather(outs, torch.ones(2))
        except ValueError as e:
            assert "all_gather" in str(e) and "output" in str(e), e
        else:
            raise AssertionError("a list of P + 1 outputs was accepted")
        assert all(torch.equal(o, torch.zeros(2)) for o in outs), "written"
    case("error: all_gather list of the wrong length", list_size)


def main() -> int:
    dist.init_process_group("lpmpi")
    P, r = dist.get_world_size(), dist.get_rank()
    assert dist.get_backend() == "lpmpi"
    assert dist.group.WORLD.getBackendName() == "lpmpi" if hasattr(dist.group.WORLD, "getBackendName") else True
    check_group(None, "world")
    if P >= 2:      # a subgroup of every rank but the first; rank 0 waits for it in a barrier
        sub = dist.new_group(list(range(1, P)))
        if r >= 1:
            check_group(sub, "sub")
        dist.barrier()
    check_errors()

    def options() -> None:     # a group with lpmpi's own algorithm and chunk, of every rank
        g = dist.new_group(list(range(P)), pg_options=lpmpi.torch.Options(algorithm="lp",
                                                                          chunk_bytes=1024))
        x = data(r, 10007, torch.float32)
        dist.all_reduce(x, group=g)
        assert torch.equal(x, reference([data(q, 10007, torch.float32) for q in range(P)], "sum"))
        h = data(r, 999, torch.bfloat16)
        dist.all_reduce(h, group=g, op=dist.ReduceOp.AVG)
        assert close(h, reference([data(q, 999, torch.bfloat16) for q in range(P)], "avg"))
        assert g._kw == {"algorithm": "lp", "chunk_bytes": 1024}, g._kw
    case("Options(algorithm, chunk_bytes) on a new group", options)
    nf = torch.tensor([len(FAILS)])
    dist.all_reduce(nf)
    world = dist.group.WORLD
    dist.destroy_process_group()
    assert world._comm is None, "the group's communicator outlived destroy_process_group"
    dist.init_process_group("lpmpi")          # again, after the first world was freed
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), float(P))), x
    dist.destroy_process_group()
    if r == 0:
        print(f"SUMMARY suite=torch_pg P={P} cases={NCASES} failures={int(nf)}", flush=True)
    return 1 if int(nf) else 0


if __name__ == "__main__":
    sys.exit(main())
