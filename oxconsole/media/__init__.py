"""Images and audio for requests: synthetic ones built cheaply per request, files checked and
measured from their headers, multipart forms built once as bytes, speech answers counted as they
stream.

Why this room exists: a run that sends images or audio must build each request's body before the
clock, as the engine does for text, at about what a text body costs; a prompts line that names a
file must be refused before anything is sent when the file is not what its key needs; and the
simulator must read and write the same formats. Everything here is pure (bytes in, bytes or
numbers out: no network, no event loop), below the workload that checks prompts, the simulator
and the engine, which all use it.
"""
