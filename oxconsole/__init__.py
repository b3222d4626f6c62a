"""oxconsole: a console and runner for high-throughput LLM inference on OpenAI-compatible endpoints."""

__version__ = "0.1.0"
