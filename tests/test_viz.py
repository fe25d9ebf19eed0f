"""w1d1_viz, the plot helpers every notebook imports: labelled heatmaps with a colour bar, Chinese
text only with a CJK font, explorers that work with and without a widget front-end."""
import importlib.util
import sys
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from autograder.course import ASSIGNMENT, SOURCE_DIR  # noqa: E402


@pytest.fixture
def viz():
    spec = importlib.util.spec_from_file_location("w1d1_viz", SOURCE_DIR / ASSIGNMENT / "w1d1_viz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    plt.close("all")


def glyph_warnings(fig):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return [str(w.message) for w in caught if "Glyph" in str(w.message) or "missing from" in str(w.message)]


def test_heatmap_has_token_labels_axis_names_and_a_colour_bar(viz):
    toks = ["the", "cat", "sat"]
    A = np.full((3, 3), 1 / 3)
    ax = viz.heatmap(A, toks, toks, title="uniform")
    fig = ax.figure
    assert [t.get_text() for t in ax.get_xticklabels()] == toks
    assert [t.get_text() for t in ax.get_yticklabels()] == toks
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("key", "query", "uniform")
    assert len(fig.axes) == 2, "no colour bar"
    assert sorted(t.get_text() for t in ax.texts) == ["0.33"] * 9  # small matrices carry their values
    assert fig.get_figwidth() * fig.dpi <= 1000


def test_large_heatmap_without_tokens_has_integer_ticks_and_no_annotations(viz):
    ax = viz.heatmap(np.eye(32))
    ax.figure.canvas.draw()
    ticks = ax.get_xticks()
    assert np.allclose(ticks, np.round(ticks)) and not ax.texts
    assert ax.figure.get_figwidth() * ax.figure.dpi <= 1000


def test_label_is_english_without_a_cjk_font(viz, monkeypatch):
    monkeypatch.setattr(viz, "cjk_font", lambda: None)
    before = list(matplotlib.rcParams["font.sans-serif"])
    assert viz.label("注意力权重", "attention weight") == "attention weight"
    assert viz.setup() is None
    assert matplotlib.rcParams["font.sans-serif"] == before


def test_setup_puts_a_found_cjk_font_first(viz, monkeypatch):
    monkeypatch.setattr(viz, "cjk_font", lambda: "Some CJK Font")
    with matplotlib.rc_context():
        assert viz.setup() == "Some CJK Font"
        assert matplotlib.rcParams["font.sans-serif"][0] == "Some CJK Font"
        assert viz.label("注意力权重", "attention weight") == "注意力权重"


def test_labelled_figure_draws_without_glyph_warnings_on_this_machine(viz):
    """Whatever fonts are installed here: Chinese with a CJK font, English without one, never tofu."""
    with matplotlib.rc_context():
        viz.setup()
        ax = viz.heatmap(np.eye(3), ["我", "爱", "你"] if viz.cjk_font() else ["I", "love", "you"],
                         title=viz.label("注意力权重", "attention weight"))
        assert glyph_warnings(ax.figure) == []


def test_chinese_without_a_cjk_font_would_warn(viz, monkeypatch):
    """The check above can fail: Chinese text in the default font is reported as missing glyphs."""
    with matplotlib.rc_context({"font.family": "DejaVu Sans"}):
        fig, ax = plt.subplots()
        ax.set_title("注意力权重")
        assert glyph_warnings(fig)


def test_explorer_without_widgets_draws_the_static_default_only(viz, monkeypatch):
    calls = []

    def draw(n=3, mode="a", flag=False):
        calls.append((n, mode, flag))
        plt.plot(range(n))

    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import fails: no widget library
    assert viz.explorer(draw, n=(1, 9), mode=["b", "a"], flag=True) is None
    assert calls == [(3, "a", False)]  # draw's own defaults, as `interact` would start


def test_explorer_defaults_come_from_the_controls_when_draw_has_none(viz, monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    viz.explorer(lambda n, mode: calls.append((n, mode)), n=(2, 9), mode=["b", "a"])
    assert calls == [(2, "b")]


def test_explorer_with_widgets_redraws_on_a_change(viz):
    import ipywidgets as widgets
    calls = []

    def draw(n=3, mode="a"):
        calls.append((n, mode))

    box = viz.explorer(draw, n=(1, 9), mode=["a", "b"])
    assert isinstance(box, widgets.interactive)
    slider, dropdown = box.children[:2]
    assert (slider.value, dropdown.value) == (3, "a")
    dropdown.value = "b"
    slider.value = 7
    assert calls[0] == (3, "a") and calls[-1] == (7, "b")


def test_seed_stats_and_their_printed_form(viz):
    assert viz.seed_stats([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    assert viz.fmt_stats([0.5, 0.25, 1.0], "{:.2f}") == "0.50 [0.25, 1.00]（3 个种子）"


def test_band_draws_the_median_and_the_range(viz):
    fig, ax = plt.subplots()
    runs = np.array([[1.0, 2.0], [3.0, 6.0], [2.0, 4.0]])
    line = viz.band(ax, [0, 1], runs, label="runs")
    assert np.allclose(line.get_ydata(), [2.0, 4.0])
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 1.0 and band.max() == 6.0


def test_measure_warms_up_and_repeats(viz):
    calls = []
    t = viz.measure(lambda: calls.append(1), repeat=5, warmup=2)
    assert len(calls) == 7 and len(t.samples) == 5
    assert t.best <= t.median
    t = viz.measure(lambda: None, repeat=2, min_time=1.0, max_repeat=9)
    assert len(t.samples) == 9          # min_time not reached: stops at max_repeat


def test_unusable_timings_are_named(viz, capsys):
    steady = viz.Timing([1.0, 1.01, 1.02, 1.0, 1.01])
    busy = viz.Timing([1.0, 3.0, 2.5, 4.0, 2.2])       # median 2.5x the minimum
    short = viz.Timing([1.0, 1.0])
    assert viz.timing_problems({"steady": steady}) == []
    problems = viz.timing_problems({"steady": steady, "busy": busy, "short": short})
    assert len(problems) == 2 and problems[0].startswith("busy") and "2 次" in problems[1]
    assert viz.spread_problem("ratio", [2.9, 3.0, 3.1], 1.5) is None
    assert "0.01" in viz.spread_problem("ratio", [0.01, 5.22, 276.42], 1.5)
    assert viz.unusable([None]) is False and capsys.readouterr().out == ""
    assert viz.unusable(problems) is True
    out = capsys.readouterr().out
    assert "不可用" in out and "busy" in out and "不做解读" in out
