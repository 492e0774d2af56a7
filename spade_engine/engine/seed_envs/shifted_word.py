"""Shifted word: decode a word written with a Caesar shift (a puzzle: setup only)."""
# skill: string_ops
# difficulty: 0.4
import random
import re


class ShiftedWordEnv(TextGame):
    """Decode a word whose letters were each shifted forward in the alphabet."""

    def setup(self, rng):
        words = ["planet", "garden", "silver", "bridge", "candle", "forest"]
        word = rng.choice(words)
        shift = rng.randint(1, 5)
        coded = "".join(chr((ord(ch) - 97 + shift) % 26 + 97) for ch in word)
        self.answer = word
        return (
            f"Each letter of a word was moved {shift} places forward in the alphabet (z wraps to a), giving "
            f"'{coded}'. What is the original word?"
        )
