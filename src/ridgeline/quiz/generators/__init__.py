"""Question generators, one module per course module. Each public generator takes a
``random.Random`` and returns a ``Question``; its ``*_q`` twin takes the parameters explicitly
(what the tests pin down)."""
