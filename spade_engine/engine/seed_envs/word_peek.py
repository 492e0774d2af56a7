"""Word peek: uncover a hidden word letter by letter, then spell it backwards (a TextGame game).

``peek K`` shows letter K of a hidden five-letter word (a small reward for each new letter);
``spell W`` ends the episode: reward 1.0 when W is the hidden word reversed, else 0.0.
"""
# skill: string_ops
# difficulty: 0.5
import random
import re


class WordPeekEnv(TextGame):
    """Uncover a hidden word and spell it backwards."""

    max_turns = 9
    WORDS = ["lemon", "cabin", "river", "stone", "tiger", "plume", "grain", "medal"]

    def setup(self, rng):
        self.word = rng.choice(self.WORDS)
        self.peeked = set()
        return (
            "A hidden word has 5 letters. Spell it backwards.\n"
            "Commands: peek K shows letter K (1 to 5); spell W gives the word reversed (one try)."
        )

    def act(self, command):
        words = command.split()
        if len(words) == 2 and words[0] == "peek" and words[1] in ("1", "2", "3", "4", "5"):
            k = int(words[1])
            reward = 0.0 if k in self.peeked else 0.02
            self.peeked.add(k)
            return f"Letter {k} is '{self.word[k - 1]}'.", reward, False
        if len(words) == 2 and words[0] == "spell":
            if words[1] == self.word[::-1]:
                return "Correct: that is the word backwards.", 1.0, True
            return f"Wrong: {words[1]} is not the word backwards.", 0.0, True
        return "Unknown command. Use peek K (1-5) or spell W.", 0.0, False

    def plan(self):
        return [f"peek {k}" for k in range(1, 6)] + [f"spell {self.word[::-1]}"]
