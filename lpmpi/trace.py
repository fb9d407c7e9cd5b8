"""What the collectives did: traces (LPMPI_TRACE) and flight-recorder dumps (LPMPI_FR_DIR).

``LPMPI_TRACE=dir`` makes every rank record each collective call (src/obs/recorder.c: one 64-byte
record per call, buffered, written to ``dir/trace.<rank>.bin``); at exit this module turns the
records into ``dir/trace.<rank>.json``, Chrome trace events (Perfetto and chrome://tracing read
them): one complete event per call (from entering the call to its end) with its sequence
number on its communicator, collective, bytes, dtype, algorithm, chunk, transport and form, and
nested events for the preparation and, for a sample of calls, each phase.

``lpmpi-trace dir`` merges the ranks onto one timeline (``dir/trace.json``), prints a summary per
collective (calls, bytes, time, bus bandwidth, algorithm mix, the latest-arriving and the slowest
rank of each call) and draws ``dir/trace.png``.  A job that was killed leaves ``.bin`` files and
no ``.json``: ``lpmpi-trace`` converts what they hold (all but the last unwritten buffer, at most
256 calls a rank), and a ``.json`` cut short is read up to its last complete event.

``lpmpi-trace --hang dir`` reads the flight-recorder dumps (``fr.<rank>.json``, written by the
watchdog, on SIGUSR1 or by :func:`lpmpi.dump_flight_recorder`) and names, per communicator, the
collective and sequence number where the ranks diverge, the ranks that never reached it, what the
others wait for, and the ranks that left no dump.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

#: a call's record in the file (src/include/engine.h lp_trace_rec_t, 64 bytes)
RECORD = np.dtype([
    ("comm", "<u8"), ("seq", "<u8"), ("t_enter", "<i8"), ("t_end", "<i8"), ("bytes", "<u8"),
    ("chunk", "<u4"), ("start_off", "<u4"),
    ("coll", "u1"), ("dt", "u1"), ("op", "u1"), ("alg", "u1"), ("tp", "u1"), ("form", "u1"), ("flags", "u1"),
    ("nphases", "u1"), ("root", "<i4"), ("rc", "<i4"),
])
#: the phases' starts of a call whose phases were timed (lp_trace_phases_t: flags has PHASES)
PHASES = np.dtype([
    ("comm", "<u8"), ("seq", "<u8"), ("t_phase0", "<i8"), ("off", "<u4", (7,)), ("pad", "u1", (2,)),
    ("flags", "u1"), ("nphases", "u1"), ("pad2", "u1", (8,)),
])
#: the file's header (lp_trace_hdr_t)
HEADER = np.dtype([
    ("magic", "S8"), ("version", "<i4"), ("recsize", "<i4"), ("rank", "<i4"), ("world_size", "<i4"),
    ("pid", "<i4"), ("pad", "<i4"), ("mono_to_unix", "<i8"), ("host", "S64"),
])
assert RECORD.itemsize == PHASES.itemsize == 64 and HEADER.itemsize == 104
_PHASE_FLAG = 2
_FORMS = ("blocking", "nonblocking", "persistent")
_TRANSPORTS = ("", "mpi", "shm", "cma")
_SAMPLED = 1
_COMP_SHIFT = 4                     # flags >> 4: the compression (0 none; lp_comp_t)
_COMPRESSIONS = ("none", "bf16", "int8", "int4")


def _names() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], dict[int, str], frozenset[str]]:
    """The engine's names (collectives, dtypes, ops, algorithms by index) and the collectives
    that reduce (the registry's rows: their records carry an op)."""
    from lpmpi import _core

    algs = {idx: name for c in _core.COLLECTIVES for name, idx, _ in _core._algorithm_info(c)}
    reducing = frozenset(t["name"] for t in _core._coll_traits() if t["has_op"])
    return _core.COLLECTIVES, _core.DTYPE_NAMES, _core.OP_NAMES, algs, reducing


# ------------------------------------------------------------------------- recording (at import)
_started: str | None = None


def start(directory: str, max_records: int = 0) -> None:
    """Record every call of this process (LPMPI_TRACE; lpmpi._env at import); convert at exit."""
    global _started
    from lpmpi import _core

    d = os.path.abspath(directory)
    _core._trace_configure(d, max_records)
    if _started is None:
        atexit.register(finish)
    _started = d


def finish() -> str | None:
    """Write the last records and make this rank's ``trace.<rank>.json`` (at exit); its path."""
    from lpmpi import _core

    binary = _core._trace_close()
    if not binary:
        return None
    out = binary[:-4] + ".json"
    write_json(out, to_events(*read_bin(binary)))
    os.unlink(binary)
    return out


# ------------------------------------------------------------------------- reading
def read_bin(path: str | os.PathLike) -> tuple[dict[str, Any], np.ndarray]:
    """A ``trace.<rank>.bin`` file's header and call records (a partly written last record
    dropped); the header's ``"phases"``: (comm, seq) -> the starts of that call's phases (ns)."""
    raw = Path(path).read_bytes()
    if len(raw) < HEADER.itemsize or raw[:8] != b"LPMPITR1":
        raise ValueError(f"{path}: not an lpmpi trace (LPMPI_TRACE) file")
    h = np.frombuffer(raw[:HEADER.itemsize], HEADER)[0]
    if int(h["recsize"]) != RECORD.itemsize or int(h["version"]) != 2:
        raise ValueError(f"{path}: version {int(h['version'])} records of {int(h['recsize'])} bytes; this lpmpi "
                         f"reads version 2, {RECORD.itemsize} bytes")
    body = raw[HEADER.itemsize:]
    n = len(body) // RECORD.itemsize
    allrec = np.frombuffer(body[:n * RECORD.itemsize], RECORD)
    is_ph = (allrec["flags"] & _PHASE_FLAG) != 0
    recs = allrec[~is_ph]
    phases = {}
    for p in np.frombuffer(body[:n * RECORD.itemsize], PHASES)[is_ph]:
        k = min(int(p["nphases"]), 8)
        t0 = int(p["t_phase0"])
        phases[(int(p["comm"]), int(p["seq"]))] = [t0] + [t0 + int(o) for o in p["off"][:max(k - 1, 0)] if o]
    hdr = {"rank": int(h["rank"]), "world_size": int(h["world_size"]), "pid": int(h["pid"]),
           "host": h["host"].split(b"\0")[0].decode(errors="replace"), "mono_to_unix": int(h["mono_to_unix"]),
           "phases": phases}
    return hdr, recs


def _tid(comm: int) -> int:
    return ((comm >> 32) - 1) * 100000 + (comm & 0xFFFFFFFF) if comm else 0


def comm_name(comm: int) -> str:
    """A communicator id as people read it: ``w<world rank of its rank 0>.<its n-th context>``."""
    return f"w{(comm >> 32) - 1}.{comm & 0xFFFFFFFF}" if comm else "?"


def to_events(hdr: dict[str, Any], recs: np.ndarray) -> list[dict[str, Any]]:
    """Chrome trace events of one rank's records (ts and dur in microseconds, wall clock)."""
    colls, dtypes, ops, algs, reducing = _names()
    rank, off = hdr["rank"], hdr["mono_to_unix"]
    ev: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": rank,
                                 "args": {"name": f"rank {rank} ({hdr['host']}, pid {hdr['pid']})"}},
                                {"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}}]
    seen: set[int] = set()

    def us(t: int) -> float:
        return (int(t) + off) / 1000.0

    for r in recs:
        comm = int(r["comm"])
        tid = _tid(comm)
        if comm not in seen:
            seen.add(comm)
            ev.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                       "args": {"name": f"communicator {comm_name(comm)}"}})
        t0, t1 = int(r["t_enter"]), int(r["t_end"])
        ts = t0 + int(r["start_off"])
        coll = colls[r["coll"]] if 0 <= r["coll"] < len(colls) else str(int(r["coll"]))
        args = {"seq": int(r["seq"]), "comm": comm_name(comm), "bytes": int(r["bytes"]),
                "dtype": dtypes[r["dt"]] if 0 <= r["dt"] < len(dtypes) else "?",
                "algorithm": algs.get(int(r["alg"]), "?"), "chunk": int(r["chunk"]),
                "transport": _TRANSPORTS[r["tp"]] if 0 <= r["tp"] < 4 else "?",
                "form": _FORMS[r["form"]] if 0 <= r["form"] < 3 else "?", "phases": int(r["nphases"])}
        if coll in reducing:      # (a list by hand named "reduce_scatterv": issue 51)
            args["op"] = ops[r["op"]] if r["op"] < len(ops) else "?"
        comp = int(r["flags"]) >> _COMP_SHIFT
        if comp:
            args["compression"] = _COMPRESSIONS[comp] if comp < len(_COMPRESSIONS) else "?"
        if r["rc"]:
            args["error"] = int(r["rc"])
        if int(r["flags"]) & _SAMPLED:
            args["sampled"] = "1 in 100 (LPMPI_TRACE_MAX passed)"
        ev.append({"name": coll, "cat": "collective", "ph": "X", "ts": us(t0), "dur": max(t1 - t0, 0) / 1000.0,
                   "pid": rank, "tid": tid, "args": args})
        if ts > t0:
            ev.append({"name": "prepare", "cat": "phase", "ph": "X", "ts": us(t0), "dur": (ts - t0) / 1000.0,
                       "pid": rank, "tid": tid})
        ph = hdr["phases"].get((comm, int(r["seq"])), [])
        for i, p in enumerate(ph):
            end = ph[i + 1] if i + 1 < len(ph) else t1
            ev.append({"name": f"phase {i}", "cat": "phase", "ph": "X", "ts": us(p), "dur": max(end - p, 0) / 1000.0,
                       "pid": rank, "tid": tid})
    return ev


def write_json(path: str | os.PathLike, events: list[dict[str, Any]]) -> None:
    """Events as a JSON array, one per line (a file cut short loses whole lines only)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write("[\n")
        f.writelines(json.dumps(e, separators=(",", ":")) + (",\n" if i + 1 < len(events) else "\n")
                     for i, e in enumerate(events))
        f.write("]\n")
    os.replace(tmp, path)


def read_json(path: str | os.PathLike) -> list[dict[str, Any]]:
    """A trace's events; a file cut short (a killed job) up to its last complete line."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        lines = [ln.rstrip(",") for ln in text.splitlines()[1:] if ln.strip() not in ("", "[", "]")]
        out = []
        for ln in lines:
            try:
                out.append(json.loads(ln))
            except json.JSONDecodeError:
                break
        return out


def load(directory: str | os.PathLike) -> dict[int, list[dict[str, Any]]]:
    """Every rank's events in a trace directory: its .json, else (a killed job) its .bin converted."""
    d = Path(directory)
    out: dict[int, list[dict[str, Any]]] = {}
    for p in sorted(d.glob("trace.*.bin")):
        rank = int(p.name.split(".")[1])
        try:
            hdr, recs = read_bin(p)
        except ValueError:
            continue
        j = p.with_suffix(".json")
        if not j.exists():                # recovery: what the killed rank had written
            write_json(j, to_events(hdr, recs))
        out[rank] = read_json(j)
    for p in sorted(d.glob("trace.*.json")):
        parts = p.name.split(".")
        if len(parts) == 3 and parts[1].isdigit() and int(parts[1]) not in out:
            out[int(parts[1])] = read_json(p)
    return out


def calls(events_by_rank: dict[int, list[dict[str, Any]]]) -> dict[tuple[str, int], dict[int, dict[str, Any]]]:
    """(communicator, sequence number) -> rank -> that rank's event of the call."""
    out: dict[tuple[str, int], dict[int, dict[str, Any]]] = defaultdict(dict)
    for rank, evs in events_by_rank.items():
        for e in evs:
            if e.get("cat") == "collective":
                out[(e["args"]["comm"], e["args"]["seq"])][rank] = e
    return out


# ------------------------------------------------------------------------- the summary
def summary(events_by_rank: dict[int, list[dict[str, Any]]]) -> str:
    """Per collective: calls, bytes, time, bus bandwidth, algorithm mix, late and slow ranks."""
    from lpmpi.engine import bus_factor

    per = calls(events_by_rank)
    by_coll: dict[str, list[dict[int, dict[str, Any]]]] = defaultdict(list)
    for (_, _), ranks in sorted(per.items()):
        by_coll[next(iter(ranks.values()))["name"]].append(ranks)
    nranks = len(events_by_rank)
    lines = [f"{nranks} rank(s), {len(per)} calls"]
    sampled = any(e.get("args", {}).get("sampled") for evs in events_by_rank.values() for e in evs)
    if sampled:
        lines.append("(sampled: past LPMPI_TRACE_MAX calls a rank records one call in 100)")
    hdr = f"{'collective':<16}{'calls':>7}{'bytes':>12}{'time ms':>10}{'mean us':>10}{'busbw GB/s':>11}  algorithms"
    lines.append(hdr)
    late_lines = []
    for coll, cs in sorted(by_coll.items()):
        times, bus, algs = [], [], Counter()
        total_bytes = 0
        late, slow, lateness, lost = Counter(), Counter(), [], Counter()
        for ranks in cs:
            evs = list(ranks.values())
            P = len(ranks)
            t = max(e["dur"] for e in evs)                          # the slowest rank's call, us
            b = max(e["args"]["bytes"] for e in evs)
            times.append(t)
            total_bytes += b
            if t > 0 and P > 1:
                bus.append(b / (t * 1e-6) / 1e9 * bus_factor(coll, P))
            algs[evs[0]["args"]["algorithm"]] += 1
            if P > 1:
                arrive = {r: e["ts"] for r, e in ranks.items()}
                last = max(arrive, key=arrive.__getitem__)
                late[last] += 1
                lateness.append(arrive[last] - min(arrive.values()))
                lost[last] += lateness[-1]             # what the others waited for it, us
                slow[max(ranks, key=lambda r: ranks[r]["dur"])] += 1
        mix = ", ".join(f"{a} {n}" for a, n in algs.most_common())
        bw = f"{statistics.median(bus):.3f}" if bus else "-"
        lines.append(f"{coll:<16}{len(cs):>7}{total_bytes:>12}{sum(times) / 1e3:>10.2f}{statistics.mean(times):>10.1f}"
                     f"{bw:>11}  {mix}")
        if late:
            (lr, ln), (sr, sn) = late.most_common(1)[0], slow.most_common(1)[0]
            wr, wt = lost.most_common(1)[0]
            late_lines.append(f"  {coll}: latest to arrive: rank {lr} in {ln} of {len(cs)} calls "
                              f"(median lateness {statistics.median(lateness):.1f} us); waited for most: rank {wr} "
                              f"({wt / 1e3:.2f} ms in all); slowest: rank {sr} in {sn} of {len(cs)}")
    if late_lines:
        lines.append("per call, across ranks (wall clocks; on several nodes as good as their sync):")
        lines += late_lines
    return "\n".join(lines)


def plot(events_by_rank: dict[int, list[dict[str, Any]]], out: str | os.PathLike, last: int = 400) -> str | None:
    """A picture: the timeline of the last ``last`` calls of every rank (a bar per call,
    coloured by collective) above each call's time against its size.  None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    colls = sorted({e["name"] for evs in events_by_rank.values() for e in evs if e.get("cat") == "collective"})
    colour = {c: plt.cm.tab10(i % 10) for i, c in enumerate(colls)}
    fig, (a, b) = plt.subplots(2, 1, figsize=(11, 7.5), gridspec_kw={"height_ratios": [1.2, 1]})
    t0 = min((e["ts"] for evs in events_by_rank.values() for e in evs if e.get("cat") == "collective"), default=0)
    for rank, evs in sorted(events_by_rank.items()):
        cs = [e for e in evs if e.get("cat") == "collective"][-last:]
        for c in colls:
            bars = [((e["ts"] - t0) / 1e3, max(e["dur"] / 1e3, 1e-4)) for e in cs if e["name"] == c]
            if bars:
                a.broken_barh(bars, (rank - 0.4, 0.8), color=colour[c], label=c if rank == min(events_by_rank) else None)
    a.set_xlabel("ms since the first call")
    a.set_ylabel("rank")
    a.set_yticks(sorted(events_by_rank))
    a.set_title(f"the last {last} calls of each rank (from entering the call to its end)")
    a.legend(loc="upper right", fontsize=8)
    for c in colls:
        xs, ys = [], []
        for evs in events_by_rank.values():
            for e in evs:
                if e.get("cat") == "collective" and e["name"] == c and e["args"]["bytes"] > 0:
                    xs.append(e["args"]["bytes"])
                    ys.append(max(e["dur"], 0.01))
        if xs:
            b.scatter(xs, ys, s=6, color=colour[c], label=c, alpha=0.5)
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("bytes")
    b.set_ylabel("us per call (each rank)")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return str(out)


# ------------------------------------------------------------------------- hangs
def load_dumps(directory: str | os.PathLike) -> dict[int, dict[str, Any]]:
    """The flight-recorder dumps of a directory: world rank -> dump."""
    out = {}
    for p in sorted(Path(directory).glob("fr.*.json")):
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if d.get("format") == "lpmpi-flight-recorder":
            out[int(d["rank"])] = d
    return out


def _ranks(rs) -> str:
    rs = sorted(rs)
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(map(str, rs))


def hang(directory: str | os.PathLike) -> str:
    """Where the ranks diverged, from their flight-recorder dumps (``lpmpi-trace --hang``)."""
    dumps = load_dumps(directory)
    if not dumps:
        return f"no flight-recorder dumps (fr.<rank>.json) in {directory}"
    world = max(d.get("world_size", 0) for d in dumps.values()) or (max(dumps) + 1)
    missing = sorted(set(range(world)) - set(dumps))
    why = ", ".join(sorted({d["reason"] for d in dumps.values()}))
    lines = [f"flight-recorder dumps of {len(dumps)} of {world} ranks in {directory} ({why})"]
    named: dict[int, list[int]] = defaultdict(list)        # dead rank -> the ranks whose dump names it
    for w, d in dumps.items():
        for r in d.get("dead_ranks", []):
            named[r].append(w)
    for r, by in sorted(named.items()):
        lines.append(f"rank {r} is gone (named by the dump of {_ranks(by)}: "
                     f"{dumps[by[0]].get('dead', '')})")
    if missing:
        lines.append(f"{_ranks(missing)} left no dump: dead (killed, crashed, exited), or not signalled "
                     "(kill -USR1 reaches only live ranks that ran an lpmpi collective)")
    notices = sorted(w for w, d in dumps.items() if d.get("notices"))
    if notices:
        lines.append(f"{_ranks(notices)} had the launcher's notice that a process of the job ended "
                     "(SIGUSR1 under mpiexec -disable-auto-cleanup)")
    members: dict[int, list[int]] = {}
    for d in dumps.values():
        for c in d["comms"]:
            if c.get("world_ranks"):
                members.setdefault(c["id"], c["world_ranks"])
    # per communicator and rank: its entries by sequence number (the latest entry of a number wins)
    per: dict[int, dict[int, dict[int, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for w, d in dumps.items():
        for e in d["entries"]:
            if e["comm"]:
                per[e["comm"]][w][e["seq"]] = e
    found = False
    for comm, by_rank in sorted(per.items()):
        ranks = members.get(comm, sorted(by_rank))
        name = comm_name(comm)
        present = [r for r in ranks if r in dumps]
        dead = [r for r in ranks if r not in dumps]

        def last_done(r: int, by_rank=by_rank) -> int:
            done = [s for s, e in by_rank.get(r, {}).items() if e["state"] == "done"]
            return max(done, default=0)

        def reached(r: int, by_rank=by_rank) -> int:
            return max(by_rank.get(r, {}), default=0)

        running = {r: e for r in present for s, e in by_rank.get(r, {}).items() if e["state"] in ("entered", "started")}
        if not running:
            continue
        k = min(last_done(r) for r in present) + 1
        at_k = {r: by_rank[r][k] for r in present if k in by_rank.get(r, {})}
        never = [r for r in present if reached(r) < k]
        found = True
        ex = next(iter(at_k.values()), None) or next(iter(running.values()))
        what = f"{ex['collective']} of {ex['bytes']} B ({ex['dtype']}"
        what += f" {ex['op']})" if ex["collective"] in ("allreduce", "reduce", "reduce_scatter") else ")"
        if ex.get("compression", "none") != "none":
            what += f", compressed {ex['compression']}"
        lines.append(f"communicator {name} ({len(ranks)} ranks: world {', '.join(map(str, ranks))}):")
        lines.append(f"  the ranks diverge at collective #{k}: {what}")
        for r, e in sorted(at_k.items()):
            if e["state"] in ("entered", "started"):
                wait = e.get("waiting", "")
                peers = e.get("peers") or []
                if peers and len(ranks) > max(peers):
                    wait += f" (world {_ranks(ranks[p] for p in peers)})"
                lines.append(f"  rank {r}: in #{k} ({e['state']}, {e['algorithm'] or 'deciding'}), {wait}")
            else:
                lines.append(f"  rank {r}: #{k} {e['state']}")
        # wall clocks: when each rank entered #k, and when each rank's dump was taken
        def wall(r: int, t: int | None) -> float | None:
            d = dumps[r]
            return (t + d["unix_ns"] - d["mono_ns"]) / 1e9 if t else None

        entered = {r: wall(r, e.get("t_enter")) for r, e in at_k.items()}
        dumped = {r: dumps[r]["unix_ns"] / 1e9 for r in present}
        late = sorted(r for r, t in entered.items() if t is not None and
                      any(q != r and q in at_k and t > dumped[q] for q in present))
        if len(entered) > 1 and all(t is not None for t in entered.values()):
            t0 = min(entered.values())
            lines.append(f"  entered #{k}: " + ", ".join(f"rank {r} {entered[r] - t0:+.3f} s" for r in sorted(entered)))
        for r in late:
            q = min((q for q in present if q != r and q in at_k and entered[r] > dumped[q]), key=dumped.get)
            lines.append(f"  rank {r}: late for #{k}: entered it {entered[r] - dumped[q]:.3f} s after rank {q} "
                         f"had dumped ({dumps[q]['reason']})")
        for r in never:
            last = by_rank.get(r, {}).get(reached(r))
            tail = (f"its last: #{last['seq']} {last['collective']}, {last['state']}" if last else
                    "no call on this communicator in its recorder")
            lines.append(f"  rank {r}: never reached #{k} ({tail}): late, or skipped it")
        for r in dead:
            lines.append(f"  rank {r}: no dump (dead?): its state is unknown")
        kinds = {(e["collective"], e["bytes"], e.get("root"), e.get("op")) for e in at_k.values()}
        if len(kinds) > 1:
            lines.append(f"  the ranks disagree on #{k}: " + "; ".join(
                f"rank {r}: {e['collective']} of {e['bytes']} B" for r, e in sorted(at_k.items())))
        if never:
            lines.append(f"  => {_ranks(never)} never reached collective #{k} ({ex['collective']}) on communicator {name}")
        elif late:
            lines.append(f"  => {_ranks(late)} late for collective #{k} ({ex['collective']}) on communicator {name}")
        elif dead:
            lines.append(f"  => {_ranks(dead)} left no dump; the others wait in #{k}")
        else:
            lines.append(f"  => every rank is in #{k}: look at the other communicators, or at MPI")
    if not found:
        lines.append("no collective was running in any dump: the ranks were not stuck in lpmpi")
    return "\n".join(lines)


# ------------------------------------------------------------------------- the command
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="lpmpi-trace", description=(
        "Merge and summarise an LPMPI_TRACE directory (one timeline, trace.json; a summary per "
        "collective; trace.png), or with --hang read flight-recorder dumps (LPMPI_FR_DIR) and say "
        "where the ranks diverged."))
    p.add_argument("directory")
    p.add_argument("--hang", action="store_true", help="read fr.<rank>.json dumps: where the ranks diverged")
    p.add_argument("--png", help="the picture's path (default DIR/trace.png; 'none': no picture)")
    p.add_argument("--last", type=int, default=400, help="calls per rank in the picture's timeline (default 400)")
    a = p.parse_args(argv)
    if not Path(a.directory).is_dir():
        p.error(f"{a.directory}: not a directory")
    if a.hang:
        print(hang(a.directory))
        return 0
    evs = load(a.directory)
    if not evs:
        print(f"no trace files (trace.<rank>.json or .bin) in {a.directory}", file=sys.stderr)
        return 1
    merged = Path(a.directory) / "trace.json"
    write_json(merged, [e for r in sorted(evs) for e in evs[r]])
    print(summary(evs))
    print(f"merged timeline: {merged} (open it in https://ui.perfetto.dev or chrome://tracing)")
    if a.png != "none":
        png = plot(evs, a.png or Path(a.directory) / "trace.png", a.last)
        print(f"picture: {png}" if png else "picture: none (matplotlib is not installed: pip install matplotlib, "
              "or lpmpi[examples])")
    return 0


if __name__ == "__main__":
    sys.exit(main())
