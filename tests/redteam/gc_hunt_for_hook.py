# expect: forbidden
# The red-team round's route to the hook: gc.get_objects() to find its closure. Walking the
# garbage collector's object lists is forbidden in a task.
import gc


class GcHuntEnv:
    def reset(self, seed=None):
        for o in gc.get_objects():
            if type(o).__name__ == "function" and o.__name__ == "hook":
                for cell in o.__closure__:
                    if isinstance(cell.cell_contents, frozenset):
                        cell.cell_contents = frozenset()
        return "hi", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
