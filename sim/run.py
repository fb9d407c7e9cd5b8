"""Run lpmpi's C engine on simulated platforms (SimGrid SMPI) and, for calibration, for real here.

    python sim/run.py build                      # make -C sim (smpicc and mpicc drivers)
    python sim/run.py fattree                    # fat-tree, 100 Gb/s, P = 2 .. 1024, 64 MiB
    python sim/run.py pcie8                      # 8 GPUs behind PCIe switches, P = 2 .. 8
    python sim/run.py here                       # this machine: measured (mpiexec) and simulated
    python sim/run.py box                        # the cluster in a box (1 Gbit/s NICs), N = 2, 3, 4 nodes
    python sim/run.py box --layout 2,2           # 2 nodes of 2 ranks (ranks per node, hostfile order)
    python sim/run.py box100g --P 8,64           # the same nodes with 100 Gbit/s NICs
    python sim/run.py fattree --P 8,1024 --algs lp,mst --timeout 1800

Each run appends rows to sim/results/<platform>.json (same key = replaced): one row per
(collective, label, P, bytes, layout) with ``kind`` = "simulated" (SMPI; MPI_Wtime is simulated time)
or "measured" (real MPI on this machine), the median over repetitions, algbw and busbw.

Labels: ``lp``, ``mst``, ``be``, ``ring`` are lpmpi's algorithms (src/, unchanged, built with
smpicc); ``smpi-mpich`` and ``smpi-ompi`` are SMPI's own implementations of MPICH's and Open
MPI's collective selection (``--cfg=smpi/<coll>:mpich`` / ``:ompi``), reached through lpmpi's
``native`` algorithm (which calls MPI_Allreduce).

Simulation settings, the same for every algorithm (SMPI_CFG below):
- network: SMPI's flow model with its piecewise latency/bandwidth factors set to 1 (pure
  latency + size / bandwidth per link, max-min sharing of links between concurrent flows),
  no cross-traffic (no TCP ACK stream: an RDMA-like network), every send rendezvous
  (send-is-detached-thresh 0);
- computation: not simulated (smpi/simulate-computation:no): local work between MPI calls takes
  no simulated time, for lpmpi and SMPI alike.  SMPI's own collectives do not charge their
  reductions either, so reductions are free for everyone (gamma = 0): the comparison is of
  communication only.  ``--charge-gamma`` (lpmpi's algorithms only) adds a reduction cost;
- MPI_Test costs no simulated time (smpi/test:0; SMPI's default of 100 us per call models a
  polling loop, while lpmpi waits in MPI_Waitany whenever nothing moved);
- buffers are SMPI shared memory (SMPI_SHARED_MALLOC): contents are meaningless, lpmpi's kernels
  are not executed (the --verify runs in `python sim/run.py verify` do execute and check them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIM = Path(__file__).resolve().parent
ROOT = SIM.parent
BUILD = SIM / "build"
RESULTS = SIM / "results"
PLATFORMS = SIM / "platforms"

SMPI_CFG = [
    "--cfg=smpi/simulate-computation:no",
    # smpi_execute(d) runs d * host-speed flops on the host: with the platforms' 1 Gflop/s hosts
    # this makes --charge-gamma's d seconds cost d (SMPI's default, 20 kflop/s, made it ~0)
    "--cfg=smpi/host-speed:1000000000",
    "--cfg=smpi/test:0",
    "--cfg=smpi/bw-factor:0:1",
    "--cfg=smpi/lat-factor:0:1",
    "--cfg=network/crosstraffic:0",
    "--cfg=smpi/send-is-detached-thresh:0",
    "--cfg=smpi/shared-malloc:global",
    "--cfg=smpi/shared-malloc-blocksize:67108864",  # one mapping per 64 MiB buffer (vm.max_map_count)
    "--log=root.thres:critical",
]
MIB = 1 << 20

# platform: file, host names, model given to lp_model_set (sets lpmpi's chunk), defaults
PLATFORM = {
    "fattree": {
        "xml": PLATFORMS / "fattree1024.xml",
        "hosts": [f"n{i}" for i in range(1024)],
        "alpha": 1e-6,  # end to end through the spine (4 links of 250 ns)
        "beta": 1 / 12.5e9,  # 100 Gb/s
        "P": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
        "sizes": [64 * MIB],
    },
    "pcie8": {
        "xml": PLATFORMS / "pcie8.xml",
        "hosts": [f"g{i}" for i in range(8)],
        "alpha": 6e-6,  # across two switches (4 links of 1.5 us)
        "beta": 1 / 10e9,
        "P": [2, 3, 4, 5, 6, 7, 8],
        "sizes": [MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB],
    },
    # the cluster in a box (lpmpi.cluster, issue 38): 1 Gbit/s NICs into a non-blocking switch,
    # 6 us a message.  The model given to the engine (it sets lp's chunk): the node-local
    # alpha/beta/gamma the box's engine had (the shipped table of the AMD EPYC VM, as
    # lpmpi._core.model_get() reads there) and the network term the box measured
    # (lpmpi.model.fit: alpha_net 6 us, 125 MB/s per NIC); the box's own runs had the engine's
    # default network term instead (25 us, 1.25 GB/s): `--as-run` simulates with that one
    "box": {
        "xml": PLATFORMS / "box.xml",
        "hosts": [f"b{i}" for i in range(1024)],
        "alpha": 2.24e-6, "beta": 1.42e-10, "gamma": 1.02e-10,
        "alpha_net": 6e-6, "beta_net": 1 / 125e6,
        "P": [2, 3, 4],
        "sizes": [MIB, 16 * MIB, 64 * MIB],
    },
    "box100g": {  # box.xml with 100 Gbit/s NICs (a projection; nothing measured)
        "xml": PLATFORMS / "box100g.xml",
        "hosts": [f"b{i}" for i in range(1024)],
        "alpha": 2.24e-6, "beta": 1.42e-10, "gamma": 1.02e-10,
        "alpha_net": 6e-6, "beta_net": 1 / 12.5e9,
        "P": [8, 16, 64, 256],
        "sizes": [16 * MIB, 64 * MIB],
    },
    "here": {  # written by `here` from the measured alpha, beta (platforms/here.xml)
        "xml": PLATFORMS / "here.xml",
        "hosts": [f"h{i}" for i in range(8)],
        "P": [2, 3, 4],
        "sizes": [MIB, 16 * MIB, 64 * MIB],
    },
}
LPMPI_ALGS = {"allreduce": ["lp", "mst", "be", "ring"], "reduce": ["lp", "mst", "be"], "bcast": ["lp", "mst", "be"]}
SELECTORS = ["mpich", "ompi"]


def simgrid_version() -> str:
    try:
        out = subprocess.run(["smpirun", "-version"], capture_output=True, text=True, timeout=30, check=False)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def build() -> None:
    subprocess.run(["make", "-C", str(SIM)], check=True)


def parse_lpsim(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("LPSIM ")]


def hosts_for(platform: str, nprocs: int, layout: list[int] | None = None) -> list[str]:
    """One host per rank, in rank order: the platform's first nprocs hosts, or with ``layout``
    (ranks per node, e.g. [2, 2]) host i named layout[i] times (ranks in blocks by node)."""
    hosts = PLATFORM[platform]["hosts"]
    if not layout:
        return hosts[:nprocs]
    return [hosts[i] for i, k in enumerate(layout) for _ in range(k)]


def smpirun(platform: str, nprocs: int, args: list[str], extra_cfg: list[str], timeout: float,
            layout: list[int] | None = None) -> tuple[list[dict], float, str]:
    p = PLATFORM[platform]
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
        f.write("\n".join(hosts_for(platform, nprocs, layout)) + "\n")
        hostfile = f.name
    cmd = ["smpirun", "-np", str(nprocs), "-platform", str(p["xml"]), "-hostfile", hostfile, *SMPI_CFG,
           *extra_cfg, str(BUILD / "lpsim-smpi"), *args]
    t0 = time.monotonic()
    # a session of its own: on a timeout the whole group goes (smpirun is a script; killing it
    # alone leaves its smpimain running)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tempfile.gettempdir(), start_new_session=True)
    try:
        out_s, err_s = proc.communicate(timeout=timeout)
        out = out_s + err_s
        rows = parse_lpsim(out_s)
        if proc.returncode != 0:
            print(f"  smpirun failed ({proc.returncode}): {' '.join(cmd)}\n{out[-2000:]}", file=sys.stderr)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        out_s, _ = proc.communicate()
        rows = parse_lpsim(out_s or "")
        print(f"  TIMEOUT after {timeout:.0f} s: {' '.join(cmd)}", file=sys.stderr)
    finally:
        os.unlink(hostfile)
    return rows, time.monotonic() - t0, " ".join(cmd)


def row_out(r: dict, platform: str, label: str, kind: str, wall: float, cmd: str) -> dict:
    P, n, t = r["P"], r["nbytes"], r["median_s"]
    factor = 2 * (P - 1) / P if r["coll"] == "allreduce" else 1.0
    return {
        "platform": platform, "kind": kind, "coll": r["coll"], "label": label, "alg": r["alg"], "P": P,
        "nbytes": n, "chunk_bytes": r["chunk_bytes"], "time_s": t, "min_s": r["min_s"], "max_s": r["max_s"],
        "reps": r["reps"], "algbw_GBps": n / t / 1e9, "busbw_GBps": n / t / 1e9 * factor,
        "model": r.get("model"), "charge_gamma": r.get("charge_gamma"), "wall_s": round(wall, 2),
        "command": cmd, "mpi": r.get("mpi"),
        **({"nodes": r["nodes"], "model_net": r.get("model_net")} if "nodes" in r else {}),
    }


def save(platform: str, rows: list[dict], meta: dict, fresh: bool = False) -> None:
    """Merge ``rows`` into sim/results/<platform>.json (replacing rows of the same key), or with
    ``fresh`` replace the file (a calibration is one consistent set)."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{platform}.json"
    fresh = fresh or not path.exists()
    doc = {"meta": {}, "rows": []} if fresh else json.loads(path.read_text())
    key = lambda r: (r["kind"], r["coll"], r["label"], r["P"], r["nbytes"], r.get("charge_gamma") or 0,
                     r.get("layout"))
    new = {key(r) for r in rows}
    doc["rows"] = [r for r in doc["rows"] if key(r) not in new] + rows
    doc["rows"].sort(key=lambda r: (r["kind"], r["coll"], r["label"], r["P"], r.get("layout") or "", r["nbytes"]))
    doc["meta"].update(meta)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"  -> {path} ({len(doc['rows'])} rows)")


# the engine's default network term (src/tune/model.c), which the box's own runs had (no model.fit)
AS_RUN_NET = (25e-6, 0.8e-9)


def simulate(platform: str, args: argparse.Namespace) -> None:
    p = PLATFORM[platform]
    layout = args.layout
    Ps = [sum(layout)] if layout else (args.P or p["P"])
    sizes = args.sizes or p["sizes"]
    colls = args.coll.split(",")
    net = AS_RUN_NET if args.as_run else ((p["alpha_net"], p["beta_net"]) if "alpha_net" in p else None)
    meta = {
        "simgrid": simgrid_version(), "smpi_cfg": SMPI_CFG, "platform_xml": str(p["xml"].relative_to(ROOT)),
        "alpha_beta_for_chunk": [p.get("alpha"), p.get("beta")],
        "note": "kind=simulated: SimGrid SMPI running lpmpi's C engine (src/) on the platform; times "
        "are simulated seconds, not measured",
    }
    if "alpha_net" in p:
        meta.update(alpha_beta_gamma_for_chunk=[p["alpha"], p["beta"], p["gamma"]],
                    net_for_chunk=[p["alpha_net"], p["beta_net"]], net_as_run=list(AS_RUN_NET),
                    layout_note="rows carry layout (ranks per node, hostfile order); 1 rank per node "
                    "unless --layout; labels ending /asrun: the chunk the box's engine chose (its "
                    "default network term, net_as_run)")
    for coll in colls:
        labels = args.algs.split(",") if args.algs else LPMPI_ALGS[coll] + [f"smpi-{s}" for s in SELECTORS]
        for P in Ps:
            lay = layout or ([1] * P if "alpha_net" in p else None)
            lay_s = ",".join(map(str, lay)) if lay else None
            lp_labels = [a for a in labels if not a.startswith("smpi-")]
            rows = []
            common = ["--coll", coll, "--sizes", ",".join(map(str, sizes)), "--reps", str(args.reps),
                      "--warmup", str(args.warmup), "--alpha", str(p["alpha"]), "--beta", str(p["beta"])]
            if "gamma" in p:
                common += ["--gamma", str(p["gamma"])]
            if net:
                common += ["--alpha-net", str(net[0]), "--beta-net", str(net[1])]
            if args.charge_gamma:
                common += ["--charge-gamma", str(args.charge_gamma)]
            if args.chunk:  # a forced chunk: rows labelled e.g. lp/128K
                common += ["--chunk", str(args.chunk)]
            if args.window:  # chunks in flight per direction: rows labelled e.g. lp/w1
                common += ["--window", str(args.window)]
            where = f"P={P}" + (f" layout={lay_s}" if lay_s and any(k > 1 for k in lay) else "")
            for alg in lp_labels:  # one smpirun per algorithm: a timeout loses only that one
                got, wall, cmd = smpirun(platform, P, [*common, "--algs", alg], [], args.timeout, lay)
                print(f"{platform} {coll} {where} {alg}: " + ", ".join(
                      f"{r['nbytes']}B {r['median_s'] * 1e3:.3f} ms (chunk {r['chunk_bytes']})" for r in got)
                      + f"  (wall {wall:.1f} s)", flush=True)
                tag = (alg + (f"/{args.chunk // 1024}K" if args.chunk else "")
                       + (f"/w{args.window}" if args.window else "") + ("/asrun" if args.as_run else ""))
                rows += [dict(row_out(r, platform, tag, "simulated", wall, cmd), **({"layout": lay_s} if lay_s else {}))
                         for r in got]
            for sel in (a[5:] for a in labels if a.startswith("smpi-")):
                got, wall, cmd = smpirun(platform, P, [*common, "--algs", "native"], [f"--cfg=smpi/{coll}:{sel}"],
                                         args.timeout, lay)
                print(f"{platform} {coll} {where} smpi-{sel}: " + ", ".join(
                    f"{r['nbytes']}B {r['median_s'] * 1e3:.3f} ms" for r in got) + f"  (wall {wall:.1f} s)", flush=True)
                rows += [dict(row_out(r, platform, f"smpi-{sel}", "simulated", wall, cmd),
                              **({"layout": lay_s} if lay_s else {})) for r in got]
            if rows:
                save(platform, rows, meta)


def verify(args: argparse.Namespace) -> None:
    """Run every lpmpi algorithm under SMPI with real data and kernels; check results exactly."""
    ok = True
    for coll in ("allreduce", "reduce", "bcast"):
        for P in (2, 3, 5, 8):
            got, wall, _ = smpirun("fattree", P, ["--coll", coll, "--verify", "--root", str(P - 1),
                                                    "--sizes", "4,1000,100004", "--chunk", "4096",
                                                    "--algs", ",".join(LPMPI_ALGS[coll] + ["native"]),
                                                    "--reps", "1"], [], 300)
            bad = [r for r in got if r["verified"] is not True]
            ok = ok and not bad and len(got) == 3 * (len(LPMPI_ALGS[coll]) + 1)
            print(f"verify {coll} P={P}: {len(got)} checked, {len(bad)} wrong ({wall:.1f} s)")
    print("SMPI runs of the engine: all results exact" if ok else "SOME RESULTS WRONG")
    sys.exit(0 if ok else 1)


def here(args: argparse.Namespace) -> None:
    """Measure the same driver with real MPI here (mpiexec), fit alpha/beta from P = 2 messages,
    write platforms/here.xml from them, and simulate the same runs on it."""
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
    env = dict(os.environ, MPIR_CVAR_CH4_PROGRESS_THROTTLE="1",
               MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT="16")
    exe = str(BUILD / "lpsim-mpi")

    def measured(P: int, cargs: list[str]) -> list[dict]:
        cmd = [mpiexec, "-n", str(P), exe, *cargs]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, check=False)
        if proc.returncode:
            print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
        return [dict(r, _cmd=" ".join(cmd)) for r in parse_lpsim(proc.stdout)]

    # 1. alpha, beta: bcast at P = 2 is one message (MPICH sends it whole)
    probe_sizes = [1 << k for k in range(10, 27, 2)]
    pts = measured(2, ["--coll", "bcast", "--algs", "native", "--sizes", ",".join(map(str, probe_sizes)),
                       "--reps", "21", "--warmup", "3"])
    import numpy as np

    n = np.array([r["nbytes"] for r in pts], float)
    t = np.array([r["median_s"] for r in pts], float)
    # alpha from the small messages, beta from the large ones: the runs below move 1-64 MiB,
    # out of the caches, where a copy is 3x slower than in them; one fit over all sizes
    # (relative least squares) took the in-cache rate and made the platform 7x too fast
    large = n >= (4 << 20)
    beta = float(np.polyfit(n[large], t[large], 1)[0])
    alpha = max(float(t[0] - n[0] * beta), 1e-7)          # the smallest message (1 KiB)
    # gamma: a float32 sum of two 64 MiB arrays into a third (memory bound, like the engine's
    # kernel), seconds per byte reduced; charged to lpmpi's algorithms in the simulation
    a, b = np.ones(1 << 24, np.float32), np.ones(1 << 24, np.float32)
    out = np.empty_like(a)
    times = []
    for _ in range(9):
        t0 = time.perf_counter()
        np.add(a, b, out=out)
        times.append(time.perf_counter() - t0)
    gamma = float(np.median(times)) / a.nbytes
    print(f"here: alpha {alpha * 1e6:.2f} us, beta {beta * 1e9:.4f} ns/B ({1 / beta / 1e9:.2f} GB/s), "
          f"gamma {gamma * 1e9:.4f} ns/B ({1 / gamma / 1e9:.2f} GB/s)")
    PLATFORM["here"].update(alpha=float(alpha), beta=float(beta))
    xml = f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- This machine as a flat cluster, written by `python sim/run.py here` from the measured
     one-message time at P = 2 (MPICH shared memory): t = alpha + n beta with alpha = {alpha * 1e6:.3f} us,
     beta = 1 / ({1 / beta / 1e9:.3f} GB/s).  Each rank on its own host; a message crosses two
     links (alpha/2 each) and the backbone.  A shared-memory message is two copies by the CPUs
     through one memory system: every message in flight shares it, so the backbone has the
     one-message bandwidth 1/beta, shared by all flows (SHARED).  Ranks never share a core here:
     what this model leaves out (2 cores shared by up to 4 ranks) is what the measured-vs-simulated
     comparison at P > 2 shows. -->
<platform version="4.1">
  <cluster id="here" prefix="h" suffix="" radical="0-7" speed="1Gf" bw="{1 / beta:.6g}Bps" lat="{alpha / 2:.6g}s"
           bb_bw="{1 / beta:.6g}Bps" bb_lat="0s" bb_sharing_policy="SHARED" sharing_policy="SPLITDUPLEX"/>
</platform>
"""
    (PLATFORMS / "here.xml").write_text(xml)
    rows, meta = [], {"alpha": alpha, "beta": beta, "gamma": gamma,
                      "probe": [[int(x), y] for x, y in zip(n, t)],
                      "note": "kind=measured: the lpsim driver built with mpicc, run with mpiexec here "
                      "(2 cores; P > 2 oversubscribed); kind=simulated: the same on platforms/here.xml, "
                      "lpmpi's algorithms charged gamma per byte reduced (SMPI's own collectives are not)"}
    sizes = ",".join(map(str, args.sizes or PLATFORM["here"]["sizes"]))
    for P in args.P or PLATFORM["here"]["P"]:
        base = ["--coll", "allreduce", "--sizes", sizes, "--alpha", str(alpha), "--beta", str(beta)]
        cargs = [*base, "--algs", "lp,mst,be,ring,native", "--reps", "9", "--warmup", "2"]
        for r in measured(P, cargs):
            rows.append(row_out(r, "here", r["alg"], "measured", 0.0, r.pop("_cmd")))
        sim_args = [*base, "--reps", "1", "--warmup", "1"]
        got, wall, cmd = smpirun("here", P, [*sim_args, "--algs", "lp,mst,be,ring", "--gamma", str(gamma),
                                             "--charge-gamma", str(gamma)], [], args.timeout)
        rows += [row_out(r, "here", r["alg"], "simulated", wall, cmd) for r in got]
        for sel in SELECTORS:
            got, wall, cmd = smpirun("here", P, [*sim_args, "--algs", "native"], [f"--cfg=smpi/allreduce:{sel}"],
                                     args.timeout)
            rows += [row_out(r, "here", f"smpi-{sel}", "simulated", wall, cmd) for r in got]
        print(f"here P={P}: {len(rows)} rows so far", flush=True)
    save("here", rows, meta, fresh=True)


SIMGRID = "install SimGrid (https://simgrid.org; e.g. apt-get install simgrid) so that it is on PATH"


def missing(what: str) -> str | None:
    """Why ``what`` cannot run here (a tool or a driver missing), in one sentence, or None."""
    if what == "build":
        if not shutil.which("smpicc"):
            return f"sim/run.py build needs SimGrid's smpicc: {SIMGRID}."
        if not shutil.which("make"):
            return "sim/run.py build needs make: install it (e.g. apt-get install make)."
        return None
    if not shutil.which("smpirun"):
        return f"sim/run.py {what} needs SimGrid's smpirun: {SIMGRID}."
    drivers = [BUILD / "lpsim-smpi"] + ([BUILD / "lpsim-mpi"] if what == "here" else [])
    absent = [d.name for d in drivers if not d.exists()]
    if absent:
        return f"sim/run.py {what} needs {', '.join(absent)}: build it first with python sim/run.py build."
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Needs SimGrid (smpicc, smpirun) on PATH; `here` also mpiexec.")
    ap.add_argument("what", choices=["build", "fattree", "pcie8", "box", "box100g", "here", "verify"],
                    help="build the drivers, simulate a platform (fattree, pcie8, box, box100g), measure "
                    "and simulate this machine (here), or check the engine's results under SMPI (verify)")
    ap.add_argument("--P", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated process counts (default: the platform's)")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated message sizes in bytes (default: the platform's)")
    ap.add_argument("--algs", help="labels: lp,mst,be,ring,smpi-mpich,smpi-ompi (default all)")
    ap.add_argument("--coll", default="allreduce", help="comma-separated collectives (default allreduce)")
    ap.add_argument("--reps", type=int, default=1, help="repetitions per size (default 1: simulated runs are deterministic)")
    ap.add_argument("--warmup", type=int, default=0, help="untimed calls first (default 0: simulated time is deterministic; the first call includes lpmpi's context set-up)")
    ap.add_argument("--charge-gamma", type=float, default=0.0,
                    help="seconds per byte reduced charged to lpmpi's algorithms (default 0: reductions free)")
    ap.add_argument("--chunk", type=int, default=0, help="force chunk_bytes (default: lpmpi's model-optimal)")
    ap.add_argument("--window", type=int, default=0,
                    help="LP: chunks in flight per direction (lp_configure; default 0: the engine's, 4)")
    ap.add_argument("--layout", type=lambda s: [int(x) for x in s.split(",")],
                    help="ranks per node, e.g. 2,2 (ranks in blocks by node; replaces --P)")
    ap.add_argument("--as-run", action="store_true",
                    help="box: choose lp's chunk with the engine's default network term (25 us, 1.25 GB/s), "
                    "as the box's own runs did, instead of the box's measured one; labels end /asrun")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per smpirun (default 1200)")
    args = ap.parse_args()
    why = missing(args.what)
    if why:
        print(why, file=sys.stderr)
        return 1
    if args.what == "build":
        build()
    elif args.what == "verify":
        verify(args)
    elif args.what == "here":
        here(args)
    else:
        simulate(args.what, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
