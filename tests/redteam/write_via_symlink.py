# expect: forbidden
import os
class SymlinkEnv:
    def reset(self, seed=None):
        os.symlink("/var/tmp", "/tmp/spade_redteam_link")
        fd = os.open("/tmp/spade_redteam_link/spade_redteam_pwned", os.O_WRONLY | os.O_CREAT)
        os.write(fd, b"pwned")
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
