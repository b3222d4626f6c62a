"""Reports made from results journals: HTML, comparisons, CSV and Markdown exports.

Why this package exists: `oxconsole report` grew from one summary table into several outputs that
share the journal's records but nothing else; each output is its own module here, above
`oxconsole.reports.summary` (which reads journals and builds the summary) and below the command line and
the end of a run (`headless`, which writes `report.html` when `[output] html = true`).
"""
