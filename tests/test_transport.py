"""The node-local transport (single-copy process_vm_readv reads for the ring allreduce between
the ranks of one node): the contract with it on and off (LPMPI_NODE_TRANSPORT=mpi), the same
bits as ring over MPI, what info and explain say, and the fallback where it is unavailable
(several emulated nodes, one rank)."""
import shutil
import sys
import textwrap

import pytest
from _mpi import child_env, mpiexec, run, run_suite

pytestmark = pytest.mark.mpi

DIGEST = textwrap.dedent("""
    import hashlib, sys
    import numpy as np, lpmpi
    from lpmpi import _core
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    h = hashlib.sha1()
    for n in (1, 5, 1000, 5000, 123457):
        for op in ("sum", "avg", "prod", "max"):
            for dt in (np.float32, np.float64, np.float16, np.int32, np.complex64):
                if (op == "avg" and dt == np.int32) or (op == "max" and dt == np.complex64):
                    continue
                x = (np.random.default_rng(w.rank * 7 + n).standard_normal(n) * 3).astype(dt)
                for cb in (None, 1024):
                    y = lpmpi.allreduce(x, op=op, algorithm="ring", chunk_bytes=cb)
                    h.update(y.tobytes())
                    z = x.copy()
                    lpmpi.allreduce(lpmpi.IN_PLACE, z, op=op, algorithm="ring", chunk_bytes=cb)
                    assert z.tobytes() == y.tobytes(), (n, op, dt, cb)
                    r = lpmpi.iallreduce(x, op=op, algorithm="ring", chunk_bytes=cb).wait()
                    assert r.tobytes() == y.tobytes(), (n, op, dt, cb)
    # several outstanding requests (the shared segment's rounds in start order), waited for
    # in reverse, and a persistent one started twice
    xs = [(np.random.default_rng(w.rank + n).standard_normal(n)).astype(np.float32)
          for n in (3000, 70000, 1 << 18)]
    want = [lpmpi.allreduce(x, algorithm="ring", chunk_bytes=4096) for x in xs]
    reqs = [lpmpi.iallreduce(x, algorithm="ring", chunk_bytes=4096) for x in xs]
    for q, y in zip(reversed(reqs), reversed(want)):
        assert q.wait().tobytes() == y.tobytes()
    out = np.empty_like(xs[1])
    p = lpmpi.allreduce_init(xs[1], out, algorithm="ring", chunk_bytes=4096)
    for _ in range(2):
        p.start()
        q = lpmpi.iallreduce(xs[2], algorithm="ring", chunk_bytes=4096)
        p.wait()
        assert out.tobytes() == want[1].tobytes() and q.wait().tobytes() == want[2].tobytes()
    for y in want:
        h.update(y.tobytes())
    # from 32 MiB the shared-memory transport writes the result with non-temporal stores; the
    # model's rule leaves those sizes to the others, so the big calls ask for the transport
    # (as a table row would: FORCE, where the environment forced one)
    import contextlib, os
    force = os.environ.get("FORCE")
    stack = contextlib.ExitStack()
    stack.enter_context(lpmpi.engine.transport(force))
    big = np.random.default_rng(w.rank).standard_normal((32 << 20) // 4 + 3).astype(np.float32)
    yb = lpmpi.allreduce(big, algorithm="ring")
    h.update(yb.tobytes())
    zb = big.copy()                                     # in place: plain stores there
    lpmpi.allreduce(lpmpi.IN_PLACE, zb, algorithm="ring")
    assert zb.tobytes() == yb.tobytes()
    # float64 there too (its one-pass sum with streaming stores), into a recvbuf off the
    # vector alignment
    bigd = np.random.default_rng(w.rank + 9).standard_normal((32 << 20) // 8 + 5)
    outd = np.empty(bigd.size + 1)[1:]
    lpmpi.allreduce(bigd, outd, algorithm="ring")
    h.update(outd.tobytes())
    stack.close()
    d = w.allgather(h.hexdigest())
    assert len(set(d)) == 1, d
    if w.rank == 0:
        sys.stdout.write(f"DIGEST {_core.comm_transport()[0]} {d[0]}\\n")
    """)


def digest(nprocs, env):
    rc, out, _ = run([mpiexec(), "-n", str(nprocs), sys.executable, "-c", DIGEST], child_env(env), 240)
    assert rc == 0, out[-6000:]
    line = [ln for ln in out.splitlines() if ln.startswith("DIGEST")]
    assert line, out[-3000:]
    return line[0].split()[1:]


@pytest.mark.parametrize("nprocs", (2, 3, 5), ids=lambda p: f"P{p}")
def test_ring_over_the_node_transport_gives_the_bits_of_ring_over_mpi(nprocs):
    off = digest(nprocs, {"LPMPI_NODE_TRANSPORT": "mpi"})
    assert off[0] == "mpi"
    on = digest(nprocs, {})
    assert on[0].startswith("shm"), "the shared-memory transport is off on one host"
    assert on[1] == off[1]
    shm = digest(nprocs, {"LPMPI_NODE_TRANSPORT": "shm", "FORCE": "shm"})
    assert shm == ["shm", off[1]]
    cma = digest(nprocs, {"LPMPI_NODE_TRANSPORT": "cma", "FORCE": "cma"})
    if cma[0] != "cma":
        pytest.skip("process_vm_readv is refused here (ptrace permissions): nothing to compare")
    assert cma[1] == off[1]


@pytest.mark.parametrize("form", ["blocking", "nonblocking", "persistent"])
@pytest.mark.parametrize("nprocs", (2, 3), ids=lambda p: f"P{p}")
def test_contract_with_the_node_transport_off(nprocs, form):
    run_suite("allreduce", nprocs, "--stride", "3", "--form", form,
              env={"LPMPI_NODE_TRANSPORT": "mpi"}, timeout=400)


@pytest.mark.parametrize("form", ["blocking", "nonblocking"])
@pytest.mark.parametrize("nt", ["shm", "cma"])
def test_contract_with_one_transport_forced(nt, form):
    """auto takes shared memory or single-copy reads by size; each alone at every size."""
    run_suite("allreduce", 3, "--stride", "3", "--form", form, "--filter", "ring",
              env={"LPMPI_NODE_TRANSPORT": nt}, timeout=400)


@pytest.mark.parametrize("nprocs", (4, 5), ids=lambda p: f"P{p}")
def test_contract_at_more_ranks_with_the_transport_on(nprocs):
    run_suite("allreduce", nprocs, "--stride", "4", "--filter", "ring", timeout=400)


def test_info_and_explain_say_which_transport(tmp_path):
    code = ("import lpmpi, numpy as np; from lpmpi import _core; from mpi4py import MPI; "
            "assert lpmpi.explain('allreduce', 1 << 20).transport.startswith('not known yet'); "
            "lpmpi.allreduce(np.ones(3)); "
            "e = lpmpi.explain('allreduce', 1 << 20); t = _core.comm_transport(); "
            "assert e.transport.startswith(t[0]) and 'node-local transport' in str(e), e; "
            "rt = _core.ring_transport(None, 65536); assert (rt == 'mpi') == (t[0] == 'mpi'), rt; "
            "assert _core.ring_transport(None, 8) == 'mpi'; "
            # the model's size rule where both are in use (internal.h, lp_ring_transport; model.c)
            "rule = [_core.ring_transport(None, n << 10, None) for n in (2, 4, 8, 16, 1024, 65536)]; "
            "assert t[0] != 'shm+cma' or rule == ['mpi', 'shm', 'shm', 'cma', 'cma', 'cma'], rule; "
            # what a table row or the override asks for, where the communicator has it
            "asked = [_core.ring_transport(None, 64 << 20, x) for x in ('shm', 'cma', 'mpi')]; "
            "assert t[0] != 'shm+cma' or asked == ['shm', 'cma', 'mpi'], asked; "
            "assert t[0] != 'mpi' or asked == ['mpi'] * 3, asked; "
            # the shared-memory segment serves the rows that say so (allreduce, allgather,
            # reduce_scatter), not reduce's and bcast's (they have no ring): the same size rule
            "ag = [_core.ring_transport(None, n << 10, x, 'allgather') for n, x in ((8, None), (8, 'shm'), (64, None))]; "
            "assert t[0] != 'shm+cma' or ag == ['shm', 'shm', 'cma'], ag; "
            "from lpmpi import engine; assert engine.ring_transports('allgather') == ('mpi', 'shm', 'cma'); "
            "assert engine.ring_transports('reduce_scatter') == ('mpi', 'shm', 'cma'); "
            "assert engine.ring_transports('allreduce') == ('mpi', 'shm', 'cma'); "
            "import sys; sys.stdout.write('T ' + t[0] + '\\n')")
    for env, want in (({}, None), ({"LPMPI_NODE_TRANSPORT": "mpi"}, "mpi"),
                      ({"MPIR_CVAR_NUM_CLIQUES": "2"}, "mpi")):
        rc, out, _ = run([mpiexec(), "-n", "2", sys.executable, "-c", code], child_env(env), 60)
        assert rc == 0, out[-4000:]
        got = {ln.split()[1] for ln in out.splitlines() if ln.startswith("T ")}
        assert len(got) == 1 and (want is None or got == {want}), (env, got)
        rc, out, _ = run([mpiexec(), "-n", "2", sys.executable, "-m", "lpmpi", "info"], child_env(env), 60)
        assert rc == 0 and "node-local transport: " in out, out[-3000:]
        if want:
            assert f"node-local transport: {want} (off:" in out, out[-3000:]


CALLS = textwrap.dedent("""
    import sys
    import numpy as np, lpmpi
    from mpi4py import MPI
    kib, form = int(sys.argv[1]), sys.argv[2]
    x = np.full((kib << 10) // 4, MPI.COMM_WORLD.rank + 1, np.float32)
    lpmpi.allreduce(np.ones(3))                     # prepares the communicator (probes included)
    if form == "inplace":
        lpmpi.allreduce(lpmpi.IN_PLACE, x, algorithm="ring")
    else:
        x = lpmpi.allreduce(x, algorithm="ring")
    assert (x == 3).all()
    """)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_calls_take_the_transport_of_the_size_rule_in_both_forms(tmp_path):
    """The model's rule as the calls apply it: at 8 KiB the shared-memory slots (no
    process_vm_readv of the peer's data after the probes), at 8 MiB single-copy reads, in place
    and out of place."""
    if _transport_name() != "shm+cma":
        pytest.skip("both transports are not in use here")
    script = tmp_path / "calls.py"
    script.write_text(CALLS)
    reads = {}
    for kib in (8, 8192):
        for form in ("inplace", "out"):
            trace = tmp_path / f"trace.{kib}.{form}"
            cmd = [mpiexec(), "-n", "2", "strace", "-f", "-qq", "-e", "trace=process_vm_readv", "-s", "0",
                   "-o", str(trace), sys.executable, str(script), str(kib), form]
            rc, out, _ = run(cmd, child_env(), 120)
            if rc != 0 and "ptrace" in out.lower():
                pytest.skip(f"strace cannot trace here: {out[-300:]}")
            assert rc == 0, out[-3000:]
            lines = [ln for f in tmp_path.glob(f"trace.{kib}.{form}*") for ln in f.read_text().splitlines()]
            # the probes read 8-16 bytes; a transfer reads at least 1 KiB
            reads[kib, form] = sum(1 for ln in lines if "process_vm_readv(" in ln and _read_bytes(ln) >= 1024)
    assert all((n > 0) == (kib == 8192) for (kib, _), n in reads.items()), reads


def _transport_name() -> str:
    code = ("import lpmpi, numpy as np; from lpmpi import _core; from mpi4py import MPI; "
            "lpmpi.allreduce(np.ones(3)); t = _core.comm_transport()[0]; "
            "MPI.COMM_WORLD.rank == 0 and print('T', t, flush=True)")   # one rank: no interleaving
    rc, out, _ = run([mpiexec(), "-n", "2", sys.executable, "-c", code], child_env(), 60)
    names = [ln.split()[1] for ln in out.splitlines() if ln.startswith("T ")]
    assert rc == 0 and names, out[-2000:]
    return names[0]


def _read_bytes(line: str) -> int:
    """The return value (bytes read) of one strace line, -1 where it failed or is unfinished."""
    tail = line.rsplit("=", 1)
    try:
        return int(tail[1].split()[0]) if len(tail) == 2 else -1
    except ValueError:
        return -1


NO_ROOM = textwrap.dedent("""
    import sys
    import numpy as np, lpmpi
    from lpmpi import _core
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    _core._test_shm_named("named" in sys.argv)         # the segment in /dev/shm, not a memfd
    x = np.random.default_rng(w.rank).standard_normal((1 << 20) + 3).astype(np.float32)
    y = lpmpi.allreduce(x, algorithm="ring")            # 4 MiB: the transport's sizes
    z = lpmpi.allreduce(x, algorithm="ring", chunk_bytes=4096)
    assert y.tobytes() == z.tobytes()
    want = w.allreduce(x.astype(np.float64), op=MPI.SUM)
    assert np.allclose(y, want, rtol=1e-5, atol=1e-5)
    name, why = _core.comm_transport()
    if w.rank == 0:
        sys.stdout.write(f"T {name} | {why}\\n")
    """)


def _small_dev_shm(size: str) -> list[str]:
    """A command prefix running the rest with a private /dev/shm of `size` (a new mount
    namespace), as in a container whose /dev/shm is small."""
    return ["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$@"', "sh"]


@pytest.mark.parametrize("nt", ["auto", "shm"])
def test_small_dev_shm_does_not_matter_to_memory_files(nt):
    """The segment is a memory file (memfd) the peers open through /proc: a 3 MiB /dev/shm does
    not limit it, and it has no name a kill could leave behind."""
    import subprocess

    if not shutil.which("unshare") or subprocess.run(_small_dev_shm("1m") + ["true"], capture_output=True,
                                                     timeout=30, check=False).returncode != 0:
        pytest.skip("cannot mount a private /dev/shm here (unshare -m and mount need CAP_SYS_ADMIN)")
    cmd = _small_dev_shm("3m") + [mpiexec(), "-n", "2", sys.executable, "-c", NO_ROOM]
    rc, out, _ = run(cmd, child_env({"LPMPI_NODE_TRANSPORT": nt}), 120)
    assert rc == 0, out[-4000:]
    line = [ln for ln in out.splitlines() if ln.startswith("T ")]
    assert line, out[-3000:]
    name, why = line[0][2:].split(" | ")
    assert name in ("shm", "shm+cma") and "in use" in why, why


@pytest.mark.parametrize("nt", ["auto", "shm"])
def test_no_room_in_dev_shm_falls_back_instead_of_crashing(nt):
    """A /dev/shm too small for the segment (3 MiB: MPICH's own segment fits, lpmpi's 4 MiB at
    P = 2 does not): the pages are reserved when the segment is made, so the transport is
    refused there and the ring runs over single-copy reads or MPI, with the right result; before,
    the first store into a page tmpfs could not supply killed the ranks with SIGBUS."""
    import subprocess

    if not shutil.which("unshare") or subprocess.run(_small_dev_shm("1m") + ["true"], capture_output=True,
                                                     timeout=30, check=False).returncode != 0:
        pytest.skip("cannot mount a private /dev/shm here (unshare -m and mount need CAP_SYS_ADMIN)")
    cmd = _small_dev_shm("3m") + [mpiexec(), "-n", "2", sys.executable, "-c", NO_ROOM, "named"]
    rc, out, _ = run(cmd, child_env({"LPMPI_NODE_TRANSPORT": nt}), 120)
    assert rc == 0, out[-4000:]
    line = [ln for ln in out.splitlines() if ln.startswith("T ")]
    assert line, out[-3000:]
    name, why = line[0][2:].split(" | ")
    assert "could not be made" in why, why
    assert "posix_fallocate" in why or "ftruncate" in why or "another rank" in why, why
    assert name == ("mpi" if nt == "shm" else "cma") or (nt == "auto" and name == "mpi" and "refused" in why), why


LP_RELAYED = textwrap.dedent("""
    import numpy as np, lpmpi
    from mpi4py import MPI
    w = MPI.COMM_WORLD
    # lp in place: where a final chunk would land in lines this rank has just sent up the chain
    # to a rank of its node (the tail in place, the middle ranks of allreduce), it comes through
    # W slots and a streaming copy (alg_lp.c relayed()); many chunks (the slots wrap), a chunk
    # not dividing the count, AVG (the head divides), float64 and float16; the bits of out of
    # place, the same on every rank
    for n, dt, op, cb in ((100003, np.float32, "sum", 4096), (70001, np.float64, "avg", 8192),
                          (33333, np.float16, "sum", 2048), (5, np.float32, "max", 4)):
        x = (np.random.default_rng(w.rank * 11 + n).standard_normal(n) * 2).astype(dt)
        want = lpmpi.allreduce(x, op=op, algorithm="lp", chunk_bytes=cb)
        z = x.copy()
        lpmpi.allreduce(lpmpi.IN_PLACE, z, op=op, algorithm="lp", chunk_bytes=cb)
        assert z.tobytes() == want.tobytes(), (n, dt, op, cb)
        q = x.copy()
        lpmpi.iallreduce(lpmpi.IN_PLACE, q, op=op, algorithm="lp", chunk_bytes=cb).wait()
        assert q.tobytes() == want.tobytes(), (n, dt, op, cb)
        ref = w.allgather(want.tobytes())
        assert all(b == ref[0] for b in ref), (n, dt, op, cb)
    print("RELAYED OK", flush=True)
""")


@pytest.mark.parametrize("nodes", ("one", "two"))
@pytest.mark.parametrize("nprocs", (2, 3, 4), ids=lambda p: f"P{p}")
def test_lp_in_place_through_slots_gives_the_bits_of_out_of_place(nprocs, nodes):
    env = {"LPMPI_WINDOW": "2"}
    if nodes == "two":
        env["MPIR_CVAR_NUM_CLIQUES"] = "2"
    rc, out, _ = run([mpiexec(), "-n", str(nprocs), sys.executable, "-c", LP_RELAYED], child_env(env), 240)
    assert rc == 0 and "RELAYED OK" in out, out[-6000:]
