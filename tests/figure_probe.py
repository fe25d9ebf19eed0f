"""Loaded into a notebook's kernel by the notebook tests: records every drawn axes that lacks an axis label."""
import matplotlib.backend_bases as backend_bases

UNLABELLED = []
_print_figure = backend_bases.FigureCanvasBase.print_figure


def _recording_print_figure(self, *args, **kwargs):
    for ax in self.figure.axes:
        if ax.axison and ax.get_label() != "<colorbar>":
            missing = [axis for axis, text in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if not text]
            if missing:
                UNLABELLED.append(f"{ax.get_title() or '(untitled)'}: no {'/'.join(missing)} label")
    return _print_figure(self, *args, **kwargs)


def install():
    backend_bases.FigureCanvasBase.print_figure = _recording_print_figure
