# expect: forbidden
# LOW, hook off: a thread makes a 32-bit system call (int 0x80, getpid) from a page of machine code.
# The filter's foreign-architecture action killed only that thread, and nothing was reported; it
# kills the task now (SIGSYS: forbidden).
import ctypes
import mmap
import threading
import time

CODE = bytes([0xB8, 0x14, 0x00, 0x00, 0x00, 0xCD, 0x80, 0xC3])  # mov eax, 20; int 0x80; ret


class Int80Env:
    def reset(self, seed=None):
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(CODE)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(page))
        fn = ctypes.CFUNCTYPE(ctypes.c_int)(addr)
        t = threading.Thread(target=fn)
        t.start()
        t.join()
        time.sleep(0.5)
        return "the task lived on", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
