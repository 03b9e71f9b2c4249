"""Reading and writing files: input limits, atomic outputs, scenario and corpus files, the built-in catalog."""
