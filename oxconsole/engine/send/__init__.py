"""The request path: one request's story from its body to its record.

`request` sends, classifies, retries and falls back; `client` makes one attempt (the SDK builds the
request once per endpoint, aiohttp sends it); `stream` and `responses` read answers as they arrive;
`internals` holds every private name of a dependency the path uses. Around one request: the
cascade (`cascade`, `checks`), packs (`packing`) and multi-turn sessions (`conversations`).
"""
