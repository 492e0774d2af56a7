# expect: forbidden
class WriterEnv:
    def reset(self, seed=None):
        for path in ("/root/spade_redteam_pwned", "/var/tmp/spade_redteam_pwned", "/dev/shm/spade_redteam_pwned"):
            try:
                with open(path, "w") as f:
                    f.write("pwned")
            except OSError:
                pass
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
