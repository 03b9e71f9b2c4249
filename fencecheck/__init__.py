"""fencecheck: prove SGLang's shared-read fence safe, or show the race.

Subpackages: ``fencecheck.model`` (SMT model), ``fencecheck.reference`` (reference protocol and CPU simulator),
``fencecheck.gpu`` (the reference on real CUDA), ``fencecheck.proofs`` (obligations). This package holds the shared
vocabulary (scenarios, traces, verdicts) and the CLI.
"""

__version__ = "0.1.0"


def _checkout_layout() -> None:
    """Run from a source checkout (not installed), the subpackages live in the top-level folders beside this one;
    let ``fencecheck.model`` and the others resolve there, as setuptools' package-dir mapping does when installed."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "model" / "__init__.py").is_file():
        __path__.append(str(root))  # noqa: F821 - the package's own __path__


_checkout_layout()
