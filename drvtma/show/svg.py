"""A scene as hand-written SVG: no dependency, scalable (viewBox), one <text> per cell label."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from .scene import FONT, Rect, Scene, Text


def svg_text(scene: Scene) -> str:
    w, h = round(scene.width), round(scene.height)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT}">',
           f'<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>']
    for item in scene.items:
        if isinstance(item, Rect):
            dash = ' stroke-dasharray="3,2"' if item.dash else ""
            out.append(f'<rect x="{item.x:.1f}" y="{item.y:.1f}" width="{item.w:.1f}" height="{item.h:.1f}" '
                       f'fill="{item.fill}" stroke="{item.stroke}" stroke-width="{item.width}"{dash}/>')
        elif isinstance(item, Text):
            extra = f' data-offset="{item.offset}"' if item.offset >= 0 else ""
            weight = ' font-weight="bold"' if item.bold else ""
            out.append(f'<text class={quoteattr(item.role)} x="{item.x:.1f}" y="{item.y:.1f}" fill="{item.colour}"'
                       f'{weight}{extra} xml:space="preserve">{escape(item.text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
