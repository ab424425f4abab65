"""Record in every PNG matplotlib writes the size of the smallest text drawn in it, in the PNG's own pixels.

`tools/run_notebooks.py --save` runs this file at the start of each kernel (an IPython startup file), so the figures
stored in the notebooks carry a PNG text chunk `smallest-text-px`; the site tests (`tests/test_site.py`) read it
from the rendered page's image and scale it by how wide the page draws the image, to check that no figure's text is
smaller than the smallest text of the page around it. A figure saved without this record fails that test: store
the notebook's outputs with `--save`.

Measured while the figure is drawn, so only what is drawn counts: every `matplotlib.text.Text` (titles, labels, tick
labels, legends, annotations) that is visible, not empty and inside the image, at its font size converted to pixels
by the renderer (points at the image's dpi).
"""
import functools

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

KEY = "smallest-text-px"


def _record(print_png):
    # as print_png itself (its module and signature): matplotlib passes its own print methods only the optional
    # arguments they name
    @functools.wraps(print_png)
    def print_png_recording(self, filename_or_obj, *, metadata=None, pil_kwargs=None):
        meta = dict(metadata or {})
        draw = Text.draw

        def draw_recording(text, renderer):
            if text.get_visible() and text.get_text().strip() and renderer is not None:
                box = text.get_window_extent(renderer)
                if box.x1 > 0 and box.y1 > 0 and box.x0 < renderer.width and box.y0 < renderer.height:
                    px = renderer.points_to_pixels(text.get_fontsize())
                    # the figure is drawn, then written with `meta`: the smallest so far is what it holds then
                    if KEY not in meta or px < float(meta[KEY]): meta[KEY] = f"{px:.2f}"
            return draw(text, renderer)

        Text.draw = draw_recording
        try: return print_png(self, filename_or_obj, metadata=meta, pil_kwargs=pil_kwargs)
        finally: Text.draw = draw
    return print_png_recording


if not getattr(FigureCanvasAgg.print_png, "_records_text", False):
    FigureCanvasAgg.print_png = _record(FigureCanvasAgg.print_png)
    FigureCanvasAgg.print_png._records_text = True
