"""Plain decoding without CUDA graphs, with the barrier and without it.

Every catalog scenario replays a CUDA graph, and PyTorch's CUDA sanitizer follows only traces without graph replays (``reference.sim.csan.applicable``), so
these two are what the sanitizer is checked on: one race-free, one with the race the missing barrier leaves."""

#: Nothing synchronizes the device before its first step (no graph capture does).
EAGER_DECODE = """
name = "eager-decode"
steps = 2
[backends.b]
reads.DECODE = { pre_replay = ["req_to_token"] }
[runners.target]
marker = false
[algorithm]
name = "none"
publisher = "target"
[[algorithm.steps.normal]]
name = "decode"
runner = "target"
mode = "DECODE"
backend = "b"
execution = "eager"
"""

#: The barrier off: each step's read of req_to_token races the next step's write.
EAGER_DECODE_UNFENCED = EAGER_DECODE.replace('name = "eager-decode"', 'name = "eager-decode-unfenced"').replace(
    "[backends.b]", "[scheduler]\nbarrier = false\n[backends.b]")
