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
