"""Pace convert: turn a distance and a time into metres per minute (a puzzle: setup only)."""
# skill: unit_convert
# difficulty: 0.4
import random
import re


class PaceConvertEnv(TextGame):
    """Convert a runner's distance and time into metres per minute."""

    def setup(self, rng):
        minutes = rng.choice([4, 5, 8, 10])
        speed = rng.randint(12, 30) * 10  # metres per minute, a whole number
        km = speed * minutes / 1000
        seconds = minutes * 60
        self.answer = speed
        return (
            f"A runner covers {km:g} km in {seconds} seconds at a steady pace. "
            "What is the speed in metres per minute (a whole number)?"
        )
