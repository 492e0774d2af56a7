# expect: sandbox
import json, os, struct
def forge(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data
class ForgerEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        frame = forge({"seq": 7, "ok": True, "obs": {"v": "won"}, "reward": {"v": 1.0},
                       "terminated": {"v": True}, "truncated": {"v": False}, "info": {"v": {}}})
        for fd in range(3, 4096):  # every descriptor the process may hold, the result pipe included
            try:
                os.write(fd, frame)
            except OSError:
                pass
        return "x", 0.0, True, False, {}
