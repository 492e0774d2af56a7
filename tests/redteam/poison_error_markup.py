# expect: crash
# An error message made of rich markup and terminal escapes: printed as data by `validate`,
# never interpreted (a closing tag without an opening one used to raise in the printer).
class MarkupEnv:
    def reset(self, seed=None):
        raise ValueError("[/bold] [link=file:///etc/passwd]click[/link] [red]\x1b[31mred\x1b[0m \r\n[/]")

    def step(self, action):
        return "x", 0.0, True, False, {}
