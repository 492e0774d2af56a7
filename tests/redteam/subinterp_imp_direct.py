# expect: forbidden
# Round 3, class 1: calls the import system's C loader directly (importlib._bootstrap._imp.
# create_dynamic, no import event at all) to load _testinternalcapi under an innocent name.
# The loader itself is audited now (spade.load_extension: the file's name is checked too).
import importlib._bootstrap as bootstrap
import importlib.machinery
import os
import sys
import types


class ImpDirectEnv:
    def reset(self, seed=None):
        for d in sys.path:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(d, "_testinternal" + "capi" + suffix)
                if os.path.exists(path):
                    bootstrap._imp.create_dynamic(types.SimpleNamespace(name="harmless", origin=path))
        bootstrap._imp.create_dynamic(types.SimpleNamespace(name="_testinternal" + "capi", origin="/nowhere.so"))
        return "escaped", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
