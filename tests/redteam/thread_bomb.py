# expect: crash
import threading, time
class ThreadBombEnv:
    def reset(self, seed=None):
        while True:
            threading.Thread(target=time.sleep, args=(10**6,), daemon=True).start()
    def step(self, action):
        return "x", 0.0, True, False, {}
