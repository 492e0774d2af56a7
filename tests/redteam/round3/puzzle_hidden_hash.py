# expect: unsolvable
# LOW: a puzzle (a TextGame without act(), inlined with the base before validation) whose answer is
# a hash of the values it shows: the same question always has the same answer, so every dynamic
# check passes, but no player can work it out. It validated and then scored 0 in every play.
class HiddenHashPuzzle(TextGame):
    """Combine the two numbers."""

    def setup(self, rng):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        self.answer = hash((a, b)) % 1000
        return f"Combine {a} and {b} the secret way. What do you get?"
