"""The reader's notes on reads in the model's own layers (fencecheck/sglang_source/model_reads.py).

A scheduler-shared map read in a layer's forward is an unresolved note naming the read, its chain, its modes and its
platforms (a map taken into a local by a conditional expression whose other side is None is still the map); a read
behind a host sync, one at load time and one on a device whose runners never publish are not noted. The synthetic model is tests/sglang_trees/model_reads."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from fencecheck.commands.main import main
from fencecheck.sglang_source import read_path

TREES = Path(__file__).resolve().parent / "sglang_trees"
TOY = "sglang/srt/models/toy.py"
UTILS = "sglang/srt/models/toy_utils.py"


def _tree(tmp_path, *cases) -> Path:
    dest = tmp_path / "wheel"
    for case in ("common", *cases, "model_reads"):
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    utils = dest / "sglang" / "srt" / "utils" / "common.py"
    utils.write_text(utils.read_text("utf-8") + "\n\ndef is_npu():\n    return hasattr(torch, 'npu')\n", "utf-8")
    return dest / "sglang"


def _line(root: Path, rel: str, text: str) -> int:
    lines = (root.parent / rel).read_text("utf-8").splitlines()
    return next(n for n, x in enumerate(lines, 1) if text in x)


def _model_notes(doc) -> dict:
    return {(n["file"], n["line"]): n for n in doc["notes"] if "in the model's forward" in n["what"]}


def test_a_layer_reading_a_shared_map_in_its_forward_is_an_unresolved_note(tmp_path):
    root = _tree(tmp_path)
    doc = read_path(root).to_json()
    got = _model_notes(doc)
    helper = (UTILS, _line(root, UTILS, "[forward_batch.positions]"))
    prepare = (TOY, _line(root, TOY, "[forward_batch.req_pool_indices]"))
    npu = (UTILS, _line(root, UTILS, "[forward_batch.seq_lens]"))
    alias = (UTILS, _line(root, UTILS, "mapping.long()"))  # `mapping`: the map or None; `other` is no alias
    assert set(got) == {helper, prepare, npu, alias}  # no device map here: no device is known to be silent
    assert got[alias]["what"].startswith(
        "toy_utils.swa_slots reads full_to_swa_index_mapping in the model's forward (from ToyAttention.forward, via "
        "ToyAttention.forward -> toy_utils.swa_slots; when mapping is not None)")
    assert "; when _is_npu); only on npu:" in got[npu]["what"]
    h = got[helper]
    assert h["unresolved"] is True
    assert h["what"] == (
        "toy_utils.build_slots reads req_to_token in the model's forward (from ToyAttention.forward, via "
        "ToyAttention.forward -> toy_utils.build_slots; when not _is_npu); only on cuda, hip, musa, xpu, cpu: in a "
        "DECODE/IDLE/TARGET_VERIFY graph it runs after the in-graph marker, outside an IN_REPLAY or PRE_REPLAY declaration of the backend that runs with the model; not decided "
        "(which backend runs with a model is a server setting)")
    assert got[prepare]["what"].startswith("ToyLayer.forward_prepare reads req_to_token in the model's forward (from "
                                           "ToyLayer.forward_prepare, via ToyLayer.forward_prepare): in a DECODE "
                                           "graph")  # the mode test decided
    # the tree is otherwise clean: the notes alone make the verdict unknown
    out = io.StringIO()
    assert main(["sglang", str(root)], out=out, err=io.StringIO()) == 3
    assert "reads req_to_token in the model's forward" in out.getvalue()


def test_a_model_read_only_on_a_device_whose_runners_never_publish_is_not_noted(tmp_path):
    """With capture_decode_graph's map (the NPU runner never publishes), the helper's NPU-only branch is left out
    and its other branch is noted with the platforms it runs on."""
    root = _tree(tmp_path, "device")
    got = _model_notes(read_path(root).to_json())
    npu = (UTILS, _line(root, UTILS, "[forward_batch.seq_lens]"))
    helper = (UTILS, _line(root, UTILS, "[forward_batch.positions]"))
    assert npu not in got and helper in got
    assert "; when not _is_npu); only on cuda, hip, musa, xpu, cpu:" in got[helper]["what"]


def test_a_model_read_is_one_note_across_trees_whatever_calls_it(tmp_path):
    """In pull-request mode a model read's note is the same note when another layer comes to call the helper (its
    entries and chain change): not added; a new reading helper is added."""
    from fencecheck.decision.pull_request import added_notes

    base = read_path(_tree(tmp_path / "base")).to_json()
    root = _tree(tmp_path / "head")
    toy = root.parent / TOY
    toy.write_text(toy.read_text("utf-8") + (
        "\n\nclass ToyCrossAttention:\n    def forward(self, positions, hidden_states, forward_batch, more):\n"
        "        more.append(1)\n        return build_slots(forward_batch)\n"), "utf-8")
    head = read_path(root)
    assert "and 1 more forward methods" in " ".join(n.what for n in head.notes)
    assert added_notes(head.notes, base) == []
    utils = root.parent / UTILS
    utils.write_text(utils.read_text("utf-8") + (
        "\n\ndef window(forward_batch):\n    return forward_batch.req_to_token_pool.req_to_token[forward_batch.seq_lens]\n"),
        "utf-8")
    toy.write_text(toy.read_text("utf-8").replace("from sglang.srt.models.toy_utils import build_slots, swa_slots",
                                                  "from sglang.srt.models.toy_utils import build_slots, swa_slots, window")
                   + "\n\nclass ToyWindow:\n    def forward(self, forward_batch):\n        return window(forward_batch)\n",
                   "utf-8")
    (added,) = added_notes(read_path(root).notes, base)
    assert added.what.startswith("toy_utils.window reads req_to_token in the model's forward (from ToyWindow.forward")
