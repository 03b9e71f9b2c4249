class EnvBool:
    def __init__(self, default):
        self.default = default

    def get(self):
        return self.default


class Envs:
    SGLANG_ENABLE_WAR_BARRIER = EnvBool(False)
    SGLANG_FORCE_COARSE_WAR_BARRIER = EnvBool(False)


envs = Envs()
