# expect: forbidden
import socket
class NetEnv:
    def reset(self, seed=None):
        socket.create_connection(("1.1.1.1", 80), timeout=1).close()
        return "hi", {}
    def step(self, action):
        return "x", 0.0, True, False, {}
