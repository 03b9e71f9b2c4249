"""The renderers: text summary, JSON, SARIF and markdown of decided documents (docs/architecture.md)."""
