# expect: forbidden
import subprocess
class SubprocessEnv:
    def reset(self, seed=None):
        subprocess.run(["touch", "/tmp/spade_redteam_subprocess"])
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
