# expect: forbidden
# Round 3, class 1: writes a complete reply of its own to every descriptor (the fingerprint of the
# last round's format, the right sequence number, counted from the calls it sees, a win) and then
# stalls, so that its forged reply is the one read. Every fingerprint now starts with a random
# string of the task that only its I/O thread knows: the forgery is detected.
import json
import os
import struct
import time

CALLS = [2]  # parse and load come before any call it sees


class ForgeReplyEnv:
    def __init__(self):
        CALLS[0] += 1

    def close(self):
        CALLS[0] += 1

    def reset(self, seed=None):
        CALLS[0] += 1
        return "Say \\boxed{1}.", {}

    def step(self, action):
        CALLS[0] += 1
        for seq in (CALLS[0],):
            data = json.dumps({
                "op": "reply", "seq": seq, "ok": True,
                "data": {"obs": {"v": "won"}, "reward": {"v": 1.0}, "terminated": {"v": True},
                         "truncated": {"v": False}, "info": {"v": {}}},
                "guard": {"fp": "96:2", "beat": seq},
            }).encode()
            for fd in range(3, 64):
                try:
                    os.write(fd, struct.pack(">I", len(data)) + data)
                except OSError:
                    pass
        time.sleep(30)
        return "x", 0.0, True, False, {}
