"""Tuning tables: the schema and its validation, bucket edges and merging, lookup at the edges
(through the engine), fingerprint matching, and import with missing, corrupt, truncated,
hand-edited or foreign tables (each: `import lpmpi` works, with exactly one warning)."""
import copy
import json
import math
import sys
import textwrap

import pytest
from _mpi import child_env, run

import lpmpi
from lpmpi import tables
from lpmpi.tables import Choice, TableError, bucket_edges, merge_choices, parse_table

LIB = tables.library_version_line()


def doc(nprocs=1, rows=None, library=LIB, **extra):
    """A valid table document for P = nprocs (P = 1: the singleton the in-process tests run as)."""
    rows = rows if rows is not None else {
        "allreduce": [
            {"lo": 0, "hi": 1000, "algorithm": "native", "chunk_bytes": None},
            {"lo": 1000, "hi": 65536, "algorithm": "mst"},
            {"lo": 65536, "hi": "inf", "algorithm": "lp", "chunk_bytes": 131072},
        ],
        "bcast": [{"lo": 0, "hi": "inf", "algorithm": "lp", "chunk_bytes": 4096}],
    }
    d = {"lpmpi_table_version": 1,
         "fingerprint": {"mpi_library": library, "nprocs": nprocs, "ranks_per_node": nprocs,
                         "memory": "host", "cpu_model": tables.cpu_model()},
         "tuner": {"command": "test"}, "collectives": rows}
    d.update(extra)
    return d


def python(code, env=None, timeout=60):
    """Run ``code`` in a fresh single-process interpreter; returns its output (exit 0 asserted)."""
    rc, out, _ = run([sys.executable, "-c", textwrap.dedent(code)], child_env(env), timeout)
    assert rc == 0, f"exit status {rc} (env {env}):\n{out[-6000:]}"
    return out


# ----------------------------------------------------------------------------- schema


def test_valid_table_parses():
    t = parse_table(doc(nprocs=2))
    assert (t.nprocs, t.memory, t.skipped) == (2, "host", [])
    assert [(r.collective, r.lo, r.hi, r.algorithm, r.chunk_bytes) for r in t.rows] == [
        ("allreduce", 0, 1000, "native", None), ("allreduce", 1000, 65536, "mst", None),
        ("allreduce", 65536, math.inf, "lp", 131072), ("bcast", 0, math.inf, "lp", 4096)]


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: d.pop("lpmpi_table_version"), "lpmpi_table_version"),
    (lambda d: d.update(lpmpi_table_version=2), "version 1"),
    (lambda d: d.update(lpmpi_table_version=True), "version 1"),
    (lambda d: d.update(lpmpi_table_version="1"), "version 1"),
    (lambda d: d.pop("fingerprint"), "fingerprint"),
    (lambda d: d["fingerprint"].update(nprocs=0), "nprocs"),
    (lambda d: d["fingerprint"].update(nprocs="2"), "nprocs"),
    (lambda d: d["fingerprint"].update(mpi_library=7), "mpi_library"),
    (lambda d: d["fingerprint"].update(memory="disk"), "memory"),
    (lambda d: d.update(collectives=[1, 2]), "collectives"),
], ids=["no-version", "future-version", "bool-version", "str-version", "no-fingerprint", "zero-P",
        "str-P", "int-library", "bad-memory", "collectives-list"])
def test_unusable_tables_are_rejected_with_a_reason(mutate, reason):
    d = doc()
    mutate(d)
    with pytest.raises(TableError, match=reason):
        parse_table(d)
    with pytest.raises(TableError, match="top level"):
        parse_table([d])


@pytest.mark.parametrize("row, reason", [
    ({"lo": "0", "hi": 10, "algorithm": "lp"}, "lo must be"),
    ({"lo": 0, "hi": "10", "algorithm": "lp"}, "hi must be"),
    ({"lo": -1, "hi": 10, "algorithm": "lp"}, ">= 0"),
    ({"lo": 0, "hi": float("nan"), "algorithm": "lp"}, "finite"),
    ({"lo": True, "hi": 10, "algorithm": "lp"}, "lo must be"),
    ({"lo": 10, "hi": 10, "algorithm": "lp"}, "empty range"),
    ({"lo": 0, "hi": 10, "algorithm": "warp"}, "unknown algorithm"),
    ({"lo": 0, "hi": 10, "algorithm": "ring"}, "unknown algorithm 'ring' for bcast"),
    ({"lo": 0, "hi": 10, "algorithm": ["lp"]}, "unknown algorithm"),
    ({"lo": 0, "hi": 10, "algorithm": "lp", "chunk_bytes": -4096}, "positive int"),
    ({"lo": 0, "hi": 10, "algorithm": "lp", "chunk_bytes": 0}, "positive int"),
    ({"lo": 0, "hi": 10, "algorithm": "lp", "chunk_bytes": 1.5}, "positive int"),
    ({"lo": 0, "hi": 10, "algorithm": "lp", "chunk_bytes": True}, "positive int"),
    ({"lo": 0, "algorithm": "lp"}, "missing hi"),
    ("lp", "must be an object"),
    ({"lo": 0, "hi": 10, "algorithm": "lp", "measured": 3}, "measured"),
])
def test_invalid_rows_are_skipped_with_a_reason(row, reason):
    good = {"lo": 10, "hi": "inf", "algorithm": "native"}
    t = parse_table(doc(rows={"bcast": [row, good]}))
    assert len(t.skipped) == 1 and reason in t.skipped[0], t.skipped
    assert [(r.lo, r.algorithm) for r in t.rows] == [(10, "native")]


def test_overlapping_unsorted_rows_and_unknown_collectives_are_skipped():
    rows = {"allreduce": [{"lo": 0, "hi": 100, "algorithm": "mst"},
                          {"lo": 50, "hi": 200, "algorithm": "be"},          # overlaps
                          {"lo": 100, "hi": "inf", "algorithm": "lp"}],
            "reduce": [{"lo": 100, "hi": "inf", "algorithm": "lp"},
                       {"lo": 0, "hi": 100, "algorithm": "mst"}],            # unsorted
            "alltoall": [{"lo": 0, "hi": "inf", "algorithm": "lp"}]}
    t = parse_table(doc(rows=rows))
    assert [(r.collective, r.algorithm) for r in t.rows] == [("allreduce", "mst"), ("allreduce", "lp"),
                                                             ("reduce", "lp")]
    assert len(t.skipped) == 3 and any("alltoall" in s for s in t.skipped)


def test_unchunked_algorithm_with_a_chunk_is_fine_and_the_chunk_ignored():
    t = parse_table(doc(rows={"reduce": [{"lo": 0, "hi": "inf", "algorithm": "mst", "chunk_bytes": 4096}]}))
    assert t.skipped == [] and t.rows[0].chunk_bytes is None


def test_model_section_validated():
    assert parse_table(doc(model={"alpha": 1e-6, "beta": 1e-10, "gamma": 2e-10})).model == (1e-6, 1e-10, 2e-10)
    t = parse_table(doc(model={"alpha": -1, "beta": 1e-10, "gamma": 2e-10}))
    assert t.model is None and any("model" in s for s in t.skipped)


def test_hash_is_canonical_and_sensitive():
    a = parse_table(doc())
    b = parse_table(json.loads(json.dumps(doc(), indent=3, sort_keys=True)))
    assert tables.rows_hash([a]) == tables.rows_hash([b]) != 0
    changed = doc()
    changed["collectives"]["bcast"][0]["chunk_bytes"] = 8192
    assert tables.rows_hash([parse_table(changed)]) != tables.rows_hash([a])
    assert tables.rows_hash([]) == 0


# ----------------------------------------------------------------------------- building


def test_bucket_edges_are_geometric_midpoints():
    """Inside the tuned range, boundaries at the geometric midpoints; beyond it, the first and
    last bucket reach a half step (the neighbour's ratio, at most 4, a lone size's 2) past the
    smallest and largest size, and the sizes further out get no row (the cost model)."""
    assert bucket_edges([8, 32, 128, 1 << 20]) == [(4, 16), (16, 64), (64, 11585), (11585, 2 << 20)]
    assert bucket_edges([4096]) == [(2896, 5793)]
    assert bucket_edges([8, 16, 32]) == [(6, 11), (11, 23), (23, 45)]           # the default ladder
    assert bucket_edges([1, 2]) == [(1, 2), (2, 3)]                             # each holds its size
    for sizes in ([8, 64 << 20], [1, 2, 3], [8, 256 << 10], [100]):
        edges = bucket_edges(sizes)
        assert all(lo <= n < hi for n, (lo, hi) in zip(sizes, edges)), (sizes, edges)
        assert all(a[1] == b[0] for a, b in zip(edges, edges[1:])), edges      # contiguous
        assert 0 < edges[0][0] and edges[-1][1] <= 4 * sizes[-1], edges
    with pytest.raises(ValueError):
        bucket_edges([32, 8])


def test_a_two_size_tuning_leaves_sizes_beyond_its_range_to_the_model(tmp_path):
    """The tester's case: two tuned sizes used to give one row [0, inf) applied from 8 B to
    64 MiB; now the rows end a half step beyond the tuned sizes, and auto decides by the cost
    model beyond (the engine's lookup finds no row there)."""
    rows = merge_choices("allreduce", [Choice(8, "be", None, 2e-6, 3e-6),
                                       Choice(256 << 10, "be", None, 9e-5, 1e-4)], {"be": False})
    assert [(r.lo, r.hi, r.algorithm) for r in rows] == [(4, 512 << 10, "be")]
    path = tmp_path / "two.json"
    tables.write_table(path, tables.table_document(doc()["fingerprint"], rows, {"command": "x"}))
    out = python("""
        import lpmpi
        for n in (0, 3, 4, 8, 256 << 10, (512 << 10) - 1, 512 << 10, 64 << 20):
            print("SOURCE", n, lpmpi.explain("allreduce", n).source)
        """, env={"LPMPI_TUNING_FILE": str(path)})
    got = {int(ln.split()[1]): ln.split()[2] for ln in out.splitlines() if ln.startswith("SOURCE")}
    assert got == {0: "model", 3: "model", 4: "table", 8: "table", 256 << 10: "table",
                   (512 << 10) - 1: "table", 512 << 10: "model", 64 << 20: "model"}, out


def test_merge_adjacent_buckets_with_the_same_choice():
    chunked = {"lp": True, "mst": False, "native": False}
    ch = [Choice(8, "native", None, 2e-6, 2e-6), Choice(32, "native", None, 3e-6, 3e-6),
          Choice(128, "mst", 4096, 5e-6, 6e-6),  # unchunked: its chunk is dropped
          Choice(512, "lp", 1024, 7e-6, 9e-6), Choice(2048, "lp", 1024, 9e-6, 12e-6),
          Choice(8192, "lp", 4096, 2e-5, 3e-5)]
    rows = merge_choices("reduce", list(reversed(ch)), chunked)
    assert [(r.lo, r.hi, r.algorithm, r.chunk_bytes) for r in rows] == [
        (4, 64, "native", None), (64, 256, "mst", None), (256, 4096, "lp", 1024), (4096, 16384, "lp", 4096)]
    assert [m["nbytes"] for m in rows[2].measured] == [512, 2048]
    assert rows[0].measured[1] == {"nbytes": 32, "time_us": 3.0, "native_us": 3.0}
    # the written document reads back to the same rows
    back = parse_table(tables.table_document(doc()["fingerprint"], rows, {"command": "x"}))
    assert [(r.lo, r.hi, r.algorithm, r.chunk_bytes) for r in back.rows] == \
        [(r.lo, r.hi, r.algorithm, r.chunk_bytes) for r in rows]


def test_lookup_at_bucket_edges():
    t = parse_table(doc())
    assert t.lookup("allreduce", 999).algorithm == "native"
    assert t.lookup("allreduce", 1000).algorithm == "mst"       # lo is inclusive, hi exclusive
    assert t.lookup("allreduce", 65535).algorithm == "mst"
    assert t.lookup("allreduce", 65536).algorithm == "lp"
    assert t.lookup("allreduce", 1 << 40).algorithm == "lp"
    assert t.lookup("reduce", 10) is None


# ----------------------------------------------------------------------------- fingerprint


@pytest.mark.parametrize("line, name", [
    ("MPICH Version: 5.0.2", "MPICH"),
    ("MPICH Version:      4.2.0", "MPICH"),
    ("Open MPI v5.0.3, package: Open MPI builder Distribution, ident: 5.0.3", "Open MPI"),
    ("Intel(R) MPI Library 2021.6 for Linux* OS", "Intel(R) MPI Library"),
    ("MVAPICH2 Version      :\t2.3.7", "MVAPICH2"),
])
def test_library_name(line, name):
    assert tables.library_name(line) == name


def test_fingerprint_matching():
    fp = doc(nprocs=2)["fingerprint"]
    same, diffs = tables.compare_fingerprint(fp, {**fp})
    assert same and diffs == []
    newer, diffs = tables.compare_fingerprint({**fp, "mpi_library": "MPICH Version: 4.1.0"},
                                              {**fp, "mpi_library": "MPICH Version: 5.0.2", "cpu_model": "Z"})
    assert newer and {d.split(":")[0] for d in diffs} == {"mpi_library", "cpu_model"}
    foreign, _ = tables.compare_fingerprint({**fp, "mpi_library": "Open MPI v5.0.3"}, fp)
    assert not foreign


def test_fingerprint_of_this_process():
    from mpi4py import MPI

    fp = tables.fingerprint(MPI.COMM_SELF)
    assert fp["nprocs"] == 1 and fp["ranks_per_node"] == 1 and fp["memory"] == "host"
    assert tables.library_name(fp["mpi_library"]) == tables.library_name(LIB)
    assert isinstance(fp["cpu_model"], str) and fp["cpu_model"]


# ----------------------------------------------------------------------------- import


LOAD = """
    import json, warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        import lpmpi
    import numpy as np
    from lpmpi import _core
    ours = [x for x in w if issubclass(x.category, lpmpi.TuningWarning)]
    st = lpmpi.tables.status()
    res = {"warnings": [str(x.message) for x in w], "ours": len(ours), "applied": len(st.applied),
           "hash": st.table_hash}
    for coll, n in (("allreduce", 999), ("allreduce", 1000), ("allreduce", 65535), ("allreduce", 65536),
                    ("bcast", 10), ("reduce", 100)):
        res[f"{coll} {n}"] = list(_core.explain_choice(coll, n))
    assert (lpmpi.allreduce(np.ones(10)) == 1).all()
    print("RESULT", json.dumps(res))
"""


def load_with(tmp_path, content, name="table.json"):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = python(LOAD, env={"LPMPI_TUNING_FILE": str(path)})
    return json.loads(out.split("RESULT", 1)[1])


def test_table_is_loaded_and_used_with_lookup_at_the_edges(tmp_path):
    res = load_with(tmp_path, json.dumps(doc()))
    assert res["warnings"] == [] and res["applied"] == 1 and res["hash"] != 0
    assert res["allreduce 999"] == ["native", None, "table"]
    assert res["allreduce 1000"] == ["mst", None, "table"]
    assert res["allreduce 65535"] == ["mst", None, "table"]
    assert res["allreduce 65536"] == ["lp", 131072, "table"]
    assert res["bcast 10"] == ["lp", 4096, "table"]
    assert res["reduce 100"][2] == "model"          # no reduce rows: the model decides


def _truncated():
    text = json.dumps(doc())
    return text[: len(text) // 2]


BAD = {
    "missing": None,
    "empty": "",
    "garbage": "this is { not json",
    "truncated": _truncated(),
    "binary": b"\x89PNG\r\n\x1a\n\x00\xff",
    "future-version": json.dumps({**doc(), "lpmpi_table_version": 99}),
    "list": json.dumps([doc()]),
    "wrong-types": json.dumps({**doc(), "fingerprint": {"mpi_library": 1, "nprocs": "two"}}),
    "foreign": json.dumps(doc(library="Open MPI v5.0.3, package: Open MPI")),
    "deep": "[" * 100000 + "]" * 100000,
}


@pytest.mark.parametrize("content", list(BAD.values()), ids=list(BAD))
def test_bad_table_gives_one_warning_and_the_model(tmp_path, content):
    res = load_with(tmp_path, content)
    assert res["ours"] == 1 and len(res["warnings"]) == 1, res["warnings"]
    assert "tuning table" in res["warnings"][0]
    assert res["applied"] == 0 and res["hash"] == 0
    assert {v[2] for k, v in res.items() if k.startswith(("allreduce", "bcast", "reduce"))} == {"model"}


def test_hand_edited_rows_skipped_rest_applied_with_one_warning(tmp_path):
    d = doc()
    d["collectives"]["allreduce"][1]["chunk_bytes"] = -5          # negative chunk
    d["collectives"]["bcast"][0]["algorithm"] = "ring"            # not a bcast algorithm
    d["collectives"]["reduce"] = "lots"                           # wrong type
    res = load_with(tmp_path, json.dumps(d))
    assert res["ours"] == 1 and len(res["warnings"]) == 1, res["warnings"]
    assert "skipped 3 invalid row(s)" in res["warnings"][0]
    assert res["allreduce 999"] == ["native", None, "table"]
    assert res["allreduce 1000"][2] == "model"                    # the bad row's range: the model
    assert res["allreduce 65536"] == ["lp", 131072, "table"]
    assert res["bcast 10"][2] == "model"


def test_disabled_and_directory(tmp_path):
    res = python(LOAD, env={"LPMPI_TUNING_FILE": "none"})
    res = json.loads(res.split("RESULT", 1)[1])
    assert res["warnings"] == [] and res["applied"] == 0
    res = json.loads(python(LOAD, env={"LPMPI_TUNING_FILE": str(tmp_path)}).split("RESULT", 1)[1])
    assert res["ours"] == 1 and res["applied"] == 0


def test_table_model_is_installed_and_explained(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc(model={"alpha": 3e-6, "beta": 1e-10, "gamma": 2e-10})))
    out = python("""
        import lpmpi
        from lpmpi import model
        print("MODEL", model.current())
        e = lpmpi.explain("allreduce", 1000)
        assert (e.algorithm, e.source, e.table_row.algorithm) == ("mst", "table", "mst"), e
        print(e)
        e = lpmpi.explain("reduce", 100)
        assert e.source == "model" and "no reduce row" in e.table_note, e
        print(e)
        """, env={"LPMPI_TUNING_FILE": str(path)})
    assert "alpha 3.00 us" in out and "table row: [1000, 65536) B -> mst" in out
    assert "model prediction per algorithm" in out


def test_shipped_tables_are_valid():
    """Every table shipped in lpmpi/tables/ reads without any skipped row."""
    import os

    names = [n for n in os.listdir(tables.SHIPPED_DIR) if n.endswith(".json")] \
        if os.path.isdir(tables.SHIPPED_DIR) else []
    for name in names:
        t = tables.read_table(os.path.join(tables.SHIPPED_DIR, name))
        assert t.skipped == [] and t.rows, (name, t.skipped)
        assert t.nprocs <= (t.fingerprint.get("cpu_count") or t.nprocs), f"{name}: oversubscribed run"


def test_status_in_this_process():
    st = tables.status()
    assert st.source in ("shipped", "LPMPI_TUNING_FILE", "disabled")
    assert copy.copy(st).tables_for(999) == []
    assert "tuning tables" in tables.describe({"nprocs": 1, "memory": "host", "mpi_library": LIB})[0]
    assert callable(lpmpi.explain)


def test_info_shows_which_table_applies(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc()))
    out = python("from lpmpi.__main__ import main; main(['info'])", env={"LPMPI_TUNING_FILE": str(path)})
    assert f"tuning tables: LPMPI_TUNING_FILE ({path})" in out
    assert f"{path}: P=1 host, 4 rows: applies" in out
    assert "1 KiB: mst  [table]" in out and "64 KiB: lp, chunk 128 KiB  [table]" in out
    foreign = tmp_path / "f.json"
    foreign.write_text(json.dumps(doc(library="Open MPI v5.0.3")))
    out = python("from lpmpi.__main__ import main; main(['info'])", env={"LPMPI_TUNING_FILE": str(foreign)})
    assert "ignored: foreign" in out and "no table for P=1 (host): 'auto' uses the cost model" in out


def test_only_a_host_tables_model_replaces_the_defaults():
    """The engine's one cost model is for host memory: a device table's fitted model (staged
    transfers) never replaces it, whatever the order the tables are read in."""
    def t(memory, alpha):
        return tables.Table({"nprocs": 2, "memory": memory, "mpi_library": LIB}, [],
                            model=(alpha, 1e-10, 1e-10))
    cuda, host = t("cuda", 9e-6), t("host", 2e-6)
    assert tables.model_table([cuda, host]) is host
    assert tables.model_table([host, cuda]) is host
    assert tables.model_table([cuda]) is None
    assert tables.model_table([]) is None


def test_acc_dtype_tables(tmp_path):
    """A table with fingerprint acc_dtype float32 applies to acc_dtype calls only, keyed by the
    16-bit message's bytes; such a call without an acc row follows the plain rows at the
    float32 copy's bytes; a plain and an acc table for the same P both apply."""
    acc = doc(rows={"allreduce": [{"lo": 0, "hi": 1000, "algorithm": "be"},
                                  {"lo": 1000, "hi": "inf", "algorithm": "ring", "chunk_bytes": 8192}]})
    acc["fingerprint"]["acc_dtype"] = "float32"
    plain = doc(rows={"allreduce": [{"lo": 0, "hi": "inf", "algorithm": "mst"}],
                      "reduce": [{"lo": 0, "hi": 1500, "algorithm": "lp", "chunk_bytes": 1024},
                                 {"lo": 1500, "hi": "inf", "algorithm": "be"}]})
    t = parse_table(acc)
    assert t.acc and t.kind == "host+acc_dtype=float32" and not parse_table(plain).acc
    assert tables.rows_hash([t]) != tables.rows_hash([parse_table({**acc, "fingerprint": plain["fingerprint"]})])
    for bad in ("float16", 1):
        with pytest.raises(TableError, match="acc_dtype"):
            parse_table({**acc, "fingerprint": {**acc["fingerprint"], "acc_dtype": bad}})
    with pytest.raises(TableError, match="acc_dtype"):
        parse_table({**acc, "fingerprint": {**acc["fingerprint"], "memory": "cuda"}})
    (tmp_path / "acc.json").write_text(json.dumps(acc))
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    out = python("""
        import lpmpi
        from lpmpi import _core, tables
        st = tables.status()
        assert len(st.applied) == 2 and not st.ignored, (st.applied, st.ignored)
        c = lambda *a, **k: _core.choice(*a, **k)[:2]
        assert c("allreduce", 800, acc=True) == ("be", None)          # acc row, 16-bit bytes
        assert c("allreduce", 1000, acc=True) == ("ring", 8192)
        assert c("allreduce", 800)[0] == "mst"                         # plain calls: plain rows
        assert c("reduce", 700, acc=True) == ("lp", 1024)             # no acc row: 1400 float32 B
        assert c("reduce", 800, acc=True)[0] == "be"                   # 1600 float32 B
        assert any("host+acc_dtype=float32" in ln for ln in tables.describe({"nprocs": 1, "memory": "host", "mpi_library": tables.library_version_line()}))
        print("OK")
        """, env={"LPMPI_TUNING_FILE": f"{tmp_path / 'acc.json'}:{tmp_path / 'plain.json'}"})
    assert "OK" in out


def test_shipped_tables_of_other_libraries_pass_silently(tmp_path):
    """Tables for several MPI libraries ship side by side: those of other libraries are listed
    by info, never warned about, unless none is for the running library."""
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    ours.write_text(json.dumps(doc()))
    theirs.write_text(json.dumps(doc(library="Open MPI v5.0.11, package: Open MPI")))
    st = tables._select("shipped", [str(ours), str(theirs)], LIB)
    assert [t.path for t in st.applied] == [str(ours)] and not st.ignored
    assert st.foreign == [(str(theirs), "Open MPI v5.0.11, package: Open MPI")]
    assert tables._warning_text(st) is None
    st = tables._select("shipped", [str(theirs)], LIB)
    text = tables._warning_text(st)
    assert text and "no shipped table for" in text and "shipped for: Open MPI" in text, text
    # named explicitly, a foreign table is still an error worth a warning
    st = tables._select("LPMPI_TUNING_FILE", [str(theirs)], LIB)
    assert st.ignored and "foreign" in tables._warning_text(st)


def test_explain_shows_the_plain_tables_row_beside_an_acc_table(tmp_path):
    acc = doc(rows={"allreduce": [{"lo": 0, "hi": "inf", "algorithm": "be"}]})
    acc["fingerprint"]["acc_dtype"] = "float32"
    (tmp_path / "a-acc.json").write_text(json.dumps(acc))          # read first
    (tmp_path / "b.json").write_text(json.dumps(doc()))
    out = python("""
        import lpmpi
        from lpmpi import tables
        st = tables.status()
        assert [t.acc for t in st.tables_for(1)] == [False] and [t.acc for t in st.tables_for(1, acc=True)] == [True]
        e = lpmpi.explain("allreduce", 1000)
        assert (e.algorithm, e.table_row.algorithm) == ("mst", "mst"), e
        # explain's acc_dtype view: the acc table's row, for the float32 copy (issue 41)
        a = lpmpi.explain("allreduce", 1000, acc_dtype="float32")
        assert (a.algorithm, a.table_row.algorithm, a.acc_dtype) == ("be", "be", "float32"), a
        assert "acc_dtype: the 16-bit data are summed in float32" in str(a) and "2000 B" in str(a), str(a)
        for bad in (dict(acc_dtype="float64"), dict(acc_dtype="float32", memory="cuda")):
            try:
                lpmpi.explain("allreduce", 1000, **bad)
            except ValueError:
                pass
            else:
                raise AssertionError(bad)
        # the native requests line names this collective's MPI calls only
        r = lpmpi.explain("alltoall", 1 << 20).requests
        assert "MPI_Ialltoall;" in r and "MPI_Iallreduce" not in r or "native" not in r, r
        print("OK")
        """, env={"LPMPI_TUNING_FILE": f"{tmp_path / 'a-acc.json'}:{tmp_path / 'b.json'}"})
    assert "OK" in out


def test_shipped_host_tables_of_another_cpu_are_not_applied(tmp_path):
    """A shipped host table measured on another CPU model is passed over (listed by info, no
    warning); the one measured on this CPU is applied; LPMPI_TUNING_FILE applies either."""
    here, other = tmp_path / "here.json", tmp_path / "other.json"
    d_here, d_other = doc(), doc()
    d_other["fingerprint"] = {**d_other["fingerprint"], "cpu_model": "Some Other CPU 9000"}
    here.write_text(json.dumps(d_here))
    other.write_text(json.dumps(d_other))
    st = tables._select("shipped", [str(other), str(here)], LIB)
    assert [t.path for t in st.applied] == [str(here)] and not st.ignored
    assert st.other_cpu == [(str(other), "Some Other CPU 9000")]
    assert tables._warning_text(st) is None
    st = tables._select("shipped", [str(other)], LIB)
    assert not st.applied and tables._warning_text(st) is None
    # beside tables of other libraries too (the library has a table, for another CPU)
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(doc(library="Open MPI v5.0.11, package: Open MPI")))
    st = tables._select("shipped", [str(other), str(theirs)], LIB)
    assert not st.applied and st.foreign and tables._warning_text(st) is None
    st = tables._select("LPMPI_TUNING_FILE", [str(other)], LIB)
    assert [t.path for t in st.applied] == [str(other)]
    # a table without cpu_model makes no claim; a cuda table is not keyed by the CPU
    bare = doc()
    del bare["fingerprint"]["cpu_model"]
    assert tables.measured_here(tables.parse_table(bare), "X")
    cuda = doc()
    cuda["fingerprint"] = {**cuda["fingerprint"], "memory": "cuda", "cpu_model": "Y"}
    assert tables.measured_here(tables.parse_table(cuda), "X")


def test_shipped_tables_of_other_mpi_tuning_variables_are_not_applied(tmp_path):
    """Issue 50: the MPI library's own collective tuning variables (I_MPI_ADJUST_*, Open MPI's
    coll MCA parameters, MPICH's algorithm CVARs) are part of the fingerprint: a shipped table
    measured with none set is passed over when one is set (listed, no warning), applies again
    when they match; LPMPI_TUNING_FILE applies it anyway; a bad mpi_tuning is a table error."""
    plain, adj8 = tmp_path / "plain.json", tmp_path / "adj8.json"
    d8 = doc()
    d8["fingerprint"] = {**d8["fingerprint"], "mpi_tuning": {"I_MPI_ADJUST_ALLREDUCE": "8"}}
    plain.write_text(json.dumps(doc()))
    adj8.write_text(json.dumps(d8))
    env = {"I_MPI_ADJUST_ALLREDUCE": "8", "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1", "PATH": "/bin",
           "OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    assert tables.mpi_tuning(env) == {"I_MPI_ADJUST_ALLREDUCE": "8", "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring",
                                      "OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}
    st = tables._select("shipped", [str(plain)], LIB, tuning={"I_MPI_ADJUST_ALLREDUCE": "8"})
    assert not st.applied and st.other_tuning == [(str(plain), "none set")]
    assert tables._warning_text(st) is None
    st = tables._select("shipped", [str(plain), str(adj8)], LIB, tuning={"I_MPI_ADJUST_ALLREDUCE": "8"})
    assert [t.path for t in st.applied] == [str(adj8)]
    st = tables._select("shipped", [str(plain), str(adj8)], LIB, tuning={})
    assert [t.path for t in st.applied] == [str(plain)]
    assert st.other_tuning == [(str(adj8), "I_MPI_ADJUST_ALLREDUCE=8")]
    st = tables._select("LPMPI_TUNING_FILE", [str(plain)], LIB, tuning={"I_MPI_ADJUST_ALLREDUCE": "8"})
    assert [t.path for t in st.applied] == [str(plain)]
    bad = doc()
    bad["fingerprint"] = {**bad["fingerprint"], "mpi_tuning": {"I_MPI_ADJUST_ALLREDUCE": 8}}
    with pytest.raises(tables.TableError, match="mpi_tuning"):
        tables.parse_table(bad)


def test_a_rows_transport_is_validated_kept_where_it_applies_and_hashed():
    d = doc(rows={"allreduce": [{"lo": 0, "hi": 1024, "algorithm": "ring", "chunk_bytes": 4096, "transport": "shm"},
                                {"lo": 1024, "hi": 4096, "algorithm": "lp", "transport": "cma"},
                                {"lo": 4096, "hi": 8192, "algorithm": "ring", "transport": "bogus"},
                                {"lo": 8192, "hi": "inf", "algorithm": "ring"}]})
    t = tables.parse_table(d)
    assert [r.transport for r in t.rows] == ["shm", None, None]     # lp has no transport; bogus skipped
    assert len(t.skipped) == 1 and "transport must be one of" in t.skipped[0]
    d2 = json.loads(json.dumps(d))
    d2["collectives"]["allreduce"][0]["transport"] = "cma"
    assert tables.rows_hash([t]) != tables.rows_hash([tables.parse_table(d2)])
    rows = tables.merge_choices("allreduce", [tables.Choice(8, "ring", 4096, 1e-6, 2e-6, transport="shm"),
                                              tables.Choice(16, "ring", 4096, 1e-6, 2e-6, transport="shm"),
                                              tables.Choice(32, "ring", 4096, 1e-6, 2e-6, transport="mpi")],
                                {"ring": True})
    assert [(r.transport, r.hi) for r in rows] == [("shm", 23.0), ("mpi", 45.0)]
    out = tables.table_document(d["fingerprint"], rows, {})
    assert [r.get("transport") for r in out["collectives"]["allreduce"]] == ["shm", "mpi"]


def test_the_transport_override_nests_and_restores():
    from lpmpi import _core, engine

    assert engine.set_transport(None) is None
    with engine.transport("shm"):
        with engine.transport("cma"):
            assert _core.transport_choice("allreduce", 1 << 20, algorithm="ring") == ("cma", "override")
        assert _core.transport_choice("allreduce", 1 << 20, algorithm="ring") == ("shm", "override")
        with engine.transport(None):          # None leaves the setting alone
            assert _core.transport_choice("allreduce", 1 << 20, algorithm="ring")[0] == "shm"
    assert _core.transport_choice("allreduce", 1 << 20, algorithm="ring") == (None, "model")
    with pytest.raises(ValueError, match="transport must be one of"):
        engine.set_transport("rdma")
