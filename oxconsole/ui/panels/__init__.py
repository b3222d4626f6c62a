"""The console's panels, one module each: the widget and the pure functions that draw its lines.

Why this package exists: the widgets should be thin (hold a snapshot, show lines) and the figures
should be testable without a terminal. Each panel's line functions take a `Snapshot`, a `Palette`
(theme colours already resolved) and the space available, and return `Line`s at most that wide;
two results compare equal when nothing visible changed, so the widget (a `ui.widgets.Panel`,
declared beside them) can skip the repaint. `goodput.py`, `packing.py`, `reasoning.py` and
`bursts.py` are lines that several panels (or one panel's several places) share.
"""
