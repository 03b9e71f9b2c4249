"""The prefill publish's gates read as facts of a tree, and pull-request mode's losses by what they decide.

``sglang_source/prefill_gates.py``: the exits before a prefill runner's publish and in its resolving method, what
they decide per speculative algorithm, forward mode and setting, and the stager they test; a loss is what the gates
decide, not where their tests stand. The synthetic trees are ``sglang_trees/common`` with a gated publish and a
``SpeculativeAlgorithm`` laid over it; the releases' gates are read from their sources (slow)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from fencecheck.commands.main import main
from fencecheck.sglang_source.backend_reader import Reader
from fencecheck.sglang_source.prefill_gates import prefill_gates
from fencecheck.sglang_source.protocol import read_protocol
from fencecheck.sglang_source.tree import Tree

TREES = Path(__file__).resolve().parent / "sglang_trees"
EVENT = "sglang/srt/model_executor/runner_utils/shared_read_event.py"
SPEC = "sglang/srt/speculative/spec_info.py"

#: The common tree's ``Envs`` line the prefill setting is laid after.
COARSE = "    SGLANG_FORCE_COARSE_WAR_BARRIER = EnvBool(False)\n"

SPEC_INFO = '''from enum import IntEnum, auto


class SpeculativeAlgorithm(IntEnum):
    NONE = auto()
    EAGLE = auto()
    DFLASH = auto()

    def is_none(self) -> bool:
        return self == SpeculativeAlgorithm.NONE

    def is_eagle(self) -> bool:
        return self == SpeculativeAlgorithm.EAGLE

    def is_dflash(self) -> bool:
        return self == SpeculativeAlgorithm.DFLASH

    def supports_prefill_shared_read_done(self) -> bool:
        """Whether target EXTEND has no later speculative shared-buffer reader."""
        return SUPPORTS

    def create_worker(self, server_args):
        return None
'''

PUBLISH = '''from sglang.srt.environ import envs
from sglang.srt.layers.attention.base_attn_backend import SharedReadEnds
from sglang.srt.model_executor.forward_batch_info import ForwardMode


def maybe_publish_prefill_shared_read_done(model_runner, shared_read_ends, device_module):
    if not envs.SGLANG_ENABLE_PREFILL_WAR_READ_DONE.get():
        return
    if shared_read_ends is not SharedReadEnds.PRE_REPLAY:
        return
    if not model_runner.spec_algorithm.supports_prefill_shared_read_done():
        stage = getattr(model_runner, "prefill_shared_read_stager", None)
        if stage is None or not stage(model_runner.forward_batch):
            return
    if model_runner.server_args.enable_hierarchical_cache:
        return
    read_done = device_module.Event()
    read_done.record()
    model_runner.shared_read_done_event = read_done
'''


def lay(dest: Path, default: str = "False", supports: str = "self.is_none() or self.is_dflash()",
        publish: str = PUBLISH, runner_extra: str = "") -> Path:
    for case in ("common", "after_marker"):
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    environ = dest / "sglang/srt/environ.py"
    assert COARSE in environ.read_text()
    environ.write_text(environ.read_text().replace(
        COARSE, COARSE + f"    SGLANG_ENABLE_PREFILL_WAR_READ_DONE = EnvBool({default})\n"))
    (dest / SPEC).parent.mkdir(parents=True, exist_ok=True)
    (dest / SPEC).parent.joinpath("__init__.py").write_text("")
    (dest / SPEC).write_text(SPEC_INFO.replace("SUPPORTS", supports))
    (dest / EVENT).write_text(publish)
    if runner_extra:
        mr = dest / "sglang/srt/model_executor/model_runner.py"
        mr.write_text(mr.read_text() + runner_extra)
    return dest


def gates(root: Path) -> dict:
    tree = Tree(root / "sglang")
    rd = Reader(tree)
    return prefill_gates(tree, read_protocol(tree), rd.root, rd.modes)


def statuses(g: dict) -> dict:
    return {a["name"]: a["publish"] for a in g["algorithms"]}


def test_the_gates_decide_each_algorithm_and_setting(tmp_path):
    g = gates(lay(tmp_path / "t"))
    (gate,) = g["gates"]
    assert (gate["function"], gate["role"], gate["file"]) == ("maybe_publish_prefill_shared_read_done", "publish",
                                                               EVENT)
    kinds = [[a["kind"] for a in x["atoms"]] for x in gate["exits"]]
    assert kinds == [["setting"], ["declaration"], ["algorithm", "stager", "other"], ["other"]]
    # EAGLE: the predicate is false and the stager is never set (ModelRunner sets no such field): never
    assert statuses(g) == {"EAGLE": "never", "DFLASH": "with settings"}
    assert g["no_speculation"] == "with settings"
    (s,) = g["settings"]
    assert (s["name"], s["default"], s["publish_off_when"]) == ("SGLANG_ENABLE_PREFILL_WAR_READ_DONE", False, False)
    assert g["unless"] == ["model_runner.server_args.enable_hierarchical_cache"]
    assert g["declaration"] == ["shared_read_ends is not SharedReadEnds.PRE_REPLAY"]
    assert g["stagers"] == [{"attribute": "prefill_shared_read_stager", "stores": [], "set": False}]


def test_a_default_turned_on_publishes_without_settings(tmp_path):
    g = gates(lay(tmp_path / "t", default="True"))
    assert g["no_speculation"] == "allowed"
    assert statuses(g) == {"EAGLE": "never", "DFLASH": "allowed"}


def test_a_stager_set_somewhere_leaves_the_other_algorithms_open(tmp_path):
    extra = "\n    def install(self, stage):\n        self.prefill_shared_read_stager = stage\n"
    g = gates(lay(tmp_path / "t", default="True", runner_extra=extra))
    (st,) = g["stagers"]
    assert st["set"] and st["stores"][0]["value"] == "stage"
    assert statuses(g)["EAGLE"] == "may"


def test_a_stager_only_ever_none_keeps_them_off(tmp_path):
    extra = "\n    def reset(self):\n        self.prefill_shared_read_stager = None\n"
    g = gates(lay(tmp_path / "t", runner_extra=extra))
    assert g["stagers"][0]["stores"][0]["value"] == "None" and not g["stagers"][0]["set"]
    assert statuses(g)["EAGLE"] == "never"


def test_the_mode_test_limits_the_modes(tmp_path):
    gated = PUBLISH.replace("    if shared_read_ends is not", "    if model_runner.forward_batch.forward_mode != "
                                                              "ForwardMode.EXTEND:\n        return\n"
                                                              "    if shared_read_ends is not")
    assert gates(lay(tmp_path / "t", publish=gated))["modes"] == ["EXTEND"]
    # without it, the runner's own path (``if forward_mode.is_decode(): return ...``) keeps DECODE out alone
    modes = gates(lay(tmp_path / "u"))["modes"]
    assert "DECODE" not in modes and "TARGET_VERIFY" in modes


def run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *argv], out=out, err=err)
    return code, out.getvalue() + err.getvalue()


def _lost(out: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.startswith("  LOST ")]


@pytest.mark.parametrize("head, says", [
    ({"supports": "self.is_none() or self.is_dflash() or self.is_eagle()"},
     ["LOST EAGLE's target prefill may now publish its read-done event (never -> with settings)"]),
    ({"publish": PUBLISH.replace("    if model_runner.server_args.enable_hierarchical_cache:\n        return\n", "")},
     ["LOST the prefill publish is no longer kept off when model_runner.server_args.enable_hierarchical_cache"]),
    ({"publish": PUBLISH.replace("    if shared_read_ends is not SharedReadEnds.PRE_REPLAY:\n        return\n", "")},
     ["LOST the prefill publish no longer tests that the backend declares PRE_REPLAY"]),
])
def test_a_change_that_opens_a_prefill_gate_is_a_loss(tmp_path, head, says):
    base, h = lay(tmp_path / "base"), lay(tmp_path / "head", **head)
    code, out = run(str(h), "--baseline", str(base))
    assert code == 1, out
    assert [x for x in _lost(out) if x.startswith(says[0][:40])] and all(
        any(x.startswith(s) for x in _lost(out)) for s in says), out


RESOLVE = """
    def resolve_prefill_shared_read_ends(self, forward_batch):
        if not envs.SGLANG_ENABLE_PREFILL_WAR_READ_DONE.get():
            return SharedReadEnds.UNKNOWN
        return self.shared_read_ends(forward_batch.forward_mode)
"""


def _moved(root: Path) -> Path:
    """The setting's test moved from the publish into the root backend's resolving method (as 0.5.23 has it)."""
    f = root / "sglang/srt/model_executor/runner_utils/shared_read_event.py"
    f.write_text(f.read_text().replace("    if not envs.SGLANG_ENABLE_PREFILL_WAR_READ_DONE.get():\n        return\n",
                                       ""))
    b = root / "sglang/srt/layers/attention/base_attn_backend.py"
    text = b.read_text().replace("from enum import Enum\n", "from enum import Enum\n\nfrom sglang.srt.environ import envs\n")
    anchor = "    def shared_read_ends(self, fm: ForwardMode) -> SharedReadEnds:\n"
    assert anchor in text
    b.write_text(text.replace(anchor, RESOLVE.lstrip("\n") + "\n" + anchor))
    return root


def test_a_gate_moved_to_the_resolving_method_or_respelled_loses_nothing(tmp_path):
    """What the gates decide is compared, not where their tests stand: the setting's test moved into the resolving
    method the runner calls first, and the server flag's receiver respelled (``server_args`` -> ``cfg``)."""
    respelled = PUBLISH.replace("model_runner.server_args.enable_hierarchical_cache",
                                "model_runner.cfg.enable_hierarchical_cache")
    base, h = lay(tmp_path / "base"), _moved(lay(tmp_path / "head", publish=respelled))
    g = gates(h)
    assert [x["role"] for x in g["gates"]] == ["resolve", "publish"]
    assert g["gates"][0]["exits"][0]["test"] == "not envs.SGLANG_ENABLE_PREFILL_WAR_READ_DONE.get()"
    code, out = run(str(h), "--baseline", str(base), "--json")
    doc = json.loads(out)
    assert doc["fence"]["lost"] == [], doc["fence"]["lost"]
    changed = {x["key"] for x in doc["facts"]["changed"]["protocol"]}
    assert {"prefill/unless", "prefill/gate/AttentionBackend.resolve_prefill_shared_read_ends"} <= changed
    assert "prefill/no_speculation" not in changed and "prefill/algorithm/EAGLE" not in changed


def test_a_setting_default_turned_on_is_a_change_not_a_loss(tmp_path):
    base, h = lay(tmp_path / "base"), lay(tmp_path / "head", default="True")
    code, out = run(str(h), "--baseline", str(base), "--json")
    doc = json.loads(out)
    assert doc["fence"]["lost"] == []
    changed = {x["key"]: (x["before"], x["after"]) for x in doc["facts"]["changed"]["protocol"]}
    assert changed["prefill/no_speculation"] == ("with settings", "allowed")
    assert changed["setting/SGLANG_ENABLE_PREFILL_WAR_READ_DONE"] == ("False", "True")


#: Per release: no speculation's prefill publish, the algorithms whose prefill may publish (the rest never), the
#: setting that keeps it off and when, the stager. Read from the sources: 0.5.18 ``shared_read_event.py:26-48``
#: (``SGLANG_ENABLE_PREFILL_WAR_READ_DONE`` default False, ``environ.py:575``; only ``spec_algorithm.is_none()``
#: publishes); 0.5.22 ``shared_read_event.py:26-49`` (``supports_prefill_shared_read_done``, ``spec_info.py:138-145``:
#: none, DFlash, DSpark; otherwise the stager, ``ModelRunner.prefill_shared_read_stager``, only ever None,
#: ``model_runner.py:462``); 0.5.23 the setting's test moved to ``AttentionBackend.resolve_prefill_shared_read_ends``
#: (``base_attn_backend.py:202-224``, default True, ``environ.py:706``) and the publish keeps off under hierarchical
#: cache, storage or LMCache (``shared_read_event.py:36-41``).
RELEASE_GATES = {
    "0.5.18": ("with settings", {}, (False, None), None),
    "0.5.22": ("with settings", {"DFLASH": "with settings", "DSPARK": "with settings"}, (False, None),
               ("sglang/srt/model_executor/model_runner.py", 462)),
    "0.5.23": ("allowed", {"DFLASH": "allowed", "DSPARK": "allowed"}, (False, True), None),
}


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(RELEASE_GATES))
def test_the_gates_of_a_release(version):
    from sglang_release import require_tree

    plain, open_, (enable_off, coarse_off), stager = RELEASE_GATES[version]
    g = gates(require_tree(version, fetching=True).parent)
    assert g["no_speculation"] == plain
    assert {k: v for k, v in statuses(g).items() if v != "never"} == open_
    assert "EAGLE" in statuses(g) and statuses(g)["EAGLE"] == "never"
    off = {s["name"]: s["publish_off_when"] for s in g["settings"]}
    assert off["SGLANG_ENABLE_PREFILL_WAR_READ_DONE"] is enable_off
    assert off.get("SGLANG_FORCE_COARSE_WAR_BARRIER") is coarse_off
    assert g["modes"] == ["EXTEND"]
    assert len(g["declaration"]) == 1 and g["declaration"][0].endswith(" is not SharedReadEnds.PRE_REPLAY")
    if version != "0.5.23":
        assert g["unless"] == []
    if stager is None:
        assert g["stagers"] == []
    else:
        (st,) = g["stagers"]
        assert not st["set"] and [(x["file"], x["line"]) for x in st["stores"]] == [stager]
    if version == "0.5.23":
        assert [x["role"] for x in g["gates"]] == ["resolve", "publish"]
        assert g["unless"] == ["memory.enable_hierarchical_cache or memory.hicache_storage_backend is not None or "
                               "memory.enable_lmcache"]


def test_details_show_what_the_gates_decide_and_each_exit(tmp_path):
    code, out = run(str(lay(tmp_path / "t")), "--details")
    line = next(x for x in out.splitlines() if x.startswith("prefill publish"))
    assert "no speculation off by default; also DFLASH (off by default); modes " in line
    assert "SGLANG_ENABLE_PREFILL_WAR_READ_DONE=False turns it off (default False)" in line
    assert line.endswith("; off when model_runner.server_args.enable_hierarchical_cache")
    assert f"  maybe_publish_prefill_shared_read_done (publish) keeps it off when not envs.SGLANG_ENABLE_PREFILL_WAR_" \
           f"READ_DONE.get() ({EVENT}:7)" in out
    assert "  stager prefill_shared_read_stager: never set to anything but None" in out


def test_a_gate_moved_into_the_caller_decides_the_same(tmp_path):
    """The algorithm test moved from the publishing function to the runner's call of it: the runner walk's path
    condition keeps EAGLE off, and pull-request mode loses nothing."""
    without = PUBLISH.replace('''    if not model_runner.spec_algorithm.supports_prefill_shared_read_done():
        stage = getattr(model_runner, "prefill_shared_read_stager", None)
        if stage is None or not stage(model_runner.forward_batch):
            return
''', "")
    assert without != PUBLISH
    base, h = lay(tmp_path / "base"), lay(tmp_path / "head", publish=without)
    runner = h / "sglang/srt/model_executor/runner/eager_runner.py"
    call = "        maybe_publish_prefill_shared_read_done(self.model_runner, ends, self.device_module)\n"
    assert call in runner.read_text()
    runner.write_text(runner.read_text().replace(call, "        if self.model_runner.spec_algorithm."
                                                       "supports_prefill_shared_read_done():\n    " + call))
    assert statuses(gates(h)) == {"EAGLE": "never", "DFLASH": "with settings"}
    code, out = run(str(h), "--baseline", str(base), "--json")
    assert json.loads(out)["fence"]["lost"] == []


def _runner_edit(root: Path, old: str, new: str) -> None:
    f = root / "sglang/srt/model_executor/runner/eager_runner.py"
    assert old in f.read_text()
    f.write_text(f.read_text().replace(old, new))


CALL = "        maybe_publish_prefill_shared_read_done(self.model_runner, ends, self.device_module)\n"
ENABLE = "    if not envs.SGLANG_ENABLE_PREFILL_WAR_READ_DONE.get():\n        return\n"
DECLARED = "    if shared_read_ends is not SharedReadEnds.PRE_REPLAY:\n        return\n"
HIER = "    if model_runner.server_args.enable_hierarchical_cache:\n        return\n"
STAGE = '        stage = getattr(model_runner, "prefill_shared_read_stager", None)\n'


@pytest.mark.parametrize("publish, runner, extra, lost", [
    # a second publish point with no gate, after the gated one: EAGLE's prefill publishes there
    (PUBLISH, (CALL, CALL + "        ev = self.device_module.Event()\n        ev.record()\n"
                     "        self.model_runner.shared_read_done_event = ev\n"), "",
     "LOST EAGLE's target prefill may now publish"),
    # the stager rebound to a callable through an annotated assignment
    (PUBLISH.replace(STAGE, STAGE + "        stage: object = lambda fb: True\n"), None, "",
     "LOST EAGLE's target prefill may now publish"),
    # the stager set as a class attribute of the model runner
    (PUBLISH, None, "\n    prefill_shared_read_stager = staticmethod(lambda fb: True)\n",
     "LOST EAGLE's target prefill may now publish"),
    # the setting's test removed
    (PUBLISH.replace(ENABLE, ""), None, "", "LOST SGLANG_ENABLE_PREFILL_WAR_READ_DONE no longer turns the prefill"),
    # the declaration test inverted: it publishes exactly when the backend does not declare PRE_REPLAY
    (PUBLISH.replace("shared_read_ends is not SharedReadEnds", "shared_read_ends is SharedReadEnds"), None, "",
     "LOST the prefill publish no longer tests that the backend declares PRE_REPLAY"),
], ids=["second-publish", "annotated-stager", "class-stager", "setting-removed", "declaration-inverted"])
def test_what_opens_a_gate_another_way_is_a_loss(tmp_path, publish, runner, extra, lost):
    base, h = lay(tmp_path / "base"), lay(tmp_path / "head", publish=publish, runner_extra=extra)
    if runner:
        _runner_edit(h, *runner)
    code, out = run(str(h), "--baseline", str(base))
    assert code == 1 and any(x.startswith(lost) for x in _lost(out)), out


@pytest.mark.parametrize("publish", [
    # the setting's test merged into the declaration's
    PUBLISH.replace(ENABLE, "").replace("    if shared_read_ends is not SharedReadEnds.PRE_REPLAY:",
                                        "    if not envs.SGLANG_ENABLE_PREFILL_WAR_READ_DONE.get() or "
                                        "shared_read_ends is not SharedReadEnds.PRE_REPLAY:"),
    # the server flag's test turned around: the publish under `if not flag`
    PUBLISH.replace(HIER, "    if not model_runner.server_args.enable_hierarchical_cache:\n        "
                          "read_done = device_module.Event()\n        read_done.record()\n        "
                          "model_runner.shared_read_done_event = read_done\n").split(
        "    read_done = device_module.Event()\n    read_done.record()\n")[0],
    # the setting and the algorithm read through locals
    PUBLISH.replace(ENABLE, "    enabled = envs.SGLANG_ENABLE_PREFILL_WAR_READ_DONE.get()\n    if not enabled:\n"
                            "        return\n").replace(
        "    if not model_runner.spec_algorithm.supports_prefill_shared_read_done():",
        "    algo = model_runner.spec_algorithm\n    if not algo.supports_prefill_shared_read_done():"),
], ids=["merged-with-the-declaration", "flag-turned-around", "through-locals"])
def test_an_honest_rewrite_of_a_gate_loses_nothing(tmp_path, publish):
    base, h = lay(tmp_path / "base"), lay(tmp_path / "head", publish=publish)
    code, out = run(str(h), "--baseline", str(base), "--json")
    assert json.loads(out)["fence"]["lost"] == [], out


def test_a_server_flag_test_moved_into_the_caller_loses_nothing(tmp_path):
    """The hierarchical-cache exit moved from the publishing function to the runner's call of it: the runner's
    path condition keeps the publish off the same way (``path_unless``)."""
    base, h = lay(tmp_path / "base"), lay(tmp_path / "head", publish=PUBLISH.replace(HIER, ""))
    _runner_edit(h, CALL, "        if not self.model_runner.server_args.enable_hierarchical_cache:\n    " + CALL)
    g = gates(h)
    assert g["unless"] == [] and g["path_unless"] == ["self.model_runner.server_args.enable_hierarchical_cache"]
    code, out = run(str(h), "--baseline", str(base), "--json")
    assert json.loads(out)["fence"]["lost"] == [], out
