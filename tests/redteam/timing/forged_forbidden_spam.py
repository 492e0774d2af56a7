# expect: forbidden
# The bounded attack of the red-team round: a thread sends a forged "forbidden" frame every 0.5 s
# so that each wait is restarted, while the main thread never answers. It took 47 s against a
# 20 s limit; the first frame now ends the task.
import json, os, struct, threading, time


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def spam():
    while True:
        for fd in range(3, 64):
            try:
                os.write(fd, frame({"op": "forbidden", "event": "spam"}))
            except OSError:
                pass
        time.sleep(0.5)


class SpamEnv:
    def reset(self, seed=None):
        threading.Thread(target=spam, daemon=True).start()
        time.sleep(10**6)
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
