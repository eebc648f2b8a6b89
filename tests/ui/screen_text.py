"""Provides `visible_text`: what a widget really shows, for UI tests that check rendering."""

from __future__ import annotations

from textual.geometry import Region
from textual.widget import Widget


def visible_text(widget: Widget) -> str:
    """What the widget shows on screen, as plain text (rendered, so markup would have been applied)."""
    lines: list[str] = []
    for node in [widget, *widget.query("*")]:
        if node.children or not node.display:
            continue
        region = Region(0, 0, node.size.width, node.size.height)
        lines += [strip.text.strip() for strip in node.render_lines(region)]
    return "\n".join(line for line in lines if line)
