"""The prompt sources: where a run's prompts come from, read a line at a time and checked.

Why this package exists: a run's prompts come from oxconsole's own JSONL, from other people's
formats (ShareGPT, OpenAI Batch input, traces), inline items or synthetic text, with the media
their lines name and their lengths in tokens; each is streamed, never loaded whole. `feed`
streams and checks them (`iter_prompts`, `check_prompts`), `promptdata` is what they are read
into (`Prompt`, `PromptStats`), `sources` dispatches other people's formats (`sharegpt`, `batch`,
`traces`, with `jsonarray` and `boundedlines` to read them within bounds), `synthtext` and
`lengths` make synthetic prompts, `tokens` counts tokens exactly, `mediafiles` and `mediaprompts`
read the media a line names. The rest of the workload (the schema, the sections' parsers) is one
level up.
"""
