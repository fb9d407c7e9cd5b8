"""Generated sources are up to date with their descriptors (issue 51): the regions marked
GENERATED in src/ and lpmpi/ (the collectives' enum, rows, MPI calls, XLA handlers, Python
functions, lpmpi.jax's functions) are what tools/gen_colls.py makes of lpmpi/_colls.py, the
engine built from them reports the descriptor's rows, and the functions they declare are lpmpi's,
with the descriptor's parameters; src/include/knobs.h is what tools/gen_knobs.py makes of
lpmpi/_knobs.py."""
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("gen_colls", ROOT / "tools" / "gen_colls.py")
gen_colls = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_colls)
COLLS = gen_colls.load().COLLECTIVES


def test_generated_regions_match_the_collectives_descriptor():
    assert gen_colls.main(["--check"]) == 0, "run `python tools/gen_colls.py`"


@pytest.mark.parametrize("change", [
    ('"MPI_Gather"', '"MPI_Igather"'),                      # a C call (alg_native.c)
    ('root=True, result="root", rblocks=0', 'root=True, result="all", rblocks=0'),  # a row
    ('chunk_bytes=None\'', 'chunk_bytes=4096\''),          # a generated Python function
    ('jax=Jax(compression=True, doc=', 'jax=Jax(doc='),   # an lpmpi.jax function
])
def test_a_changed_descriptor_is_seen(tmp_path, change):
    """The check fails when the descriptor says something a generated region does not."""
    old, new = change
    text = gen_colls.DESCRIPTOR.read_text()
    assert old in text, old
    desc = tmp_path / "_colls.py"
    desc.write_text(text.replace(old, new, 1))
    assert gen_colls.main(["--check", "--descriptor", str(desc)]) == 1


def test_the_engine_reports_the_descriptors_rows():
    """The built engine's rows (lp_colls through lp_coll_traits) are the descriptor's, in its
    order: a stale build or a hand edit of a generated region shows here."""
    from lpmpi import _core, engine
    assert _core.COLLECTIVES == tuple(c.name for c in COLLS)
    for c in COLLS:
        row = engine.collective_info(c.name)
        assert (row.has_op, row.has_root, row.input, row.result, row.send_blocks, row.recv_blocks,
                row.mpi_name, row.ring_shm, row.send_counts, row.recv_counts, row.via, row.prefix) == (
            c.op, c.root, c.input, c.result, c.sblocks, c.rblocks, c.mpi, c.shm,
            "send" in c.vcounts, "recv" in c.vcounts, c.via, c.prefix), c.name


def test_the_descriptors_compressible_collectives_are_the_engines():
    """compression= is checked against the descriptor's list (tuning.pxi) and runs through the
    registry's compressed rows: the two say the same."""
    from lpmpi import _core
    want = {c.name for c in COLLS if c.compression}
    assert want and want == set(_core._cz_collectives())


def test_generated_functions_have_the_descriptors_parameters():
    import lpmpi
    made = [c for c in COLLS if c.forms]
    assert made
    for c in made:
        want = list(inspect.signature(eval(f"lambda {c.forms.params}: 0")).parameters)   # noqa: S307
        for fname in (c.name, f"i{c.name}", f"{c.name}_init"):
            fn = getattr(lpmpi, fname)
            assert list(inspect.signature(fn).parameters) == want, fname
            assert fname in lpmpi.__all__
        assert getattr(lpmpi, c.name).__doc__.split()[:3] == c.forms.doc.split()[:3]


def test_every_torch_method_of_the_descriptor_is_the_backends():
    """The torch backend has each method the descriptor names (its profiler wraps them)."""
    group = pytest.importorskip("lpmpi.torch._group")
    for c in COLLS:
        for m in c.torch:
            assert callable(getattr(group.ProcessGroupLpmpi, m.method, None)), (c.name, m.method)


# ---------------------------------------------------------------- the knob table -> src/include/knobs.h
_spec = importlib.util.spec_from_file_location("gen_knobs", ROOT / "tools" / "gen_knobs.py")
gen_knobs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_knobs)


def test_knobs_h_matches_the_knob_table():
    """src/include/knobs.h (the C side's defaults and limits, the list of knobs the ranks must
    agree on) is what tools/gen_knobs.py makes of lpmpi/_knobs.py."""
    assert gen_knobs.main(["--check"]) == 0, "run `python tools/gen_knobs.py`"


def test_a_changed_knob_table_is_seen(tmp_path):
    """The check fails when a default in the table is not the header's."""
    table = tmp_path / "_knobs.py"
    text = gen_knobs.TABLE.read_text()
    assert "default=256, lo=0" in text
    table.write_text(text.replace("default=256, lo=0", "default=512, lo=0", 1))
    assert gen_knobs.main(["--check", "--table", str(table)]) == 1


def test_the_engine_runs_with_the_knob_tables_defaults_and_limits():
    """What the engine reports (its limits, lpmpi.engine) is the table's, and the table is the
    documents' (VARIABLES: README's and docs/api.md's table)."""
    from lpmpi import _env, _knobs, engine
    assert (engine.WINDOW_MAX, engine.STAGING_MAX) == (_knobs.WINDOW_MAX, _knobs.STAGING_MAX)
    assert [v[0] for v in _env.VARIABLES] == [k.name for k in _knobs.KNOBS]
    for k in _knobs.KNOBS:
        assert k.name.startswith("LPMPI_") and hasattr(_env.Settings(), k.field), k.name
        assert not k.agree or k.c_value or k.name in ("LPMPI_ALGORITHM", "LPMPI_CHUNK_BYTES"), k.name
