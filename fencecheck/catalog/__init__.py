"""The built-in catalog, by SGLang version: each version's configurations (and known hazards) as scenario files, one
folder per version (data only; ``fencecheck.files.catalog`` lists and loads them)."""
