"""fencecheck: prove SGLang's shared-read fence safe, or show the race.

Subpackages: ``fencecheck.model`` (SMT model), ``fencecheck.reference`` (reference protocol and CPU simulator),
``fencecheck.gpu`` (the reference on real CUDA), ``fencecheck.proofs`` (obligations). This package holds the shared
vocabulary (scenarios, traces, verdicts) and the CLI.
"""

__version__ = "0.1.0"
