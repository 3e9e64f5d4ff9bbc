"""`convgen fuzz`: property-based search of the problem space for runs that fail, each
failure shrunk to the smallest case that still fails and written as a lit test.

    space.py     what a case is (convgen's flags) and the hypothesis strategy that draws one
    run.py       one case through convgen in this process: passed, wrong, crashed, refused, hung
    fuzz.py      the search: budget, seeds, the found-failures database, shrinking, the tests
    commands.py  the command line (a plug-in command, convgen.commands.PLUGINS)
"""
