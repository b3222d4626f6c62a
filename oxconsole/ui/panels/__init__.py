"""What each console panel shows: pure functions from one immutable Snapshot to a panel's lines.

Why this package exists: the widgets should be thin (hold a snapshot, show lines) and the figures
should be testable without a terminal. Every function here takes a `Snapshot`, a `Palette` (theme
colours already resolved) and the space available, and returns `Line`s at most that wide; two
results compare equal when nothing visible changed, so the widget can skip the repaint. One module
per panel (the tables: models, errors, phase, share one).
"""
