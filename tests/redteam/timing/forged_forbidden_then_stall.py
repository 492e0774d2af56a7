# expect: forbidden
# A forged "forbidden" frame (no seq) used to make the engine wait 5 s more for the zygote's word,
# and every frame in that window restarted the wait. Now the task is killed the moment the frame
# arrives, well inside the validation's limit.
import json, os, struct, time


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


class StallEnv:
    def reset(self, seed=None):
        for fd in range(3, 64):  # the result pipe is one of these
            try:
                os.write(fd, frame({"op": "forbidden", "event": "os.system", "detail": "forged"}))
            except OSError:
                pass
        time.sleep(10**6)
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
