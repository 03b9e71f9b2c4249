"""fencecheck: prove SGLang's shared-read fence safe, or show the race.

Subpackages: ``fencecheck.model`` (SMT model), ``fencecheck.reference`` (reference protocol and CPU simulator),
``fencecheck.gpu`` (the reference on real CUDA), ``fencecheck.proofs`` (obligations). This package holds the shared
vocabulary (scenarios, traces, verdicts) and the CLI.
"""

__version__ = "0.1.0"

#: The subpackages that live in top-level folders of the source tree (setuptools' package-dir mapping).
SUBPACKAGES = ("model", "reference", "gpu", "proofs")


def _checkout_layout() -> None:
    """Run from a source checkout (not installed), resolve exactly ``fencecheck.<sub>`` for each of ``SUBPACKAGES`` to
    the top-level folder ``<sub>/``, as the package-dir mapping does when installed. Nothing else of the checkout
    becomes importable under ``fencecheck`` (no ``fencecheck.fencecheck``, no ``fencecheck.tests``)."""
    import importlib.abc
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if not ((root / "pyproject.toml").is_file() and (root / "model" / "__init__.py").is_file()):
        return  # installed: the mapping is already in the wheel's layout

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            head, _, sub = fullname.partition(".")
            if head != __name__ or sub not in SUBPACKAGES:
                return None
            init = root / sub / "__init__.py"
            return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(root / sub)])

    if not any(type(f).__name__ == "_Finder" and getattr(f, "root", None) == root for f in sys.meta_path):
        finder = _Finder()
        finder.root = root
        sys.meta_path.insert(0, finder)


_checkout_layout()
