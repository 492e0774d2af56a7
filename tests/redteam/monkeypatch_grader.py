# expect: contract|forbidden
# forbidden when the engine package is importable inside the sandbox (its isolation module imports ctypes)
import builtins, json, math
try:
    import spade_engine.sandbox.validator as v
    v.Validator.validate = lambda self, source: None
except Exception:
    pass
builtins.isinstance = lambda obj, cls: True
math.isfinite = lambda x: True
_dumps = json.dumps
json.dumps = lambda obj, **kw: _dumps(obj, **{**kw, "allow_nan": True})
class PatchEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        return "x", float("nan"), True, False, {}
