"""The decision layer: from a tree's facts to decided findings (docs/architecture.md)."""
