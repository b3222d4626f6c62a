"""`oxconsole sweep`: one point per value of a workload key in one process with warm connections,
the knee found (or searched for) and shown as a table and JSON.

Why this package exists: a sweep drives many engine runs and judges them together; it sits above
the engine and the reports and below the console and the command line (`plan.py` what to run,
`run.py` running it, `served.py` the whole sweep behind one control socket with `gauge.py` where
it is, `table.py` the output; argv to exit code is `cli/sweep.py`; the knee rule and the search
are `metrics/knee.py`, which the HTML report reads too).
"""
