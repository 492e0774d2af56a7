# expect: sandbox
# A thread keeps sending well-formed replies to a command that was never sent: the first one
# kills the task (a reply for another seq is a frame that does not fit), nothing waits for more.
import json, os, struct, threading, time


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def spam():
    while True:
        for fd in range(3, 64):
            try:
                os.write(fd, frame({"op": "reply", "seq": 999, "ok": True, "guard": {"fp": "", "beat": 999}, "data": {}}))
            except OSError:
                pass
        time.sleep(0.3)


class ReplySpamEnv:
    def reset(self, seed=None):
        threading.Thread(target=spam, daemon=True).start()
        time.sleep(10**6)
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
