"""No module of the package is part of an import cycle, type-only and deferred imports included:
a cycle means neither module can be read (or tested) without the other."""

from __future__ import annotations

import grimp


def cycles() -> list[tuple[str, str]]:
    """Each direct import `a -> b` for which `b` also leads back to `a`."""
    g = grimp.build_graph("oxconsole")  # every import: TYPE_CHECKING and inside functions too
    return sorted(
        (a, b)
        for a in g.modules
        for b in g.find_modules_directly_imported_by(a)
        if b.startswith("oxconsole") and g.find_shortest_chain(importer=b, imported=a) is not None
    )


def test_no_import_cycle_anywhere() -> None:
    found = cycles()
    assert found == [], f"import cycles: {found}"
