# expect: timeout
# A thread drips a frame onto the result pipe one byte every 0.2 s (it never completes in time)
# while reset() never returns: data arriving must not move the deadline.
import os, struct, threading, time


def drip():
    data = struct.pack(">I", 4000) + b"{" + b" " * 3999
    for i in range(len(data)):
        for fd in range(3, 64):
            try:
                os.write(fd, data[i : i + 1])
            except OSError:
                pass
        time.sleep(0.2)


class DripEnv:
    def reset(self, seed=None):
        threading.Thread(target=drip, daemon=True).start()
        time.sleep(10**6)
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
