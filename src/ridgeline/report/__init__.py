"""report: plots and the HTML/Markdown/JSON report.

Layer rule: may import every library layer (specs, analytic, serving, sim, quiz, sweep); not
the faces (cli, web). Never imports torch itself.
"""
