# expect: memory
# Class 2: touches 300 MiB (within the address-space limit), held by the task as a whole; with a
# task cgroup smaller than that the kernel's OOM killer ends the task, reported as memory.
class ResidentHogEnv:
    def reset(self, seed=None):
        block = bytearray(300 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        return "held", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
