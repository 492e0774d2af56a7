# expect: forbidden
# Round 3, class 1: the audited loader keeps the real create_dynamic in a generator's frame;
# this program takes the generator from the wrapper's closure and reads its frame to get the
# unaudited original. Reading that frame is refused.
import importlib._bootstrap as bootstrap


class LoaderFrameEnv:
    def reset(self, seed=None):
        for cell in bootstrap._imp.create_dynamic.__closure__ or ():
            gen = cell.cell_contents
            frame = getattr(gen, "gi_frame", None)
            if frame is not None:
                originals = [v for v in frame.f_locals.values() if callable(v)]
                return f"took {len(originals)} originals", {}
        return "nothing to take", {}

    def step(self, action):
        return "x", 0.0, True, False, {}
