"""The skill sets a designer can be asked to exercise.

* ``engine`` (default): the 16 skill families of the procedural simulation; the bundled seed
  archive has two to four environments for each of them and the bundled corpus grounds all of
  them through their domains.
* ``cognitive``: the 9 cognitive skills of the public SPADE release (Pattern Recognition,
  Logical Deduction, Strategic Planning, Mathematical Reasoning, Spatial Reasoning, Causal
  Inference, Memory Recall, Optimization, Language Understanding), with the release's
  descriptions and example game ideas; each is grounded on one domain of the bundled corpus.

``loop.skill_set`` picks the set; ``loop.skills`` may name any skill of any set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Skill", "SKILLS", "COGNITIVE_SKILLS", "SKILL_SETS", "skill_info", "skill_names"]


@dataclass(frozen=True)
class Skill:
    """A target skill the designer is asked to exercise, and the corpus domain that grounds it."""

    name: str
    description: str
    domain: str
    #: game ideas shown to the designer ("pick one or invent your own")
    ideas: tuple[str, ...] = field(default=())


SKILLS: dict[str, Skill] = {
    s.name: s
    for s in (
        Skill("arithmetic", "mathematical reasoning: evaluate multi-step arithmetic exactly", "math",
              ("a ledger whose hidden entries are revealed one query at a time", "operator puzzles over hidden digits",
               "a budget balanced over several transactions")),
        Skill("sequence", "pattern induction: infer the rule of a sequence and extend it", "logic",
              ("a sequence whose terms are revealed on request", "a two-rule sequence (odd and even positions)",
               "a cipher whose shift is inferred from probes")),
        Skill("number_search", "search under feedback: locate a hidden value with few queries", "logic",
              ("higher/lower search with a query budget", "a hidden cell in a grid found with distance clues",
               "a hidden code found with match counts")),
        Skill("code_trace", "program tracing: predict what a short program computes", "code",
              ("a register machine stepped instruction by instruction", "a stack program whose output is predicted",
               "a loop whose variables are inspected before answering")),
        Skill("unit_convert", "scientific quantities: convert and compute with physical units", "science",
              ("convert through a chain of units looked up one at a time", "mix solutions to reach a concentration",
               "compute an energy from measured quantities")),
        Skill("tool_use", "tool use: call tools in the right order and follow references", "tool_use",
              ("look records up by key and follow references", "query a small inventory with several tools",
               "a calendar whose free slot is found with queries")),
        Skill("sort_swaps", "planning: reach a goal state through a sequence of moves", "code",
              ("sort a list with a limited budget of swaps", "move blocks between stacks to a goal",
               "a sliding puzzle on a short row")),
        Skill("gcd_steps", "number theory: run Euclid's algorithm, gcd and lcm step by step", "math",
              ("Euclid's algorithm with each remainder asked for", "the lcm of hidden numbers revealed by probes",
               "tile a rectangle with the largest square")),
        Skill("linear_equation", "algebra: solve linear equations and small systems exactly", "math",
              ("a balance scale whose hidden weights are found by weighings", "two equations revealed one at a time",
               "ages or prices found from stated relations")),
        Skill("truth_table", "propositional logic: evaluate formulas and count satisfying assignments", "logic",
              ("a circuit of switches whose output is probed", "count the rows that satisfy a hidden formula",
               "find the assignment that makes every clause true")),
        Skill("ordering", "deduction: order items consistently with precedence or comparison facts", "logic",
              ("rank hidden items with pairwise comparisons", "schedule tasks under precedence rules",
               "seat guests consistently with stated constraints")),
        Skill("graph_path", "graph search: reach a goal through a map within a cost budget", "logic",
              ("explore a map of rooms revealed on entry", "a road network with tolls and a budget",
               "a maze whose exits are seen only from neighbouring cells")),
        Skill("stack_machine", "data structures: simulate stacks, queues and postfix evaluation", "code",
              ("evaluate a postfix program token by token", "a queue of jobs served under rules",
               "undo/redo history reconstructed from operations")),
        Skill("string_ops", "string manipulation: apply and invert character-level transformations", "code",
              ("invert a chain of rotations and reversals", "edit a word into a target with few operations",
               "decode a word transformed by hidden rules")),
        Skill("formula", "scientific laws: compute and rearrange physical formulas with units", "science",
              ("find a missing quantity of a circuit with Ohm's law", "a projectile whose launch values are measured",
               "gas law problems with readings on request")),
        Skill("inventory", "tool use: query and update an inventory or price list through tools", "tool_use",
              ("restock a shop within a budget with query tools", "reconcile a ledger with lookups and updates",
               "fill an order from several warehouses")),
    )
}

COGNITIVE_SKILLS: dict[str, Skill] = {
    s.name: s
    for s in (
        Skill("Pattern Recognition", "Identifying patterns in sequences, numbers, or text", "logic",
              ("Caesar/substitution cipher decoding", "regex pattern inference from string examples",
               "modular arithmetic cycles (clock arithmetic)", "sequence with hidden piecewise rules",
               "function composition rule discovery from input-output pairs", "Mastermind with position feedback")),
        Skill("Logical Deduction", "Drawing conclusions from given premises and rules", "logic",
              ("detective investigation: interview suspects, examine evidence, then accuse",
               "logic grid puzzle filled by yes/no questions", "escape room where each object reveals the next clue")),
        Skill("Strategic Planning", "Multi-step planning and resource management", "code",
              ("path planning with limited fuel", "resource allocation across rounds", "scheduling puzzles")),
        Skill("Mathematical Reasoning", "Solving mathematical problems and equations", "math",
              ("combinatorial counting with constraints", "modular inverse / Chinese Remainder Theorem",
               "integer partitions or Diophantine equations", "graph shortest path", "cryptarithmetic")),
        Skill("Spatial Reasoning", "Understanding spatial relationships and mental rotation", "logic",
              ("grid navigation with hidden walls", "Sokoban on a small warehouse", "position tracking after moves")),
        Skill("Causal Inference", "Understanding cause-effect relationships", "science",
              ("find the hidden causal rule by choosing experiments", "diagnose a faulty component by testing parts",
               "toggle switches and measure outputs to find the faulty gate")),
        Skill("Memory Recall", "Remembering and utilizing past information", "tool_use",
              ("items revealed one at a time, then recalled exactly", "spot the contradicting witness statement",
               "reconstruct a secret from messages seen across turns")),
        Skill("Optimization", "Finding optimal solutions under constraints", "math",
              ("knapsack with items arriving one by one", "assign jobs to machines to minimise completion time",
               "route planning with costs")),
        Skill("Language Understanding", "Understanding and manipulating language", "tool_use",
              ("anagram and word puzzles", "riddles answered by exploring clues", "crossword filled clue by clue")),
    )
}

SKILL_SETS: dict[str, dict[str, Skill]] = {"engine": SKILLS, "cognitive": COGNITIVE_SKILLS}


def skill_info(name: str) -> Skill | None:
    """The skill called ``name`` in any set, or ``None``."""
    for table in SKILL_SETS.values():
        if name in table:
            return table[name]
    return None


def skill_names(skill_set: str = "engine") -> list[str]:
    """Every skill of ``skill_set``, in order."""
    try:
        return list(SKILL_SETS[skill_set])
    except KeyError:
        raise ValueError(f"unknown skill set {skill_set!r} (expected {', '.join(SKILL_SETS)})") from None
