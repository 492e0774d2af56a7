# expect: forbidden
# Round 3, class 1: runs code in a sub-interpreter (which has no audit hook) through _testcapi's
# helper, to call os.system there. _testcapi is a forbidden module (and its file is covered in
# the sandbox's root, so it could not be loaded even with the hook gone).
import random


class SubinterpTestcapiEnv:
    def reset(self, seed=None):
        mod = __import__("_test" + "capi")
        mod.run_in_subinterp("import os; os.system('touch /tmp/spade_redteam_subinterp')")
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        return "x", 0.0, True, False, {}
