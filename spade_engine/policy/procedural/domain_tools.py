"""Tool-use skill families of the procedural designer (a SIMULATION, not an LLM): reference
chains through a lookup tool and inventory tools, each with variants, difficulty knobs, reward
schemes and wordings, plus the observation solvers of the simulated agent. Every observation
repeats the tool syntax, so the agent (which sees only the latest observation) knows its tools."""

from __future__ import annotations

import random
from . import bounded_re as re

from .kit import Built, Family, Spec, fill, pick, reward_scheme, step_reward
from .domain_logic import vocabulary

__all__ = ["TOOL_USE", "INVENTORY"]

_VERBS = (("get", "answer"), ("read", "submit"), ("fetch", "report"), ("lookup", "final"))


# ----------------------------------------------------------------------------------------------
# reference chains

_CHAIN_MAKE = {
    "chain": r'''
    def _make(self, rng):
        names = rng.sample(self.WORDS, self.DEPTH + self.DISTRACTORS)
        chain, extra = ["start"] + names[: self.DEPTH], names[self.DEPTH:]
        self._answer = rng.randint(10, 999)
        self._store = {}
        for a, b in zip(chain, chain[1:]):
            self._store[a] = ("ref", b)
        self._store[chain[-1]] = ("value", self._answer)
        for name in extra:
            self._store[name] = ("value", rng.randint(10, 999)) if rng.random() < 0.5 else ("ref", rng.choice(chain))
        self._plan = chain
        self._task = "Find the number reached by following references from key 'start'."
''',
    "sum": r'''
    def _make(self, rng):
        names = rng.sample(self.WORDS, self.DEPTH + self.DISTRACTORS)
        wanted = names[: self.DEPTH]
        self._store = {n: ("value", rng.randint(1, 99)) for n in names}
        self._answer = sum(self._store[n][1] for n in wanted)
        self._plan = sorted(wanted)
        self._task = "Report the sum of the values stored under " + ", ".join(sorted(wanted)) + "."
''',
}

_CHAIN = r'''
    def _tools(self):
        return "(tools: __GET__ <key>, __ANSWER__ <number>)"

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self._store = {}
        self._answer = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self._make(rng)
        self._seen = {}
        self.turn_count = 0
        keys = ", ".join(sorted(self._store))
        return (self.THEME + "\nTools: \\boxed{__GET__ <key>} shows what a key holds; \\boxed{__ANSWER__ <number>} submits the final "
                "value. Keys: " + keys + ". " + self._task + " " + self._notes() + " " + self._tools()), {}

    def _notes(self):
        return "Notes: " + (", ".join(k + "=" + str(v) for k, v in sorted(self._seen.items())) or "none") + "."

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        parts = _cmd(action).split()
        if len(parts) == 2 and parts[0].lower() == "__GET__":
            key = parts[1].strip("'\"").lower()
            entry = self._store.get(key)
            if entry is None:
                return "No key named '" + key + "'. " + self._tools(), 0.0, False, truncated, {}
            if entry[0] == "ref":
                return __REF__ + " " + self._notes() + " " + self._task + " " + self._tools(), 0.0, False, truncated, {}
            self._seen[key] = entry[1]
            return __VALUE__ + " " + self._notes() + " " + self._task + " " + self._tools(), __STEP__, False, truncated, {}
        if len(parts) == 2 and parts[0].lower() == "__ANSWER__":
            if _int(parts[1]) == self._answer:
                return "Correct.", 1.0, True, False, {}
            return "Incorrect.", self._score(len(self._seen), len(self._plan)), True, False, {}
        return "Unknown tool. " + self._tools(), 0.0, False, truncated, {}

    def solution(self):
        return [_boxed("__GET__ " + k) for k in self._plan] + [_boxed("__ANSWER__ " + str(self._answer))]
'''

_REF = ('"Key \'" + key + "\' holds a reference to key \'" + entry[1] + "\'."',
        '"Key \'" + key + "\' points to key \'" + entry[1] + "\'."')
_VALUE = ('"Key \'" + key + "\' holds the value " + str(entry[1]) + "."',
          '"Key \'" + key + "\' stores the number " + str(entry[1]) + "."')


def _build_chain(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variant = pick(rng, ("chain", "chain", "sum"))
    get, answer = pick(rng, _VERBS)
    depth = max(1, min(spec.turn_limit - (2 if variant == "chain" else 1), 1 + round(3 * d)))
    distractors = 1 + round(5 * d)
    words = vocabulary(spec, depth + distractors + 4)
    words = [w for w in words if w != "start"]
    scheme, scheme_desc, score = reward_scheme(rng, multi_step=True)
    body = fill("\n    DEPTH = __D__\n    DISTRACTORS = __X__\n    WORDS = __W__\n", D=depth, X=distractors, W=repr(words)) + _CHAIN_MAKE[variant] + score + fill(
        _CHAIN, GET=get, ANSWER=answer, REF=pick(rng, _REF), VALUE=pick(rng, _VALUE),
        MAX_TURNS=min(spec.turn_limit, depth + 3), STEP=step_reward(scheme))
    desc = (f"Tool use: the agent calls '{get}' to follow a chain of {depth} reference(s) among {distractors} distractor keys, "
            f"then '{answer}'s the value found." if variant == "chain" else
            f"Tool use: the agent looks up {depth} keys with '{get}' (among {distractors} distractors) and '{answer}'s their sum.")
    return Built(body=body, doc=pick(rng, ("Call tools in the right order.", "A key-value tool (" + variant + ").",
                                           "Follow references with a lookup tool.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{get}/{scheme}")


def _tool_verbs(obs: str) -> tuple[str, str] | None:
    m = list(re.finditer(r"\(tools: (\w+) <key>, (\w+) <number>\)", obs))
    return (m[-1].group(1), m[-1].group(2)) if m else None


def _solve_tool_use(obs: str) -> str | None:
    verbs = _tool_verbs(obs)
    if verbs is None:
        return None
    get, answer = verbs
    task = re.search(r"Report the sum of the values stored under ([a-z, ]+)\.", obs)
    notes = dict((k, int(v)) for k, v in re.findall(r"([a-z]+)=(\d+)", (re.findall(r"Notes: (.*?)\.", obs) or [""])[-1]))
    if task:
        wanted = [w.strip() for w in task.group(1).split(",")]
        missing = [w for w in wanted if w not in notes]
        return f"{get} {missing[0]}" if missing else f"{answer} {sum(notes[w] for w in wanted)}"
    m = re.search(r"(?:holds the value|stores the number) (\d+)\.", obs)
    if m:
        return f"{answer} {m.group(1)}"
    m = re.search(r"(?:holds a reference to|points to) key '(\w+)'", obs)
    if m:
        return f"{get} {m.group(1)}"
    if "from key 'start'" in obs:
        return f"{get} start"
    return None


def _wrong_tool(rng: random.Random, obs: str, correct: str | None) -> str:
    verbs = _tool_verbs(obs)
    return f"{verbs[1] if verbs else 'answer'} {rng.randint(10, 999)}"


TOOL_USE = Family(
    "tool_use", "tool_use", "Tool calls", _build_chain, _solve_tool_use, _wrong_tool,
    "Call the lookup tool on the first key you need and keep calling it on each key you are referred to (or each key "
    "of the task); only when you hold the value, submit it with the answer tool. Use the tool names the observation lists.",
    -0.1, ("KeyChainTool", "ReferenceLookup", "ToolChain", "KeyValueTool", "ApiLookup"),
)


# ----------------------------------------------------------------------------------------------
# inventory tools

_INV_MAKE = {
    "restock": r'''
    def _make(self, rng):
        items = rng.sample(self.WORDS, self.COUNT)
        self._stock = {i: rng.randint(0, 9) for i in items}
        self._target = {i: self._stock[i] + rng.randint(1, self.MAX_ORDER) for i in items}
        self._known = {}

    def _status(self):
        parts = []
        for item in sorted(self._target):
            have = str(self._stock[item]) if item in self._known else "?"
            parts.append(item + " " + have + "/" + str(self._target[item]))
        return "Stock/target: " + ", ".join(parts) + "."

    def _done(self):
        return all(self._stock[i] == self._target[i] for i in self._target)

    def _solution(self):
        out = []
        for item in sorted(self._target):
            if item not in self._known:
                out.append("__CHECK__ " + item)
            if self._stock[item] < self._target[item]:
                out.append("__ORDER__ " + item + " " + str(self._target[item] - self._stock[item]))
        return out
''',
    "pricing": r'''
    def _make(self, rng):
        items = rng.sample(self.WORDS, self.COUNT)
        self._price = {i: rng.randint(1, 20) for i in items}
        self._qty = {i: rng.randint(1, self.MAX_ORDER) for i in items}
        self._known = {}
        self._total = sum(self._price[i] * self._qty[i] for i in items)

    def _status(self):
        order = ", ".join(str(self._qty[i]) + " x " + i for i in sorted(self._qty))
        prices = ", ".join(i + " " + (str(self._price[i]) if i in self._known else "?") for i in sorted(self._qty))
        return "Order: " + order + ". Known prices: " + prices + "."

    def _done(self):
        return False

    def _solution(self):
        return ["__CHECK__ " + i for i in sorted(self._qty) if i not in self._known] + ["__ORDER__ " + str(self._total)]
''',
}

_INV = r'''
    def _tools(self):
        return __TOOLS__

    def __init__(self, max_turns=__MAX_TURNS__):
        self.max_turns = max_turns
        self.turn_count = 0
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self._make(rng)
        self.turn_count = 0
        return self.THEME + "\n" + __TASK__ + " " + self._status() + " " + self._tools(), {}

    def step(self, action):
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        parts = _cmd(action).lower().split()
        if len(parts) == 2 and parts[0] == "__CHECK__" and parts[1] in self._items():
            self._known[parts[1]] = True
            return "Checked. " + self._status() + " " + self._tools(), __STEP__, False, truncated, {}
        if parts and parts[0] == "__ORDER__":
            return self._act(parts[1:], truncated)
        return "Unknown command. " + self._status() + " " + self._tools(), 0.0, False, truncated, {}

    def solution(self):
        return [_boxed(a) for a in self._solution()]
'''

_INV_ACT = {
    "restock": r'''
    def _items(self):
        return self._target

    def _act(self, args, truncated):
        if len(args) != 2 or args[0] not in self._target or _int(args[1]) is None or _int(args[1]) < 1:
            return "Use " + self._tools() + ". " + self._status(), 0.0, False, truncated, {}
        item, n = args[0], _int(args[1])
        self._stock[item] += n
        self._known[item] = True
        if self._stock[item] > self._target[item]:
            right = sum(1 for i in self._target if self._stock[i] == self._target[i])
            return "Overstocked " + item + ".", self._score(right, len(self._target)), True, False, {}
        if self._done():
            return "Every item is at its target.", 1.0, True, False, {}
        return "Ordered. " + self._status() + " " + self._tools(), __STEP__, False, truncated, {}
''',
    "pricing": r'''
    def _items(self):
        return self._qty

    def _act(self, args, truncated):
        if len(args) != 1 or _int(args[0]) is None:
            return "Use " + self._tools() + ". " + self._status(), 0.0, False, truncated, {}
        if _int(args[0]) == self._total:
            return "Correct total.", 1.0, True, False, {}
        return "Wrong total.", self._score(len(self._known), len(self._qty)), True, False, {}
''',
}

_INV_WORDS = {
    "restock": (("check", "order"), ("count", "restock"), ("inspect", "buy")),
    "pricing": (("price", "total"), ("quote", "pay"), ("cost", "invoice")),
}


def _build_inventory(spec: Spec) -> Built:
    rng, d = spec.rng, spec.d
    variant = pick(rng, ("restock", "pricing"))
    check, order = pick(rng, _INV_WORDS[variant])
    per_item = 2 if variant == "restock" else 1
    count = max(1, min((spec.turn_limit - (0 if variant == "restock" else 1)) // per_item, 1 + round(2.5 * d)))
    words = vocabulary(spec, count + 3)
    if variant == "restock":
        tools = f'"(tools: \\\\boxed{{{check} <item>}} shows the stock, \\\\boxed{{{order} <item> <n>}} adds n units)"'
        task = pick(rng, ('"Bring every item exactly to its target stock."', '"Restock: each item must end exactly at its target."'))
        desc = f"Inventory management: the agent inspects ({check}) and restocks ({order}) {count} item(s) to exact targets; overstocking fails."
    else:
        tools = f'"(tools: \\\\boxed{{{check} <item>}} shows a unit price, \\\\boxed{{{order} <number>}} submits the order total)"'
        task = pick(rng, ('"Work out the total cost of the order."', '"Price the order: quantity times unit price, summed."'))
        desc = f"Tool use with a price list: the agent queries ({check}) the unit prices of {count} item(s) and submits ({order}) the order total."
    scheme, scheme_desc, score = reward_scheme(rng, multi_step=True)
    constants = fill("\n    WORDS = __W__\n    COUNT = __C__\n    MAX_ORDER = __M__\n", W=repr(words), C=count, M=3 + round(6 * d))
    body = constants + fill(_INV_MAKE[variant] + _INV_ACT[variant], CHECK=check, ORDER=order, STEP=step_reward(scheme)) + score + fill(
        _INV, TOOLS=tools, TASK=task, CHECK=check, ORDER=order, STEP=step_reward(scheme),
        MAX_TURNS=min(spec.turn_limit, per_item * count + 2))
    return Built(body=body, doc=pick(rng, ("Manage an inventory through tools.", "Inventory tools (" + variant + ").",
                                           "Stock and price lookups.")),
                 description=desc + " Scoring: " + scheme_desc + ".", variant=f"{variant}/{check}/{scheme}")


def _inv_tools(obs: str) -> tuple[str, str, str] | None:
    m = list(re.finditer(r"\(tools: \\boxed\{(\w+) <item>\} shows (?:the stock|a unit price), \\boxed\{(\w+) <(item> <n|number)>\}", obs))
    if not m:
        return None
    check, order, kind = m[-1].groups()
    return check, order, "restock" if kind == "item> <n" else "pricing"


def _solve_inventory(obs: str) -> str | None:
    tools = _inv_tools(obs)
    if tools is None:
        return None
    check, order, kind = tools
    if kind == "restock":
        status = re.findall(r"Stock/target: (.*?)\.", obs)
        if not status:
            return None
        for item, have, want in re.findall(r"([a-z]+) (\?|\d+)/(\d+)", status[-1]):
            if have == "?":
                return f"{check} {item}"
            if int(have) < int(want):
                return f"{order} {item} {int(want) - int(have)}"
        return None
    qty = dict((i, int(q)) for q, i in re.findall(r"(\d+) x ([a-z]+)", (re.findall(r"Order: (.*?)\.", obs) or [""])[-1]))
    prices = re.findall(r"([a-z]+) (\?|\d+)", (re.findall(r"Known prices: (.*?)\.", obs) or [""])[-1])
    for item, p in prices:
        if p == "?":
            return f"{check} {item}"
    known = dict((i, int(p)) for i, p in prices)
    if not qty or set(qty) != set(known):
        return None
    return f"{order} {sum(qty[i] * known[i] for i in qty)}"


def _wrong_inventory(rng: random.Random, obs: str, correct: str | None) -> str:
    tools = _inv_tools(obs)
    if tools is None:
        return "wait"
    _check, order, kind = tools
    if kind == "restock":
        m = re.findall(r"([a-z]+) (?:\?|\d+)/(\d+)", (re.findall(r"Stock/target: (.*?)\.", obs) or [""])[-1])
        if m:
            item, want = rng.choice(m)
            return f"{order} {item} {int(want) + rng.randint(1, 5)}"
        return f"{order} nothing 1"
    return f"{order} {rng.randint(10, 400)}"


INVENTORY = Family(
    "inventory", "tool_use", "Inventory tools", _build_inventory, _solve_inventory, _wrong_inventory,
    "Query each unknown quantity with the inspection tool before acting; order exactly the difference between "
    "target and stock (or sum quantity times price) and use the tool names the observation lists.",
    -0.05, ("Inventory", "Warehouse", "StockTool", "PriceList", "Procurement"),
)
