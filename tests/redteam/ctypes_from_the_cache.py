# expect: forbidden
# Round 3, class 1: _ctypes is already loaded in the worker (numpy and the sandbox's own set-up
# import it), and the import system keeps a copy of a loaded C module: asking the extension
# loader for it again needs no file and raised no audit event. The loader is audited now.
import importlib.machinery
import importlib.util
import os
import sys


class CtypesCacheEnv:
    def reset(self, seed=None):
        name = "_c" + "types"
        for d in sys.path:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(d, name + suffix)
                if os.path.exists(path):
                    loader = importlib.machinery.ExtensionFileLoader(name, path)
                    mod = loader.create_module(importlib.util.spec_from_file_location(name, path, loader=loader))
                    return f"got {mod.__name__}: raw memory", {}
        return "not found", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
