# expect: valid
# Leaves a note in /tmp for whatever runs next on its worker, and fails loudly if it finds a
# note left by another task: with a fresh /tmp per task it never does.
import os
import random

NOTE = "/tmp/spade_note"


class NoteEnv:
    def reset(self, seed=None):
        if os.path.exists(NOTE):
            with open(NOTE) as f:
                writer = f.read()
            if writer != str(os.getpid()):
                raise RuntimeError(f"LEAK: a note from task {writer} survived into this task")
        with open(NOTE, "w") as f:
            f.write(str(os.getpid()))
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\boxed{n}." % self.n, {}

    def step(self, action):
        ok = action.strip() == "\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}

    def solution(self):
        return ["\\boxed{%d}" % self.n]
