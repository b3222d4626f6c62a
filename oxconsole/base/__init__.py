"""The ground floor: what every room may use and that imports nothing of the package.

The event loop (`aio`), exit codes and bad input (`exits`), paced garbage collection (`gcpace`),
id sets (`idset`), JSON files written whole (`jsonfile`), how figures read (`units`), secrets kept
out of output (`redaction`) and text from a server made safe (`safetext`).
"""
