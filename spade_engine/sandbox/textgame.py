# --- TextGame: the engine-provided base class of a scaffolded environment (spade-engine) ---
import random as _tg_random
import re as _tg_re


class TextGame:
    """The reset/step/solution contract, turn counting and \\boxed{} parsing for a game that
    defines setup(rng) -> str, act(command) -> (text, reward, done) and plan() -> [command]."""

    max_turns = 20

    def __init__(self, max_turns=None):
        if max_turns is not None:
            self.max_turns = int(max_turns)
        self.turn_count = 0
        self.rng = _tg_random.Random(0)
        self.reset()

    def reset(self, seed=None):
        self.turn_count = 0
        self.rng = _tg_random.Random(seed)
        intro = self.setup(self.rng)
        return str(intro) + "\nReply with one action per turn, written as \\boxed{action}.", {}

    def step(self, action):
        self.turn_count += 1
        found = _tg_re.findall(r"\\boxed\{([^{}]*)\}", str(action))
        command = " ".join(found[-1].split()) if found else ""
        if command:
            text, reward, done = TextGame._outcome(self.act(command))
        else:
            text, reward, done = "No action found: reply with one action written as \\boxed{action}.", 0.0, False
        truncated = not done and self.turn_count >= self.max_turns
        return text, reward, done, truncated, {}

    def solution(self):
        out = []
        for command in self.plan():
            command = str(command)
            out.append(command if command.startswith("\\boxed{") else "\\boxed{" + command + "}")
        return out

    @staticmethod
    def _outcome(result):
        if isinstance(result, str):
            return result, 0.0, False
        if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
            raise TypeError("act() must return (text, reward, done), got " + type(result).__name__)
        reward = float(result[1])
        done = bool(result[2]) if len(result) == 3 else reward >= 1.0
        return str(result[0]), reward, done
# --- end of TextGame ---
