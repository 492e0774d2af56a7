# expect: forbidden
# Round 3, class 1: loads the sub-interpreter module under a dotted name the import rule used not
# to look into ("spade_pkg._xxsubinterpreters": only its first part was checked), straight
# through the extension loader (no import statement at all), then creates an interpreter. Every
# part of the name is checked now, and loading a C module is itself audited.
import importlib.machinery
import importlib.util
import os
import sys


def find(name):
    for d in sys.path:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(d, name + suffix)
            if os.path.exists(path):
                return path
    return os.path.join(sys.prefix, "lib", "x", name + ".so")


class DottedSubinterpEnv:
    def reset(self, seed=None):
        path = find("_xxsub" + "interpreters")
        loader = importlib.machinery.ExtensionFileLoader("spade_pkg._xxsub" + "interpreters", path)
        spec = importlib.util.spec_from_file_location("spade_pkg._xxsub" + "interpreters", path, loader=loader)
        mod = loader.create_module(spec)
        interp = mod.create()
        mod.run_string(interp, "import os; os.kill(1, 9)")
        return "escaped", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
