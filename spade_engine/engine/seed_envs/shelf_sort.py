"""Shelf sort: put five books in order of height with a limited number of swaps (a TextGame game).

The heights are shown. ``swap I J`` exchanges the books at positions I and J (1-5); a swap that
puts a book in its final place earns a small reward. The episode is won (reward 1.0) when the
shelf is sorted from shortest to tallest, and lost after more swaps than the shelf needs plus one.
"""
# skill: sort_swaps
# difficulty: 0.5
import random
import re


class ShelfSortEnv(TextGame):
    """Sort the books by height, shortest first, using few swaps."""

    max_turns = 12

    def setup(self, rng):
        self.books = rng.sample(range(10, 40), 5)
        while self.books == sorted(self.books):
            rng.shuffle(self.books)
        self.swaps_left = len(self._swaps()) + 1
        return (
            f"Book heights on the shelf, positions 1 to 5: {self.books}. Sort them shortest to tallest.\n"
            f"Command: swap I J exchanges the books at positions I and J. You have {self.swaps_left} swaps."
        )

    def _swaps(self):
        books, out = list(self.books), []
        for i in range(len(books)):
            j = books.index(min(books[i:]), i)
            if j != i:
                books[i], books[j] = books[j], books[i]
                out.append(f"swap {i + 1} {j + 1}")
        return out

    def act(self, command):
        words = command.split()
        if len(words) != 3 or words[0] != "swap" or not words[1].isdigit() or not words[2].isdigit():
            return "Unknown command. Use swap I J with positions 1 to 5.", 0.0, False
        i, j = int(words[1]) - 1, int(words[2]) - 1
        if not (0 <= i < 5 and 0 <= j < 5) or i == j:
            return "Positions must be two different numbers from 1 to 5.", 0.0, False
        goal = sorted(self.books)
        before = sum(a == b for a, b in zip(self.books, goal))
        self.books[i], self.books[j] = self.books[j], self.books[i]
        self.swaps_left -= 1
        if self.books == goal:
            return f"Shelf: {self.books}. Sorted!", 1.0, True
        if self.swaps_left <= 0:
            return f"Shelf: {self.books}. No swaps left.", 0.0, True
        placed = sum(a == b for a, b in zip(self.books, goal))
        reward = 0.05 if placed > before else 0.0
        return f"Shelf: {self.books}. Swaps left: {self.swaps_left}.", reward, False

    def plan(self):
        return self._swaps()
