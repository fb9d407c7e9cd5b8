"""A cluster in a box: Linux network namespaces as nodes, shaped links, MPI over TCP (issue 38).

    python -m lpmpi.cluster up --nodes 4 [--rate 1gbit] [--delay 50us] [--jitter 10us] [--loss 0.1%]
    python -m lpmpi.cluster run [--ppn 1] [--placement block|rr] [-n N] -- python script.py
    python -m lpmpi.cluster bytes                 # bytes each node's NIC sent and received
    python -m lpmpi.cluster down                  # also after a crash: removes only lpbox-* objects

Each node is a network namespace ``lpbox-nK`` with one NIC (``eth0``, a veth pair whose other end
``lpbox-vK`` is on the bridge ``lpbox0``), address 10.231.77.K/24 (the root namespace is .254 on
the bridge), the NIC's egress shaped by ``tc`` (tbf for a rate alone, netem with its rate for
delay, jitter or loss).  ``run`` starts MPICH's hydra with its ssh launcher pointed at this
module's launcher (``-launcher-exec``): it runs each proxy inside the node's namespace, in a new
UTS and mount namespace with the node's hostname, its own boot id bound over
``/proc/sys/kernel/random/boot_id`` (UCX takes processes with one boot id for one host and would
move "inter-node" data through shared memory) and its own ``/dev/shm`` (a tmpfs that goes with
the node's processes: no shared-memory file of a run is left on the host), so MPI sees N hosts, uses TCP between them and
shared memory within one.  Every object it makes is named ``lpbox*`` and recorded in
``/run/lpmpi-cluster/state.json``; ``down`` removes exactly those (found by name, so also after
a crash) and nothing else.  Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); without it every command
says so in one line and exits 2.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

PREFIX = "lpbox"
BRIDGE = f"{PREFIX}0"
NET = "10.231.77"
STATE_DIR = Path("/run/lpmpi-cluster")
STATE = STATE_DIR / "state.json"
MAX_NODES = 16


class ClusterError(RuntimeError):
    """A command of the box failed (the message says which and why)."""


def _sh(*cmd: str, check: bool = True, capture: bool = True) -> str:
    p = subprocess.run(cmd, capture_output=capture, text=True, timeout=60, check=False)
    if check and p.returncode != 0:
        raise ClusterError(f"{' '.join(cmd)}: {(p.stderr or p.stdout or '').strip() or f'exit {p.returncode}'}")
    return p.stdout or ""


def node_name(i: int) -> str:
    return f"{PREFIX}-n{i}"


def why_not() -> str | None:
    """None where the box can be made here, else the one-line reason."""
    if sys.platform != "linux":
        return "needs Linux network namespaces"
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth, tc, mount namespaces): run it as root"
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` (iproute2 / util-linux) on PATH"
    probe = f"{PREFIX}-probe"
    try:     # what up needs, tried (and undone) on objects of its own name
        _sh("ip", "netns", "list")
        _sh("ip", "netns", "add", probe)
        _sh("ip", "netns", "del", probe)
        _sh("ip", "link", "add", probe, "type", "bridge")
        _sh("ip", "link", "del", probe)
        _sh("unshare", "--uts", "--mount", "true")
    except (ClusterError, OSError, subprocess.TimeoutExpired) as exc:
        _sh("ip", "netns", "del", probe, check=False)
        _sh("ip", "link", "del", probe, check=False)
        return f"cannot make its namespaces and links here: {exc}"
    return None


def _require() -> None:
    reason = why_not()
    if reason:
        raise ClusterError(reason)


def state() -> dict[str, Any] | None:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return None


def _shape_args(rate: str | None, delay: str | None, jitter: str | None, loss: str | None) -> list[str]:
    """The tc qdisc for a node's NIC: tbf for a rate alone, netem (with its own rate) else."""
    if not (delay or jitter or loss):
        if not rate:
            return []
        return ["tbf", "rate", rate, "burst", "256kb", "latency", "100ms"]
    args = ["netem", "limit", "10000"]
    if delay or jitter:
        args += ["delay", delay or "0us"] + (["jitter", jitter] if jitter else [])
    if loss:
        args += ["loss", loss]
    if rate:
        args += ["rate", rate]
    return args


def up(nodes: int, rate: str | None = "1gbit", delay: str | None = None, jitter: str | None = None,
       loss: str | None = None) -> dict[str, Any]:
    """Bring up ``nodes`` nodes (after removing any box left behind).  Returns the state."""
    _require()
    if not 1 <= nodes <= MAX_NODES:
        raise ClusterError(f"--nodes must be in 1..{MAX_NODES}, got {nodes}")
    down(quiet=True)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    st: dict[str, Any] = {"nodes": [], "bridge": BRIDGE, "net": f"{NET}.0/24", "rate": rate,
                          "delay": delay, "jitter": jitter, "loss": loss}
    try:
        _sh("ip", "link", "add", BRIDGE, "type", "bridge")
        _sh("ip", "addr", "add", f"{NET}.254/24", "dev", BRIDGE)
        _sh("ip", "link", "set", BRIDGE, "up")
        shape = _shape_args(rate, delay, jitter, loss)
        for i in range(1, nodes + 1):
            ns, host_end, node_end = node_name(i), f"{PREFIX}-v{i}", f"{PREFIX}-p{i}"
            _sh("ip", "netns", "add", ns)
            _sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end)
            _sh("ip", "link", "set", node_end, "netns", ns)
            _sh("ip", "link", "set", host_end, "master", BRIDGE)
            _sh("ip", "link", "set", host_end, "up")
            nx = ("ip", "netns", "exec", ns)
            _sh(*nx, "ip", "link", "set", "lo", "up")
            _sh(*nx, "ip", "link", "set", node_end, "name", "eth0")
            _sh(*nx, "ip", "addr", "add", f"{NET}.{i}/24", "dev", "eth0")
            _sh(*nx, "ip", "link", "set", "eth0", "up")
            if shape:
                try:
                    _sh(*nx, "tc", "qdisc", "add", "dev", "eth0", "root", *shape)
                except ClusterError as exc:
                    if shape[0] == "netem" and "unknown" in str(exc):
                        raise ClusterError("delay, jitter and loss need the kernel's netem qdisc "
                                           "(sch_netem), which this kernel lacks; --rate alone uses "
                                           "tbf") from None
                    raise
            boot = STATE_DIR / f"boot_id.{i}"
            boot.write_text(str(uuid.uuid4()) + "\n")
            st["nodes"].append({"name": ns, "address": f"{NET}.{i}", "veth": host_end,
                                "boot_id": str(boot)})
        _write_hosts(nodes)
        STATE.write_text(json.dumps(st, indent=1))
        _write_launcher()
    except BaseException:
        down(quiet=True)
        raise
    return st


def _write_hosts(nodes: int) -> None:
    """/run/lpmpi-cluster/hosts: the nodes' names and addresses (bound over /etc/hosts in them)."""
    lines = ["127.0.0.1 localhost"] + [f"{NET}.{i} {node_name(i)}" for i in range(1, nodes + 1)]
    (STATE_DIR / "hosts").write_text("\n".join(lines) + "\n")


LAUNCHER = STATE_DIR / "launch"
BINDER = STATE_DIR / "bind"


def _write_launcher() -> None:
    """The -launcher-exec of hydra: `launch [ssh options] HOST COMMAND...` runs COMMAND in HOST;
    and ``bind COMMAND...`` (``run --bind``): COMMAND pinned by its global rank (:data:`BIND`)."""
    # this file as a script, not `-m lpmpi.cluster`: importing the package initializes MPI (a
    # singleton), and the launcher execs into the node without finalizing it, which left one
    # /dev/shm/mpich_shm_* file of the host's per node and run; -I: the script's folder (lpmpi/,
    # whose trace.py would shadow the standard library's) is not on sys.path
    LAUNCHER.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -I {shlex.quote(str(Path(__file__).resolve()))} "
                        f"_exec \"$@\"\n")
    LAUNCHER.chmod(0o755)
    BINDER.write_text(f"#!/bin/sh\n{BIND}\n")
    BINDER.chmod(0o755)


def _exec(argv: list[str]) -> int:
    """Run a hydra proxy command in a node: argv = ssh's options, the host, the command."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-p", "-l", "-o", "-i", "-F") else 1
    if i >= len(argv):
        print("lpmpi.cluster launcher: no host given", file=sys.stderr)
        return 2
    host, command = argv[i], argv[i + 1:]
    m = re.fullmatch(rf"{PREFIX}-n(\d+)", host)
    if not m:
        print(f"lpmpi.cluster launcher: {host!r} is not a node of the box", file=sys.stderr)
        return 2
    k = int(m.group(1))
    boot, hosts = STATE_DIR / f"boot_id.{k}", STATE_DIR / "hosts"
    # the node's own /dev/shm (a tmpfs of this mount namespace, which every process of the node
    # shares, since hydra starts them all from this proxy): MPI's and lpmpi's shared-memory files
    # live and die with the node's processes, and nothing of a run stays in the host's /dev/shm
    inner = (f"hostname {shlex.quote(host)} && mount --bind {shlex.quote(str(boot))} "
             f"/proc/sys/kernel/random/boot_id && mount --bind {shlex.quote(str(hosts))} /etc/hosts && "
             f"mount -t tmpfs -o mode=1777,size=50% {PREFIX}-shm /dev/shm && "
             f"exec sh -c {shlex.quote(' '.join(command))}")
    os.execvp("ip", ["ip", "netns", "exec", host, "unshare", "--uts", "--mount", "--propagation",
                     "private", "sh", "-c", inner])
    return 0  # not reached


#: ``run --bind``: each rank pinned to core (its global rank mod the cores), by the rank itself.
#: hydra's own ``-bind-to core`` binds per node, and the box's nodes share one machine's cores:
#: every node's local rank k would land on core k (2 x 1: both ranks on core 0)
BIND = 'exec taskset -c $(( ${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}} % $(nproc --all) )) "$@"'


def launcher_kind(mpiexec: str) -> str:
    """"openmpi" where ``mpiexec --version`` says Open MPI (its mpirun: PRRTE), else "hydra"
    (MPICH's, and Intel MPI's)."""
    try:
        p = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError as exc:
        raise ClusterError(f"{mpiexec}: {exc}") from None
    return "openmpi" if "Open MPI" in (p.stdout + p.stderr) else "hydra"


#: environment a rank needs that Open MPI's mpirun does not forward by itself (hydra forwards
#: everything): these names and every LPMPI_* variable set here
FORWARD = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "MPI4PY_LIBMPI", "OMPI_MCA_mpi_yield_when_idle")


def _openmpi_command(exe: str, hosts: list[str], counts: list[int] | None, n: int, placement: str,
                     command: list[str]) -> list[str]:
    """Open MPI's mpirun across the box: PRRTE's ssh agent is this module's launcher, TCP between
    nodes over the box's subnet (its shared memory within one node)."""
    if counts is not None:
        host_arg = ",".join(f"{h}:{k}" for h, k in zip(hosts, counts) if k)
    else:
        host_arg = ",".join(f"{h}:{max(1, -(-n // len(hosts)))}" for h in hosts)
    env = [v for k in sorted(os.environ) if (k in FORWARD or k.startswith("LPMPI_")) for v in ("-x", k)]
    return [exe, "--allow-run-as-root", "--prtemca", "plm_ssh_agent", str(LAUNCHER),
            "--prtemca", "oob_tcp_if_include", f"{NET}.0/24", "--mca", "oob_tcp_if_include", f"{NET}.0/24",
            "--mca", "btl_tcp_if_include", f"{NET}.0/24", "--host", host_arg,
            "--map-by", "node" if placement == "rr" else "slot", "--bind-to", "none", *env, "-np", str(n),
            *command]


def mpiexec_command(command: list[str], n: int | None = None, ppn: int = 1, placement: str = "block",
                    mpiexec: str | None = None, layout: list[int] | None = None, bind: bool = False) -> list[str]:
    """The command line that runs ``command`` across the box with the MPI library's own launcher
    (MPICH's hydra, or Open MPI's mpirun where ``mpiexec`` is Open MPI's): ``ppn`` ranks on
    every node, or ``layout[k]`` ranks on node k+1 (an uneven layout: block placement);
    ``bind``: each rank on one core, global rank mod the machine's cores (:data:`BIND`)."""
    if bind:
        command = [str(BINDER), *command]
    st = state()
    if not st:
        raise ClusterError("no box is up: python -m lpmpi.cluster up --nodes N")
    hosts = [nd["name"] for nd in st["nodes"]]
    if layout is not None:
        if len(layout) > len(hosts) or any(k < 0 for k in layout):
            raise ClusterError(f"layout {layout}: the box has {len(hosts)} nodes")
        host_arg = ",".join(f"{h}:{k}" for h, k in zip(hosts, layout) if k)
        n = sum(layout)
    elif placement == "block":
        host_arg = ",".join(f"{h}:{ppn}" for h in hosts)
    elif placement == "rr":
        host_arg = ",".join(hosts)
    else:
        raise ClusterError(f"placement must be block or rr, got {placement!r}")
    n = n or len(hosts) * ppn
    exe = mpiexec or str(Path(sys.executable).parent / "mpiexec")
    if launcher_kind(exe) == "openmpi":
        counts = layout if layout is not None else ([ppn] * len(hosts) if placement == "block" else None)
        return _openmpi_command(exe, hosts, counts, n, placement, command)
    return [exe, "-launcher", "ssh", "-launcher-exec", str(LAUNCHER), "-iface", BRIDGE,
            "-hosts", host_arg, "-n", str(n), *command]


def nic_bytes() -> dict[str, dict[str, int]]:
    """{node: {"sent": bytes, "received": bytes}} from the bridge ends of the nodes' veths."""
    st = state() or {"nodes": []}
    out = {}
    for nd in st["nodes"]:
        base = Path("/sys/class/net") / nd["veth"] / "statistics"
        try:     # the bridge end receives what the node sends
            out[nd["name"]] = {"sent": int((base / "rx_bytes").read_text()),
                               "received": int((base / "tx_bytes").read_text())}
        except OSError:
            continue
    return out


def leftovers() -> list[str]:
    """Every lpbox* namespace and link that exists now."""
    names = [ln.split()[0] for ln in _sh("ip", "netns", "list", check=False).splitlines() if ln.strip()]
    out = [f"netns {n}" for n in names if n.startswith(PREFIX)]
    for ln in _sh("ip", "-o", "link", "show", check=False).splitlines():
        parts = ln.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith(PREFIX):
                out.append(f"link {name}")
    return out


def down(quiet: bool = False) -> list[str]:
    """Remove every lpbox* namespace and link and the state (only those: found by name)."""
    if why_not():
        if quiet:
            return []
        _require()
    removed = []
    for item in leftovers():
        kind, name = item.split(" ", 1)
        if kind == "netns":
            _sh("ip", "netns", "del", name, check=False)
        else:
            _sh("ip", "link", "del", name, check=False)
        removed.append(item)
    if STATE_DIR.exists():
        shutil.rmtree(STATE_DIR, ignore_errors=True)
    return removed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_exec"]:
        return _exec(argv[1:])
    ap = argparse.ArgumentParser(prog="lpmpi-cluster", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="bring up N nodes (removes a box left behind first)")
    u.add_argument("--nodes", type=int, required=True)
    u.add_argument("--rate", default="1gbit", help="NIC rate (tc units: 1gbit, 100mbit; 'none': unshaped)")
    u.add_argument("--delay", default=None, help="one-way delay added by each NIC (50us, 1ms)")
    u.add_argument("--jitter", default=None)
    u.add_argument("--loss", default=None, help="packet loss (0.1%%)")
    r = sub.add_parser("run", help="run a command across the box with the MPI library's launcher "
                                   "(MPICH's hydra, or Open MPI's mpirun given as --mpiexec)")
    r.add_argument("-n", type=int, default=None, help="processes (default: nodes x ppn)")
    r.add_argument("--ppn", type=int, default=1, help="processes per node")
    r.add_argument("--placement", choices=("block", "rr"), default="block")
    r.add_argument("--layout", default=None, help="ranks per node, e.g. 1,2,1 (uneven; block placement)")
    r.add_argument("--bind", action="store_true",
                   help="pin each rank to core (global rank mod cores) with taskset; hydra's -bind-to "
                        "binds per node, which on one machine puts every node's rank k on core k")
    r.add_argument("--mpiexec", default=None,
                   help="the launcher: hydra's mpiexec (default: beside this Python) or Open MPI's mpirun")
    r.add_argument("command", nargs=argparse.REMAINDER)
    sub.add_parser("bytes", help="bytes each node's NIC sent and received")
    sub.add_parser("status", help="the box and what is left of it")
    sub.add_parser("down", help="remove the box (every lpbox* namespace and link)")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "up":
            rate = None if a.rate in ("none", "") else a.rate
            st = up(a.nodes, rate, a.delay, a.jitter, a.loss)
            print(f"lpmpi.cluster: {len(st['nodes'])} nodes up "
                  f"({', '.join(nd['name'] + ' ' + nd['address'] for nd in st['nodes'])}); "
                  f"NIC rate {rate or 'unshaped'}, delay {a.delay or 0}, jitter {a.jitter or 0}, "
                  f"loss {a.loss or 0}")
        elif a.cmd == "run":
            _require()
            cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
            if not cmd:
                raise ClusterError("run: no command given (run -- python script.py)")
            layout = [int(k) for k in a.layout.split(",")] if a.layout else None
            full = mpiexec_command(cmd, a.n, a.ppn, a.placement, a.mpiexec, layout, a.bind)
            return subprocess.call(full)
        elif a.cmd == "bytes":
            for name, b in nic_bytes().items():
                print(f"{name}: sent {b['sent']} B, received {b['received']} B")
        elif a.cmd == "status":
            st = state()
            print(json.dumps(st, indent=1) if st else "no box is up")
            left = leftovers() if not why_not() else []
            print("lpbox objects: " + (", ".join(left) if left else "none"))
        elif a.cmd == "down":
            removed = down()
            print(f"lpmpi.cluster: removed {len(removed)} object(s)" + (f": {', '.join(removed)}" if removed else ""))
    except ClusterError as exc:
        print(f"lpmpi.cluster: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
