from sglang.srt.utils.common import *  # noqa: F401,F403
