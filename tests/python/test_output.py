"""What a cell gives back, on both backends: a value's repr bounded by
max_repr, Result.text bounded by max_text, matplotlib figures as PNG bytes
in Result.images (issue #23 sections 2 and 3)."""

from __future__ import annotations

import os
import struct
import sys

import pytest

import dolsot
from dolsot.inprocess import InProcessSession

pytestmark = pytest.mark.timeout(120)


def _make(kind, **options):
    if kind == "inprocess":
        return InProcessSession(timeout=30, typecheck=False, **options)
    from dolsot.repl import Repl
    from dolsot.store import MemoryStore

    return Repl(store=MemoryStore(), timeout=30, typecheck=False, **options)


@pytest.fixture(params=["inprocess", "repl"])
def make(request):
    """make(**options) -> a backend of this parameter's kind, closed afterwards."""
    made = []

    def factory(**options):
        made.append(_make(request.param, **options))
        return made[-1]

    yield factory
    for backend in made:
        backend.close()


# --- the value ---------------------------------------------------------------

def test_a_million_items_show_their_shape_in_a_few_thousand_characters(make):
    r = make().run("s", "list(range(10**6))")
    assert r.ok, r.error
    assert len(r.value) <= 4000
    assert r.value.startswith("[0, 1, 2, 3, 4, ")
    assert r.value.endswith(", 999998, 999999]  # list of 1000000 items, shortened")
    assert "... 999900 more items ..." in r.value


def test_nested_dicts_are_bounded_at_every_level(make):
    r = make().run("s", "{i: {j: 'x' * 5000 for j in range(300)} for i in range(300)}")
    assert r.ok, r.error
    assert len(r.value) <= 4000
    assert r.value.startswith("{0: {0: 'xxx")
    assert r.value.endswith("}  # dict of 300 items, shortened")
    assert "more characters" in r.value and "more items" in r.value


def test_a_huge_string_keeps_its_head_and_tail(make):
    r = make().run("s", "'<' + 'x' * 50_000_000 + '>'")
    assert len(r.value) <= 4000
    assert r.value.startswith("'<xxx")
    assert r.value.endswith("xx>'  # str of 50000002 characters, shortened")


def test_an_objects_own_ten_megabyte_repr_is_cut_with_a_marker(make):
    backend = make()
    backend.run("s", "class Big:\n    def __repr__(self):\n        return 'B' * 10_000_000 + 'END'")
    r = backend.run("s", "Big()")
    assert len(r.value) <= 4000
    assert r.value.startswith("BBB") and r.value.endswith("BEND")
    assert " more characters ... " in r.value


def test_what_fits_is_pythons_own_repr(make):
    backend = make()
    for code in ["{'a': [1, 2.5, None], 'b': (True,)}", "list(range(100))", "'q' * 3000",
                 "frozenset({1})", "b'\\x00\\xff'"]:
        assert backend.run("s", code).value == repr(eval(code)), code


def test_max_repr_and_max_text_can_be_set(make):
    backend = make(max_repr=300, max_text=1500)
    r = backend.run("s", "print('o' * 50_000)\nlist(range(10**5))")
    assert len(r.value) <= 300
    assert r.value.endswith("99999]  # list of 100000 items, shortened")
    assert len(r.stdout) > 50_000, "stdout keeps DOLSOT_MAX_OUTPUT's meaning"
    assert len(r.text) <= 1500
    assert r.max_text == 1500
    assert "[text cut to 1500 characters (stdout)" in r.text
    assert "print(x[:50])" in r.text and "len(x)" in r.text
    assert r.text.index("99999]") < r.text.index("[text cut")


def test_zero_means_no_cap(make):
    r = make(max_repr=0, max_text=0).run("s", "list(range(10_000))")
    assert r.value == repr(list(range(10_000)))
    assert r.text.startswith(r.value)
    # max_output (default 100000) still caps the value, as the contract says.
    capped = make(max_repr=0).run("s", "list(range(10**6))")
    assert 90_000 < len(capped.value) <= 100_000
    assert capped.value.endswith("999999]  # list of 1000000 items, shortened")


def test_max_output_still_caps_the_value(make):
    r = make(max_output=500).run("s", "list(range(10**5))")
    assert len(r.value) <= 500


def test_the_environment_sets_both(make, monkeypatch):
    monkeypatch.setenv("DOLSOT_MAX_REPR", "200")
    monkeypatch.setenv("DOLSOT_MAX_TEXT", "700")
    r = make().run("s", "print('y' * 5000)\nlist(range(10**4))")
    assert len(r.value) <= 200
    assert len(r.text) <= 700
    assert dolsot._dolsot.resolve_config()["max_repr"] == 200


@pytest.mark.parametrize("name", ["max_repr", "max_text"])
def test_bad_bounds_are_refused(make, name):
    with pytest.raises(dolsot.ConfigError, match=name):
        make(**{name: -1})
    with pytest.raises(TypeError, match=name):
        make(**{name: "4k"})


def test_text_that_fits_is_whole(make):
    r = make().run("s", "print('hello')\n21 * 2")
    assert r.text == "hello\n42\nsession now holds: nothing"


# --- figures -----------------------------------------------------------------

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_MAGIC)
    return struct.unpack(">II", png[16:24])


@pytest.fixture
def matplotlib_path():
    """The directory matplotlib imports from (the Repl's worker gets it through sys.path)."""
    matplotlib = pytest.importorskip("matplotlib")
    import pathlib

    return str(pathlib.Path(matplotlib.__file__).parents[1])


PLOTS = """
import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.title("first"); plt.show()
plt.plot([3, 2, 1]); plt.title("second"); plt.show()
fig, ax = plt.subplots(figsize=(3, 2))
ax.bar([1, 2], [3, 4])
"""


def test_shown_and_open_figures_come_back_as_png(make, matplotlib_path):
    backend = make()
    r = backend.run("s", PLOTS)
    assert r.ok, r.error
    assert len(r.images) == 3, "each show() is its own picture, then the one left open"
    sizes = [png_size(png) for png in r.images]
    assert sizes[0] == sizes[1] and sizes[2][0] < sizes[0][0]
    assert "[3 figures: PNG in Result.images]" in r.text
    # Shown and collected figures are closed: the next cell starts clean.
    again = backend.run("s", "len(plt.get_fignums())")
    assert (again.value, again.images) == ("0", [])


def test_figures_are_bounded_in_count_and_pixels(make, matplotlib_path):
    backend = make()
    r = backend.run("s", "import matplotlib.pyplot as plt\nfor i in range(11): plt.figure()")
    assert len(r.images) == 8
    assert "figures 9, 10, 11 not returned: at most 8 per cell" in r.stdout
    huge = backend.run("s", "plt.figure(figsize=(400, 400), dpi=100)\nplt.plot([1, 2])\nNone")
    assert len(huge.images) == 1
    width, height = png_size(huge.images[0])
    assert width * height <= 4_000_000 * 1.1, "drawn at a lower dpi, not 40000 x 40000"


def test_a_session_that_never_plots_never_imports_matplotlib(make, matplotlib_path):
    backend = make()
    r = backend.run("s", "import sys\n[m for m in sys.modules if m.startswith('matplotlib')]")
    if isinstance(backend, InProcessSession) and "matplotlib" in sys.modules:
        return  # in-process the modules are the host's, and this host imported it
    assert r.value == "[]"


def test_processes_a_cell_starts_get_no_backend_of_ours(make, matplotlib_path):
    code = ("import subprocess, sys\n"
            "import matplotlib.pyplot as plt\n"
            "plt.figure()\n"
            "child = [sys.executable, '-c', 'import os; print(os.environ.get(\"MPLBACKEND\"))']\n"
            "subprocess.run(child, capture_output=True, text=True).stdout.strip()")
    r = make().run("s", code)
    assert r.value == repr(str(os.environ.get("MPLBACKEND"))), "MPLBACKEND is never set"


def test_a_figure_that_cannot_be_drawn_is_named_not_raised(make, matplotlib_path):
    code = ("import matplotlib.pyplot as plt\n"
            "fig = plt.figure()\n"
            "fig.text(0.5, 0.5, '$\\\\frac{$')\n"  # mathtext that fails when drawn
            "1")
    r = make().run("s", code)
    assert r.ok and r.value == "1"
    assert r.images == []
    assert "could not be drawn: ValueError" in r.stdout
