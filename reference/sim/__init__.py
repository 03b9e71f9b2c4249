"""The CPU simulator of CUDA stream/event/graph semantics: trace recorder, happens-before, races, interleavings."""
