"""A scene as PNG through matplotlib (the optional extra `plot`): the same rectangles and texts as the SVG."""

from __future__ import annotations

from ..errors import ArgumentError
from .scene import FONT, Rect, Scene, Text

DPI = 100


def pyplot(path: str):
    """matplotlib's pyplot (Agg), or ArgumentError naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ArgumentError("plot_extra", "png", path, "install the plot extra (pip install 'drvtma[plot]', "
                            "matplotlib) or write --svg", "PNG pictures are drawn by matplotlib") from None
    return plt


def write_png(scene: Scene, path: str) -> None:
    plt = pyplot(path)
    from matplotlib.patches import Rectangle

    fig = plt.figure(figsize=(scene.width / DPI, scene.height / DPI), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, scene.width)
    ax.set_ylim(scene.height, 0)  # y grows downwards, as in the SVG
    ax.axis("off")
    points = FONT * 72 / DPI  # pixel font size -> points
    for item in scene.items:
        if isinstance(item, Rect):
            ax.add_patch(Rectangle((item.x, item.y), item.w, item.h, facecolor=item.fill, edgecolor=item.stroke,
                                   linewidth=item.width, linestyle="--" if item.dash else "-"))
        elif isinstance(item, Text):
            ax.text(item.x, item.y, item.text, fontsize=points, family="monospace", color=item.colour,
                    fontweight="bold" if item.bold else "normal", va="baseline")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
