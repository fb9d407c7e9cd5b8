"""Generated sources are up to date with their descriptors (issue 51): lpmpi/_core.src/forms.pxi
is what tools/gen_forms.py makes of lpmpi/_core.src/forms.toml, and the functions it declares
are lpmpi's, with the descriptor's parameters."""
import importlib.util
import inspect
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("gen_forms", ROOT / "tools" / "gen_forms.py")
gen_forms = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_forms)


def test_forms_pxi_matches_its_descriptor():
    assert gen_forms.main(["--check"]) == 0, "run `python tools/gen_forms.py`"


def test_a_changed_descriptor_is_seen(tmp_path, monkeypatch):
    """The check fails when the descriptor says something forms.pxi does not."""
    desc = tmp_path / "forms.toml"
    desc.write_text(gen_forms.DESCRIPTOR.read_text().replace('chunk_bytes=None', 'chunk_bytes=4096', 1))
    monkeypatch.setattr(gen_forms, "DESCRIPTOR", desc)
    assert gen_forms.main(["--check"]) == 1


def test_generated_functions_have_the_descriptors_parameters():
    import lpmpi
    entries = tomllib.loads(gen_forms.DESCRIPTOR.read_text())["collective"]
    assert entries
    for e in entries:
        want = list(inspect.signature(eval(f"lambda {e['params']}: 0")).parameters)   # noqa: S307
        for fname in (e["name"], f"i{e['name']}", f"{e['name']}_init"):
            fn = getattr(lpmpi, fname)
            assert list(inspect.signature(fn).parameters) == want, fname
            assert fname in lpmpi.__all__
        assert getattr(lpmpi, e["name"]).__doc__.split()[:3] == e["doc"].split()[:3]


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
