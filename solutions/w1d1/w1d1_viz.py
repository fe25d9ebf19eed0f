"""Plot and statistics helpers shared by every W1D1 notebook (shipped to students).

- Figures use English / math labels by default; `label(zh, en)` picks Chinese only when a
  CJK font is installed, so no "Glyph missing" warning ever appears.
- `heatmap` draws an attention matrix with tokens on both axes and a colour bar.
- `seed_stats` reports median and range of a random quantity over several seeds; `band` plots
  such per-seed runs as a median line with a min–max band.
- `measure` times a function robustly (warm-up, several repeats, minimum); `timing_problems` and
  `spread_problem` say when a measurement on a busy machine is unusable, `unusable` prints why.
- `explorer` shows a static default figure and, where ipywidgets has a front-end, the controls.
- `print_table` prints rows in aligned columns (a Chinese character counts two columns).
"""
import inspect
import time
import unicodedata
import warnings
from functools import lru_cache

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import font_manager
from matplotlib.ticker import MaxNLocator

CJK_FONT_NAMES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei",
                  "WenQuanYi Micro Hei", "SimHei", "Microsoft YaHei", "PingFang SC", "AR PL UMing CN")


@lru_cache(maxsize=1)
def cjk_font():
    """Name of an installed CJK font, or None."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    for name in CJK_FONT_NAMES:
        if name in installed:
            return name
    return None


def setup():
    """Notebook-wide plot defaults; adds a CJK font to the fallback list when one exists."""
    matplotlib.rcParams.update({"figure.dpi": 100, "figure.figsize": (6.4, 4.0), "axes.grid": False,
                                "font.size": 10})
    font = cjk_font()
    if font:
        matplotlib.rcParams["font.sans-serif"] = [font] + list(matplotlib.rcParams["font.sans-serif"])
        matplotlib.rcParams["axes.unicode_minus"] = False
    return font


def label(zh, en):
    """Chinese text where a CJK font exists, English otherwise."""
    return zh if cjk_font() else en


def heatmap(A, xlabels=None, ylabels=None, title=None, ax=None, vmin=0.0, vmax=None, cmap="viridis",
            annotate=None, xlabel="key", ylabel="query"):
    """Attention heatmap: rows = queries, columns = keys, with a colour bar."""
    A = np.asarray(A, dtype=float)
    if ax is None:
        size = min(7.0, 1.2 + 0.45 * max(A.shape))
        _, ax = plt.subplots(figsize=(size + 1.0, size))
    im = ax.imshow(A, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    T_q, T_k = A.shape
    if xlabels is not None:
        ax.set_xticks(range(T_k), labels=list(xlabels), rotation=45, ha="right")
    else:  # positions are integers: no 2.5-style ticks
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if ylabels is not None:
        ax.set_yticks(range(T_q), labels=list(ylabels))
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if annotate is None:
        annotate = max(A.shape) <= 10
    if annotate:
        hi = np.nanmax(A) if vmax is None else vmax
        for i in range(T_q):
            for j in range(T_k):
                ax.text(j, i, f"{A[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if A[i, j] < 0.6 * hi else "black")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def seed_stats(values):
    """(median, min, max) of a list of per-seed measurements."""
    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(v.min()), float(v.max())


def fmt_stats(values, fmt="{:.3g}"):
    """'median [min, max] (n seeds)' for printing beside the course text's figure."""
    med, lo, hi = seed_stats(values)
    return f"{fmt.format(med)} [{fmt.format(lo)}, {fmt.format(hi)}]（{len(values)} 个种子）"


def _width(text):
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def print_table(header, rows, gap=2):
    """Print `rows` (sequences of values) under `header` in left-aligned columns."""
    cells = [[str(v) for v in row] for row in [header, *rows]]
    widths = [max(_width(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print((" " * gap).join(v + " " * (w - _width(v)) for v, w in zip(row, widths)).rstrip())


MIN_REPEATS = 5      # fewer timed calls than this: no statistic to trust
MAX_NOISE = 0.5      # median more than 50 % above the minimum: the machine was busy while timing


class Timing:
    """Wall-clock samples (seconds) of one function; `best` (the minimum) is the robust statistic:
    interference from other processes only ever makes a call slower."""

    def __init__(self, samples):
        self.samples = np.asarray(samples, dtype=float)

    @property
    def best(self):
        return float(self.samples.min())

    @property
    def median(self):
        return float(np.median(self.samples))

    @property
    def noise(self):
        """How much slower the typical call was than the best one: median / min - 1."""
        return self.median / self.best - 1.0


def measure(fn, repeat=MIN_REPEATS, warmup=1, min_time=0.0, max_repeat=50, sync=None):
    """Time fn(): `warmup` untimed calls, then at least `repeat` timed calls, more until `min_time`
    seconds are spent (at most `max_repeat`). `sync` (e.g. torch.cuda.synchronize) runs after each call."""
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    samples, spent = [], 0.0
    while len(samples) < repeat or (spent < min_time and len(samples) < max_repeat):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        samples.append(time.perf_counter() - t0)
        spent += samples[-1]
    return Timing(samples)


def timing_problems(timings, min_repeats=MIN_REPEATS, max_noise=MAX_NOISE):
    """Why these measurements cannot be interpreted: {name: Timing} -> list of Chinese reasons (empty: usable)."""
    problems = []
    for name, t in timings.items():
        if len(t.samples) < min_repeats:
            problems.append(f"{name}：只计时了 {len(t.samples)} 次（至少要 {min_repeats} 次）")
        elif t.noise > max_noise:
            problems.append(f"{name}：中位数比最小值慢 {100 * t.noise:.0f}%（上限 {100 * max_noise:.0f}%），计时时机器很忙")
    return problems


def spread_problem(name, values, max_ratio):
    """A reason (str) when per-seed estimates of one quantity spread wider than max / min = max_ratio, else None."""
    v = np.asarray(values, dtype=float)
    lo, hi = float(v.min()), float(v.max())
    if lo <= 0 or hi / lo > max_ratio:
        return f"{name}：各种子的值从 {lo:.3g} 到 {hi:.3g}（最大/最小超过 {max_ratio:g}）"
    return None


def unusable(problems, limit=4):
    """Print the reasons and return True when there are any: the caller then skips its interpretation."""
    problems = [p for p in problems if p]
    if not problems:
        return False
    print(f"⚠ 这次测量不可用，下面不做解读（{len(problems)} 处）：")
    for p in problems[:limit]:
        print("   -", p)
    if len(problems) > limit:
        print(f"   - 另有 {len(problems) - limit} 处")
    print("  多半是别的程序同时在用 CPU。关掉它们、等机器空闲后重新运行这个单元格。")
    return True


def band(ax, x, runs, label=None, color=None, **kwargs):
    """Median over seeds as a line, min–max over seeds as a shaded band.

    runs: array (n_seeds, len(x)). Works on log axes (set the scale before or after).
    Returns the median line.
    """
    runs = np.asarray(runs, dtype=float)
    (line,) = ax.plot(x, np.median(runs, axis=0), label=label, color=color, **kwargs)
    ax.fill_between(x, runs.min(axis=0), runs.max(axis=0), color=line.get_color(), alpha=0.2, lw=0)
    return line


def explorer(draw, **controls):
    """Draw the default figure once (static: survives HTML export), then offer the widgets.

    draw(**kwargs) makes one figure; controls are ipywidgets widgets or `interact` abbreviations.
    The static figure uses draw's own keyword defaults where it has them (as `interact` does),
    else the widget's value, else the first option of a list / the lower end of a tuple.
    Returns the widget box, or None without ipywidgets.
    """
    params = inspect.signature(draw).parameters
    defaults = {}
    for k, w in controls.items():
        if k in params and params[k].default is not inspect.Parameter.empty:
            defaults[k] = params[k].default
        else:
            defaults[k] = getattr(w, "value", w[0] if isinstance(w, (list, tuple)) else w)
    draw(**defaults)
    plt.show()
    try:
        import ipywidgets as widgets
    except ImportError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return widgets.interactive(draw, **controls)
