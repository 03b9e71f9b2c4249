"""Small synthetic SGLang trees for the reader's limit, fuzz and capture tests.

Small synthetic SGLang trees built in a temporary folder by the reader's limit and fuzz tests: the common minimal
package (tests/sglang_trees/common) with files added or replaced, and source generators for backends, helper chains
and declarations, and the files the capture tests lay over the tree. Never imported: the reader reads them with ``ast``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

TREES = Path(__file__).resolve().parent / "sglang_trees"
ATTN = "srt/layers/attention"
HEAD = "from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds\n\n\n"
READ = "self.req_to_token[fb.req_pool_indices]"


def build(dest: Path, files: dict[str, str], case: str | None = None) -> Path:
    """The common tree (and ``case``, a folder of tests/sglang_trees) copied to ``dest`` with ``files`` (paths
    relative to the ``sglang`` package) written over it; returns the package folder."""
    shutil.copytree(TREES / "common", dest, dirs_exist_ok=True)
    if case:
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    root = dest / "sglang"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


#: The common tree's forward_batch_info.py with a ForwardBatch dataclass (the capture rules read its fields).
FB = "srt/model_executor/forward_batch_info.py"
FORWARD_BATCH = ("from dataclasses import dataclass\n" + (TREES / "common" / "sglang" / FB).read_text()
                 + "\n\n@dataclass\nclass ForwardBatch:\n    forward_mode: ForwardMode\n    batch_size: int\n"
                   "    req_pool_indices: object = None\n    seq_lens: object = None\n")
#: A breakable-graph break marker, for a tree with breakable graphs.
BREAKABLE = {"srt/model_executor/runner_backend_utils/breakable.py": "def eager_on_graph(fn=None):\n    return fn\n"}
#: The common tree's decode graph runner, and a copy of it whose no-marker fallback is PRE_REPLAY.
RUNNER = "srt/model_executor/runner/decode_cuda_graph_runner.py"
PRE_FALLBACK = {RUNNER: (TREES / "common" / "sglang" / RUNNER).read_text().replace(
    "            return SharedReadEnds.POST_REPLAY\n", "            return SharedReadEnds.PRE_REPLAY\n")}


def method(name: str, body: str, args: str = "self, fb") -> str:
    """A method of a class body (indented once), ``body`` its statements."""
    return f"    def {name}({args}):\n" + textwrap.indent(textwrap.dedent(body).strip() + "\n", " " * 8)


def chain(n: int, prefix: str = "h", last: str = f"return {READ}") -> list[str]:
    """Methods ``h1`` .. ``hn``, each calling the next, ``hn`` running ``last``."""
    out = [method(f"{prefix}{i}", f"return self.{prefix}{i + 1}(fb)") for i in range(1, n)]
    return out + [method(f"{prefix}{n}", last)]


def backend(name: str, methods: list[str], base: str = "AttentionBackend") -> str:
    return f"class {name}({base}):\n" + "\n".join(methods)


def decode_calls(first: str) -> str:
    """``forward_decode`` calling ``self.<first>(forward_batch)``: in DECODE, a read below it is at
    in_graph_after_marker (two calls below ``forward``: AttentionBackend.forward -> forward_decode -> first)."""
    return method("forward_decode", f"return self.{first}(forward_batch)", "self, q, k, v, layer, forward_batch")



_VALIDATOR = []


def validate(doc: dict) -> None:
    """``doc`` checked against docs/sglang-reader.schema.json (the schema itself checked once)."""
    if not _VALIDATOR:
        import json

        import jsonschema

        schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-reader.schema.json")
                            .read_text("utf-8"))
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATOR.append(jsonschema.Draft202012Validator(schema))
    _VALIDATOR[0].validate(doc)
