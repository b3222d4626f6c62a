"""The processes a user starts: the command line (`main`) and what each subcommand runs.

A console on a run (`console`, `attach`), the engine as a detached process (`detached`), a run
without a console (`headless`), the end of a console's run (`runend`), `oxconsole ps`, `oxconsole
sweep` (`sweep`), a workload from flags (`quickstart`, `modellist`), `oxconsole init` (`starter`)
and getting a run ready (`prepare`). Only `main`, `console` and `attach` reach the console (Textual).
"""
